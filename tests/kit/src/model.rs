//! A small scripted OpenAI-compatible chat-completions server on `127.0.0.1:0`, the test
//! double for a model: it checks the bearer key, records every request and answers what the test
//! tells it to.
//!
//! A request with `"stream": true` is answered the way OpenAI streams: server-sent events of
//! `chat.completion.chunk` objects (content in several pieces, tool calls as argument fragments by
//! index, reasoning as `reasoning_content`), the usage in a last chunk when
//! `stream_options.include_usage` asks for it, then `data: [DONE]`. [`Reply::Body`] answers plain
//! JSON either way, as a server that ignores `stream` does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;

/// Characters of one streamed piece of content or of a tool call's arguments: small, so a text
/// of any length arrives in several pieces.
pub const STREAM_PIECE_CHARS: usize = 4;

/// What the server answers to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A well-formed completion whose message content is this text.
    Content(String),
    /// A completion that calls tools: `(name, arguments)` each, with ids `call_0`, `call_1`...
    /// in order, and this text beside them, if any.
    ToolCalls {
        content: Option<String>,
        calls: Vec<(String, Value)>,
    },
    /// An error status with an OpenAI-style error body.
    Status(u16),
    /// This exact body with status 200, also to a request that asks to stream.
    Body(String),
    /// A completion whose content is the request's `Authorization` header, like a careless proxy.
    EchoAuthorization,
    /// The reply after a pause.
    Delay(Duration, Box<Reply>),
    /// Exactly these pieces, in order (to a request that does not stream: one completion of the
    /// content and reasoning pieces joined).
    Stream(Vec<Piece>),
}

/// One step of a [`Reply::Stream`].
#[derive(Clone, Debug)]
pub enum Piece {
    /// A chunk whose `delta.content` is this text.
    Content(String),
    /// A chunk whose `delta.reasoning_content` is this text.
    Reasoning(String),
    /// Nothing more is sent until the gate opens.
    Wait(Gate),
    /// An OpenAI-style error object as the next event, and the stream ends (no `[DONE]`).
    Error(String),
    /// The connection breaks here (no `[DONE]`, no clean end of the body).
    Drop,
}

/// A gate a streamed reply waits at until the test opens it (once open, it stays open).
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<GateInner>);

