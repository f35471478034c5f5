//! A small scripted OpenAI-compatible chat-completions server on `127.0.0.1:0`, the test
//! double for a model: it checks the bearer key, records every request and answers what the test
//! tells it to.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

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
    /// This exact body with status 200.
    Body(String),
    /// A completion whose content is the request's `Authorization` header, like a careless proxy.
    EchoAuthorization,
    /// The reply after a pause.
    Delay(Duration, Box<Reply>),
}

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub authorization: Option<String>,
    pub body: Value,
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
    let completion = |message: Value, finish_reason: &str| {
        axum::Json(json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }))
        .into_response()
    };
    match reply {
        Reply::Content(content) => {
            completion(json!({"role": "assistant", "content": content}), "stop")
        }
        Reply::ToolCalls { content, calls } => {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({"id": format!("call_{i}"), "type": "function",
                           "function": {"name": name, "arguments": args.to_string()}})
                })
                .collect();
            completion(
                json!({"role": "assistant", "content": content, "tool_calls": calls}),
                "tool_calls",
            )
        }
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
    }
}
