//! A LangGraph run's SSE stream, made from its Chronicle run's events as they become durable:
//! `metadata` first, a new turn's input as `values`, then per checkpoint `updates` (`{node: what changed}`) and `values` (the
//! whole state), the conversation's new messages (`messages`, and the answer's live chunks),
//! each Chronicle event as `custom`, and at the end the interrupts (`updates` with
//! `__interrupt__`, then the final `values`), or `error`. The stream ends once the run needs a
//! human or has ended — its status says so before the stream closes, so a client that checks the
//! run then does not reconnect.
//!
//! With `stream_resumable`, the last frame made from each event carries the event's seq as
//! `id:`; a client that rejoins with `Last-Event-ID` gets what follows that event.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;

use axum::response::Response;
use axum::response::sse::Event as SseEvent;
use chronicle_engine::store::Error as StoreError;
use chronicle_engine::{Live, RunState, is_settled};
use chronicle_schemas::{Envelope, Event, RunId};
use chronicle_wire::langgraph::{Message, StreamMode};
use chronicle_wire::names::{self, ChunkKind};
use serde_json::{Map, Value, json};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::records::RunRecord;
use super::views;
use crate::error::ApiResult;
use crate::limits::StreamPermit;
use crate::response::sse_response;
use crate::state::AppState;

/// One SSE frame before it is sent.
struct Frame {
    event: &'static str,
    data: Value,
    id: Option<u64>,
}

impl Frame {
    fn new(event: &'static str, data: Value) -> Self {
        Frame {
            event,
            data,
            id: None,
        }
    }

    fn sse(self) -> SseEvent {
        let e = SseEvent::default()
            .event(self.event)
            .data(self.data.to_string());
        match self.id {
            Some(id) => e.id(id.to_string()),
            None => e,
        }
    }
}

/// What a stream is asked for.
pub(crate) struct Ask {
    pub modes: Vec<StreamMode>,
    pub resumable: bool,
    /// Resume after this seq (`Last-Event-ID`); `None`: from the run's start.
    pub after: Option<u64>,
    /// Cancel the run when the client leaves before the end.
    pub cancel_on_disconnect: bool,
}

/// One LangGraph run's stream between frames.
struct Watch {
    st: AppState,
    rec: RunRecord,
    ask: Ask,
    /// The thread's turns before this run's (their messages come first).
    earlier: Vec<RunState>,
    given: views::GivenIds,
    cur: RunState,
    /// The seq this LangGraph run's part of the Chronicle run ends at, when a later one took
    /// over.
    until: Option<u64>,
    events: ReceiverStream<Result<Live, StoreError>>,
    /// Ids of the messages sent (or there before the stream began).
    sent: HashSet<String>,
    /// The answer's text streamed so far, in chunks.
    streamed: String,
    values: Option<Map<String, Value>>,
    queue: VecDeque<Frame>,
    done: bool,
    shutdown: CancellationToken,
    _permit: StreamPermit,
}

impl Watch {
    fn wants(&self, m: StreamMode) -> bool {
        self.ask.modes.contains(&m)
    }

    fn run(&self) -> RunId {
        self.rec.chronicle_run
    }

    fn meta(&self, node: &str) -> Value {
        json!({
            "run_id": self.rec.run_id.to_string(),
            "thread_id": self.rec.thread_id.to_string(),
            "langgraph_node": node,
            "graph_id": views::SUPERVISOR_GRAPH,
            "assistant_id": self.rec.assistant_id,
        })
    }

