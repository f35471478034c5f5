//! SSE streams: one run's events (`id:` = run seq) and every run's events (`id:` =
//! global offset), each message named and shaped by [`chronicle_wire::names`], history first and then live,
//! with no gap and no duplicate. Between them, the live chunks of model answers
//! (`message.chunk`, `reasoning.chunk`) *without* an `id:`: they are not stored, so a client's
//! `Last-Event-ID` stays the last event's and a resumed stream gets the events it missed and the
//! chunks written from then on. Each event's `data` is the one the WebSocket sends too
//! ([`Enricher`]).
//!
//! Each stream holds a [`StreamPermit`] (the caps) and reads a bounded amount ahead of its
//! client: a client that stops reading costs its stream a fixed amount, never a growing buffer.
//!
//! A run's stream replays the log as stored, abandoned branches included, and marks each event a
//! restore has left with `abandoned: true` ([`BranchMarks`]): ids stay dense (a resumed stream
//! needs no gap rule), and a client sees what happened before the restore for what it is. The
//! end of an abandoned branch (its old `run.end`) does not end the stream: it goes on to the
//! `run.restored` and the live branch, to the run's real end.

use std::pin::Pin;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use chronicle_engine::store::Tail;
use chronicle_engine::{Chunk, Live};
use chronicle_schemas::Envelope;
use chronicle_wire::{ErrorBody, EventData, EventsQuery, names};
use futures_util::Stream;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::auth::StreamPrincipal;
use crate::error::{ApiError, ApiResult};
use crate::events::{BranchMarks, Enricher};
use crate::extract::{Query, RunPath};
use crate::limits::StreamPermit;
use crate::refusals::{RunStreamError, StreamError};
use crate::response::sse_response;
use crate::state::AppState;

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
        RunPath,
        ("from" = Option<u64>, Query, minimum = 0, description = "Start at this seq (inclusive); default 0"),
        ("follow" = Option<bool>, Query, description = "Keep the stream open after `run.end` / `run.error`"),
        ("Last-Event-ID" = Option<u64>, Header, minimum = 0, description = "Resume after this seq (wins over `from`)"),
        ("ticket" = Option<String>, Query, description = "A one-time stream ticket (`POST /api/v1/stream-tickets`), for clients that cannot send the `Authorization` header, such as browsers"),
    ),
    responses(
        (status = 200, description = "Server-sent events, history then live: `id` = the run's seq, `event` = the dotted name, `data` = `{run_id, seq, offset, at, kind, type, subtype, content}`. Between them, while a model writes an answer, live chunks `message.chunk` / `reasoning.chunk` without an `id` (they are not stored; a resumed stream gets the events it missed and the chunks from then on), `data` = `{run_id, kind: \"MessageChunk\" | \"ReasoningChunk\", type, subtype: \"chunk\", content: {text, todo_id?, agent?}}`. An event on a branch a later restore abandoned has `abandoned: true` in its `data`; the stream ends after the `run.end` / `run.error` of the live branch (one on an abandoned branch does not end it) unless `follow`", content_type = "text/event-stream", body = String),
        (status = 204, description = "A resumed stream of an ended run has nothing newer"),
        (status = 400, description = "A run id that is not a UUID, a bad `from`, `follow` or `Last-Event-ID` (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        RunStreamError,
    ))]
pub(crate) async fn run_events(
    State(st): State<AppState>,
    StreamPrincipal(who): StreamPrincipal,
    // After the query, as before it was an extractor: a bad query is told first.
    Query(q): Query<EventsQuery>,
    RunPath(run): RunPath,
    headers: HeaderMap,
) -> Result<Response, RunStreamError> {
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
        StreamError,
    ))]
pub(crate) async fn all_events(
    State(st): State<AppState>,
    StreamPrincipal(who): StreamPrincipal,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, StreamError> {
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
