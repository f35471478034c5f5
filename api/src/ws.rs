//! The WebSocket: a chat session over JSON text frames `{"type": ...}`.
//!
//! Client → server: `message` (start a run in the session and stream it), `human_response`
//! (decide the pending approval of the current run, as `POST /api/sessions/{id}/resume` does),
//! `command` (a slash command on the current run), `subscribe` (stream a run from a seq).
//! Server → client: `connected`, `event` (the SSE `data` object, also of the live chunks of model
//! answers, which have no seq), `hitl_request`, `final`, `command_result`, `error`. A bad frame gets an `error` and the socket stays open.
//!
//! Connecting with the `thread_id` of one's own session whose latest run waits for a human
//! follows that run and sends its pending `hitl_request` again right after `connected`;
//! `human_response` and `command` act on the session's latest run when the socket has no
//! current run.
//!
//! Each streamed run has its own forwarding task (bus subscription → the socket's outbox); the
//! socket task alone writes to the socket. The current run is the one started or subscribed last.
//!
//! A socket is one stream under the stream caps. A message over `ws_message_bytes_max` gets an
//! `error` frame (`payload_too_large`) and a close with code 1009: messages up to twice the limit
//! are read whole (so the close handshake completes), a larger one is refused at its frame
//! header without reading it.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::StatusCode;
use axum::response::Response;
use chronicle_engine::{Engine, Live, Turn, TurnInput, TurnOutcome};
use chronicle_schemas::{
    Approval, ApprovalId, ApprovalStatus, Decision, Event, HitlMode, OnReject, RunId, RunStatus,
    SessionId,
};
use chronicle_wire::{ApprovalView, ErrorBody};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::auth::StreamPrincipal;
use crate::error::{ApiError, ApiResult};
use crate::events::{BranchMarks, Enricher};
use crate::extract::{Query, owned_run};
use crate::limits::StreamPermit;
use crate::refusals::StreamError;
use crate::response::WAITING_HINT;
use crate::state::AppState;

/// Runs one socket streams at once; subscribing to one more drops the oldest.
pub const WS_SUBSCRIPTIONS_MAX: usize = 16;

/// How long a closing socket waits to tell the client why (the server is going away, a message
/// was too big), and for its answer.
pub const WS_CLOSE_WAIT_MS: u64 = 1000;

/// The socket's read buffer to start with (tungstenite's default, 128 KiB, is filled in whole
/// on the first read: 128 KiB of memory for every idle socket). It grows for a larger frame.
const WS_READ_BUFFER_BYTES: usize = 8 * 1024;

/// The client message types, for a clear error on any other.
const CLIENT_TYPES: [&str; 4] = ["message", "human_response", "command", "subscribe"];

#[derive(Debug, Deserialize)]
pub struct WsQuery {
    /// The session of the socket (a `thread_id`, as the REST sessions API names it); a new one
    /// when absent.
    pub thread_id: Option<String>,
}

#[utoipa::path(get, path = "/ws", tag = "streams", security(("bearer" = [])),
    params(
        ("thread_id" = Option<String>, Query, description = "The session of the socket (default: a new one)"),
        ("Connection" = String, Header, description = "`Upgrade`"),
        ("Upgrade" = String, Header, description = "`websocket`"),
        ("Sec-WebSocket-Version" = String, Header, description = "`13`"),
        ("Sec-WebSocket-Key" = String, Header, description = "The client's nonce"),
        ("ticket" = Option<String>, Query, description = "A one-time stream ticket (`POST /api/v1/stream-tickets`), for clients that cannot send the `Authorization` header, such as browsers"),
    ),
    responses(
        (status = 101, description = "WebSocket upgrade; JSON text frames `{\"type\": ...}`. Client: message {content, thread_id?, hitl?, on_reject?, user_id?}, human_response {approve | response | decision, approval_id?, edited_args?, comment?}, command {command}, subscribe {run_id, from_seq?}. Server: connected, event, hitl_request, final, command_result, error"),
        (status = 400, description = "Not a valid WebSocket upgrade (missing or bad `Connection`, `Upgrade`, `Sec-WebSocket-Version` or `Sec-WebSocket-Key`) (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 426, description = "The connection cannot be upgraded (`upgrade_required`)", body = ErrorBody),
        StreamError,
    ))]
