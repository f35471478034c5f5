//! The PostgreSQL store's queries other than the append: reads in bounded pages, record and index
//! writes, verification, and the follower of the durable head.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use chronicle_schemas::{Envelope, Hash, RunId, SessionId, Timestamp};
use tokio_postgres::AsyncMessage;
use tokio_postgres::types::ToSql;
use tokio_stream::StreamExt;

use super::{Inner, PgLog, db, hash_of};
use crate::index::IndexOp;
use crate::records::RecordOp;
use crate::verify::{Chains, Problem, VerifyReport, decode_at as decode};
use crate::{Error, Result, RunHead};

/// Most rows one read of a page returns.
pub const PAGE_EVENTS: u64 = 256;

/// Advisory-lock class of named records' keys (the two-number form, apart from anyone's
/// one-number locks).
const RECORD_LOCK_CLASS: i32 = 0x4348_5231;

/// An iterator over pages that a cursor key fetches one at a time, ending at the first empty
/// page or the first error.
pub(crate) struct Pages<K, T, F> {
    fetch: F,
    after: Option<K>,
    page: std::vec::IntoIter<(K, T)>,
    done: bool,
}

impl<K: Clone, T, F: FnMut(Option<K>) -> Result<Vec<(K, T)>>> Pages<K, T, F> {
    pub fn new(fetch: F) -> Self {
        Pages {
            fetch,
            after: None,
            page: Vec::new().into_iter(),
            done: false,
        }
    }
}

