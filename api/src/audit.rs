//! The approvals inbox (`GET /api/v1/approvals`: what waits on a human across every run, and
//! since when) and the audit export (`GET /api/v1/audit/approvals`: one row per decision, as
//! JSON Lines or CSV, streamed from the log). The rows come from `projections::Audit` and are
//! encoded by `chronicle_wire::audit`; this file only reads the log, filters and streams.

use std::collections::{HashMap, HashSet};
use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use chronicle_engine::store;
use chronicle_projections::Audit;
use chronicle_schemas::{
    ApprovalStatus, AuditRow, Envelope, Event, Hash, OWNER_OF_OLD_RUNS, RunId, Timestamp,
};
use chronicle_wire::audit::{
    Encoder, Format, HEAD_OFFSET_HEADER, RUN_HEAD_HASH_HEADER, RUN_HEAD_SEQ_HEADER,
};
use chronicle_wire::{ErrorBody, ExportQuery, Inbox, InboxQuery};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ExportFormat, OlderThan, Query, owned_run};
use crate::lists::{INBOX_ITEMS_MAX, inbox_items, parse_status};
use crate::refusals::ReadError;
use crate::state::AppState;

/// The export sends the body in chunks of about this size.
const EXPORT_CHUNK_BYTES: usize = 64 * 1024;
/// Chunks buffered between the log reader and a slow client, after which the reader waits.
const EXPORT_QUEUE_CHUNKS: usize = 8;
/// How long the export waits for a run's newest event to pass its durability barrier (it is
/// visible in the run head a moment before): the export shows only durable events.
const DURABLE_WAIT_MS: u64 = 5_000;

// ------------------------------------------------------------------ the inbox

#[utoipa::path(get, path = "/api/v1/approvals", tag = "approvals", security(("bearer" = [])),
    params(
        ("status" = Option<ApprovalStatus>, Query, description = "Only approvals in this state (default `pending`)"),
        ("older_than" = inline(Option<OlderThan>), Query, description = "Only approvals requested before now minus this duration, or before this instant"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "At most this many, oldest first (default 1000)"),
    ),
    responses(
        (status = 200, description = "The approvals of every run the caller may see (an admin: all), oldest request first; pending ones with how long they have waited", body = Inbox),
        (status = 400, description = "A bad `status`, `older_than` or `limit` (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn inbox(
    State(st): State<AppState>,
    Principal(who): Principal,
    Query(q): Query<InboxQuery>,
) -> Result<Response, ReadError> {
    let status = parse_status(q.status.as_deref().unwrap_or("pending"))?;
    let limit = q.limit.unwrap_or(INBOX_ITEMS_MAX);
    if limit == 0 || limit > INBOX_ITEMS_MAX {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={INBOX_ITEMS_MAX}, got {limit}"
        ))
        .into());
    }
    let now = now();
    let before = q
        .older_than
        .as_deref()
        .map(|s| older_than(s, now))
        .transpose()?;
    let engine = st.engine.clone();
    // Replaying runs reads sled synchronously: keep it off the async workers.
    let (items, truncated) =
        tokio::task::spawn_blocking(move || inbox_items(&engine, &who, status, before, now, limit))
            .await
            .map_err(ApiError::internal)??;
    Ok(axum::Json(Inbox {
        status,
        now,
        count: items.len(),
        truncated,
        approvals: items,
    })
    .into_response())
}

/// The instant before which an approval counts as older than `s`: `now - duration` for a
/// duration (`250ms`, `30s`, `5m`, `2h`, `1d`), or an RFC 3339 instant.
fn older_than(s: &str, now: Timestamp) -> ApiResult<Timestamp> {
    if let Some(t) = Timestamp::parse_rfc3339(s) {
        return Ok(t);
    }
    let micros = parse_duration_micros(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "older_than must be a duration like 30s, 5m, 2h, 1d or an RFC 3339 instant, got {s:?}"
        ))
    })?;
    Ok(Timestamp(now.as_micros().saturating_sub(micros)))
}