pub(crate) async fn handler(
    State(st): State<AppState>,
    StreamPrincipal(who): StreamPrincipal,
    Query(q): Query<WsQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, StreamError> {
    let upgrade = upgrade.map_err(|e| {
        let code = if e.status() == StatusCode::UPGRADE_REQUIRED {
            "upgrade_required"
        } else {
            "bad_request"
        };
        ApiError::new(e.status(), code, e.body_text())
    })?;
    let session_id = q
        .thread_id
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let permit = st.streams.open(&who.name)?;
    // Read a little past the API's limit, so that a message just over it is refused with a
    // clean close instead of a connection cut in the middle of the frame.
    let transport_bytes_max = st.config.ws_message_bytes_max.saturating_mul(2);
    Ok(upgrade
        .read_buffer_size(WS_READ_BUFFER_BYTES)
        .max_message_size(transport_bytes_max)
        .max_frame_size(transport_bytes_max)
        .on_upgrade(move |socket| Session::run(st, who, session_id, socket, permit)))
}

// ------------------------------------------------------------------ client messages

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum ClientMsg {
    Message {
        content: String,
        thread_id: Option<String>,
        hitl: Option<HitlMode>,
        on_reject: Option<OnReject>,
        user_id: Option<String>,
    },
    HumanResponse {
        approve: Option<bool>,
        /// A `/command`, or feedback passed to the agent as an edit.
        response: Option<String>,
        approval_id: Option<String>,
        decision: Option<Decision>,
        edited_args: Option<Value>,
        comment: Option<String>,
    },
    Command {
        command: String,
    },
    Subscribe {
        run_id: String,
        from_seq: Option<u64>,
    },
}

/// Malformed JSON or an unknown type → `bad_request`; a known type of the wrong shape →
/// `unprocessable_entity` (as the REST extractors answer 400 / 422).
fn parse(text: &str) -> ApiResult<ClientMsg> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let ty = v.get("type").and_then(Value::as_str).ok_or_else(|| {
        ApiError::bad_request("a message is a JSON object with a string \"type\"")
    })?;
    if !CLIENT_TYPES.contains(&ty) {
        return Err(ApiError::bad_request(format!(
            "unknown message type {ty:?}; expected one of {}",
            CLIENT_TYPES.join(", ")
        )));
    }
    let ty = ty.to_owned();
    serde_json::from_value(v).map_err(|e| ApiError::unprocessable(format!("{ty}: {e}")))
}

/// The `error` frame of a failure (with the error's extra fields, e.g. a command's `help`).
fn error_frame(e: ApiError) -> Value {
    let mut v = json!({"type": "error", "error": {"code": e.code, "message": e.message}});
    if let (Some(Value::Object(extra)), Value::Object(m)) = (e.extra, &mut v) {
        m.extend(extra);
    }
    v
}

// ------------------------------------------------------------------ the session

/// A message from a forwarder, tagged with the subscription that produced it, so what a replaced
/// subscription had already queued is dropped instead of interleaving with its successor.
#[derive(Debug)]
struct Out {
    run: RunId,
    generation: u64,
    frame: Value,
}

