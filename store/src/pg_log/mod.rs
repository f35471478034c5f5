//! The event log on PostgreSQL: the same rules as the sled log, in a database that several
//! processes share.
//!
//! Tables (see `connect`): `log_head` (one row: the next offset and the newest `at`), `events`
//! (offset → the record `encode_record` made, unique by run and seq), `runs` (the heads),
//! `records`, `blobs`, `snapshots` (unlogged: a cache), `index_entries` with `index_head`, and
//! `meta` (the schema version).
//!
//! **Appends.** One writer task per process takes every queued append (up to
//! `append_batch_events_max` events) and writes the batch in one transaction: it locks the
//! `log_head` row first, reads the heads of the batch's runs under that lock, checks and encodes
//! each append as every implementation does (`append::stage`), inserts the events and heads,
//! moves the log head, announces the new head (`NOTIFY`) and commits — the statements of each
//! half pipelined in one round trip. The row lock serializes commits across every process, so
//! offsets are dense and in commit order, and the committed log is always a prefix `0..next`. A
//! caller is answered only once its commit is acknowledged (`synchronous_commit=on`). A commit
//! whose outcome is unknown (the connection lost during `COMMIT`) is reconciled: once the lost
//! transaction has ended (the head lock is free again), the batch is acknowledged if its first
//! record is there and refused if not; if the database cannot be asked within
//! `pg_reconcile_ms`, the store stops (fail-stop) rather than guess.
//!
//! **Followers.** The durable head moves on this process's commits, on each `NOTIFY` of another
//! process's, and on a poll of `log_head` every `pg_poll_ms` (notifications are lost while the
//! listening connection is down).
//!
//! **Reads.** The trait's synchronous reads run on the store's own runtime and wait for the
//! answer on a channel, so they work from any thread; the async reads do not block their caller's
//! runtime. The newest events this process committed are kept in memory for followers.
//!
//! **Failures.** A database that cannot be reached, or refuses a write for a reason that may pass
//! (shutting down, too many connections, a lock wait too long), is [`Error::Unavailable`]: nothing
//! was written and the same request may work later. A full disk is [`Error::StorageFull`].

mod connect;
mod import;
mod nodes;
mod reads;
mod writer;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chronicle_projections::{RunState, snapshot};
use chronicle_schemas::{BlobRef, Envelope, Event, Hash, RunId, SessionId};
use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot, watch};

use crate::index::{IndexEntry, IndexOp, IndexRange};
use crate::log::{Events, SharedEvents};
use crate::records::{self, RecordOp, RecordRange};
use crate::{Error, EventLog, Options, Result, RunHead, StorageHealth, VerifyReport};

pub use connect::{DEFAULT_SCHEMA, Migrated, PG_SCHEMA_VERSION, Target};

/// The newest committed events this process keeps decoded for its followers.
const RECENT_EVENTS: usize = 4096;

/// The event log on PostgreSQL.
pub struct PgLog {
    opts: Options,
    target: Target,
    inner: Arc<Inner>,
    writer: mpsc::Sender<writer::Request>,
    /// The store's own runtime: the pool's connections, the writer and the follower live on it,
    /// whatever runtime (or none) the callers have.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
}

/// What the store's tasks share with its handle.
pub(crate) struct Inner {
    pub pool: Pool,
    pub head_tx: watch::Sender<u64>,
    pub failure_tx: watch::Sender<Option<String>>,
    pub barriers: AtomicU64,
    pub channel: String,
    pub recent: Mutex<Recent>,
    pub opts: Options,
    /// How long each commit held the log head's lock.
    pub hold: HoldTimes,
    /// The node this process joined as, and the sessions it owns.
    pub joined: nodes::Joined,
}

/// The newest lock hold times (from the lock taken to the commit answered), for a benchmark.
#[derive(Default)]
pub(crate) struct HoldTimes(Mutex<VecDeque<u32>>);

/// Hold times kept: the newest ones.
const HOLD_SAMPLES: usize = 1 << 16;

