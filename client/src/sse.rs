//! The one SSE reader: a run's stream (`id:` = seq) or the all-runs stream (`id:` = offset),
//! each message a typed [`StreamEvent`], and between them the live chunks of model answers
//! (`message.chunk`, `reasoning.chunk`: no `id:`, [`StreamItem::Chunk`]) for a reader that asks
//! for them ([`EventStream::next_item`]).
//!
//! Keep-alive comments are skipped. A connection that drops (or a body that ends before the
//! stream is over) is opened again with `Last-Event-ID` set to the last id received, so the
//! server resumes right after it; ids at or below it are dropped and a skipped id is an error, so
//! the events come without gap or duplicate. A run's stream ends after `run.end` / `run.error`
//! (unless it follows on, or the event is marked `abandoned`: the end of a branch a restore left,
//! after which the stream goes on to the live branch), or when the server answers 204 (a finished
//! run with nothing newer).

use std::time::Duration;

use chronicle_schemas::RunId;
use chronicle_wire::names::{CHUNK_NAMES, END_NAMES};
use chronicle_wire::{ChunkData, EventData, EventsQuery};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::{Method, Response, StatusCode};

use crate::client::Client;
use crate::error::{Error, Result};

/// The largest SSE message the reader buffers; a bigger one means a broken or hostile stream
/// (events are at most 64 KiB, their JSON a small multiple of that).
const SSE_MESSAGE_BYTES_MAX: usize = 1024 * 1024;
/// Reconnection attempts in a row (without an event in between) before the stream gives up.
const RECONNECT_ATTEMPTS_MAX: u32 = 5;
/// The wait before the first reconnection attempt; it doubles up to [`RECONNECT_DELAY_MAX_MS`].
const RECONNECT_DELAY_MS: u64 = 100;
const RECONNECT_DELAY_MAX_MS: u64 = 2_000;

/// Where a stream starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsFrom {
    /// `?from=`: this seq (the all-runs stream: this offset), inclusive. Without it a run's
    /// stream starts at 0, the all-runs stream at the events from now on.
    pub from: Option<u64>,
    /// `Last-Event-ID`: resume right after this id (the server lets it win over `from`).
    pub last_event_id: Option<u64>,
    /// Keep a run's stream open after `run.end` / `run.error` (a restore can bring it back).
    pub follow: bool,
}

impl EventsFrom {
    /// From this seq (or offset) on.
    pub fn seq(from: u64) -> Self {
        Self {
            from: Some(from),
            ..Self::default()
        }
    }
}

/// One SSE message: its `id:` (the run seq, or the global offset on the all-runs stream), its
/// `event:` name (`todo.updated`) and its `data`.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEvent {
    pub id: u64,
    pub name: String,
    pub data: EventData,
}

/// One message of a stream: a stored event, or a live chunk of a model's answer (which has no
/// id: it is not stored, and a resumed stream goes on with the chunks written from then on).
#[derive(Clone, Debug, PartialEq)]
pub enum StreamItem {
    Event(StreamEvent),
    Chunk(ChunkData),
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    Run(RunId),
    All,
}

/// A stream of events; see the module documentation.
pub struct EventStream {
    client: Client,
    target: Target,
    from: EventsFrom,
    /// The last id received (or the one to resume after).
    last_id: Option<u64>,
    body: Option<Response>,
    buf: Vec<u8>,
    finished: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("target", &self.target)
            .field("last_id", &self.last_id)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// What one connection attempt gave.
enum Opened {
    Body(Response),
    /// 204: nothing newer, and nothing will come.
    NoContent,
}

impl EventStream {
    pub(crate) async fn open(client: Client, target: Target, from: EventsFrom) -> Result<Self> {
        let mut s = EventStream {
            client,
            target,
            last_id: from.last_event_id,
            from,
            body: None,
            buf: Vec::new(),
            finished: false,
        };
        // The first connection's errors are the caller's (an unknown run, a bad token).
        match s.connect().await? {
            Opened::Body(b) => s.body = Some(b),
            Opened::NoContent => s.finished = true,
        }
        Ok(s)
    }

    /// The last id received.
    pub fn last_id(&self) -> Option<u64> {
        self.last_id
    }

    /// Nothing more will come (the end of a run, a 204, an error).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn path(&self) -> String {
        match self.target {
            Target::Run(run) => format!("/api/v1/agent/{run}/events"),
            Target::All => "/api/v1/events".to_owned(),
        }
    }

