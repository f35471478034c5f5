//! A real Chronicle server for black-box API tests: the production router served on an ephemeral
//! loopback port over a temp data dir, with a real HTTP client and a minimal SSE reader.

use std::time::Duration;

use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::agents::Registry;
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Settings};
use futures_util::StreamExt;
use serde_json::Value;

pub struct Server {
    pub base: String,
    pub engine: Engine,
    pub client: reqwest::Client,
    /// Kept so the data dir lives as long as the server.
    pub _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Starts a server; `registry: None` = the built-in agents.
pub async fn server(tokens: Tokens, registry: Option<Registry>) -> Server {
    server_with(tokens, registry, ApiConfig::default()).await
}

pub async fn server_with(tokens: Tokens, registry: Option<Registry>, config: ApiConfig) -> Server {
    let mut settings = chronicle_realestate::settings();
    if let Some(r) = registry {
        settings.registry = r;
    }
    server_settings(tokens, settings, config).await
}

/// A server over an engine with these settings.
pub async fn server_settings(tokens: Tokens, settings: Settings, config: ApiConfig) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    server_on(dir, store, tokens, settings, config).await
}

/// A server over `store` (opened in `dir`, which lives as long as the server).
pub async fn server_on(
    dir: tempfile::TempDir,
    store: Store,
    tokens: Tokens,
    settings: Settings,
    config: ApiConfig,
) -> Server {
    let engine = Engine::open(store, settings).await.unwrap();
    let state = AppState::new(engine.clone(), tokens, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        chronicle_api::serve(listener, state, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    Server {
        base,
        engine,
        client,
        _dir: dir,
        stop: Some(stop),
        task: Some(task),
    }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Graceful shutdown: streams end, the engine stops, the store is flushed.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("graceful shutdown")
                .unwrap();
        }
    }

    /// The number of events in the whole store (to check a bad request wrote nothing).
    pub fn offsets(&self) -> u64 {
        self.engine.store().durable_next_offset()
    }
}

/// One SSE message.
#[derive(Clone, Debug, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Value,
}

/// Reads SSE messages from a streaming response, yielding each complete message (comments,
/// i.e. keep-alives, are skipped).
pub fn sse_events(resp: reqwest::Response) -> impl futures_util::Stream<Item = SseEvent> {
    let bytes = resp.bytes_stream();
    // Split on raw bytes and decode whole messages, so a character cut between two network chunks
    // is put back together.
    futures_util::stream::unfold(
        (bytes, Vec::<u8>::new()),
        |(mut bytes, mut buf)| async move {
            loop {
                if let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let raw: Vec<u8> = buf.drain(..end + 2).collect();
                    let block = String::from_utf8_lossy(&raw);
                    let (mut id, mut event, mut data) = (None, None, String::new());
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("id:") {
                            id = Some(v.trim().to_owned());
                        } else if let Some(v) = line.strip_prefix("event:") {
                            event = Some(v.trim().to_owned());
                        } else if let Some(v) = line.strip_prefix("data:") {
                            if !data.is_empty() {
                                data.push('\n');
                            }
                            data.push_str(v.strip_prefix(' ').unwrap_or(v));
                        }
                    }
                    if id.is_none() && event.is_none() && data.is_empty() {
                        continue; // a comment (keep-alive)
                    }
                    let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                    return Some((SseEvent { id, event, data }, (bytes, buf)));
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        // Normalise CRLF framing to LF.
                        if buf.contains(&b'\r') {
                            buf.retain(|b| *b != b'\r');
                        }
                    }
                    _ => return None,
                }
            }
        },
    )
}