/// A running forwarder; dropping it stops the forwarder.
#[derive(Debug)]
struct Subscription {
    generation: u64,
    stop: CancellationToken,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct Session {
    st: AppState,
    /// The authenticated principal: the `by` of every decision and command.
    who: chronicle_engine::Principal,
    session_id: String,
    current: Option<RunId>,
    subs: HashMap<RunId, Subscription>,
    generation: u64,
    outbox: mpsc::Sender<Out>,
    /// Cancelled at shutdown or when the socket ends; every forwarder stops on it.
    stop: CancellationToken,
}

impl Session {
    async fn run(
        st: AppState,
        who: chronicle_engine::Principal,
        session_id: String,
        mut socket: WebSocket,
        _permit: StreamPermit,
    ) {
        let stop = st.shutdown.child_token();
        let (outbox, mut inbox) = mpsc::channel(st.config.ws_outbox_messages.max(1));
        let message_bytes_max = st.config.ws_message_bytes_max;
        let mut ping =
            tokio::time::interval(Duration::from_millis(st.config.sse_keepalive_ms.max(1)));
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.tick().await;
        let mut s = Session {
            st,
            who,
            session_id,
            current: None,
            subs: HashMap::new(),
            generation: 0,
            outbox,
            stop: stop.clone(),
        };
        let hello =
            json!({"type": "connected", "session_id": s.session_id, "principal": s.who.name});
        let mut open = send(&mut socket, &hello, &stop).await;
        for frame in s.rejoin() {
            open = open && send(&mut socket, &frame, &stop).await;
        }
        while open {
            tokio::select! {
                _ = stop.cancelled() => {
                    close(&mut socket, close_code::AWAY, "server shutting down").await;
                    open = false;
                }
                Some(out) = inbox.recv() => {
                    let live = s.subs.get(&out.run).is_some_and(|x| x.generation == out.generation);
                    if live {
                        open = send(&mut socket, &out.frame, &stop).await;
                    }
                }
                _ = ping.tick() => {
                    open = send_message(&mut socket, Message::Ping(Default::default()), &stop).await;
                }
                msg = socket.recv() => {
                    let msg = match msg {
                        None | Some(Ok(Message::Close(_))) => break,
                        Some(Err(e)) => {
                            if let Some(bytes) = too_long(&e) {
                                refuse_oversized(&mut socket, bytes, message_bytes_max).await;
                                // The rest of the message is still unread, and closing a socket
                                // with unread bytes resets it, which could destroy the close
                                // frame on its way: give the client time to read it first.
                                tokio::time::sleep(Duration::from_millis(WS_CLOSE_WAIT_MS)).await;
                            }
                            break;
                        }
                        Some(Ok(msg)) => msg,
                    };
                    let bytes = match &msg {
                        Message::Text(text) => text.len(),
                        Message::Binary(data) => data.len(),
                        _ => 0,
                    };
                    if bytes > message_bytes_max {
                        refuse_oversized(&mut socket, bytes, message_bytes_max).await;
                        break;
                    }
                    let reply = match msg {
                        Message::Text(text) => s.handle(text.as_str()).await.unwrap_or_else(|e| Some(error_frame(e))),
                        Message::Binary(_) => Some(error_frame(ApiError::bad_request("binary frames are not supported; send JSON text"))),
                        Message::Ping(_) | Message::Pong(_) | Message::Close(_) => None,
                    };
                    if let Some(reply) = reply {
                        open = send(&mut socket, &reply, &stop).await;
                    }
                }
            }
        }
        stop.cancel();
    }

    fn engine(&self) -> &Engine {
        &self.st.engine
    }

    /// The run a `human_response` or `command` is about: the one started or subscribed last,
    /// else the session's latest run (another principal's session is not found).
    fn current_run(&self) -> ApiResult<RunId> {
        if let Some(run) = self.current {
            return Ok(run);
        }
        let session = SessionId(self.session_id.clone());
        self.engine()
            .latest_run_of(&self.who, &session)?
            .ok_or_else(|| {
                ApiError::conflict("no run on this socket yet: send a message or subscribe first")
            })
    }

    /// On connecting to a session whose latest run waits for a human: that run becomes the
    /// current one and is followed from now on, and what it waits for is asked again (the
    /// client may have missed the `hitl_request` while away). Another principal's session, or
    /// one whose run does not wait, shows nothing.
    fn rejoin(&mut self) -> Vec<Value> {
        let session = SessionId(self.session_id.clone());
        let Ok(Some(run)) = self.engine().latest_run_of(&self.who, &session) else {
            return Vec::new();
        };
        let state = match self.engine().state(run, None) {
            Ok(s) if s.supervisor.run_status == RunStatus::WaitingForApproval => s,
            _ => return Vec::new(),
        };
        if let Err(e) = self.follow(run, state.next_seq()) {
            return vec![error_frame(e)];
        }
        state
            .approvals
            .pending()
            .map(|a| hitl_request_frame(run, a.clone()))
            .collect()
    }