    async fn connect(&self) -> Result<Opened> {
        let query = EventsQuery {
            from: self.from.from,
            follow: (self.from.follow && matches!(self.target, Target::Run(_))).then_some(true),
        };
        let mut rb = self
            .client
            .request(Method::GET, &self.path())
            .query(&query)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = self.last_id {
            rb = rb.header("Last-Event-ID", id.to_string());
        }
        let res = self.client.send(rb).await?;
        if res.status() == StatusCode::NO_CONTENT {
            return Ok(Opened::NoContent);
        }
        let ty = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !ty.starts_with("text/event-stream") {
            return Err(Error::Protocol(format!(
                "{} answered {ty:?}, not an event stream",
                self.path()
            )));
        }
        Ok(Opened::Body(res))
    }

    /// Opens the connection again after the last id; `Ok(false)` when the server says there is
    /// nothing more (204).
    async fn reconnect(&mut self) -> Result<bool> {
        let mut delay = RECONNECT_DELAY_MS;
        let mut attempt = 1;
        loop {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            match self.connect().await {
                Ok(Opened::Body(b)) => {
                    self.body = Some(b);
                    self.buf.clear();
                    return Ok(true);
                }
                Ok(Opened::NoContent) => return Ok(false),
                // A refusal will not get better by asking again.
                Err(e @ (Error::Http { .. } | Error::Protocol(_))) => return Err(e),
                Err(e) if attempt >= RECONNECT_ATTEMPTS_MAX => return Err(e),
                Err(_) => {
                    attempt += 1;
                    delay = (delay * 2).min(RECONNECT_DELAY_MAX_MS);
                }
            }
        }
    }

