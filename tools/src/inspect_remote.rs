//! The HTTP side of the inspection commands with `--server URL`: JSON requests with the bearer
//! token, the API's `{"error": {"code", "message"}}` turned into one-line errors, and a small
//! reader of a run's SSE stream (DESIGN §6) used as a wake-up for `log --follow`.

use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::StreamExt;
use serde_json::Value;

use crate::common::RemoteArgs;

/// How long one request may take (the SSE stream excepted: it stays open).
const REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Largest SSE message the reader accepts before it gives up on the stream.
const SSE_MESSAGE_BYTES_MAX: usize = 1024 * 1024;

#[derive(Debug)]
pub struct Remote {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
}

impl Remote {
    /// `Some` when `--server` was given.
    pub fn from_args(args: &RemoteArgs) -> anyhow::Result<Option<Remote>> {
        let Some(server) = &args.server else {
            return Ok(None);
        };
        let base = server.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!("--server must be an http:// or https:// URL, got {server:?}");
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(REQUEST_TIMEOUT_MS))
            .build()
            .context("building the HTTP client")?;
        Ok(Some(Remote {
            base,
            token: args.token.clone().filter(|t| !t.is_empty()),
            client,
        }))
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        req
    }

    async fn send(&self, req: reqwest::RequestBuilder, what: &str) -> anyhow::Result<Value> {
        let res = req
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach {}: {}", self.base, root_cause(&e)))?;
        let status = res.status();
        let body = res
            .bytes()
            .await
            .with_context(|| format!("reading the answer to {what}"))?;
        if !status.is_success() {
            bail!("{}", api_error(status, &body));
        }
        serde_json::from_slice(&body).with_context(|| format!("the answer to {what} is not JSON"))
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(
            self.request(reqwest::Method::GET, path),
            &format!("GET {path}"),
        )
        .await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(
            self.request(reqwest::Method::POST, path).json(&body),
            &format!("POST {path}"),
        )
        .await
    }

    /// Opens an SSE stream; the returned reader yields one message at a time.
    pub async fn sse(&self, path: &str) -> anyhow::Result<SseReader> {
        let res = self
            .request(reqwest::Method::GET, path)
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach {}: {}", self.base, root_cause(&e)))?;
        let status = res.status();
        if !status.is_success() {
            let body = res.bytes().await.unwrap_or_default();
            bail!("{}", api_error(status, &body));
        }
        Ok(SseReader {
            stream: res.bytes_stream().map(|c| c.map(|b| b.to_vec())).boxed(),
            buf: Vec::new(),
        })
    }
}

/// The innermost cause of a reqwest error (`connection refused`), which is what a user can act on.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// The API's error body as one line, or the status when the body is not the API's.
fn api_error(status: reqwest::StatusCode, body: &[u8]) -> String {
    let msg = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned));
    match msg {
        Some(m) => format!("{m} (HTTP {})", status.as_u16()),
        None => format!("the server answered HTTP {status}"),
    }
}

/// One SSE message: its `id:`, `event:` and `data:` fields.
#[derive(Debug, Default)]
pub struct SseMessage {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

type ByteStream = futures_util::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>;

/// Reads SSE messages off a response body.
pub struct SseReader {
    stream: ByteStream,
    buf: Vec<u8>,
}

impl std::fmt::Debug for SseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseReader").finish_non_exhaustive()
    }
}

impl SseReader {
    /// The next message; `None` when the server ended the stream. Comments (keep-alives) and
    /// messages without data are skipped.
    pub async fn next(&mut self) -> anyhow::Result<Option<SseMessage>> {
        loop {
            if let Some(end) = message_end(&self.buf) {
                let raw: Vec<u8> = self.buf.drain(..end.1).collect();
                let msg = parse_message(&String::from_utf8_lossy(&raw[..end.0]));
                if msg.id.is_some() || !msg.data.is_empty() {
                    return Ok(Some(msg));
                }
                continue;
            }
            if self.buf.len() > SSE_MESSAGE_BYTES_MAX {
                bail!("an SSE message exceeds {SSE_MESSAGE_BYTES_MAX} bytes");
            }
            match self.stream.next().await {
                None => return Ok(None),
                Some(chunk) => self
                    .buf
                    .extend_from_slice(&chunk.context("reading the event stream")?),
            }
        }
    }
}

/// `(end of the message, end of its blank-line terminator)` of the first complete message.
fn message_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_message(text: &str) -> SseMessage {
    let mut msg = SseMessage::default();
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => msg.id = Some(value.to_owned()),
            "event" => msg.event = Some(value.to_owned()),
            "data" => data.push(value),
            _ => {}
        }
    }
    msg.data = data.join("\n");
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_on_blank_lines() {
        let buf = b": keep-alive\n\nid: 3\nevent: todo.updated\ndata: {\"a\":1}\n\nid: 4";
        let (end, next) = message_end(buf).unwrap();
        assert_eq!(
            parse_message(std::str::from_utf8(&buf[..end]).unwrap()).data,
            ""
        );
        let rest = &buf[next..];
        let (end, _) = message_end(rest).unwrap();
        let m = parse_message(std::str::from_utf8(&rest[..end]).unwrap());
        assert_eq!(
            (m.id.as_deref(), m.event.as_deref(), m.data.as_str()),
            (Some("3"), Some("todo.updated"), "{\"a\":1}")
        );
    }
}