    /// Answers one client frame: `Ok(Some(frame))` to reply, `Ok(None)` when the answer comes
    /// through the run's stream.
    async fn handle(&mut self, text: &str) -> ApiResult<Option<Value>> {
        match parse(text)? {
            ClientMsg::Message {
                content,
                thread_id,
                hitl,
                on_reject,
                user_id,
            } => {
                if let Some(t) = thread_id.filter(|t| !t.trim().is_empty()) {
                    self.session_id = t;
                }
                let turn = Turn {
                    session: SessionId(self.session_id.clone()),
                    run: None,
                    input: TurnInput::Message(content),
                    by: self.who.clone(),
                    user_id,
                    hitl,
                    on_reject,
                    idempotency_key: None,
                };
                self.turn(turn).await
            }
            ClientMsg::Command { command } => self.command(command.trim()).await.map(Some),
            ClientMsg::Subscribe {
                run_id: run,
                from_seq,
            } => {
                let run = owned_run(&self.st, &self.who, &run)?;
                self.follow(run, from_seq.unwrap_or(0))?;
                Ok(None)
            }
            ClientMsg::HumanResponse {
                approve,
                response,
                approval_id,
                decision,
                edited_args,
                comment,
            } => {
                let run = self.current_run()?;
                let answer = match (&approve, &response, &approval_id, &decision, &edited_args) {
                    (Some(yes), None, None, None, None) => Some(TurnInput::Approve(*yes)),
                    (None, Some(text), None, None, None) if !text.trim().is_empty() => {
                        Some(TurnInput::Response(text.clone()))
                    }
                    _ => None,
                };
                if let Some(input) = answer {
                    // The chat's own answer to the one pending approval (or a `/command`).
                    let turn = Turn {
                        session: SessionId(self.session_id.clone()),
                        run: Some(run),
                        input,
                        by: self.who.clone(),
                        user_id: None,
                        hitl: None,
                        on_reject: None,
                        idempotency_key: None,
                    };
                    return self.turn(turn).await;
                }
                let (id, decision, edited) = match (approve, response, decision, edited_args) {
                    (Some(yes), None, None, None) => {
                        let d = if yes {
                            Decision::Approve
                        } else {
                            Decision::Reject
                        };
                        (self.pending(run, approval_id.as_deref())?.0, d, None)
                    }
                    (None, Some(text), None, None) if !text.trim().is_empty() => {
                        // Feedback goes to the agent as an edit of the requested args.
                        let (id, args) = self.pending(run, approval_id.as_deref())?;
                        let mut args = match args {
                            Value::Object(m) => m,
                            _ => Default::default(),
                        };
                        args.insert("feedback".into(), Value::String(text));
                        (id, Decision::Edit, Some(Value::Object(args)))
                    }
                    (None, None, Some(d), edited) => {
                        (self.pending(run, approval_id.as_deref())?.0, d, edited)
                    }
                    _ => {
                        return Err(ApiError::unprocessable(
                            "human_response: send one of {\"approve\": bool}, {\"response\": \"...\"} or {\"decision\": \"approve|reject|edit\", \"edited_args\"?: {...}}, each with an optional approval_id",
                        ));
                    }
                };
                self.engine()
                    .decide(run, id, decision, edited, &self.who, comment)
                    .await?;
                Ok(None)
            }
        }
    }

    /// Carries out a chat turn (the engine's policy) and answers it on the socket: a command's
    /// result; a new run, streamed; the request a waiting run still waits for.
    async fn turn(&mut self, turn: Turn) -> ApiResult<Option<Value>> {
        match self.engine().turn(turn).await? {
            TurnOutcome::Command {
                run,
                command,
                outcome,
                said,
            } => Ok(Some(json!({
                "type": "command_result", "run_id": run, "command": command, "result": outcome,
                "interpreted_from": said,
            }))),
            TurnOutcome::Started { run } => {
                self.follow(run, 0)?;
                Ok(None)
            }
            TurnOutcome::Waiting { run } => {
                // No second run: the session's run still waits for its human.
                self.current = Some(run);
                let state = self.engine().state(run, None)?;
                let mut frame = match state.approvals.pending().next().cloned() {
                    Some(a) => hitl_request_frame(run, a),
                    None => json!({
                        "type": "hitl_request", "run_id": run, "message": null, "approval": null,
                    }),
                };
                frame["hint"] = json!(WAITING_HINT);
                Ok(Some(frame))
            }
            TurnOutcome::Decided { .. } => Ok(None),
        }
    }

    /// The approval a `human_response` decides, with its request args: the named one, or the
    /// only pending one (with several pending the client must name one, so a decision never
    /// lands on an approval the human did not mean).
    fn pending(&self, run: RunId, id: Option<&str>) -> ApiResult<(ApprovalId, Value)> {
        let state = self.engine().state(run, None)?;
        if let Some(id) = id {
            let a = state
                .approvals
                .get(&ApprovalId(id.to_owned()))
                .ok_or_else(|| ApiError::not_found(format!("approval {id} not found")))?;
            return Ok((a.approval_id.clone(), a.request_args.clone()));
        }
        let mut pending = state.approvals.pending();
        let first = pending
            .next()
            .ok_or_else(|| ApiError::conflict(format!("run {run} is not waiting for a human")))?;
        let more = pending.count();
        if more > 0 {
            return Err(ApiError::conflict(format!(
                "{} approvals of run {run} are pending: name one with approval_id",
                more + 1
            )));
        }
        Ok((first.approval_id.clone(), first.request_args.clone()))
    }

