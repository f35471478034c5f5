//! SSE streams: one run's events (`id:` = run seq) and every run's events (`id:` = global offset),
//! each message named and shaped by [`chronicle_wire::names`], history first and then live, with no
//! gap and no duplicate. Between them, the live chunks of model answers (`message.chunk`,
//! `reasoning.chunk`) *without* an `id:`: they are not stored, so a client's `Last-Event-ID` stays
//! the last event's and a resumed stream gets the events it missed and the chunks written from then
//! on. Also the agent-event fields added to approval events that SSE and the WebSocket both send
//! ([`event_data`]).
//!
//! Each stream holds a [`StreamPermit`] (the caps) and reads a bounded amount ahead of its
//! client: a client that stops reading costs its stream a fixed amount, never a growing buffer.
//!
//! A run's stream replays the log as stored, abandoned branches included, and marks each event a
//! restore has left with `abandoned: true` ([`BranchMarks`]): ids stay dense (a resumed stream
//! needs no gap rule), and a client sees what happened before the restore for what it is. The
//! end of an abandoned branch (its old `run.end`) does not end the stream: it goes on to the
//! `run.restored` and the live branch, to the run's real end.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chronicle_engine::store::Tail;
use chronicle_engine::{Chunk, Engine, Live};
use chronicle_projections::{Branches, restore_of};
use chronicle_schemas::{ApprovalId, Envelope, Event, RunId};
use chronicle_wire::{ErrorBody, EventData, EventsQuery, names};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::auth::StreamPrincipal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Path, Query};
use crate::limits::StreamPermit;
use crate::openapi::{Forbidden, Internal, RunNotFound, StreamsUnavailable, Unauthorized};
use crate::rest::run_id;
use crate::state::AppState;

/// Builds the `data` object of each event a stream sends: [`names::event_data`] plus what the
/// agent-event contract (`type` × `subtype`) asks of approval events — `tool` and
/// `approval_required` on `approval.requested`; `tool` and `effective_args` on `approval.decided`.
/// One per stream: it remembers the requests it has sent, so a decision's effective args come from
/// `Decision::effective_args` without touching the store; only a decision whose request came before
/// the stream started costs a state read.
pub(crate) struct Enricher {
    engine: Engine,
    /// Requests seen on this stream and not yet decided: `(run, approval) → (tool, args)`.
    requests: HashMap<(RunId, ApprovalId), (String, Value)>,
}

/// Undecided requests one stream remembers; beyond this it forgets them all (they are then read
/// from the state when decided).
const ENRICHER_REQUESTS_MAX: usize = 4096;

impl Enricher {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            engine,
            requests: HashMap::new(),
        }
    }

    /// May `who` see the events of `run`? (An admin sees every run; nobody a deleted
    /// session's.)
    pub(crate) fn visible_to(&self, who: &chronicle_engine::Principal, run: RunId) -> bool {
        self.engine.authorize(who, run).is_ok()
    }

    pub(crate) fn data(&mut self, env: &Envelope) -> EventData {
        let mut data = names::event_data(env);
        match &env.event {
            Event::ApprovalRequested {
                approval_id,
                tool_name,
                args,
                ..
            } => {
                data.content["tool"] = json!(tool_name);
                data.content["approval_required"] = json!(true);
                if self.requests.len() >= ENRICHER_REQUESTS_MAX {
                    self.requests.clear();
                }
                self.requests.insert(
                    (env.run_id, approval_id.clone()),
                    (tool_name.clone(), args.clone()),
                );
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                edited_args,
                ..
            } => {
                let (tool, requested) = match self
                    .requests
                    .remove(&(env.run_id, approval_id.clone()))
                {
                    Some((tool, args)) => (Some(tool), Some(args)),
                    None => {
                        let a = self
                            .engine
                            .state(env.run_id, Some(env.seq))
                            .inspect_err(|e| tracing::warn!(error = %e, run = %env.run_id, "no state for effective_args"))
                            .ok()
                            .and_then(|s| s.approvals.get(approval_id).map(|a| (a.tool_name.clone(), a.request_args.clone())));
                        a.map_or((None, None), |(t, r)| (Some(t), Some(r)))
                    }
                };
                data.content["tool"] = json!(tool);
                data.content["effective_args"] =
                    json!(decision.effective_args(edited_args.as_ref(), requested.as_ref()));
            }
            _ => {}
        }
        data
    }
}

