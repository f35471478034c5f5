//! `Store`, the handle everyone holds: a cheap clone of one [`EventLog`], plus what is written once
//! over the trait for every implementation (following the log, projections from the store).

use std::path::Path;
use std::sync::Arc;

use chronicle_projections::{EventSource, RunState, snapshot};
use chronicle_schemas::{BlobRef, Envelope, Event, RunId, SessionId};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use crate::index::{IndexEntry, IndexOp, IndexRange};
use crate::records::{RecordOp, RecordRange};
use crate::timings::{LogTimings, WriteTimings};
use crate::{
    Error, EventLog, MemoryLog, Options, Result, RunHead, SledLog, StorageHealth, VerifyReport,
};

/// Most events a follower reads at once, so a far-behind follower holds no long read open.
pub const FOLLOW_CHUNK_EVENTS: u64 = 256;

/// A handle to the event store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(crate) log: Arc<dyn EventLog>,
    /// Held by whoever writes the index in this process (see [`Store::index_lock`]).
    index_writer: Arc<std::sync::Mutex<()>>,
    /// What was read through this handle and its clones.
    reads: Arc<ReadCounts>,
    /// What the appends and durability waits through this handle and its clones took.
    writes: Arc<WriteTimings>,
}

/// Events and run heads read through a [`Store`] (and its clones) since it was made: what a test
/// or a metric says about the cost of a request, or of opening.
#[derive(Debug, Default)]
pub struct ReadCounts {
    events: std::sync::atomic::AtomicU64,
    heads: std::sync::atomic::AtomicU64,
}