    /// Runs a slash command on the current run. A refused command is an `error` with `help`, as
    /// `POST .../commands` answers 400 or 409.
    async fn command(&self, text: &str) -> ApiResult<Value> {
        let run = self.current_run()?;
        let out = self.engine().command(run, text, &self.who).await?;
        Ok(json!({"type": "command_result", "run_id": run, "command": text, "result": out}))
    }

    /// Streams `run` from `from_seq` and makes it the current run (replacing an older stream of
    /// the same run; dropping the oldest stream beyond [`WS_SUBSCRIPTIONS_MAX`]).
    fn follow(&mut self, run: RunId, from_seq: u64) -> ApiResult<()> {
        let marks = BranchMarks::open(self.engine(), run, from_seq)?;
        let events = self.engine().subscribe_live(run, from_seq)?;
        self.generation += 1;
        let generation = self.generation;
        let stop = self.stop.child_token();
        self.subs.remove(&run);
        while self.subs.len() >= WS_SUBSCRIPTIONS_MAX {
            let oldest = self
                .subs
                .iter()
                .min_by_key(|(_, s)| s.generation)
                .map(|(r, _)| *r);
            if let Some(r) = oldest {
                self.subs.remove(&r);
            }
        }
        self.subs.insert(
            run,
            Subscription {
                generation,
                stop: stop.clone(),
            },
        );
        self.current = Some(run);
        let fwd = Forwarder {
            enrich: Enricher::new(self.st.engine.clone()),
            marks,
            engine: self.st.engine.clone(),
            run,
            generation,
            outbox: self.outbox.clone(),
            stop,
        };
        tokio::spawn(fwd.run(events));
        Ok(())
    }
}

/// The `hitl_request` frame asking a human for `a`.
fn hitl_request_frame(run: RunId, a: Approval) -> Value {
    json!({
        "type": "hitl_request",
        "run_id": run,
        "message": a.message.clone(),
        "approval": ApprovalView::new(run, a),
    })
}

/// Sends one JSON frame unless the server is stopping; false when the socket is gone.
async fn send(socket: &mut WebSocket, frame: &Value, stop: &CancellationToken) -> bool {
    send_message(socket, Message::Text(frame.to_string().into()), stop).await
}

/// Sends one message unless the server is stopping (a client that stopped reading must not hold
/// the shutdown up); false when the socket is gone.
async fn send_message(socket: &mut WebSocket, msg: Message, stop: &CancellationToken) -> bool {
    tokio::select! {
        sent = socket.send(msg) => sent.is_ok(),
        _ = stop.cancelled() => true,
    }
}

/// Closes the socket with `code`, waiting a bounded time for the client to take the close frame
/// and answer it.
async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let wait = Duration::from_millis(WS_CLOSE_WAIT_MS);
    let _ = tokio::time::timeout(wait, async {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        socket.send(Message::Close(Some(frame))).await?;
        // The client's close frame ends the handshake (and whatever it sent before is read and
        // dropped, so the socket closes cleanly rather than with a reset).
        while let Some(Ok(msg)) = socket.recv().await {
            if matches!(msg, Message::Close(_)) {
                break;
            }
        }
        Ok::<_, axum::Error>(())
    })
    .await;
}

/// Answers a message of `bytes` over `max` bytes: an `error` frame, then a close with 1009.
async fn refuse_oversized(socket: &mut WebSocket, bytes: usize, max: usize) {
    let e = ApiError::too_large(format!(
        "a message of {bytes} bytes exceeds the limit of {max} bytes"
    ));
    let wait = Duration::from_millis(WS_CLOSE_WAIT_MS);
    let frame = Message::Text(error_frame(e).to_string().into());
    if let Ok(Ok(())) = tokio::time::timeout(wait, socket.send(frame)).await {
        close(socket, close_code::SIZE, "message too big").await;
    }
}

