//! `--server URL`: a small client for the REST routes the CLI uses (DESIGN §6), one mapping of
//! their `{"error": {"code", "message"}}` answers to errors, and a reader for the SSE run stream.

use std::pin::Pin;
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::common::RemoteArgs;

/// How long a connection attempt may take before the server counts as unreachable.
const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// How long one ordinary request (not a stream) may take.
const REQUEST_TIMEOUT_MS: u64 = 60_000;
/// The largest SSE message the reader buffers; a bigger one means a broken or hostile stream
/// (events are at most 64 KiB, their JSON a small multiple of that).
const SSE_MESSAGE_BYTES_MAX: usize = 1024 * 1024;

/// An answer of the server that is not a success.
#[derive(Debug)]
pub struct HttpError {
    pub status: u16,
    pub code: String,
    pub message: String,
    /// The whole error body (the command route adds `help` beside `error`).
    pub body: Value,
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server answered {} {}: {}",
            self.status, self.code, self.message
        )
    }
}

impl std::error::Error for HttpError {}

/// A Chronicle server.
#[derive(Clone, Debug)]
pub struct Remote {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
}

impl Remote {
    /// The server of `--server`, or `None` when the command works on a data directory.
    pub fn from_args(args: &RemoteArgs) -> anyhow::Result<Option<Remote>> {
        let Some(server) = &args.server else {
            return Ok(None);
        };
        let url = reqwest::Url::parse(server)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .with_context(|| {
                format!(
                    "--server must be an http(s) URL like http://127.0.0.1:8080, got {server:?}"
                )
            })?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .build()?;
        Ok(Some(Remote {
            base: url.as_str().trim_end_matches('/').to_owned(),
            token: args.token.clone().filter(|t| !t.is_empty()),
            client,
        }))
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let rb = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// Sends a request; a transport failure names the server, a non-2xx answer becomes an
    /// [`HttpError`].
    pub async fn send(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let res = rb
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach the server at {}: {e}", self.base))?;
        let status = res.status();
        if status.is_success() {
            return Ok(res);
        }
        let text = res.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let (code, message) = match &body["error"] {
            Value::Object(e) => (
                e.get("code").and_then(Value::as_str).unwrap_or("error"),
                e.get("message").and_then(Value::as_str).unwrap_or(""),
            ),
            _ => ("error", text.trim()),
        };
        Err(HttpError {
            status: status.as_u16(),
            code: code.to_owned(),
            message: message.to_owned(),
            body: body.clone(),
        }
        .into())
    }

    /// GET a JSON answer.
    pub async fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let rb = self
            .request(reqwest::Method::GET, path)
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS));
        Ok(self.send(rb).await?.json().await?)
    }

    /// POST a JSON body, read a JSON answer.
    pub async fn post_json(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let rb = self
            .request(reqwest::Method::POST, path)
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS))
            .json(body);
        Ok(self.send(rb).await?.json().await?)
    }

    /// GET a streamed answer (no overall timeout: the body may take long).
    pub async fn get_stream(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> anyhow::Result<reqwest::Response> {
        self.send(self.request(reqwest::Method::GET, path).query(query))
            .await
    }
}

/// One SSE message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SseMessage {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

pub type SseStream = Pin<Box<dyn Stream<Item = anyhow::Result<SseMessage>> + Send>>;

/// Reads the SSE messages of a streaming response (comments, i.e. keep-alives, are skipped).
/// Ends when the server ends the body.
pub fn sse(res: reqwest::Response) -> SseStream {
    let bytes = res.bytes_stream();
    // Split on raw bytes and decode whole messages, so a character cut between two network
    // chunks is put back together.
    Box::pin(futures_util::stream::unfold(
        (bytes, Vec::<u8>::new()),
        |(mut bytes, mut buf)| async move {
            loop {
                if let Some(msg) = take_message(&mut buf) {
                    if msg == SseMessage::default() {
                        continue;
                    }
                    return Some((Ok(msg), (bytes, buf)));
                }
                if buf.len() > SSE_MESSAGE_BYTES_MAX {
                    let e = anyhow::anyhow!("an SSE message exceeds {SSE_MESSAGE_BYTES_MAX} bytes");
                    return Some((Err(e), (bytes, Vec::new())));
                }
                match bytes.next().await? {
                    Ok(chunk) => buf.extend_from_slice(&chunk),
                    Err(e) => {
                        let e = anyhow::anyhow!("the event stream broke: {e}");
                        return Some((Err(e), (bytes, Vec::new())));
                    }
                }
            }
        },
    ))
}

/// Takes the first complete message (ended by a blank line) out of `buf`.
fn take_message(buf: &mut Vec<u8>) -> Option<SseMessage> {
    let (end, sep) = [b"\n\n".as_slice(), b"\r\n\r\n".as_slice()]
        .iter()
        .filter_map(|sep| {
            buf.windows(sep.len())
                .position(|w| w == *sep)
                .map(|p| (p, sep.len()))
        })
        .min()?;
    let raw: Vec<u8> = buf.drain(..end + sep).collect();
    let block = String::from_utf8_lossy(&raw);
    let mut msg = SseMessage::default();
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
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
    Some(msg)
}

/// Fails unless `res` is JSON Lines or CSV as the export sends them.
pub fn expect_content_type(res: &reqwest::Response, want: &str) -> anyhow::Result<()> {
    let got = res
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !got.starts_with(want) {
        bail!("the server sent {got:?}, expected {want}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_messages_split_on_blank_lines() {
        let mut buf =
            b": keep-alive\n\nid: 3\nevent: todo.added\ndata: {\"a\":\ndata: 1}\n\nid: 4\n"
                .to_vec();
        assert_eq!(take_message(&mut buf), Some(SseMessage::default()));
        assert_eq!(
            take_message(&mut buf),
            Some(SseMessage {
                id: Some("3".into()),
                event: Some("todo.added".into()),
                data: "{\"a\":\n1}".into(),
            })
        );
        assert_eq!(take_message(&mut buf), None);
        assert_eq!(buf, b"id: 4\n");
    }

    #[test]
    fn server_urls_are_checked() {
        let args = |s: &str| RemoteArgs {
            server: Some(s.into()),
            token: None,
        };
        assert!(
            Remote::from_args(&args("http://127.0.0.1:8080/"))
                .unwrap()
                .is_some()
        );
        for bad in ["127.0.0.1:8080", "ftp://x", "http//x", ""] {
            assert!(Remote::from_args(&args(bad)).is_err(), "{bad:?}");
        }
        let none = RemoteArgs {
            server: None,
            token: None,
        };
        assert!(Remote::from_args(&none).unwrap().is_none());
    }
}