impl ReadCounts {
    /// Events read (each one a read of a stored record, or of the newest written, in memory).
    pub fn events(&self) -> u64 {
        self.events.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Run heads read by walking every run ([`Store::runs`]).
    pub fn heads(&self) -> u64 {
        self.heads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count<'a, T: 'a>(
        &'a self,
        counter: &'a std::sync::atomic::AtomicU64,
        it: impl Iterator<Item = T> + Send + 'a,
    ) -> impl Iterator<Item = T> + Send + 'a {
        it.inspect(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Store").field(&self.log).finish()
    }
}

impl Store {
    /// Opens (or creates) the sled store in `dir`: sled lives in `dir/sled`, blobs in
    /// `dir/blobs`. Checks the newest records and refuses a broken tail unless
    /// `repair_truncate_tail`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        Ok(Store::from_log(SledLog::open(dir, opts)?))
    }

    /// A new, empty store in memory (for tests and trials; nothing outlives the last handle).
    pub fn memory() -> Store {
        Store::memory_with(Options::default())
    }

    /// [`Store::memory`] with settings (`snapshot_interval_events`, `follow_buffer_events`).
    pub fn memory_with(opts: Options) -> Store {
        Store::from_log(MemoryLog::new(opts))
    }

    /// A handle to any implementation of the log.
    pub fn from_log(log: impl EventLog) -> Store {
        Store {
            log: Arc::new(log),
            index_writer: Arc::default(),
            reads: Arc::default(),
            writes: Arc::default(),
        }
    }

    /// The data directory, for stores that have one (a memory store has none).
    pub fn dir(&self) -> Option<&Path> {
        self.log.dir()
    }

    /// Connects to the store on PostgreSQL at `url` (see [`crate::Target::parse`]), creating
    /// its schema when the database has none and `create` allows it.
    pub fn open_postgres(url: &str, opts: Options, create: crate::Create) -> Result<Store> {
        Ok(Store::from_log(crate::PgLog::open(url, opts, create)?))
    }

    /// The database and schema of a store on PostgreSQL.
    /// Nodes and the sessions they own: `None` for a store only one process serves.
    pub fn membership(&self) -> Option<&dyn crate::Membership> {
        self.log.membership()
    }

    pub fn postgres(&self) -> Option<&crate::Target> {
        self.log.postgres()
    }

    pub fn options(&self) -> &Options {
        self.log.options()
    }

    /// Appends `events` to `run_id` if the run's next seq is `expected_seq` (0 for a new run).
    /// All or nothing: a conflict, an oversized event or an invalid first event writes nothing.
    /// Returns the stored envelopes once they are durable.
    pub async fn append(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let started = self.timed_append(&events);
        let out = self.log.append(run_id, expected_seq, events).await;
        self.writes
            .append_durable_seconds
            .observe_duration(started.elapsed());
        out
    }

    /// [`Store::append`] that returns once the events are written, before they are durable:
    /// nothing written this way may be acknowledged before [`Store::wait_durable`] covers it.
    pub async fn append_written(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let started = self.timed_append(&events);
        let out = self.log.append_written(run_id, expected_seq, events).await;
        self.writes
            .append_written_seconds
            .observe_duration(started.elapsed());
        out
    }

    /// Returns once every event below `next_offset` is as durable as an acknowledged append.
    pub async fn wait_durable(&self, next_offset: u64) -> Result<()> {
        let started = std::time::Instant::now();
        let out = self.log.wait_durable(next_offset).await;
        self.writes
            .durable_wait_seconds
            .observe_duration(started.elapsed());
        out
    }

    /// Counts an append's events and starts its clock.
    fn timed_append(&self, events: &[Event]) -> std::time::Instant {
        self.writes.append_events.observe(events.len() as f64);
        std::time::Instant::now()
    }

    /// What the appends and durability waits through this handle and its clones took.
    pub fn write_timings(&self) -> &WriteTimings {
        &self.writes
    }

    /// What the log's own writer measured (its barriers and batches), for a log that has one.
    pub fn log_timings(&self) -> Option<&LogTimings> {
        self.log.timings()
    }

    /// Asks for a barrier soon, without waiting for it (see [`EventLog::request_barrier`]).
    pub fn request_barrier(&self) {
        self.log.request_barrier();
    }

    /// Durability barriers passed since the store opened (0 for a log without barriers).
    pub fn barriers(&self) -> u64 {
        self.log.barriers()
    }

    /// How long the newest commits held the lock every writer waits for, in µs (see
    /// [`EventLog::lock_hold_us`]).
    pub fn lock_hold_us(&self) -> Vec<u32> {
        self.log.lock_hold_us()
    }

    /// Bytes the store takes in its database, where it can say (see [`EventLog::disk_bytes`]).
    pub fn disk_bytes(&self) -> Result<Option<u64>> {
        self.log.disk_bytes()
    }

    /// `append` for callers outside an async runtime.
    pub fn append_blocking(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let started = self.timed_append(&events);
        let out = self.log.append_blocking(run_id, expected_seq, events);
        self.writes
            .append_durable_seconds
            .observe_duration(started.elapsed());
        out
    }

    /// Makes everything acknowledged durable now (at shutdown; in sled's `sync` mode every
    /// acknowledgement already passed a barrier).
    pub fn flush(&self) -> Result<()> {
        self.log.flush()
    }

    /// Why the store stopped accepting writes (fail-stop), if it did.
    pub fn failure(&self) -> Option<String> {
        self.log.failure()
    }

    /// Changes to `Some(reason)` once, when the store stops accepting writes.
    pub fn watch_failure(&self) -> watch::Receiver<Option<String>> {
        self.log.watch_failure()
    }

    /// Whether appends can be taken: failed, short of disk space, or fine.
    pub fn health(&self) -> StorageHealth {
        self.log.health()
    }

    /// One past the newest durable offset: what subscribers may see.
    pub fn durable_next_offset(&self) -> u64 {
        self.log.durable_next_offset()
    }

    /// Watches the durable head (see [`Store::durable_next_offset`]).
    pub fn watch_head(&self) -> watch::Receiver<u64> {
        self.log.watch_head()
    }

    pub fn run_head(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.log.run_head(run_id)
    }

    /// [`Store::run_head`] without blocking the caller's runtime.
    pub async fn run_head_async(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.log.run_head_async(run_id).await
    }

    /// A run's events with seq in `from_seq..=to_seq`, all of them, without blocking the
    /// caller's runtime.
    pub async fn read_run_async(
        &self,
        run_id: RunId,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<Envelope>> {
        let events = self.log.read_run_async(run_id, from_seq, to_seq).await?;
        self.reads
            .events
            .fetch_add(events.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(events)
    }

    /// Every run head, in run-id order.
    pub fn runs(&self) -> impl Iterator<Item = Result<RunHead>> + Send + '_ {
        self.reads.count(&self.reads.heads, self.log.runs())
    }

    /// What was read through this handle and its clones.
    pub fn reads(&self) -> &ReadCounts {
        &self.reads
    }

    /// The runs of a session, oldest first.
    pub fn session_runs(&self, session: &SessionId) -> Result<Vec<RunId>> {
        self.log.session_runs(session)
    }

    /// The event at a global offset.
    pub fn get(&self, offset: u64) -> Result<Option<Envelope>> {
        let got = self.log.get(offset);
        if matches!(got, Ok(Some(_))) {
            self.reads
                .events
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        got
    }

    /// The seq of `run`'s newest durable event (what subscribers have seen), or `None` if none
    /// is durable yet.
    pub fn durable_seq(&self, run_id: RunId) -> Result<Option<u64>> {
        self.log.durable_seq(run_id)
    }

    /// Events with offsets in `from..to`, in order.
    pub fn read_range(
        &self,
        from: u64,
        to: u64,
    ) -> impl Iterator<Item = Result<Envelope>> + Send + '_ {
        self.reads
            .count(&self.reads.events, self.log.read_range(from, to))
    }

    /// Events with offsets in `from..to` that `keep` takes, in order (errors included).
    pub fn read_range_where(
        &self,
        from: u64,
        to: u64,
        keep: fn(&Event) -> bool,
    ) -> impl Iterator<Item = Result<Envelope>> + Send + '_ {
        self.reads.count(
            &self.reads.events,
            self.log.read_range_where(from, to, keep),
        )
    }

    /// A run's events with seq in `from_seq..=to_seq`, in order.
    pub fn read_run(
        &self,
        run_id: RunId,
        from_seq: u64,
        to_seq: u64,
    ) -> impl Iterator<Item = Result<Envelope>> + Send + '_ {
        self.reads.count(
            &self.reads.events,
            self.log.read_run(run_id, from_seq, to_seq),
        )
    }