/// Which events of one run's stream lie on a branch a restore abandoned. It knows the run's
/// restores from where the stream starts up to the run's head when the stream opened (it reads
/// none when the run was never restored), and then those the stream itself sends; events newer
/// than the head at the opening are on the live branch as far as anyone knows when they are sent.
/// A terminal event is checked against the log once more before it may end a stream (only the
/// events after it can leave it), so a restore appended while the stream was catching up does not
/// leave the client at an old `run.end`.
pub(crate) struct BranchMarks {
    engine: Engine,
    run: RunId,
    /// Restores at seqs from the stream's start on: seq → to_seq.
    restores: HashMap<u64, u64>,
    branches: Branches,
}

impl BranchMarks {
    /// For a stream of `run` from seq `from` (restores before it leave only seqs before it).
    pub(crate) fn open(engine: &Engine, run: RunId, from: u64) -> ApiResult<Self> {
        let mut marks = Self {
            engine: engine.clone(),
            run,
            restores: HashMap::new(),
            branches: Branches::default(),
        };
        // The number of restores so far is in the state (kept current by the engine): a run
        // that was never restored costs no read of its log.
        if engine.state(run, None)?.checkpoints.branch > 0 {
            marks.read_restores(from)?;
        }
        Ok(marks)
    }

    /// Reads the run's restores from seq `from` up to its head now, and what they leave.
    fn read_restores(&mut self, from: u64) -> ApiResult<()> {
        let Some(head) = self.engine.store().run_head(self.run)? else {
            return Ok(());
        };
        let mut found = false;
        if from <= head.last_seq {
            for env in self.engine.store().read_run(self.run, from, head.last_seq) {
                let env = env?;
                if let Some(to_seq) = restore_of(&env) {
                    self.restores.insert(env.seq, to_seq);
                    found = true;
                }
            }
        }
        if found {
            self.branches = Branches::new(head.last_seq, &self.restores);
        }
        Ok(())
    }

    /// Whether `env` (the stream's next event of this run) lies on an abandoned branch.
    pub(crate) fn abandoned(&mut self, env: &Envelope) -> bool {
        if let Some(to_seq) = restore_of(env) {
            // It leaves only seqs the stream has sent; kept for a later re-check.
            self.restores.insert(env.seq, to_seq);
        }
        if env.event.is_terminal()
            && !self.branches.is_abandoned(env.seq)
            && let Err(e) = self.read_restores(env.seq + 1)
        {
            // Ending the stream here is final: make sure no restore has left this end.
            tracing::warn!(error = %e.message, run = %self.run, "could not re-read the run's restores");
        }
        self.branches.is_abandoned(env.seq)
    }
}

/// One SSE message of a live chunk: named, without an `id:` (it cannot be resumed from).
fn chunk_message(chunk: &Chunk) -> SseEvent {
    let json = serde_json::to_string(&chunk.data).unwrap_or_default();
    SseEvent::default().event(chunk.data.name()).data(json)
}

/// One SSE message of an event.
fn message(id: u64, env: &Envelope, data: &EventData) -> SseEvent {
    // The data is plain JSON values: it always encodes.
    let json = serde_json::to_string(data).unwrap_or_default();
    SseEvent::default()
        .id(id.to_string())
        .event(names::wire_names(&env.event).0)
        .data(json)
}

/// The client's resume point from `Last-Event-ID` (the last id it received), if it sent one.
fn last_event_id(headers: &HeaderMap) -> ApiResult<Option<u64>> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| ApiError::bad_request(format!("invalid Last-Event-ID {v:?}")))
}