/// A duration of 1..=18 digits and a unit, in microseconds.
fn parse_duration_micros(s: &str) -> Option<i64> {
    let digits = s.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 || digits > 18 {
        return None;
    }
    let (n, unit) = s.split_at(digits);
    let n: i64 = n.parse().ok()?;
    let unit_micros: i64 = match unit {
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60 * 1_000_000,
        "h" => 3_600 * 1_000_000,
        "d" => 86_400 * 1_000_000,
        _ => return None,
    };
    // Saturating: a duration longer than the clock's range reaches back past every approval.
    Some(n.saturating_mul(unit_micros))
}

fn now() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp(i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX))
}

// ------------------------------------------------------------------ the export

/// Which rows an export keeps: `since <= decided_at < until`.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    since: Option<Timestamp>,
    until: Option<Timestamp>,
}

impl Window {
    fn keeps(&self, row: &AuditRow) -> bool {
        self.since.is_none_or(|s| row.decided_at >= s)
            && self.until.is_none_or(|u| row.decided_at < u)
    }
}

/// What the export reads: the whole log below the durable head, or one run up to its head.
#[derive(Clone, Copy, Debug)]
enum Scope {
    All { to_offset: u64 },
    Run { run_id: RunId, last_seq: u64 },
}

/// `jsonl` (the default) or `csv`.
fn format_param(s: Option<&str>) -> ApiResult<Format> {
    match s {
        None => Ok(Format::Jsonl),
        Some(s) => Format::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!("format must be jsonl or csv, got {s:?}"))
        }),
    }
}

fn time_param(name: &str, s: &str) -> ApiResult<Timestamp> {
    Timestamp::parse_rfc3339(s).ok_or_else(|| {
        ApiError::bad_request(format!("{name} must be an RFC 3339 instant, got {s:?}"))
    })
}

#[utoipa::path(get, path = "/api/v1/audit/approvals", tag = "audit", security(("bearer" = [])),
    params(
        ("format" = inline(Option<ExportFormat>), Query, description = "`jsonl` (default) or `csv`"),
        ("since" = Option<String>, Query, format = DateTime, description = "RFC 3339: rows decided at or after it"),
        ("until" = Option<String>, Query, format = DateTime, description = "RFC 3339: rows decided before it"),
        ("run_id" = Option<RunId>, Query, description = "Only this run"),
    ),
    responses(
        (status = 200, description = "One row per decision (and expiry) of the runs the caller may see, in log order: run_id, session_id, approval_id, subject_kind, subject, todo_id, tool_or_agent, requested_args, decision, effective_args, decided_by, comment, on_expiry, requested_at, decided_at, and the decision event's seq, offset, hash and prev_hash",
         content((String = "application/x-ndjson"), (String = "text/csv")),
         headers(
            ("x-chronicle-head-offset" = u64, description = "The durable next offset the export read below"),
            ("x-chronicle-run-head-seq" = u64, description = "With `run_id`: the run's last seq"),
            ("x-chronicle-run-head-hash" = String, description = "With `run_id`: the hash of the run's last event"),
         )),
        (status = 400, description = "A bad `format`, time or run id (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "`run_id` names no run the caller may see (`not_found`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn export(
    State(st): State<AppState>,
    Principal(who): Principal,
    Query(q): Query<ExportQuery>,
) -> Result<Response, ReadError> {
    let format = format_param(q.format.as_deref())?;
    let window = Window {
        since: q
            .since
            .as_deref()
            .map(|s| time_param("since", s))
            .transpose()?,
        until: q
            .until
            .as_deref()
            .map(|s| time_param("until", s))
            .transpose()?,
    };
    let run = q
        .run_id
        .as_deref()
        .map(|run| owned_run(&st, &who, run))
        .transpose()?;
    let store = st.engine.store().clone();
    let mut headers = HeaderMap::new();
    let scope = match run {
        Some(run_id) => {
            let head = store
                .run_head(run_id)?
                .ok_or_else(|| ApiError::not_found(format!("run {run_id} not found")))?;
            wait_durable(&store, head.last_offset).await?;
            headers.insert(
                HeaderName::from_static(RUN_HEAD_SEQ_HEADER),
                HeaderValue::from(head.last_seq),
            );
            headers.insert(
                HeaderName::from_static(RUN_HEAD_HASH_HEADER),
                HeaderValue::try_from(head.last_hash.to_hex()).map_err(ApiError::internal)?,
            );
            Scope::Run {
                run_id,
                last_seq: head.last_seq,
            }
        }
        None => Scope::All {
            to_offset: store.durable_next_offset(),
        },
    };
    let head_offset = match scope {
        Scope::All { to_offset } => to_offset,
        Scope::Run { .. } => store.durable_next_offset(),
    };
    headers.insert(
        HeaderName::from_static(HEAD_OFFSET_HEADER),
        HeaderValue::from(head_offset),
    );
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));

    let (tx, rx) = mpsc::channel(EXPORT_QUEUE_CHUNKS);
    // sled iterators are synchronous: read and encode on a blocking thread, a chunk at a time,
    // holding only the fold's per-run state (session id, undecided requests), never the rows.
    tokio::task::spawn_blocking(move || produce(&store, &who, scope, window, format, &tx));
    let body = Body::from_stream(until_shutdown(rx, st.shutdown.clone()));
    Ok((headers, body).into_response())
}

/// Waits until `offset` has passed its durability barrier.
async fn wait_durable(store: &store::Store, offset: u64) -> ApiResult<()> {
    let mut head = store.watch_head();
    match tokio::time::timeout(
        Duration::from_millis(DURABLE_WAIT_MS),
        head.wait_for(|durable| *durable > offset),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) => Err(ApiError::internal("the store closed")),
        Err(_) => Err(ApiError::internal(format!(
            "offset {offset} did not become durable within {DURABLE_WAIT_MS} ms"
        ))),
    }
}