    /// Follows the log from `from` (a global offset): first what is durable, then every new
    /// durable event as it arrives. Offsets are dense and read in order, so the stream never
    /// skips or repeats one. Ends when the receiver is dropped or the store closes.
    pub fn follow(&self, from: u64) -> ReceiverStream<Result<Arc<Envelope>>> {
        let (tx, rx) = mpsc::channel(self.options().follow_buffer_events.max(1));
        let mut tail = self.tail(from, FOLLOW_CHUNK_EVENTS);
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = tail.next() => next,
                    _ = tx.closed() => return,
                };
                let Some(item) = next else { return };
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
        ReceiverStream::new(rx)
    }

    /// [`Store::follow`] without a task or a channel: the caller pulls, and the tail reads at
    /// most `chunk_events` events ahead of it, so a reader that stops reading holds one chunk
    /// at most while the rest stays in the log.
    pub fn tail(&self, from: u64, chunk_events: u64) -> Tail {
        Tail {
            // A tail must not keep the store open: it holds a weak handle and upgrades it only
            // while it reads, so dropping the last `Store` closes the log even with tails around.
            log: Arc::downgrade(&self.log),
            head: self.log.watch_head(),
            next: from,
            chunk_events: chunk_events.max(1),
            ready: Vec::new().into_iter(),
            retry: TAIL_RETRY_MIN,
        }
    }

    /// Checks every record: dense offsets, decodable bodies, intact hashes, unbroken per-run
    /// chains, and heads that match the log. Names the first bad offset.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.log.verify()
    }

    /// [`Store::verify`] restricted to one run's chain (offsets are still checked for density).
    pub fn verify_run(&self, run_id: RunId) -> Result<VerifyReport> {
        self.log.verify_run(run_id)
    }

    /// Stores a large payload under its content hash, durably before this returns, so an event
    /// appended afterwards can reference it.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<BlobRef> {
        self.log.put_blob(bytes)
    }

    pub fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        self.log.read_blob(blob)
    }

    /// Stores `value` under `key`, replacing what was there; durable (fsynced) when it returns.
    /// Named records are small mutable values beside the log (not events: not chained, not
    /// verified); the rules are on [`EventLog`].
    pub fn put_record(&self, key: &str, value: &[u8]) -> Result<()> {
        self.log.put_record(key, value)
    }

    /// Stores `value` under `key` when no record is there: `None` when it stored it (durable
    /// when this returns), else the value already there (see [`EventLog`]).
    pub fn put_record_if_absent(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>> {
        self.log.put_record_if_absent(key, value)
    }

    /// The value stored under `key`.
    pub fn record(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.log.record(key)
    }

    /// Every record whose key starts with `prefix`, in key order.
    pub fn records(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        self.log.records(prefix)
    }

    /// Applies `ops` to the index and moves its watermark from `from` to `to`, atomically (see
    /// [`crate::index`]); [`Error::IndexConflict`] when it is not at `from`.
    pub fn index_apply(&self, ops: &[IndexOp], from: u64, to: u64) -> Result<()> {
        self.log.index_apply(ops, from, to)
    }

    /// One index writer at a time in this process: the guard to hold while deriving and writing
    /// a batch (a writer elsewhere is caught by the watermark check).
    pub fn index_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.index_writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The offset the index has taken the log in up to (exclusive).
    pub fn index_watermark(&self) -> Result<u64> {
        self.log.index_watermark()
    }

    /// The value of one index key.
    pub fn index_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.log.index_get(key)
    }

    /// A page of index entries.
    pub fn index_range(&self, range: &IndexRange) -> Result<Vec<IndexEntry>> {
        self.log.index_range(range)
    }

    /// Removes the record under `key` (nothing when absent); durable when it returns.
    pub fn delete_record(&self, key: &str) -> Result<()> {
        self.log.delete_record(key)
    }

    /// Applies every put and delete of `ops`, if every expectation in it holds, atomically and
    /// durably; [`Error::RecordConflict`] (nothing written) when one does not.
    pub fn records_apply(&self, ops: &[RecordOp]) -> Result<()> {
        self.log.records_apply(ops)
    }

    /// One page of records: a prefix, after a key, either way, at most a limit.
    pub fn records_range(&self, range: &RecordRange) -> Result<Vec<(String, Vec<u8>)>> {
        self.log.records_range(range)
    }

    /// Caches a projection of `state.run_id` at `state.last_seq`.
    pub fn put_snapshot(&self, state: &RunState) -> Result<()> {
        self.log.put_snapshot(state)
    }

    /// The newest intact snapshot of `run_id` at or before `seq`.
    pub fn latest_snapshot(&self, run_id: RunId, seq: u64) -> Result<Option<RunState>> {
        self.log.latest_snapshot(run_id, seq)
    }

    /// Deletes every snapshot (they are a cache; replays re-derive everything).
    pub fn clear_snapshots(&self) -> Result<()> {
        self.log.clear_snapshots()
    }

    /// A run as a projection source (its events and snapshots).
    pub fn source(&self, run_id: RunId) -> RunSource<'_> {
        RunSource {
            store: self,
            run_id,
        }
    }

    /// The projected state of a run right after `seq` (snapshots speed it up).
    pub fn state_at(&self, run_id: RunId, seq: u64) -> Result<RunState> {
        chronicle_projections::replay(&self.source(run_id), seq)
    }

    /// Replays a run once from its newest snapshot and caches a snapshot at every due seq that
    /// lacks one. Returns how many it wrote.
    pub fn write_snapshots(&self, run_id: RunId) -> Result<usize> {
        let Some(head) = self.run_head(run_id)? else {
            return Ok(0);
        };
        let interval = self.options().snapshot_interval_events;
        let src = self.source(run_id);
        let mut state = self
            .latest_snapshot(run_id, head.last_seq)?
            .unwrap_or_default();
        let from = state.next_seq();
        let mut written = 0;
        if from <= head.last_seq {
            src.for_each_event(from, head.last_seq, &mut |env| {
                state.apply(&env, &src)?;
                if snapshot::is_due(env.seq, interval) {
                    self.put_snapshot(&state)?;
                    written += 1;
                }
                Ok(())
            })?;
        }
        Ok(written)
    }
}