impl<K: Clone, T, F: FnMut(Option<K>) -> Result<Vec<(K, T)>>> Iterator for Pages<K, T, F> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        loop {
            if let Some((k, item)) = self.page.next() {
                self.after = Some(k);
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            match (self.fetch)(self.after.clone()) {
                Ok(page) if page.is_empty() => {
                    self.done = true;
                    return None;
                }
                Ok(page) => self.page = page.into_iter(),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

const HEAD_COLUMNS: &str =
    "run_id, session_id, last_seq, last_hash, last_offset, created_at, updated_at, terminal";

pub(crate) fn head_of(row: &tokio_postgres::Row) -> Result<RunHead> {
    Ok(RunHead {
        run_id: RunId(row.get(0)),
        session_id: SessionId::from(row.get::<_, &str>(1)),
        last_seq: row.get::<_, i64>(2) as u64,
        last_hash: hash_of(row.get::<_, &[u8]>(3))?,
        last_offset: row.get::<_, i64>(4) as u64,
        created_at: Timestamp(row.get(5)),
        updated_at: Timestamp(row.get(6)),
        terminal: row.get(7),
    })
}

pub(crate) async fn run_head(inner: Arc<Inner>, run_id: RunId) -> Result<Option<RunHead>> {
    let client = inner.client().await?;
    let row = client
        .query_opt(
            &format!("SELECT {HEAD_COLUMNS} FROM runs WHERE run_id = $1"),
            &[&run_id.0],
        )
        .await
        .map_err(db)?;
    row.as_ref().map(head_of).transpose()
}

pub(crate) async fn runs_page(
    inner: Arc<Inner>,
    after: Option<RunId>,
) -> Result<Vec<(RunId, RunHead)>> {
    let client = inner.client().await?;
    let after = after.map(|r| r.0);
    let rows = client
        .query(
            &format!(
                "SELECT {HEAD_COLUMNS} FROM runs WHERE $1::uuid IS NULL OR run_id > $1 \
                 ORDER BY run_id LIMIT {PAGE_EVENTS}"
            ),
            &[&after],
        )
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| head_of(r).map(|h| (h.run_id, h)))
        .collect()
}

pub(crate) async fn session_runs(inner: Arc<Inner>, session: SessionId) -> Result<Vec<RunId>> {
    if session.as_str().contains('\0') {
        // No run has it (an append refuses it), and PostgreSQL's text cannot hold it.
        return Ok(Vec::new());
    }
    let client = inner.client().await?;
    let rows = client
        .query(
            "SELECT run_id FROM runs WHERE session_id = $1 ORDER BY created_at, run_id",
            &[&session.as_str()],
        )
        .await
        .map_err(db)?;
    Ok(rows.iter().map(|r| RunId(r.get(0))).collect())
}

/// The events `from..to` that are in the log (at most [`PAGE_EVENTS`] of them); a hole below the
/// last one returned is damage.
pub(crate) async fn range(inner: Arc<Inner>, from: u64, to: u64) -> Result<Vec<Envelope>> {
    // Past any offset PostgreSQL's bigint can hold, there is nothing.
    if to <= from || from > i64::MAX as u64 {
        return Ok(Vec::new());
    }
    let to = to
        .min(from.saturating_add(PAGE_EVENTS))
        .min(i64::MAX as u64);
    let client = inner.client().await?;
    let rows = client
        .query(
            "SELECT log_offset, record FROM events WHERE log_offset >= $1 AND log_offset < $2 \
             ORDER BY log_offset",
            &[&(from as i64), &(to as i64)],
        )
        .await
        .map_err(db)?;
    let mut out = Vec::with_capacity(rows.len());
    for (want, row) in (from..).zip(&rows) {
        let offset = row.get::<_, i64>(0) as u64;
        if offset != want {
            return Err(Error::Corrupt {
                offset: want,
                reason: "missing".into(),
            });
        }
        out.push(decode(offset, row.get(1))?);
    }
    Ok(out)
}

/// A run's events with seqs `from..=to` (at most [`PAGE_EVENTS`] of them).
pub(crate) async fn run_page(
    inner: Arc<Inner>,
    run_id: RunId,
    from: u64,
    to: u64,
) -> Result<Vec<Envelope>> {
    if to < from || from > i64::MAX as u64 {
        return Ok(Vec::new());
    }
    // Bounded to one page in the condition, not only by the LIMIT: without statistics (a table
    // just written) the planner would read and sort the run's whole rest for every page.
    let to = to
        .min(from.saturating_add(PAGE_EVENTS - 1))
        .min(i64::MAX as u64);
    let client = inner.client().await?;
    let rows = client
        .query(
            "SELECT log_offset, seq, record FROM events WHERE run_id = $1 AND seq >= $2 \
             AND seq <= $3 ORDER BY seq",
            &[&run_id.0, &(from as i64), &(to as i64)],
        )
        .await
        .map_err(db)?;
    let mut out = Vec::with_capacity(rows.len());
    for (want, row) in (from..).zip(&rows) {
        let offset = row.get::<_, i64>(0) as u64;
        if row.get::<_, i64>(1) as u64 != want {
            return Err(Error::Corrupt {
                offset,
                reason: format!("run {run_id} has no seq {want}"),
            });
        }
        out.push(decode(offset, row.get(2))?);
    }
    Ok(out)
}

pub(crate) async fn record(inner: Arc<Inner>, key: Vec<u8>) -> Result<Option<Vec<u8>>> {
    let client = inner.client().await?;
    let row = client
        .query_opt("SELECT value FROM records WHERE key = $1", &[&key])
        .await
        .map_err(db)?;
    Ok(row.map(|r| r.get(0)))
}

/// The advisory locks of `keys`, in one order for every writer (so two never wait on each
/// other): what orders a check of a record against a write of it.
fn record_locks<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Vec<i32> {
    let set: BTreeSet<i32> = keys
        .map(|k| {
            let h = Hash::of_content(k).0;
            i32::from_be_bytes([h[0], h[1], h[2], h[3]])
        })
        .collect();
    set.into_iter().collect()
}

async fn lock_records(tx: &tokio_postgres::Transaction<'_>, locks: &[i32]) -> Result<()> {
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, k) FROM \
         (SELECT k FROM unnest($2::int4[]) AS k ORDER BY k) AS sorted",
        &[&RECORD_LOCK_CLASS, &locks],
    )
    .await
    .map_err(db)?;
    Ok(())
}

pub(crate) async fn put_record_if_absent(
    inner: Arc<Inner>,
    key: Vec<u8>,
    value: Vec<u8>,
) -> Result<Option<Vec<u8>>> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db)?;
    lock_records(&tx, &record_locks(std::iter::once(key.as_slice()))).await?;
    let there = tx
        .query_opt("SELECT value FROM records WHERE key = $1", &[&key])
        .await
        .map_err(db)?;
    if let Some(row) = there {
        return Ok(Some(row.get(0)));
    }
    tx.execute(
        "INSERT INTO records (key, value) VALUES ($1, $2)",
        &[&key, &value],
    )
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(None)
}