/// The body: chunks as the reader produces them, until its end marker (an empty chunk). A read
/// error (sent as an `Err`), a reader that stops without the marker (a panic) and shutdown all
/// make the body fail instead of ending, so the client sees a broken transfer, never a
/// complete-looking export with rows missing.
fn until_shutdown(
    rx: mpsc::Receiver<io::Result<Bytes>>,
    shutdown: CancellationToken,
) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static {
    futures_util::stream::unfold(Some((rx, shutdown)), |state| async move {
        let (mut rx, shutdown) = state?;
        let chunk = tokio::select! {
            chunk = rx.recv() => chunk,
            () = shutdown.cancelled() => Some(Err(io::Error::other("the server is shutting down"))),
        };
        match chunk {
            Some(Ok(c)) if c.is_empty() => None,
            Some(Ok(c)) => Some((Ok(c), Some((rx, shutdown)))),
            Some(Err(e)) => Some((Err(e), None)),
            None => Some((Err(io::Error::other("the export stopped early")), None)),
        }
    })
}

/// Reads the log, folds it into rows, and sends the kept ones — of runs `who` may see — in chunks. Stops when the client
/// goes away (the send fails). A read error or a break in the log ends the body with an error.
fn produce(
    store: &store::Store,
    who: &chronicle_engine::Principal,
    scope: Scope,
    window: Window,
    format: Format,
    tx: &mpsc::Sender<io::Result<Bytes>>,
) {
    let fail = |e: String| {
        tracing::error!(error = %e, "audit export aborted");
        let _ = tx.blocking_send(Err(io::Error::other(e)));
    };
    let mut enc = Encoder::new(format);
    let events: Box<dyn Iterator<Item = store::Result<Envelope>>> = match scope {
        Scope::All { to_offset } => Box::new(store.read_range(0, to_offset)),
        Scope::Run { run_id, last_seq } => Box::new(store.read_run(run_id, 0, last_seq)),
    };
    let mut audit = Audit::new();
    let mut links = Links::default();
    // Runs of others, known from their `RunStarted` (every run's first event).
    let mut hidden = HashSet::new();
    for env in events {
        let env = match env {
            Ok(env) => env,
            Err(e) => return fail(e.to_string()),
        };
        if let Err(e) = links.check(&env, scope) {
            return fail(e);
        }
        if let Event::RunStarted { owner, .. } = &env.event
            && !who.may_access(owner.as_deref().unwrap_or(OWNER_OF_OLD_RUNS))
        {
            hidden.insert(env.run_id);
        }
        if hidden.contains(&env.run_id) {
            continue;
        }
        let Some(row) = audit.apply(&env) else {
            continue;
        };
        if !window.keeps(&row) {
            continue;
        }
        enc.push(&row);
        if enc.len() >= EXPORT_CHUNK_BYTES && tx.blocking_send(Ok(Bytes::from(enc.take()))).is_err()
        {
            return;
        }
    }
    if let Err(e) = links.check_end(scope) {
        return fail(e);
    }
    if !enc.is_empty() && tx.blocking_send(Ok(Bytes::from(enc.take()))).is_err() {
        return;
    }
    // The end marker: only now is the export complete.
    let _ = tx.blocking_send(Ok(Bytes::new()));
}