impl HoldTimes {
    pub(crate) fn record(&self, d: std::time::Duration) {
        let mut v = self.0.lock().expect("not poisoned");
        if v.len() == HOLD_SAMPLES {
            v.pop_front();
        }
        v.push_back(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
    }
}

/// The newest committed events, in offset order from `first`.
#[derive(Default)]
pub(crate) struct Recent {
    first: u64,
    events: VecDeque<Arc<Envelope>>,
}

impl Recent {
    /// Keeps a committed batch (its offsets follow every earlier batch of this process, but
    /// another process may have committed in between: then the ring starts over).
    fn extend(&mut self, batch: &[Envelope]) {
        let Some(first) = batch.first() else { return };
        if self.first + self.events.len() as u64 != first.offset {
            self.events.clear();
            self.first = first.offset;
        }
        self.events.extend(batch.iter().cloned().map(Arc::new));
        while self.events.len() > RECENT_EVENTS {
            self.events.pop_front();
            self.first += 1;
        }
    }

    /// The events `from..to` when all of them are here.
    fn range(&self, from: u64, to: u64) -> Option<Vec<Arc<Envelope>>> {
        let end = self.first + self.events.len() as u64;
        (from >= self.first && to <= end && from < to).then(|| {
            self.events
                .range((from - self.first) as usize..(to - self.first) as usize)
                .cloned()
                .collect()
        })
    }
}

impl Inner {
    pub fn failure(&self) -> Option<String> {
        self.failure_tx.borrow().clone()
    }

    pub fn fail_stop(&self, why: &str) {
        self.failure_tx.send_if_modified(|f| {
            let first = f.is_none();
            if first {
                tracing::error!(
                    reason = why,
                    "the PostgreSQL store stopped accepting writes"
                );
                *f = Some(why.to_owned());
            }
            first
        });
    }

    pub fn refuse_if_stopped(&self) -> Result<()> {
        match self.failure() {
            Some(why) => Err(Error::Stopped(why)),
            None => Ok(()),
        }
    }

    /// Moves the durable head forward to `next` (never back).
    pub fn advance(&self, next: u64) {
        self.head_tx.send_if_modified(|h| {
            let later = next > *h;
            if later {
                *h = next;
            }
            later
        });
    }

    pub async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool
            .get()
            .await
            .map_err(|e| Error::Unavailable(format!("no connection to PostgreSQL: {e}")))
    }
}

/// A database error as the store's: what may pass is [`Error::Unavailable`], a full disk is
/// [`Error::StorageFull`], the rest names what PostgreSQL said.
pub(crate) fn db(e: tokio_postgres::Error) -> Error {
    use tokio_postgres::error::SqlState;
    let Some(code) = e.code() else {
        // No answer from the server: the connection is gone or was never made.
        return Error::Unavailable(format!("PostgreSQL: {e}"));
    };
    let message = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_owned());
    if *code == SqlState::DISK_FULL {
        return Error::StorageFull {
            needed: 0,
            available: 0,
            reserve: 0,
        };
    }
    let passing = code.code().starts_with("08")
        || code.code().starts_with("57")
        || code.code().starts_with("53")
        || [
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::READ_ONLY_SQL_TRANSACTION,
            SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
        ]
        .contains(code);
    if passing {
        Error::Unavailable(format!("PostgreSQL ({}): {message}", code.code()))
    } else {
        Error::Postgres(format!("{} ({})", message, code.code()))
    }
}

impl std::fmt::Debug for PgLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLog")
            .field("target", &self.target)
            .field("next_offset", &*self.inner.head_tx.borrow())
            .finish_non_exhaustive()
    }
}

/// Whether opening may create the store's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Create {
    /// Create the schema when it is not there (a server's first start).
    IfAbsent,
    /// Refuse a database without the store (the read commands: they never write).
    No,
}

impl PgLog {
    /// Connects to the store at `url` (see [`Target::parse`]); with [`Create::IfAbsent`] makes
    /// its schema when the database has none. Refuses a store of another schema version (run
    /// `chronicle store migrate`).
    pub fn open(url: &str, opts: Options, create: Create) -> Result<PgLog> {
        PgLog::open_target(Target::parse(url)?, opts, create)
    }