/// An SSE response with the configured keep-alive. Proxies are asked not to buffer it.
pub(crate) fn sse_response(
    st: &AppState,
    stream: impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
) -> Response {
    let keep_alive =
        KeepAlive::new().interval(Duration::from_millis(st.config.sse_keepalive_ms.max(1)));
    let mut res = Sse::new(stream).keep_alive(keep_alive).into_response();
    res.headers_mut()
        .insert("x-accel-buffering", header::HeaderValue::from_static("no"));
    res
}

/// State of one run's stream between messages.
struct RunStream<S> {
    events: S,
    enrich: Enricher,
    marks: BranchMarks,
    follow: bool,
    ended: bool,
    shutdown: CancellationToken,
    _permit: StreamPermit,
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/events", tag = "streams", security(("bearer" = [])),
    params(
        ("run_id" = RunId, Path, description = "The run"),
        ("from" = Option<u64>, Query, minimum = 0, description = "Start at this seq (inclusive); default 0"),
        ("follow" = Option<bool>, Query, description = "Keep the stream open after `run.end` / `run.error`"),
        ("Last-Event-ID" = Option<u64>, Header, minimum = 0, description = "Resume after this seq (wins over `from`)"),
        ("ticket" = Option<String>, Query, description = "A one-time stream ticket (`POST /api/v1/stream-tickets`), for clients that cannot send the `Authorization` header, such as browsers"),
    ),
    responses(
        (status = 200, description = "Server-sent events, history then live: `id` = the run's seq, `event` = the dotted name, `data` = `{run_id, seq, offset, at, kind, type, subtype, content}`. Between them, while a model writes an answer, live chunks `message.chunk` / `reasoning.chunk` without an `id` (they are not stored; a resumed stream gets the events it missed and the chunks from then on), `data` = `{run_id, kind: \"MessageChunk\" | \"ReasoningChunk\", type, subtype: \"chunk\", content: {text, todo_id?, agent?}}`. An event on a branch a later restore abandoned has `abandoned: true` in its `data`; the stream ends after the `run.end` / `run.error` of the live branch (one on an abandoned branch does not end it) unless `follow`", content_type = "text/event-stream", body = String),
        (status = 204, description = "A resumed stream of an ended run has nothing newer"),
        (status = 400, description = "A run id that is not a UUID, a bad `from`, `follow` or `Last-Event-ID` (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 401, response = Unauthorized), (status = 403, response = Forbidden), (status = 404, response = RunNotFound),
        (status = 500, response = Internal), (status = 503, response = StreamsUnavailable),
    ))]
pub async fn run_events(
    State(st): State<AppState>,
    StreamPrincipal(who): StreamPrincipal,
    Path(run): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let run = run_id(&run)?;
    // The header wins: a browser's EventSource reconnects to the same URL (with its `?from=`)
    // and adds the id it saw last.
    let resume = last_event_id(&headers)?.map(|id| id.saturating_add(1));
    st.engine.authorize(&who, run)?;
    let resumed = resume.is_some() || q.from.is_some();
    let from = resume.or(q.from).unwrap_or(0);
    let follow = q.follow.unwrap_or(false);
    let head = st
        .engine
        .store()
        .run_head(run)?
        .ok_or_else(|| ApiError::not_found(format!("run {run} not found")))?;
    if resumed && !follow && head.terminal && from > head.last_seq {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let permit = st.streams.open(&who.name)?;
    let marks = BranchMarks::open(&st.engine, run, from)?;
    // The bus subscribes to live events before it reads history, so nothing falls in between;
    // chunks come from now on.
    let events = st.engine.subscribe_live(run, from)?;
    let state = RunStream {
        events,
        enrich: Enricher::new(st.engine.clone()),
        marks,
        follow,
        ended: false,
        shutdown: st.shutdown.clone(),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        if s.ended {
            return None;
        }
        let next = tokio::select! {
            biased;
            _ = s.shutdown.cancelled() => return None,
            next = s.events.next() => next,
        };
        match next? {
            Ok(Live::Event(env)) => {
                let mut data = s.enrich.data(&env);
                data.abandoned = s.marks.abandoned(&env);
                s.ended = !s.follow && names::ends_stream(&env.event) && !data.abandoned;
                Some((Ok(message(env.seq, &env, &data)), s))
            }
            Ok(Live::Chunk(chunk)) => Some((Ok(chunk_message(&chunk)), s)),
            Err(e) => {
                tracing::error!(error = %e, "run event stream stopped");
                None
            }
        }
    });
    Ok(sse_response(&st, stream))
}