#[derive(Debug, Default)]
struct GateInner {
    open: AtomicBool,
    notify: Notify,
}

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn open(&self) {
        self.0.open.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    pub async fn wait(&self) {
        loop {
            // Created before the check, so an `open` in between still wakes it.
            let notified = self.0.notify.notified();
            if self.0.open.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub authorization: Option<String>,
    /// The W3C trace context the request carried.
    pub traceparent: Option<String>,
    pub body: Value,
}

impl Seen {
    /// The request asked for a streamed answer.
    pub fn streams(&self) -> bool {
        self.body["stream"] == json!(true)
    }
}

type Respond = dyn Fn(&Value) -> Reply + Send + Sync;

struct Inner {
    key: Option<String>,
    respond: Box<Respond>,
    seen: Mutex<Vec<Seen>>,
}

/// The running server; stops when dropped.
pub struct TestServer {
    pub base_url: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Starts the server. With `key`, a request without `Authorization: Bearer <key>` gets 401.
    pub async fn start(
        key: Option<&str>,
        respond: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let inner = Arc::new(Inner {
            key: key.map(str::to_owned),
            respond: Box::new(respond),
            seen: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            inner,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn completions(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    inner
        .seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Seen {
            authorization: authorization.clone(),
            traceparent: headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: body.clone(),
        });
    if let Some(key) = &inner.key
        && authorization.as_deref() != Some(format!("Bearer {key}").as_str())
    {
        let error =
            json!({"error": {"message": "invalid api key", "type": "invalid_request_error"}});
        return (StatusCode::UNAUTHORIZED, axum::Json(error)).into_response();
    }
    let mut reply = (inner.respond)(&body);
    while let Reply::Delay(pause, next) = reply {
        tokio::time::sleep(pause).await;
        reply = *next;
    }
    if let Reply::EchoAuthorization = reply {
        reply = Reply::Content(authorization.unwrap_or_default());
    }
    let streams = body["stream"] == json!(true);
    let usage = body["stream_options"]["include_usage"] == json!(true);
    match reply {
        Reply::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (
                status,
                axum::Json(json!({"error": {"message": "test failure", "code": code}})),
            )
                .into_response()
        }
        Reply::Body(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
        Reply::Delay(..) | Reply::EchoAuthorization => {
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        reply if streams => stream(&body["model"], reply, usage),
        reply => whole(&body["model"], reply).await,
    }
}

fn usage_json() -> Value {
    json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
}

fn tool_calls_json(calls: &[(String, Value)]) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect()
}

/// The reply as one `chat.completion`.
async fn whole(model: &Value, reply: Reply) -> Response {
    let (message, finish_reason) = match reply {
        Reply::Content(content) => (json!({"role": "assistant", "content": content}), "stop"),
        Reply::ToolCalls { content, calls } => (
            json!({"role": "assistant", "content": content, "tool_calls": tool_calls_json(&calls)}),
            "tool_calls",
        ),
        Reply::Stream(pieces) => {
            let (mut content, mut reasoning) = (String::new(), String::new());
            for piece in pieces {
                match piece {
                    Piece::Content(t) => content.push_str(&t),
                    Piece::Reasoning(t) => reasoning.push_str(&t),
                    Piece::Wait(gate) => gate.wait().await,
                    Piece::Error(_) | Piece::Drop => {
                        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
                    }
                }
            }
            let mut message = json!({"role": "assistant", "content": content});
            if !reasoning.is_empty() {
                message["reasoning_content"] = json!(reasoning);
            }
            (message, "stop")
        }
        _ => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    axum::Json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage_json(),
    }))
    .into_response()
}

/// `text` in pieces of [`STREAM_PIECE_CHARS`] characters (at least one piece).
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(STREAM_PIECE_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

/// What one streamed event carries.
enum Out {
    Chunk(Value),
    Raw(String),
    Wait(Gate),
    Drop,
}

/// The reply as server-sent `chat.completion.chunk` events, written by a task of its own so
/// that pieces can wait for a gate.
fn stream(model: &Value, reply: Reply, usage: bool) -> Response {
    let chunk = |delta: Value, finish_reason: Option<&str>| {
        Out::Chunk(json!({
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }))
    };
    let mut outs = vec![chunk(json!({"role": "assistant"}), None)];
    let mut finish = "stop";
    let mut complete = true;
    match reply {
        Reply::Content(content) => {
            outs.extend(
                pieces(&content)
                    .into_iter()
                    .map(|p| chunk(json!({"content": p}), None)),
            );
        }
        Reply::ToolCalls { content, calls } => {
            if let Some(content) = content {
                outs.extend(
                    pieces(&content)
                        .into_iter()
                        .map(|p| chunk(json!({"content": p}), None)),
                );
            }
            for (i, (name, args)) in calls.iter().enumerate() {
                let head = json!({"index": i, "id": format!("call_{i}"), "type": "function",
                                  "function": {"name": name, "arguments": ""}});
                outs.push(chunk(json!({"tool_calls": [head]}), None));
                for p in pieces(&args.to_string()) {
                    let frag = json!({"index": i, "function": {"arguments": p}});
                    outs.push(chunk(json!({"tool_calls": [frag]}), None));
                }
            }
            finish = "tool_calls";
        }
        Reply::Stream(list) => {
            for piece in list {
                match piece {
                    Piece::Content(t) => outs.push(chunk(json!({"content": t}), None)),
                    Piece::Reasoning(t) => outs.push(chunk(json!({"reasoning_content": t}), None)),
                    Piece::Wait(gate) => outs.push(Out::Wait(gate)),
                    Piece::Error(message) => {
                        let error = json!({"error": {"message": message, "type": "server_error"}});
                        outs.push(Out::Chunk(error));
                        complete = false;
                        break;
                    }
                    Piece::Drop => {
                        outs.push(Out::Drop);
                        complete = false;
                        break;
                    }
                }
            }
        }
        _ => {}
    }
    if complete {
        outs.push(chunk(json!({}), Some(finish)));
        if usage {
            outs.push(Out::Chunk(json!({
                "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model,
                "choices": [], "usage": usage_json(),
            })));
        }
        outs.push(Out::Raw("[DONE]".into()));
    }
    let (tx, rx) = mpsc::channel::<Result<String, std::io::Error>>(4);
    tokio::spawn(async move {
        for out in outs {
            let data = match out {
                Out::Chunk(v) => v.to_string(),
                Out::Raw(text) => text,
                Out::Wait(gate) => {
                    gate.wait().await;
                    continue;
                }
                Out::Drop => {
                    let _ = tx
                        .send(Err(std::io::Error::other("the test cut the stream")))
                        .await;
                    return;
                }
            };
            if tx.send(Ok(format!("data: {data}\n\n"))).await.is_err() {
                return;
            }
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