/// A pull-based follower of the durable log ([`Store::tail`]).
pub struct Tail {
    log: std::sync::Weak<dyn EventLog>,
    head: watch::Receiver<u64>,
    next: u64,
    chunk_events: u64,
    ready: std::vec::IntoIter<Arc<Envelope>>,
    /// How long to wait before reading again after a transient failure.
    retry: std::time::Duration,
}

const TAIL_RETRY_MIN: std::time::Duration = std::time::Duration::from_millis(50);
const TAIL_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(1);

impl std::fmt::Debug for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail").field("next", &self.next).finish()
    }
}

impl Tail {
    /// The next durable event, waiting for one to become durable; `None` once the store is
    /// closed. Cancel-safe: an event read is kept for the next call. Shared: the newest events
    /// come from the log's memory without a copy.
    pub async fn next(&mut self) -> Option<Result<Arc<Envelope>>> {
        loop {
            if let Some(env) = self.ready.next() {
                return Some(Ok(env));
            }
            let durable = *self.head.borrow_and_update();
            if self.next < durable {
                let end = durable.min(self.next + self.chunk_events);
                let log = self.log.upgrade()?;
                // Read without blocking the runtime (a store over the network waits for it).
                let chunk = log.read_range_async(self.next, end).await;
                drop(log);
                let chunk = match chunk {
                    Ok(chunk) if chunk.len() as u64 == end - self.next => chunk,
                    // The database is out of reach for now: read the same chunk again later,
                    // so a follower outlives an outage instead of ending with it.
                    Err(e) if e.is_transient() => {
                        tracing::debug!(error = %e, "a follower waits for the store");
                        tokio::time::sleep(self.retry).await;
                        self.retry = (self.retry * 2).min(TAIL_RETRY_MAX);
                        continue;
                    }
                    Ok(_) => {
                        let gap = Error::Corrupt {
                            offset: self.next,
                            reason: "gap in the log".into(),
                        };
                        return Some(Err(gap));
                    }
                    Err(e) => return Some(Err(e)),
                };
                self.next = end;
                self.retry = TAIL_RETRY_MIN;
                self.ready = chunk.into_iter();
                continue;
            }
            self.head.changed().await.ok()?;
        }
    }
}

/// A store-backed [`EventSource`] for one run.
#[derive(Debug)]
pub struct RunSource<'a> {
    store: &'a Store,
    run_id: RunId,
}

impl EventSource for RunSource<'_> {
    type Error = Error;
    fn for_each_event(
        &self,
        from_seq: u64,
        to_seq: u64,
        f: &mut dyn FnMut(Envelope) -> Result<()>,
    ) -> Result<()> {
        for env in self.store.read_run(self.run_id, from_seq, to_seq) {
            f(env?)?;
        }
        Ok(())
    }

    fn latest_snapshot(&self, seq: u64) -> Result<Option<RunState>> {
        self.store.latest_snapshot(self.run_id, seq)
    }
}