    pub fn open_target(target: Target, opts: Options, create: Create) -> Result<PgLog> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("chronicle-pg")
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let pool = {
            let _entered = handle.enter();
            connect::pool(&target, &opts)?
        };
        let next = run_on(&handle, {
            let (pool, schema) = (pool.clone(), target.schema.clone());
            async move {
                let client = pool.get().await.map_err(|e| {
                    Error::Unavailable(format!("cannot connect to PostgreSQL: {e}"))
                })?;
                let version = connect::schema_version(&client, &schema).await?;
                match (version, create) {
                    (Some(v), _) if v == PG_SCHEMA_VERSION => {}
                    (Some(v), _) => {
                        return Err(Error::SchemaVersion {
                            found: v,
                            supported: PG_SCHEMA_VERSION,
                        });
                    }
                    (None, Create::IfAbsent) => {
                        connect::migrate(&client, &schema).await?;
                    }
                    (None, Create::No) => {
                        return Err(Error::Postgres(format!(
                            "the database has no Chronicle store in schema {schema} \
                             (`chronicle store migrate` makes one)"
                        )));
                    }
                }
                for warning in connect::durability_warnings(&client).await? {
                    tracing::warn!("{warning}");
                }
                let row = client
                    .query_one("SELECT next_offset FROM log_head", &[])
                    .await
                    .map_err(db)?;
                Ok(row.get::<_, i64>(0) as u64)
            }
        })?;
        let inner = Arc::new(Inner {
            pool,
            head_tx: watch::channel(next).0,
            failure_tx: watch::channel(None).0,
            barriers: AtomicU64::new(0),
            channel: target.channel(),
            recent: Mutex::new(Recent {
                first: next,
                events: VecDeque::new(),
            }),
            opts: opts.clone(),
            hold: HoldTimes::default(),
            joined: nodes::Joined::default(),
        });
        let (tx, rx) = mpsc::channel(opts.write_queue_requests.max(1));
        handle.spawn(writer::run(inner.clone(), rx));
        handle.spawn(reads::follow(inner.clone(), target.session_config(&opts)));
        Ok(PgLog {
            opts,
            target,
            inner,
            writer: tx,
            runtime: Some(runtime),
            handle,
        })
    }

    /// Creates the store's schema at `url`, or upgrades it, under an advisory lock.
    pub fn migrate(url: &str) -> Result<Migrated> {
        let target = Target::parse(url)?;
        let schema = target.schema.clone();
        one_off(&target, move |client| {
            Box::pin(async move { connect::migrate(client, &schema).await })
        })
    }

    /// Removes the store in `target`'s schema, with everything in it (the tests' clean-up).
    #[doc(hidden)]
    pub fn drop_schema(target: &Target) -> Result<()> {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", target.schema);
        one_off(target, move |client| {
            Box::pin(async move { client.batch_execute(&sql).await.map_err(db) })
        })
    }

    /// Ends every connection of the store in `target`'s schema, as a failing network would (a
    /// fault drill for the tests), and waits (up to 5 s) until their sessions are gone.
    #[doc(hidden)]
    pub fn terminate_connections(target: &Target) -> Result<()> {
        let name = format!("chronicle/{}", target.schema);
        one_off(target, move |client| {
            Box::pin(async move {
                client
                    .execute(
                        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity \
                         WHERE application_name = $1 AND pid <> pg_backend_pid()",
                        &[&name],
                    )
                    .await
                    .map_err(db)?;
                Ok(())
            })
        })
    }

    /// Makes this process the store's only server: holds a session advisory lock of the store's
    /// schema for as long as the store is open, so that a second server on it is refused
    /// ([`Error::Locked`]). The read commands do not take it. If the lock's connection is lost
    /// (the database restarted), it is taken again; if another process took it meanwhile, this
    /// store stops (fail-stop) rather than share the runs.
    pub fn hold_exclusive(&self) -> Result<()> {
        let (config, key) = (
            self.target.session_config(&self.opts),
            exclusive_key(&self.target.schema),
        );
        let shown = self.target.shown.clone();
        let first = self.block({
            let config = config.clone();
            async move { take_exclusive(&config, key).await }
        })?;
        let Some(held) = first else {
            return Err(Error::Locked(format!(
                "another server holds the store at {shown}: one server per store"
            )));
        };
        let inner = self.inner.clone();
        self.handle.spawn(async move {
            let mut held = held;
            loop {
                // Until the lock's connection ends (the database restarted or cut it).
                let _ = (&mut held.1).await;
                drop(held.0);
                let mut wait = Duration::from_millis(100);
                // The lost session may still hold the lock on the server until the server's
                // keepalives end it (seconds); held by someone else past that, it is another
                // server's.
                let mut held_elsewhere_since = None;
                held = loop {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                    match take_exclusive(&config, key).await {
                        Ok(Some(again)) => break again,
                        Ok(None) => {
                            let since = *held_elsewhere_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= EXCLUSIVE_RETAKE {
                                inner.fail_stop(
                                    "another server took the store while this one's lock \
                                     connection was down",
                                );
                                return;
                            }
                        }
                        Err(e) => tracing::debug!(error = %e, "retaking the store's lock"),
                    }
                };
            }
        });
        Ok(())
    }

    /// Writes events stored elsewhere, each at its own offset with its own `at` and hash, after
    /// the last one here (`events[0].offset` must be this log's next offset): what `chronicle
    /// store copy` moves a log with. Returns the next offset.
    pub fn import(&self, events: Vec<Envelope>) -> Result<u64> {
        self.inner.refuse_if_stopped()?;
        self.block(import::batch(self.inner.clone(), events))
    }

    /// Where the store lives (no password).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs `fut` on the store's runtime and waits for it, from any thread.
    fn block<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        run_on(&self.handle, fut)
    }

    /// Runs `fut` on the store's runtime without blocking the caller's.
    async fn spawn<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.handle.spawn(fut).await.unwrap_or(Err(Error::Closed))
    }

    /// An append for the writer, and where its answer comes.
    fn request(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<(writer::Request, oneshot::Receiver<Result<Vec<Envelope>>>)> {
        self.inner.refuse_if_stopped()?;
        let (reply, answer) = oneshot::channel();
        let request = writer::Request {
            run_id,
            expected_seq,
            events,
            reply,
        };
        Ok((request, answer))
    }

    async fn submit(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let (request, answer) = self.request(run_id, expected_seq, events)?;
        self.writer.send(request).await.map_err(|_| Error::Closed)?;
        answer.await.unwrap_or(Err(Error::Closed))
    }
}