/// State of the all-runs stream between messages. It pulls from the log as its client reads,
/// `sse_stream_buffer_events` at a time, and takes the live chunks of every run from now on (a
/// client that falls behind loses some: they are not stored).
struct AllStream {
    events: Tail,
    chunks: Pin<Box<dyn Stream<Item = Arc<Chunk>> + Send>>,
    /// Whose stream it is: only the runs they may see are sent.
    who: chronicle_engine::Principal,
    enrich: Enricher,
    shutdown: CancellationToken,
    _permit: StreamPermit,
}

#[utoipa::path(get, path = "/api/v1/events", tag = "streams", security(("bearer" = [])),
    params(
        ("from" = Option<u64>, Query, minimum = 0, description = "Start at this global offset (inclusive); default: only events from now on"),
        ("Last-Event-ID" = Option<u64>, Header, minimum = 0, description = "Resume after this offset (wins over `from`)"),
        ("ticket" = Option<String>, Query, description = "A one-time stream ticket (`POST /api/v1/stream-tickets`), for clients that cannot send the `Authorization` header, such as browsers"),
    ),
    responses(
        (status = 200, description = "Server-sent events of every run the caller may see (an admin: all): `id` = the global offset, `event` = the dotted name, the same `data` as a run's stream, and the live chunks (`message.chunk` / `reasoning.chunk`, without an `id`) of those runs from the moment the stream opens. Never ends by itself", content_type = "text/event-stream", body = String),
        (status = 400, description = "A bad `from` or `Last-Event-ID` (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 401, response = Unauthorized), (status = 403, response = Forbidden),
        (status = 503, response = StreamsUnavailable),
    ))]
pub async fn all_events(
    State(st): State<AppState>,
    StreamPrincipal(who): StreamPrincipal,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let resume = last_event_id(&headers)?.map(|id| id.saturating_add(1));
    // Without a start point the whole history could be a great many events: follow from now.
    let from = resume
        .or(q.from)
        .unwrap_or_else(|| st.engine.store().durable_next_offset());
    let permit = st.streams.open(&who.name)?;
    let chunk = st.config.sse_stream_buffer_events as u64;
    let state = AllStream {
        events: st.engine.store().tail(from, chunk),
        chunks: Box::pin(st.engine.all_chunks()),
        who,
        enrich: Enricher::new(st.engine.clone()),
        shutdown: st.shutdown.clone(),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            // Not biased: neither a flood of chunks nor a long history starves the other.
            let next = tokio::select! {
                _ = s.shutdown.cancelled() => return None,
                Some(chunk) = s.chunks.next() => {
                    if !s.enrich.visible_to(&s.who, chunk.data.run_id) {
                        continue;
                    }
                    return Some((Ok(chunk_message(&chunk)), s));
                }
                next = s.events.next() => next,
            };
            let env = match next? {
                Ok(env) => env,
                Err(e) => {
                    tracing::error!(error = %e, "event log stream stopped");
                    return None;
                }
            };
            if !s.enrich.visible_to(&s.who, env.run_id) {
                continue;
            }
            let data = s.enrich.data(&env);
            return Some((Ok(message(env.offset, &env, &data)), s));
        }
    });
    Ok(sse_response(&st, stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_event_id_parses_or_refuses() {
        let mut h = HeaderMap::new();
        assert_eq!(last_event_id(&h).unwrap(), None);
        h.insert("last-event-id", " 42 ".parse().unwrap());
        assert_eq!(last_event_id(&h).unwrap(), Some(42));
        h.insert("last-event-id", "x".parse().unwrap());
        assert_eq!(last_event_id(&h).unwrap_err().code, "bad_request");
    }
}