    /// The thread's values now, with every turn's messages.
    fn values_now(&self) -> Map<String, Value> {
        let mut turns: Vec<&RunState> = self.earlier.iter().collect();
        turns.push(&self.cur);
        match views::values(&self.cur, &views::messages(&turns, &self.given)) {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// This turn's messages not sent yet, marked sent.
    fn new_messages(&mut self) -> Vec<Message> {
        let all = views::messages(&[&self.cur], &self.given);
        all.into_iter()
            .filter(|m| self.sent.insert(m.id.clone()))
            .collect()
    }

    fn on_event(&mut self, env: &Envelope) -> Vec<Frame> {
        let mut out = Vec::new();
        let store = self.st.engine.store().clone();
        if let Err(e) = self.cur.apply(env, &store.source(self.run())) {
            out.push(Frame::new(
                "error",
                json!({"error": "StoreError", "message": e.to_string()}),
            ));
            self.done = true;
            return out;
        }
        if self.wants(StreamMode::Custom) {
            out.push(Frame::new("custom", json!(names::event_data(env))));
        }
        let node = match &env.event {
            Event::CheckpointSaved { node, .. } => Some(node.clone()),
            _ => None,
        };
        self.message_frames(node.as_deref().unwrap_or(""), &mut out);
        // A new turn's input comes first as `values`, as LangGraph sends it.
        if env.seq == 0 && self.wants(StreamMode::Values) {
            let input = self.values_now();
            out.push(Frame::new("values", Value::Object(input.clone())));
            self.values = Some(input);
        }
        if let Some(node) = node {
            self.checkpoint_frames(&node, env, &mut out);
        }
        let ended = self.until.is_some_and(|u| env.seq >= u)
            || (is_settled(&self.cur)
                && store
                    .durable_seq(self.run())
                    .ok()
                    .flatten()
                    .is_none_or(|d| d <= env.seq));
        if ended {
            self.finish(&mut out);
        }
        if self.ask.resumable
            && let Some(last) = out.last_mut()
        {
            last.id = Some(env.seq);
        }
        out
    }

    fn message_frames(&mut self, node: &str, out: &mut Vec<Frame>) {
        let tuple = self.wants(StreamMode::MessagesTuple);
        let whole = self.wants(StreamMode::Messages);
        if !tuple && !whole {
            return;
        }
        let answer = views::answer_message_id(self.run(), self.cur.checkpoints.branch);
        for m in self.new_messages() {
            // The answer's chunks were sent: its whole text again would double it.
            if m.id == answer && !self.streamed.is_empty() {
                continue;
            }
            if tuple {
                out.push(Frame::new("messages", json!([m, self.meta(node)])));
            }
            if whole {
                out.push(Frame::new("messages/complete", json!([m])));
            }
        }
    }

    fn checkpoint_frames(&mut self, node: &str, env: &Envelope, out: &mut Vec<Frame>) {
        // The interrupts come with the last frames, as LangGraph sends them: `updates` with
        // `__interrupt__`, then the values that hold them.
        let mut now = self.values_now();
        now.remove("__interrupt__");
        if self.wants(StreamMode::Updates) {
            let before = self.values.as_ref();
            let changed: Map<String, Value> = now
                .iter()
                .filter(|(k, v)| before.and_then(|b| b.get(*k)) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            out.push(Frame::new("updates", json!({ node: changed })));
        }
        if self.wants(StreamMode::Values) {
            out.push(Frame::new("values", Value::Object(now.clone())));
        }
        if self.wants(StreamMode::Debug) || self.wants(StreamMode::Checkpoints) {
            let checkpoint = match &env.event {
                Event::CheckpointSaved { checkpoint_id, .. } => {
                    views::checkpoint_uuid(self.run(), checkpoint_id).to_string()
                }
                _ => String::new(),
            };
            let payload = json!({
                "config": {"configurable": {
                    "thread_id": self.rec.thread_id.to_string(),
                    "checkpoint_ns": "", "checkpoint_id": checkpoint,
                }},
                "values": now,
                "next": views::next_nodes(node, &self.cur),
                "metadata": {"source": "loop", "run_id": self.run().0.to_string()},
            });
            if self.wants(StreamMode::Checkpoints) {
                out.push(Frame::new("checkpoints", payload.clone()));
            }
            if self.wants(StreamMode::Debug) {
                out.push(Frame::new(
                    "debug",
                    json!({"type": "checkpoint", "timestamp": env.at.to_string(), "step": env.seq, "payload": payload}),
                ));
            }
        }
        self.values = Some(now);
    }

    /// The last frames: the failure, or the interrupts and the final values.
    fn finish(&mut self, out: &mut Vec<Frame>) {
        self.done = true;
        let s = &self.cur.supervisor;
        if s.run_status == chronicle_schemas::RunStatus::Failed {
            let message = s.error_log.last().cloned().unwrap_or_default();
            out.push(Frame::new(
                "error",
                json!({"error": "RunFailed", "message": message}),
            ));
            return;
        }
        let interrupts = views::interrupts(&self.cur);
        if !interrupts.is_empty() && self.wants(StreamMode::Updates) {
            out.push(Frame::new(
                "updates",
                json!({ "__interrupt__": interrupts }),
            ));
        }
        let now = self.values_now();
        let last_values = out
            .iter()
            .rev()
            .find(|f| f.event == "values")
            .map(|f| &f.data);
        if self.wants(StreamMode::Values) && last_values != Some(&Value::Object(now.clone())) {
            out.push(Frame::new("values", Value::Object(now)));
        }
    }

    fn on_chunk(&mut self, chunk: &chronicle_engine::Chunk) -> Vec<Frame> {
        let c = &chunk.data;
        let answer = c.kind == ChunkKind::MessageChunk && c.content.todo_id.is_none();
        if !answer || c.content.text.is_empty() {
            return Vec::new();
        }
        self.streamed.push_str(&c.content.text);
        let id = views::answer_message_id(self.run(), self.cur.checkpoints.branch);
        let mut out = Vec::new();
        if self.wants(StreamMode::MessagesTuple) {
            let piece = json!({
                "type": "AIMessageChunk", "id": id, "content": c.content.text,
                "additional_kwargs": {}, "response_metadata": {}, "tool_call_chunks": [],
            });
            out.push(Frame::new(
                "messages",
                json!([piece, self.meta("generate_response")]),
            ));
        }
        if self.wants(StreamMode::Messages) {
            let so_far = Message::new("ai", id, Value::String(self.streamed.clone()));
            out.push(Frame::new("messages/partial", json!([so_far])));
        }
        out
    }
}

/// Cancels the run when the client leaves before the end, if it asked for that.
struct CancelOnDrop {
    st: AppState,
    run: RunId,
    who: chronicle_engine::Principal,
    armed: bool,
}

impl CancelOnDrop {
    /// The stream ended by itself: leaving now cancels nothing.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (engine, run, who) = (self.st.engine.clone(), self.run, self.who.clone());
        tokio::spawn(async move {
            let reason = Some("the client left the stream (on_disconnect: cancel)".to_owned());
            if let Err(e) = engine.cancel(run, &who, reason).await {
                tracing::debug!(error = %e, %run, "cancel on disconnect");
            }
        });
    }
}

/// What a stream shows of its thread besides its own turn: the turns before it on its branch
/// (their messages come first) and the ids clients gave the turns' human messages.
pub(crate) struct Earlier {
    pub turns: Vec<RunState>,
    pub given: views::GivenIds,
}

/// The SSE response of LangGraph run `rec`, holding `permit` (taken before the run was
/// started or looked up, so a stream over the cap is refused before it changes anything).
/// `until`: where a later LangGraph run took the Chronicle run over.
pub(crate) fn respond(
    st: &AppState,
    who: &chronicle_engine::Principal,
    permit: StreamPermit,
    rec: RunRecord,
    earlier: Earlier,
    until: Option<u64>,
    ask: Ask,
) -> ApiResult<Response> {
    let Earlier {
        turns: earlier,
        given,
    } = earlier;
    let run = rec.chronicle_run;
    let from = ask
        .after
        .map_or(rec.from_seq, |a| (a + 1).max(rec.from_seq));
    let cur = match from {
        0 => RunState::default(),
        n => st.engine.state(run, Some(n - 1))?,
    };
    let events = st.engine.subscribe_live(run, from)?;
    let mut w = Watch {
        st: st.clone(),
        earlier,
        given,
        cur,
        until,
        events,
        sent: HashSet::new(),
        streamed: String::new(),
        values: None,
        queue: VecDeque::new(),
        done: false,
        shutdown: st.shutdown.clone(),
        _permit: permit,
        rec,
        ask,
    };
    w.queue.push_back(Frame::new(
        "metadata",
        json!({"run_id": w.rec.run_id.to_string(), "attempt": 1}),
    ));
    if from > 0 {
        w.new_messages();
        let now = w.values_now();
        if w.wants(StreamMode::Values) {
            w.queue
                .push_back(Frame::new("values", Value::Object(now.clone())));
        }
        w.values = Some(now);
        let durable = st.engine.store().durable_seq(run)?;
        let at_end = until.is_some_and(|u| from > u)
            || (is_settled(&w.cur) && durable.is_none_or(|d| d < from));
        if at_end {
            let mut out = Vec::new();
            w.finish(&mut out);
            w.queue.extend(out);
        }
    }
    let guard = CancelOnDrop {
        st: st.clone(),
        run,
        who: who.clone(),
        armed: w.ask.cancel_on_disconnect,
    };
    let stream = futures_util::stream::unfold((w, guard), |(mut w, mut guard)| async move {
        loop {
            if let Some(f) = w.queue.pop_front() {
                return Some((Ok::<_, Infallible>(f.sse()), (w, guard)));
            }
            if w.done {
                guard.disarm();
                return None;
            }
            let next = tokio::select! {
                biased;
                _ = w.shutdown.cancelled() => return None,
                next = w.events.next() => next,
            };
            let frames = match next? {
                Ok(Live::Event(env)) => w.on_event(&env),
                Ok(Live::Chunk(chunk)) => w.on_chunk(&chunk),
                Err(e) => {
                    tracing::error!(error = %e, "langgraph run stream stopped");
                    w.done = true;
                    vec![Frame::new(
                        "error",
                        json!({"error": "StoreError", "message": e.to_string()}),
                    )]
                }
            };
            w.queue.extend(frames);
        }
    });
    Ok(sse_response(st, stream))
}