/// How long a server keeps trying to take its lock again while another session holds it: longer
/// than the server's keepalives take to end this server's own lost session.
const EXCLUSIVE_RETAKE: Duration = Duration::from_secs(30);

/// The advisory lock of a store's only server: a class of its own, and the schema's name hashed.
fn exclusive_key(schema: &str) -> (i32, i32) {
    let h = Hash::of_content(schema.as_bytes()).0;
    (0x4348_5232, i32::from_be_bytes([h[0], h[1], h[2], h[3]]))
}

/// A connection holding the lock, and the task that drives it (it ends with the connection).
type Held = (tokio_postgres::Client, tokio::task::JoinHandle<()>);

/// Takes the exclusive lock on a connection of its own: `None` when another session holds it.
async fn take_exclusive(
    config: &tokio_postgres::Config,
    (class, key): (i32, i32),
) -> Result<Option<Held>> {
    let (client, conn) = config.connect(connect::tls()).await.map_err(db)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let row = client
        .query_one("SELECT pg_try_advisory_lock($1, $2)", &[&class, &key])
        .await
        .map_err(db)?;
    Ok(row.get::<_, bool>(0).then_some((client, driver)))
}

/// Runs `work` on a connection of its own (not one of a store's), on a thread and runtime of its
/// own: callable from anywhere.
fn one_off<T: Send>(
    target: &Target,
    work: impl for<'c> FnOnce(
        &'c tokio_postgres::Client,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<T>> + Send + 'c>,
    > + Send,
) -> Result<T> {
    let mut config = target.session_config(&Options::default());
    config.application_name("chronicle/admin");
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let (client, conn) = config.connect(connect::tls()).await.map_err(db)?;
                let conn = tokio::spawn(conn);
                let done = work(&client).await;
                drop(client);
                let _ = conn.await;
                done
            })
        })
        .join()
        .unwrap_or(Err(Error::Closed))
    })
}

/// Runs `fut` on `handle`'s runtime and waits for its answer on a channel: works from a thread of
/// any runtime (it blocks that thread, never enters the runtime) and from none.
fn run_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().unwrap_or(Err(Error::Closed))
}