/// The export's own integrity check while it reads: offsets dense (whole log), seqs dense and
/// each `prev_hash` the previous hash of its run. Each record's hash against its body is already
/// checked by the store's decoder. Rows from a broken log would vouch for what is not there.
#[derive(Debug, Default)]
struct Links {
    next_offset: u64,
    runs: HashMap<RunId, (u64, Hash)>,
}

impl Links {
    fn check(&mut self, env: &Envelope, scope: Scope) -> Result<(), String> {
        if let Scope::All { .. } = scope {
            if env.offset != self.next_offset {
                return Err(format!(
                    "gap in the log: expected offset {}, found {}",
                    self.next_offset, env.offset
                ));
            }
            self.next_offset += 1;
        }
        let (next_seq, prev) = self
            .runs
            .get(&env.run_id)
            .map_or((0, Hash::ZERO), |&(seq, h)| (seq + 1, h));
        if env.seq != next_seq || env.prev_hash != prev {
            return Err(format!(
                "broken chain of run {} at offset {}: seq {} (expected {next_seq}), prev_hash {} (expected {prev})",
                env.run_id, env.offset, env.seq, env.prev_hash
            ));
        }
        self.runs.insert(env.run_id, (env.seq, env.hash));
        Ok(())
    }

    fn check_end(&self, scope: Scope) -> Result<(), String> {
        match scope {
            Scope::All { to_offset } if self.next_offset != to_offset => Err(format!(
                "the log ends at offset {} below the durable head {to_offset}",
                self.next_offset
            )),
            Scope::Run { run_id, last_seq }
                if self.runs.get(&run_id).map(|r| r.0) != Some(last_seq) =>
            {
                Err(format!("run {run_id} ends before its head seq {last_seq}"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_instants() {
        let now = Timestamp(10 * 86_400 * 1_000_000);
        assert_eq!(
            older_than("30s", now).unwrap(),
            Timestamp(now.0 - 30_000_000)
        );
        assert_eq!(
            older_than("250ms", now).unwrap(),
            Timestamp(now.0 - 250_000)
        );
        assert_eq!(
            older_than("5m", now).unwrap(),
            Timestamp(now.0 - 300_000_000)
        );
        assert_eq!(
            older_than("2h", now).unwrap(),
            Timestamp(now.0 - 7_200_000_000)
        );
        assert_eq!(
            older_than("1d", now).unwrap(),
            Timestamp(now.0 - 86_400_000_000)
        );
        assert_eq!(
            older_than("2025-10-05T10:00:00Z", now).unwrap(),
            Timestamp::parse_rfc3339("2025-10-05T10:00:00Z").unwrap()
        );
        for bad in [
            "",
            "5",
            "m",
            "5w",
            "-5m",
            "5 m",
            "99999999999999999999d",
            "1.5h",
        ] {
            assert_eq!(
                older_than(bad, now).unwrap_err().code,
                "bad_request",
                "{bad:?}"
            );
        }
        // Up to 18 digits, as the document says; a duration past the clock's range saturates.
        assert!(parse_duration_micros("9223372036854775807d").is_none());
        assert_eq!(parse_duration_micros("999999999999999999d"), Some(i64::MAX));
        assert!(older_than("999999999999999999d", now).is_ok());
    }

    #[test]
    fn statuses_and_formats() {
        assert_eq!(parse_status("pending").unwrap(), ApprovalStatus::Pending);
        assert_eq!(
            parse_status("cancelled").unwrap(),
            ApprovalStatus::Cancelled
        );
        assert!(parse_status("done").is_err());
        assert_eq!(format_param(None).unwrap(), Format::Jsonl);
        assert_eq!(format_param(Some("csv")).unwrap(), Format::Csv);
        assert!(format_param(Some("xml")).is_err());
    }
}