/// The size of a message the transport refused to read because it is over its limit (read
/// whole up to twice the API's limit, so only a far larger one ends here).
fn too_long(e: &axum::Error) -> Option<usize> {
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(tungstenite::Error::Capacity(
            tungstenite::error::CapacityError::MessageTooLong { size, .. },
        )) = err.downcast_ref::<tungstenite::Error>()
        {
            return Some(*size);
        }
        source = err.source();
    }
    None
}

/// Turns one run's events into server frames: `event` for each, plus `hitl_request` for an
/// approval that is still pending and `final` for the answer; and the run's live chunks into
/// `event` frames of their own data (`type` `message` / `reasoning`, `subtype` `chunk`). WebSocket streams stay open after
/// the run ends (a restore can bring it back); the socket bounds how many it keeps. An event on a
/// branch a restore abandoned is an `event` with `abandoned: true` in its data, and asks nothing
/// and answers nothing: no `hitl_request`, no `final`.
struct Forwarder {
    enrich: Enricher,
    marks: BranchMarks,
    engine: Engine,
    run: RunId,
    generation: u64,
    outbox: mpsc::Sender<Out>,
    stop: CancellationToken,
}

impl Forwarder {
    async fn run(
        mut self,
        mut events: ReceiverStream<Result<Live, chronicle_engine::store::Error>>,
    ) {
        loop {
            let next = tokio::select! {
                _ = self.stop.cancelled() => return,
                next = events.next() => next,
            };
            let env = match next {
                None => return,
                Some(Ok(Live::Event(env))) => env,
                // A live chunk: an `event` frame with its data (no seq: it is not stored).
                Some(Ok(Live::Chunk(chunk))) => {
                    if !self
                        .emit(json!({"type": "event", "data": chunk.data}))
                        .await
                    {
                        return;
                    }
                    continue;
                }
                Some(Err(e)) => {
                    self.emit(error_frame(ApiError::internal(e))).await;
                    return;
                }
            };
            let mut data = self.enrich.data(&env);
            data.abandoned = self.marks.abandoned(&env);
            if !self.emit(json!({"type": "event", "data": data})).await {
                return;
            }
            let extra = match &env.event {
                _ if data.abandoned => None,
                Event::ApprovalRequested { approval_id, .. } => self.hitl_request(approval_id),
                Event::ResponseGenerated { final_response } => Some(json!({
                    "type": "final", "run_id": self.run, "content": final_response,
                })),
                _ => None,
            };
            if let Some(frame) = extra
                && !self.emit(frame).await
            {
                return;
            }
        }
    }

    /// A `hitl_request` for an approval that still waits for a human (one already decided, seen
    /// while replaying history, asks nobody).
    fn hitl_request(&self, id: &ApprovalId) -> Option<Value> {
        let state = self
            .engine
            .state(self.run, None)
            .inspect_err(
                |e| tracing::warn!(error = %e, run = %self.run, "no state for hitl_request"),
            )
            .ok()?;
        let a = state
            .approvals
            .get(id)
            .filter(|a| a.status == ApprovalStatus::Pending)?;
        Some(hitl_request_frame(self.run, a.clone()))
    }

    async fn emit(&self, frame: Value) -> bool {
        let out = Out {
            run: self.run,
            generation: self.generation,
            frame,
        };
        tokio::select! {
            sent = self.outbox.send(out) => sent.is_ok(),
            _ = self.stop.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_sorts_bad_frames() {
        assert_eq!(parse("{nope").unwrap_err().code, "bad_request");
        assert_eq!(parse("[1]").unwrap_err().code, "bad_request");
        assert_eq!(
            parse(r#"{"type":"dance"}"#).unwrap_err().code,
            "bad_request"
        );
        assert_eq!(
            parse(r#"{"type":"command"}"#).unwrap_err().code,
            "unprocessable_entity"
        );
        assert_eq!(
            parse(r#"{"type":"command","command":"/todos","extra":1}"#)
                .unwrap_err()
                .code,
            "unprocessable_entity"
        );
        assert!(matches!(
            parse(r#"{"type":"message","content":"q","hitl":"every_todo"}"#).unwrap(),
            ClientMsg::Message {
                hitl: Some(HitlMode::EveryTodo),
                ..
            }
        ));
        assert!(matches!(
            parse(r#"{"type":"human_response","approval_id":"a","decision":"edit","edited_args":{"x":1}}"#).unwrap(),
            ClientMsg::HumanResponse {
                decision: Some(Decision::Edit),
                ..
            }
        ));
    }
}