impl Drop for PgLog {
    fn drop(&mut self) {
        // Nothing acknowledged is pending (an append is answered once committed); an append in
        // flight is abandoned like a process that stops, and its transaction rolls back.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

pub(crate) fn hash_of(bytes: &[u8]) -> Result<Hash> {
    <[u8; 32]>::try_from(bytes)
        .map(Hash)
        .map_err(|_| Error::Decode(format!("a hash of {} bytes", bytes.len())))
}

#[async_trait]
impl EventLog for PgLog {
    fn options(&self) -> &Options {
        &self.opts
    }

    fn dir(&self) -> Option<&Path> {
        None
    }

    fn membership(&self) -> Option<&dyn crate::Membership> {
        Some(self)
    }

    fn postgres(&self) -> Option<&Target> {
        Some(&self.target)
    }

    async fn append(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.submit(run_id, expected_seq, events).await
    }

    fn barriers(&self) -> u64 {
        self.inner.barriers.load(Ordering::Relaxed)
    }

    /// At most the newest 65,536, from the lock taken to the commit answered.
    fn lock_hold_us(&self) -> Vec<u32> {
        self.inner
            .hold
            .0
            .lock()
            .expect("not poisoned")
            .iter()
            .copied()
            .collect()
    }

    /// The schema's tables with their indexes and TOAST (`pg_total_relation_size`).
    fn disk_bytes(&self) -> Result<Option<u64>> {
        let (inner, schema) = (self.inner.clone(), self.target.schema.clone());
        self.block(async move {
            let client = inner.client().await?;
            let row = client
                .query_one(
                    "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c \
                     JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relkind = 'r'",
                    &[&schema],
                )
                .await
                .map_err(db)?;
            // A schema without tables sums to NULL.
            Ok(Some(row.get::<_, Option<i64>>(0).unwrap_or(0) as u64))
        })
    }

    fn append_blocking(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let (request, answer) = self.request(run_id, expected_seq, events)?;
        self.writer
            .blocking_send(request)
            .map_err(|_| Error::Closed)?;
        answer.blocking_recv().unwrap_or(Err(Error::Closed))
    }

    fn run_head(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.block(reads::run_head(self.inner.clone(), run_id))
    }

    async fn run_head_async(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.spawn(reads::run_head(self.inner.clone(), run_id))
            .await
    }

    fn runs(&self) -> Box<dyn Iterator<Item = Result<RunHead>> + Send + '_> {
        Box::new(reads::Pages::new(move |after: Option<RunId>| {
            self.block(reads::runs_page(self.inner.clone(), after))
        }))
    }

    fn session_runs(&self, session: &SessionId) -> Result<Vec<RunId>> {
        self.block(reads::session_runs(self.inner.clone(), session.clone()))
    }

    fn get(&self, offset: u64) -> Result<Option<Envelope>> {
        let mut page = self.block(reads::range(
            self.inner.clone(),
            offset,
            offset.saturating_add(1),
        ))?;
        Ok(page.pop())
    }

    fn read_range(&self, from: u64, to: u64) -> Events<'_> {
        Box::new(reads::Pages::new(move |after: Option<u64>| {
            let from = after.map_or(from, |o| o + 1);
            let to = to.min(from.saturating_add(reads::PAGE_EVENTS));
            self.block(reads::range(self.inner.clone(), from, to))
                .map(|page| page.into_iter().map(|e| (e.offset, e)).collect())
        }))
    }