    /// The next event (chunks are skipped); `None` when the stream is over.
    pub async fn next(&mut self) -> Option<Result<StreamEvent>> {
        loop {
            match self.next_item().await? {
                Ok(StreamItem::Event(ev)) => return Some(Ok(ev)),
                Ok(StreamItem::Chunk(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next event or live chunk; `None` when the stream is over.
    pub async fn next_item(&mut self) -> Option<Result<StreamItem>> {
        let out = self.read_item().await;
        if matches!(out, Some(Err(_))) {
            self.finished = true;
        }
        out
    }

    async fn read_item(&mut self) -> Option<Result<StreamItem>> {
        loop {
            if self.finished {
                return None;
            }
            let Some(body) = self.body.as_mut() else {
                match self.reconnect().await {
                    Ok(true) => continue,
                    Ok(false) => {
                        self.finished = true;
                        return None;
                    }
                    Err(e) => return Some(Err(e)),
                }
            };
            if let Some(msg) = take_message(&mut self.buf) {
                match self.accept(msg) {
                    Ok(Some(ev)) => return Some(Ok(ev)),
                    Ok(None) => continue,
                    Err(e) => return Some(Err(e)),
                }
            }
            if self.buf.len() > SSE_MESSAGE_BYTES_MAX {
                return Some(Err(Error::Protocol(format!(
                    "an SSE message exceeds {SSE_MESSAGE_BYTES_MAX} bytes"
                ))));
            }
            match body.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                // The connection dropped or the server ended the body early: resume after the
                // last id (a partial message in the buffer is sent again).
                Err(_) | Ok(None) => {
                    self.body = None;
                    self.buf.clear();
                }
            }
        }
    }

    /// Turns one message into an event or a chunk: `None` for a comment or a duplicate.
    fn accept(&mut self, msg: RawMessage) -> Result<Option<StreamItem>> {
        if msg.data.is_empty() {
            return Ok(None);
        }
        if msg.id.is_none()
            && let Some(name) = msg.event.as_deref().filter(|n| CHUNK_NAMES.contains(n))
        {
            let chunk: ChunkData =
                serde_json::from_str(&msg.data).map_err(|source| Error::Decode {
                    what: format!("a {name} message of {}", self.path()),
                    source,
                })?;
            return Ok(Some(StreamItem::Chunk(chunk)));
        }
        let id: u64 = msg
            .id
            .as_deref()
            .and_then(|i| i.trim().parse().ok())
            .ok_or_else(|| {
                Error::Protocol(format!("an SSE message without a numeric id: {:?}", msg.id))
            })?;
        let expected = match (self.last_id, self.from.from) {
            (Some(last), _) => Some(last + 1),
            (None, Some(from)) => Some(from),
            (None, None) if matches!(self.target, Target::Run(_)) => Some(0),
            (None, None) => None,
        };
        if let Some(expected) = expected {
            if id < expected {
                return Ok(None);
            }
            if id > expected {
                return Err(Error::Protocol(format!(
                    "the event stream skipped from id {} to {id}",
                    expected
                )));
            }
        }
        let data: EventData = serde_json::from_str(&msg.data).map_err(|source| Error::Decode {
            what: format!("the SSE message {id} of {}", self.path()),
            source,
        })?;
        self.last_id = Some(id);
        let name = msg.event.unwrap_or_default();
        if matches!(self.target, Target::Run(_))
            && !self.from.follow
            && !data.abandoned
            && END_NAMES.contains(&name.as_str())
        {
            self.finished = true;
        }
        Ok(Some(StreamItem::Event(StreamEvent { id, name, data })))
    }

    /// The events as a `futures` stream.
    pub fn into_stream(self) -> BoxStream<'static, Result<StreamEvent>> {
        futures_util::stream::unfold(self, |mut s| async move {
            let next = s.next().await?;
            Some((next, s))
        })
        .boxed()
    }

    /// The events and live chunks as a `futures` stream.
    pub fn into_item_stream(self) -> BoxStream<'static, Result<StreamItem>> {
        futures_util::stream::unfold(self, |mut s| async move {
            let next = s.next_item().await?;
            Some((next, s))
        })
        .boxed()
    }
}

/// One SSE message as it arrived.
#[derive(Clone, Debug, Default, PartialEq)]
struct RawMessage {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

/// Takes the first complete message (ended by a blank line) out of `buf`. The split is on raw
/// bytes, so a character cut between two network chunks is put back together first.
fn take_message(buf: &mut Vec<u8>) -> Option<RawMessage> {
    let (end, sep) = [b"\n\n".as_slice(), b"\r\n\r\n".as_slice()]
        .iter()
        .filter_map(|sep| {
            buf.windows(sep.len())
                .position(|w| w == *sep)
                .map(|p| (p, sep.len()))
        })
        .min()?;
    let raw: Vec<u8> = buf.drain(..end + sep).collect();
    let block = String::from_utf8_lossy(&raw[..end]);
    let mut msg = RawMessage::default();
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
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
    Some(msg)
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{Envelope, Event, Hash, Timestamp};
    use chronicle_wire::names::{event_data, wire_names};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const RUN: RunId = RunId::from_u128(0x5E);

    /// The SSE message of seq `seq` (the last one a `run.end`).
    fn message(seq: u64, last: bool) -> String {
        let event = if last {
            Event::RunCompleted {
                total_execution_time_ms: 1,
            }
        } else {
            Event::Reasoning {
                message: format!("note {seq}"),
            }
        };
        let env = Envelope {
            offset: seq,
            run_id: RUN,
            seq,
            at: Timestamp(0),
            prev_hash: Hash::ZERO,
            hash: Hash::ZERO,
            event,
        };
        let data = serde_json::to_string(&event_data(&env)).unwrap();
        format!(
            "id: {seq}\nevent: {}\ndata: {data}\n\n",
            wire_names(&env.event).0
        )
    }

    /// A server that answers each connection with the next of `bodies` (`None`: 204) and then
    /// closes it; returns its base URL and the request heads it saw.
    async fn server(bodies: Vec<Option<String>>) -> (String, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut heads = Vec::new();
            for body in bodies {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    sock.read_exact(&mut byte).await.unwrap();
                    head.push(byte[0]);
                }
                heads.push(String::from_utf8(head).unwrap().to_ascii_lowercase());
                let answer = match body {
                    Some(b) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{b}"
                    ),
                    None => "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n".to_owned(),
                };
                sock.write_all(answer.as_bytes()).await.unwrap();
                sock.shutdown().await.unwrap();
            }
            heads
        });
        (base, task)
    }

    async fn ids(stream: &mut EventStream) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        while let Some(ev) = stream.next().await {
            let ev = ev?;
            assert_eq!(ev.data.seq, ev.id);
            ids.push(ev.id);
        }
        Ok(ids)
    }

    #[tokio::test]
    async fn a_dropped_connection_resumes_without_gap_or_duplicate() {
        let first = format!(
            ": keep-alive\n\n{}{}id: 2\nevent: reasoning.note\ndata: {{\"run_",
            message(0, false),
            message(1, false)
        );
        let second = format!(
            "{}{}{}",
            message(1, false),
            message(2, false),
            message(3, true)
        );
        let (base, task) = server(vec![Some(first), Some(second)]).await;
        let client = Client::new(&base).unwrap();
        let mut stream = client.run_events(RUN, EventsFrom::default()).await.unwrap();
        assert_eq!(ids(&mut stream).await.unwrap(), [0, 1, 2, 3]);
        let heads = task.await.unwrap();
        assert!(!heads[0].contains("last-event-id"), "{}", heads[0]);
        assert!(heads[1].contains("last-event-id: 1\r\n"), "{}", heads[1]);
        assert!(
            heads[1].starts_with(&format!("get /api/v1/agent/{RUN}/events ")),
            "{}",
            heads[1]
        );
    }

    /// A live chunk's SSE message: named, without an id.
    fn chunk(text: &str) -> String {
        let data = serde_json::json!({"run_id": RUN, "kind": "MessageChunk", "type": "message",
            "subtype": "chunk", "content": {"text": text}});
        format!("event: message.chunk\ndata: {data}\n\n")
    }

    #[tokio::test]
    async fn chunks_come_between_events_and_leave_the_resume_point_alone() {
        let first = format!(
            "{}{}{}{}",
            message(0, false),
            chunk("Sun"),
            message(1, false),
            chunk("ny")
        );
        let second = format!("{}{}{}", message(1, false), chunk("!"), message(2, true));
        let (base, task) = server(vec![Some(first.clone()), Some(second.clone())]).await;
        let client = Client::new(&base).unwrap();
        let mut stream = client.run_events(RUN, EventsFrom::default()).await.unwrap();
        let mut seen = Vec::new();
        while let Some(item) = stream.next_item().await {
            seen.push(match item.unwrap() {
                StreamItem::Event(ev) => ev.id.to_string(),
                StreamItem::Chunk(c) => {
                    assert_eq!((c.run_id, c.name()), (RUN, "message.chunk"));
                    c.content.text
                }
            });
        }
        assert_eq!(seen, ["0", "Sun", "1", "ny", "!", "2"]);
        // The chunk after event 1 did not move the resume point.
        let heads = task.await.unwrap();
        assert!(heads[1].contains("last-event-id: 1\r\n"), "{}", heads[1]);

        // A reader of events alone never sees the chunks.
        let (base, _task) = server(vec![Some(first), Some(second)]).await;
        let client = Client::new(&base).unwrap();
        let mut stream = client.run_events(RUN, EventsFrom::default()).await.unwrap();
        assert_eq!(ids(&mut stream).await.unwrap(), [0, 1, 2]);

        // A message without an id that is not a chunk is still refused.
        let body = format!("event: reasoning.note\ndata: {{}}\n\n{}", message(0, false));
        let (base, _task) = server(vec![Some(body)]).await;
        let client = Client::new(&base).unwrap();
        let mut stream = client.run_events(RUN, EventsFrom::default()).await.unwrap();
        let e = stream.next().await.unwrap().unwrap_err();
        assert!(e.to_string().contains("without a numeric id"), "{e}");
    }

    #[tokio::test]
    async fn a_finished_run_with_nothing_newer_ends_the_stream() {
        let (base, task) = server(vec![Some(message(0, false)), None]).await;
        let client = Client::new(&base).unwrap();
        let mut stream = client.run_events(RUN, EventsFrom::default()).await.unwrap();
        assert_eq!(ids(&mut stream).await.unwrap(), [0]);
        task.await.unwrap();

        // 204 at once: an empty stream.
        let (base, task) = server(vec![None]).await;
        let client = Client::new(&base).unwrap();
        let from = EventsFrom {
            last_event_id: Some(9),
            ..EventsFrom::default()
        };
        let mut stream = client.run_events(RUN, from).await.unwrap();
        assert_eq!(ids(&mut stream).await.unwrap(), Vec::<u64>::new());
        assert!(task.await.unwrap()[0].contains("last-event-id: 9\r\n"));
    }

    #[tokio::test]
    async fn a_skipped_id_is_an_error() {
        let body = format!("{}{}", message(0, false), message(2, false));
        let (base, _task) = server(vec![Some(body)]).await;
        let client = Client::new(&base).unwrap();
        let mut stream = client.run_events(RUN, EventsFrom::default()).await.unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap().id, 0);
        let e = stream.next().await.unwrap().unwrap_err();
        assert!(e.to_string().contains("skipped from id 1 to 2"), "{e}");
        assert!(stream.next().await.is_none());
    }

    #[test]
    fn messages_split_on_blank_lines() {
        let mut buf =
            b": keep-alive\n\nid: 3\nevent: todo.added\ndata: {\"a\":\ndata: 1}\n\nid: 4\n"
                .to_vec();
        assert_eq!(take_message(&mut buf), Some(RawMessage::default()));
        assert_eq!(
            take_message(&mut buf),
            Some(RawMessage {
                id: Some("3".into()),
                event: Some("todo.added".into()),
                data: "{\"a\":\n1}".into(),
            })
        );
        assert_eq!(take_message(&mut buf), None);
        assert_eq!(buf, b"id: 4\n");
        let mut crlf = b"id: 5\r\ndata: x\r\n\r\n".to_vec();
        assert_eq!(take_message(&mut crlf).unwrap().data, "x");
    }
}