/// Each key's value after `ops` in order (`None`: deleted), and the expectations.
type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

pub(crate) async fn records_apply(inner: Arc<Inner>, ops: Vec<RecordOp>) -> Result<()> {
    let mut writes = Writes::new();
    let mut expects = Vec::new();
    for op in &ops {
        match op {
            RecordOp::Put(k, v) => {
                writes.insert(k.as_bytes().to_vec(), Some(v.clone()));
            }
            RecordOp::Delete(k) => {
                writes.insert(k.as_bytes().to_vec(), None);
            }
            RecordOp::Expect(k, want) => expects.push((k.clone(), want.clone())),
        }
    }
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db)?;
    let keys = ops.iter().map(|op| op.key().as_bytes());
    lock_records(&tx, &record_locks(keys)).await?;
    if !expects.is_empty() {
        let keys: Vec<Vec<u8>> = expects.iter().map(|(k, _)| k.as_bytes().to_vec()).collect();
        let rows = tx
            .query(
                "SELECT key, value FROM records WHERE key = ANY($1)",
                &[&keys],
            )
            .await
            .map_err(db)?;
        let there: BTreeMap<Vec<u8>, Vec<u8>> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        for (key, want) in &expects {
            if there.get(key.as_bytes()) != want.as_ref() {
                return Err(Error::RecordConflict { key: key.clone() });
            }
        }
    }
    apply_writes(&tx, "records", writes).await?;
    tx.commit().await.map_err(db)?;
    Ok(())
}

/// Writes each key's final value into `table` (`records` or `index_entries`).
async fn apply_writes(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    writes: Writes,
) -> Result<()> {
    let (mut put_keys, mut put_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
    for (k, v) in writes {
        match v {
            Some(v) => {
                put_keys.push(k);
                put_values.push(v);
            }
            None => deletes.push(k),
        }
    }
    if !deletes.is_empty() {
        tx.execute(
            &format!("DELETE FROM {table} WHERE key = ANY($1)"),
            &[&deletes],
        )
        .await
        .map_err(db)?;
    }
    if !put_keys.is_empty() {
        tx.execute(
            &format!(
                "INSERT INTO {table} (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            ),
            &[&put_keys, &put_values],
        )
        .await
        .map_err(db)?;
    }
    Ok(())
}

pub(crate) async fn index_apply(
    inner: Arc<Inner>,
    ops: Vec<IndexOp>,
    from: u64,
    to: u64,
) -> Result<()> {
    let mut writes = Writes::new();
    for op in ops {
        match op {
            IndexOp::Put(k, v) => writes.insert(k, Some(v)),
            IndexOp::Delete(k) => writes.insert(k, None),
        };
    }
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db)?;
    let row = tx
        .query_one("SELECT watermark FROM index_head FOR UPDATE", &[])
        .await
        .map_err(db)?;
    let actual = row.get::<_, i64>(0) as u64;
    if actual != from {
        return Err(Error::IndexConflict {
            expected: from,
            actual,
        });
    }
    apply_writes(&tx, "index_entries", writes).await?;
    tx.execute("UPDATE index_head SET watermark = $1", &[&(to as i64)])
        .await
        .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(())
}

/// One page of `table`'s keys within the bounds, either way.
pub(crate) async fn key_range(
    inner: Arc<Inner>,
    table: &'static str,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut conditions = Vec::new();
    let mut params: Vec<Vec<u8>> = Vec::new();
    for (bound, incl, excl) in [(&start, ">=", ">"), (&end, "<=", "<")] {
        let (op, key) = match bound {
            Bound::Included(k) => (incl, k),
            Bound::Excluded(k) => (excl, k),
            Bound::Unbounded => continue,
        };
        params.push(key.clone());
        conditions.push(format!("key {op} ${}", params.len()));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let order = if reverse { "DESC" } else { "ASC" };
    let limit = limit.min(i64::MAX as usize) as i64;
    let sql = format!("SELECT key, value FROM {table} {filter} ORDER BY key {order} LIMIT {limit}");
    let client = inner.client().await?;
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    let rows = client.query(&sql, &refs).await.map_err(db)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// A row of the log as stored: offset, run, seq and record.
pub(crate) type RawRow = (u64, RunId, u64, Vec<u8>);

pub(crate) async fn raw_page(inner: Arc<Inner>, from: u64) -> Result<Vec<RawRow>> {
    let client = inner.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT log_offset, run_id, seq, record FROM events WHERE log_offset >= $1 \
                 ORDER BY log_offset LIMIT {PAGE_EVENTS}"
            ),
            &[&(from.min(i64::MAX as u64) as i64)],
        )
        .await
        .map_err(db)?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0) as u64,
                RunId(r.get(1)),
                r.get::<_, i64>(2) as u64,
                r.get(3),
            )
        })
        .collect())
}