    fn read_range_shared(&self, from: u64, to: u64) -> SharedEvents<'_> {
        if let Some(events) = self
            .inner
            .recent
            .lock()
            .expect("not poisoned")
            .range(from, to)
        {
            return Box::new(events.into_iter().map(Ok));
        }
        crate::log::shared(self.read_range(from, to))
    }

    async fn read_range_async(&self, from: u64, to: u64) -> Result<Vec<Arc<Envelope>>> {
        if let Some(events) = self
            .inner
            .recent
            .lock()
            .expect("not poisoned")
            .range(from, to)
        {
            return Ok(events);
        }
        let mut out = Vec::new();
        let mut next = from;
        while next < to {
            let page = self
                .spawn(reads::range(self.inner.clone(), next, to))
                .await?;
            let Some(last) = page.last().map(|e| e.offset) else {
                break;
            };
            out.extend(page.into_iter().map(Arc::new));
            next = last + 1;
        }
        Ok(out)
    }

    fn read_run(&self, run_id: RunId, from_seq: u64, to_seq: u64) -> Events<'_> {
        Box::new(reads::Pages::new(move |after: Option<u64>| {
            let from = after.map_or(from_seq, |s| s + 1);
            self.block(reads::run_page(self.inner.clone(), run_id, from, to_seq))
                .map(|page| page.into_iter().map(|e| (e.seq, e)).collect())
        }))
    }

    async fn read_run_async(
        &self,
        run_id: RunId,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<Envelope>> {
        let mut out = Vec::new();
        let mut from = from_seq;
        loop {
            let page = self
                .spawn(reads::run_page(self.inner.clone(), run_id, from, to_seq))
                .await?;
            let Some(last) = page.last().map(|e| e.seq) else {
                return Ok(out);
            };
            out.extend(page);
            if last >= to_seq {
                return Ok(out);
            }
            from = last + 1;
        }
    }

    fn durable_next_offset(&self) -> u64 {
        *self.inner.head_tx.borrow()
    }

    fn watch_head(&self) -> watch::Receiver<u64> {
        self.inner.head_tx.subscribe()
    }

    fn durable_seq(&self, run_id: RunId) -> Result<Option<u64>> {
        Ok(self.run_head(run_id)?.map(|h| h.last_seq))
    }

    fn put_snapshot(&self, state: &RunState) -> Result<()> {
        let (Some(run), Some(seq)) = (state.run_id, state.last_seq) else {
            return Ok(());
        };
        if self.inner.failure().is_some() {
            return Ok(());
        }
        let value = snapshot::encode(state);
        let inner = self.inner.clone();
        self.block(async move {
            let client = inner.client().await?;
            client
                .execute(
                    "INSERT INTO snapshots (run_id, seq, state) VALUES ($1, $2, $3) \
                     ON CONFLICT (run_id, seq) DO UPDATE SET state = EXCLUDED.state",
                    &[&run.0, &(seq as i64), &value],
                )
                .await
                .map_err(db)?;
            Ok(())
        })
    }

    fn latest_snapshot(&self, run_id: RunId, seq: u64) -> Result<Option<RunState>> {
        let inner = self.inner.clone();
        self.block(async move {
            let client = inner.client().await?;
            let rows = client
                .query(
                    "SELECT state FROM snapshots WHERE run_id = $1 AND seq <= $2 \
                     ORDER BY seq DESC LIMIT 16",
                    &[&run_id.0, &(seq.min(i64::MAX as u64) as i64)],
                )
                .await
                .map_err(db)?;
            Ok(rows
                .iter()
                .find_map(|r| snapshot::decode(r.get::<_, &[u8]>(0))))
        })
    }

    fn clear_snapshots(&self) -> Result<()> {
        let inner = self.inner.clone();
        self.block(async move {
            let client = inner.client().await?;
            client.batch_execute("TRUNCATE snapshots").await.map_err(db)
        })
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<BlobRef> {
        self.inner.refuse_if_stopped()?;
        let hash = Hash::of_content(bytes);
        let blob = BlobRef {
            hash,
            bytes: bytes.len() as u64,
        };
        let (inner, bytes) = (self.inner.clone(), bytes.to_vec());
        self.block(async move {
            let client = inner.client().await?;
            client
                .execute(
                    "INSERT INTO blobs (hash, bytes) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
                    &[&hash.0.as_slice(), &bytes],
                )
                .await
                .map_err(db)?;
            Ok(blob)
        })
    }

    fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        let (inner, want) = (self.inner.clone(), blob.hash);
        let bytes = self.block(async move {
            let client = inner.client().await?;
            let row = client
                .query_opt(
                    "SELECT bytes FROM blobs WHERE hash = $1",
                    &[&want.0.as_slice()],
                )
                .await
                .map_err(db)?;
            row.map(|r| r.get::<_, Vec<u8>>(0))
                .ok_or(Error::BlobMissing(want))
        })?;
        let actual = Hash::of_content(&bytes);
        if actual != blob.hash {
            return Err(Error::BlobCorrupt {
                hash: blob.hash,
                actual,
            });
        }
        Ok(bytes)
    }

    fn put_record(&self, key: &str, value: &[u8]) -> Result<()> {
        records::check(key, Some(value))?;
        self.records_apply(&[RecordOp::Put(key.to_owned(), value.to_vec())])
    }

    fn put_record_if_absent(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>> {
        records::check(key, Some(value))?;
        self.inner.refuse_if_stopped()?;
        let (inner, key, value) = (self.inner.clone(), key.as_bytes().to_vec(), value.to_vec());
        self.block(reads::put_record_if_absent(inner, key, value))
    }

    fn record(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.block(reads::record(self.inner.clone(), key.as_bytes().to_vec()))
    }

    fn records(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self.records_range(&RecordRange {
                prefix: prefix.to_owned(),
                after: after.clone(),
                reverse: false,
                limit: reads::PAGE_EVENTS as usize,
            })?;
            let full = page.len() == reads::PAGE_EVENTS as usize;
            after = page.last().map(|(k, _)| k.clone());
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    fn delete_record(&self, key: &str) -> Result<()> {
        records::check(key, None)?;
        self.records_apply(&[RecordOp::Delete(key.to_owned())])
    }

    fn records_apply(&self, ops: &[RecordOp]) -> Result<()> {
        records::check_batch(ops)?;
        self.inner.refuse_if_stopped()?;
        self.block(reads::records_apply(self.inner.clone(), ops.to_vec()))
    }

    fn records_range(&self, range: &RecordRange) -> Result<Vec<(String, Vec<u8>)>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let (start, end) = range.bounds();
        let page = self.block(reads::key_range(
            self.inner.clone(),
            "records",
            start,
            end,
            range.reverse,
            range.limit,
        ))?;
        page.into_iter()
            .map(|(k, v)| {
                String::from_utf8(k)
                    .map(|k| (k, v))
                    .map_err(|_| Error::Decode("a record key that is not UTF-8".into()))
            })
            .collect()
    }

    fn index_apply(&self, ops: &[IndexOp], from: u64, to: u64) -> Result<()> {
        crate::index::check(ops)?;
        self.inner.refuse_if_stopped()?;
        self.block(reads::index_apply(
            self.inner.clone(),
            ops.to_vec(),
            from,
            to,
        ))
    }

    fn index_watermark(&self) -> Result<u64> {
        let inner = self.inner.clone();
        self.block(async move {
            let client = inner.client().await?;
            let row = client
                .query_one("SELECT watermark FROM index_head", &[])
                .await
                .map_err(db)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn index_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (inner, key) = (self.inner.clone(), key.to_vec());
        self.block(async move {
            let client = inner.client().await?;
            let row = client
                .query_opt("SELECT value FROM index_entries WHERE key = $1", &[&key])
                .await
                .map_err(db)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn index_range(&self, range: &IndexRange) -> Result<Vec<IndexEntry>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        self.block(reads::key_range(
            self.inner.clone(),
            "index_entries",
            range.start.clone(),
            range.end.clone(),
            range.reverse,
            range.limit,
        ))
    }

    fn health(&self) -> StorageHealth {
        match self.inner.failure() {
            Some(why) => StorageHealth::Failed(why),
            None => StorageHealth::Ok,
        }
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn watch_failure(&self) -> watch::Receiver<Option<String>> {
        self.inner.failure_tx.subscribe()
    }

    fn fail_stop(&self, why: &str) {
        self.inner.fail_stop(why);
    }

    /// Every acknowledged append is committed already.
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn verify(&self) -> Result<VerifyReport> {
        reads::verify(self, None)
    }

    fn verify_run(&self, run_id: RunId) -> Result<VerifyReport> {
        reads::verify(self, Some(run_id))
    }
}

impl PgLog {
    /// A page of the log from `from` (at most [`reads::PAGE_EVENTS`]), for `verify`.
    fn verify_page(&self, from: u64) -> Result<Vec<reads::RawRow>> {
        self.block(reads::raw_page(self.inner.clone(), from))
    }

    /// Every head, for `verify`.
    fn all_heads(&self) -> Result<Vec<RunHead>> {
        self.runs().collect()
    }
}

#[cfg(test)]
mod conformance {
    crate::conformance_tests!(crate::conformance::Postgres::default());
}