/// Walks the whole log in pages: dense offsets, records that decode and hash, unbroken chains,
/// and heads that match them.
pub(crate) fn verify(log: &PgLog, only: Option<RunId>) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let mut chains = Chains::default();
    let mut problem = None;
    let mut next = 0u64;
    'walk: loop {
        let page = log.verify_page(next)?;
        if page.is_empty() {
            break;
        }
        for (offset, run_id, seq, record) in page {
            let at = |reason: String| Problem {
                offset,
                run_id: Some(run_id),
                seq: Some(seq),
                reason,
            };
            if offset != next {
                problem = Some(Problem {
                    offset: next,
                    run_id: None,
                    seq: None,
                    reason: "missing".into(),
                });
                break 'walk;
            }
            report.next_offset = offset + 1;
            next = offset + 1;
            let env = match decode(offset, &record) {
                Ok(env) => env,
                Err(e) => {
                    problem = Some(at(e.to_string()));
                    break 'walk;
                }
            };
            report.events += 1;
            if only.is_some_and(|r| r != env.run_id) {
                continue;
            }
            if let Err(reason) = chains.check(&env) {
                problem = Some(at(reason));
                break 'walk;
            }
            chains.extend(&env);
        }
    }
    if problem.is_none() {
        problem = log
            .all_heads()?
            .iter()
            .filter(|h| only.is_none_or(|r| r == h.run_id))
            .find_map(|h| {
                Some(Problem {
                    offset: h.last_offset,
                    run_id: Some(h.run_id),
                    seq: Some(h.last_seq),
                    reason: chains.disagrees_with(h)?,
                })
            });
    }
    report.problem = problem;
    report.heads = chains.into_heads();
    Ok(report)
}

/// Keeps the durable head up with every process's commits: `LISTEN` on the store's channel, and
/// a poll of `log_head` (notifications are lost while the connection is down). Reconnects for as
/// long as the store is open.
pub(crate) async fn follow(inner: Arc<Inner>, config: tokio_postgres::Config) {
    let poll = Duration::from_millis(inner.opts.pg_poll_ms.max(10));
    loop {
        if let Err(e) = listen(&inner, &config, poll).await {
            tracing::debug!(error = %e, "the PostgreSQL follower reconnects");
        }
        tokio::time::sleep(poll).await;
    }
}

async fn listen(inner: &Inner, config: &tokio_postgres::Config, poll: Duration) -> Result<()> {
    let (client, mut connection) = config.connect(super::connect::tls()).await.map_err(db)?;
    let (tx, mut notified) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                let _ = tx.send(n.payload().parse::<u64>().ok());
            }
        }
    });
    let _stop = Abort(driver);
    client
        .batch_execute(&format!("LISTEN {}", inner.channel))
        .await
        .map_err(db)?;
    let mut tick = tokio::time::interval(poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            n = notified.recv() => match n {
                Some(Some(next)) => inner.advance(next),
                Some(None) => {}
                None => return Err(Error::Unavailable("the listening connection closed".into())),
            },
            _ = tick.tick() => {
                let row = client
                    .query_one("SELECT next_offset FROM log_head", &[])
                    .await
                    .map_err(db)?;
                inner.advance(row.get::<_, i64>(0) as u64);
            }
        }
    }
}

/// Aborts a task when dropped.
struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}
