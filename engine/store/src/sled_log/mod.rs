//! The event store on sled (DESIGN §3).
//!
//! Trees: `events` (offset → record), `streams` (run ‖ seq → offset), `runs` (run → head),
//! `sessions` (session ‖ created_at ‖ run → ()), `snapshots` (run ‖ seq → projection cache) and
//! `meta` (schema version, next offset). One writer thread owns every append: it validates
//! `expected_seq`, assigns dense offsets and seqs, writes a whole batch of appends as one sled
//! transaction, passes one durability barrier for the batch (group commit), and only then
//! acknowledges the callers and publishes the new head to subscribers.
//!
//! Records over [`SLED_VALUE_BYTES_MAX`] keep a stub in sled and their body in `<data>/bodies`
//! (see `bodies`), so sled never writes a page to a file of its own.
//!
//! Failures: a write refused for lack of disk space is [`Error::StorageFull`] and changes
//! nothing; the next append tries again. A failed fsync (or any failure after a batch reached
//! sled) is fail-stop: the store refuses every later write with [`Error::Stopped`] and reports
//! it through [`Store::watch_failure`], and recovery happens on the next open.

mod blobs;
mod bodies;
mod keys;
mod live;
mod verify;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use chronicle_projections::{EventSource, RunState, snapshot};
use chronicle_schemas::{
    Envelope, Event, Hash, RECORD_FORMAT_EXTERNAL, RunId, SessionId, Timestamp, decode_record,
    decode_record_body, parse_external_stub,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;

pub use bodies::SLED_VALUE_BYTES_MAX;
pub use live::LiveRun;
pub use verify::{Problem, VerifyReport};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The on-disk schema version kept in `meta`.
pub const SCHEMA_VERSION: u64 = 1;

const FOLLOW_CHUNK_EVENTS: u64 = 256;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("conflict on run {run_id}: expected seq {expected}, but the run is at seq {actual}")]
    Conflict {
        run_id: RunId,
        expected: u64,
        actual: u64,
    },
    #[error("event #{index} of the append: {source}")]
    Encode {
        index: usize,
        source: chronicle_schemas::Error,
    },
    #[error("invalid append: {0}")]
    Invalid(String),
    #[error("corrupt log at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    #[error(
        "the disk is full: {available} bytes free, {needed} needed (the store keeps {reserve} in reserve)"
    )]
    StorageFull {
        needed: u64,
        available: u64,
        reserve: u64,
    },
    #[error("the store stopped accepting writes: {0}; restart to recover")]
    Stopped(String),
    #[error("sled cannot open the store: {0}")]
    Unopenable(String),
    /// Another process (a running server) holds the store.
    #[error("the store is locked by another process: {0}")]
    Locked(String),
    #[error("blob {0} not found")]
    BlobMissing(Hash),
    #[error("blob {hash} is corrupt: content hashes to {actual}")]
    BlobCorrupt { hash: Hash, actual: Hash },
    #[error("the store is closed")]
    Closed,
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
    #[error("sled transaction: {0}")]
    Transaction(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("stored value does not decode: {0}")]
    Decode(String),
}

impl Error {
    /// The size limit an event of the append exceeded, if that is what this is.
    pub fn event_too_large(&self) -> Option<(usize, usize)> {
        match self {
            Error::Encode {
                source: chronicle_schemas::Error::TooLarge { bytes, max, .. },
                ..
            } => Some((*bytes, *max)),
            _ => None,
        }
    }

    /// An error of the same kind and message, for the other callers of a refused batch.
    pub(crate) fn same_again(&self) -> Error {
        match self {
            Error::StorageFull {
                needed,
                available,
                reserve,
            } => Error::StorageFull {
                needed: *needed,
                available: *available,
                reserve: *reserve,
            },
            Error::Stopped(why) => Error::Stopped(why.clone()),
            Error::Io(e) => Error::Io(std::io::Error::new(e.kind(), e.to_string())),
            other => Error::Transaction(other.to_string()),
        }
    }

    /// This error, with an I/O error from a full disk told apart as [`Error::StorageFull`].
    pub(crate) fn or_storage_full(self, needed: u64, reserve: u64) -> Error {
        match self {
            Error::Io(e) if e.kind() == std::io::ErrorKind::StorageFull => Error::StorageFull {
                needed,
                available: 0,
                reserve,
            },
            other => other,
        }
    }
}

/// What `/healthz` reports about the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageHealth {
    Ok,
    /// Appends are refused until at least the reserve is free again.
    Full {
        available: u64,
        reserve: u64,
    },
    /// Fail-stop after a failed durability barrier; only a restart recovers.
    Failed(String),
}

/// When a caller is acknowledged relative to the durability barrier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledge after the batch passed the barrier (the default).
    #[default]
    Sync,
    /// Acknowledge before the barrier; a background thread runs it every `async_flush_ms`.
    /// A crash may lose the last `async_flush_ms` of acknowledged appends.
    Async,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(Durability::Sync),
            "async" => Ok(Durability::Async),
            _ => Err(format!("durability must be `sync` or `async`, got {s:?}")),
        }
    }
}

/// Store settings; every limit carries its unit.
#[derive(Clone, Debug)]
pub struct Options {
    pub durability: Durability,
    pub async_flush_ms: u64,
    /// sled's page cache.
    pub cache_capacity_bytes: u64,
    /// Most events one group-commit batch takes before it passes the barrier.
    pub append_batch_events_max: usize,
    /// Appends waiting for the writer before `append` applies back-pressure.
    pub write_queue_requests: usize,
    /// How many of the newest records `open` checks (decode and chain).
    pub open_verify_tail_events: u64,
    /// Drop an undecodable final record on open instead of refusing to open.
    pub repair_truncate_tail: bool,
    /// Buffer of each `follow` subscriber.
    pub follow_buffer_events: usize,
    pub snapshot_interval_events: u64,
    /// How long `open` waits for another holder of the database lock (a store of this process
    /// that is still closing) before it gives up.
    pub open_lock_wait_ms: u64,
    /// Free disk space the store keeps: an append that would leave less is refused with
    /// [`Error::StorageFull`] before anything is written (sled cannot recover from a write that
    /// fails for lack of space without a restart).
    pub disk_reserve_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            durability: Durability::Sync,
            async_flush_ms: 10,
            cache_capacity_bytes: 256 * 1024 * 1024,
            append_batch_events_max: 4096,
            write_queue_requests: 4096,
            open_verify_tail_events: 1024,
            repair_truncate_tail: false,
            follow_buffer_events: 256,
            snapshot_interval_events: chronicle_projections::SNAPSHOT_INTERVAL_EVENTS,
            open_lock_wait_ms: 3000,
            disk_reserve_bytes: 64 * 1024 * 1024,
        }
    }
}

/// The newest event of a run, kept in the `runs` tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunHead {
    pub run_id: RunId,
    pub last_seq: u64,
    pub last_hash: Hash,
    pub last_offset: u64,
    pub session_id: SessionId,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The last event was `RunCompleted`, `RunFailed` or `RunCancelled` (a later restore clears it).
    pub terminal: bool,
}

impl RunHead {
    pub fn next_seq(&self) -> u64 {
        self.last_seq + 1
    }
}

pub(crate) struct Trees {
    pub db: sled::Db,
    pub events: sled::Tree,
    pub streams: sled::Tree,
    pub runs: sled::Tree,
    pub sessions: sled::Tree,
    pub snapshots: sled::Tree,
    pub meta: sled::Tree,
    pub bodies: bodies::BodyFile,
}

pub(crate) struct AppendRequest {
    pub run_id: RunId,
    pub expected_seq: u64,
    pub events: Vec<Event>,
    pub reply: oneshot::Sender<Result<Vec<Envelope>>>,
}

struct Inner {
    dir: PathBuf,
    trees: Arc<Trees>,
    opts: Options,
    tx: Mutex<Option<mpsc::Sender<AppendRequest>>>,
    head_rx: watch::Receiver<u64>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    barrier: Arc<writer::Barrier>,
    failure: watch::Receiver<Option<String>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue ends the writer (after a last barrier); joining makes sure sled is
        // closed before a reopen in the same process.
        self.tx.lock().map(|mut t| t.take()).ok();
        self.barrier.stop();
        if let Ok(mut threads) = self.threads.lock() {
            for t in threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// A handle to the event store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`: sled lives in `dir/sled`, blobs in `dir/blobs`.
    /// Checks the newest records and refuses a broken tail unless `repair_truncate_tail`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(dir.join("blobs"))?;
        let config = sled::Config::new()
            .path(dir.join("sled"))
            .cache_capacity(opts.cache_capacity_bytes)
            .mode(sled::Mode::HighThroughput)
            // No sled background flusher: every acknowledgement passes our own barrier (and async
            // mode runs its own flusher), and sled's thread would hold the database (and its file
            // lock) for up to its interval after the store is dropped.
            .flush_every_ms(None);
        let db = open_waiting_for_lock(&config, opts.open_lock_wait_ms)?;
        let (body_file, bodies_end) = bodies::BodyFile::open(&dir)?;
        let open_tree = |name: &str| {
            catching_panics(|| db.open_tree(name))?.map_err(|e| unopenable_or(e, name))
        };
        let trees = Arc::new(Trees {
            events: open_tree("events")?,
            streams: open_tree("streams")?,
            runs: open_tree("runs")?,
            sessions: open_tree("sessions")?,
            snapshots: open_tree("snapshots")?,
            meta: open_tree("meta")?,
            bodies: body_file,
            db,
        });
        match trees
            .meta
            .get("schema_version")?
            .and_then(|v| keys::parse_u64(&v))
        {
            // sled holds no store, but the body file holds records: sled's files were emptied
            // or replaced, and opening would start an empty log over them.
            None if bodies_end > 0 => {
                return Err(Error::Unopenable(format!(
                    "sled holds no log but the body file has {bodies_end} bytes of records: sled's files were lost or emptied"
                )));
            }
            None => {
                // A new store: make it durable before anything references it (sled creates
                // its files without syncing their directory entries).
                trees
                    .meta
                    .insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
                trees.db.flush()?;
                sync_tree_entries(&dir)?;
            }
            Some(SCHEMA_VERSION) => {}
            Some(v) => {
                return Err(Error::Invalid(format!(
                    "store schema version {v} is not {SCHEMA_VERSION}"
                )));
            }
        }
        catching_panics(|| {
            verify::check_tail(
                &trees,
                opts.open_verify_tail_events,
                opts.repair_truncate_tail,
            )
        })??;
        let next_offset = verify::next_offset(&trees)?;
        let (failure_tx, failure) = watch::channel(None);
        let barrier = Arc::new(writer::Barrier::new(
            &trees,
            &dir.join("sled"),
            Arc::new(failure_tx),
        )?);
        let (head_tx, head_rx) = watch::channel(next_offset);
        let head_tx = Arc::new(head_tx);
        let (tx, rx) = mpsc::channel(opts.write_queue_requests.max(1));
        let mut threads = vec![writer::spawn(
            writer::Start {
                trees: trees.clone(),
                barrier: barrier.clone(),
                head_tx: head_tx.clone(),
                dir: dir.clone(),
                next_offset,
                bodies_end,
            },
            rx,
            &opts,
        )?];
        if opts.durability == Durability::Async {
            threads.push(writer::spawn_flusher(
                barrier.clone(),
                head_tx,
                opts.async_flush_ms,
            )?);
        }
        Ok(Store {
            inner: Arc::new(Inner {
                dir,
                trees,
                opts,
                tx: Mutex::new(Some(tx)),
                head_rx,
                threads: Mutex::new(threads),
                barrier,
                failure,
            }),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    fn sender(&self) -> Result<mpsc::Sender<AppendRequest>> {
        self.inner
            .tx
            .lock()
            .ok()
            .and_then(|t| t.clone())
            .ok_or(Error::Closed)
    }

    /// Appends `events` to `run_id` if the run's next seq is `expected_seq` (0 for a new run).
    /// All or nothing: a conflict, an oversized event or an invalid first event writes nothing.
    /// Returns the stored envelopes once they are durable (in `sync` mode).
    pub async fn append(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let (reply, rx) = oneshot::channel();
        let req = AppendRequest {
            run_id,
            expected_seq,
            events,
            reply,
        };
        self.sender()?.send(req).await.map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// `append` for callers outside an async runtime.
    pub fn append_blocking(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let (reply, rx) = oneshot::channel();
        let req = AppendRequest {
            run_id,
            expected_seq,
            events,
            reply,
        };
        self.sender()?
            .blocking_send(req)
            .map_err(|_| Error::Closed)?;
        rx.blocking_recv().map_err(|_| Error::Closed)?
    }

    /// Runs a durability barrier now (at shutdown; in `sync` mode every ack already passed one).
    pub fn flush(&self) -> Result<()> {
        self.inner.barrier.run()
    }

    /// Why the store stopped accepting writes (fail-stop), if it did.
    pub fn failure(&self) -> Option<String> {
        self.inner.failure.borrow().clone()
    }

    /// Changes to `Some(reason)` once, when the store stops accepting writes.
    pub fn watch_failure(&self) -> watch::Receiver<Option<String>> {
        self.inner.failure.clone()
    }

    /// Whether appends can be taken: failed, short of disk space, or fine.
    pub fn health(&self) -> StorageHealth {
        if let Some(why) = self.failure() {
            return StorageHealth::Failed(why);
        }
        let reserve = self.inner.opts.disk_reserve_bytes;
        match bodies::available_bytes(&self.inner.dir) {
            Ok(available) if available < reserve => StorageHealth::Full { available, reserve },
            _ => StorageHealth::Ok,
        }
    }

    /// One past the newest offset that passed its barrier: what subscribers may see.
    pub fn durable_next_offset(&self) -> u64 {
        *self.inner.head_rx.borrow()
    }

    /// Watches the durable head (see [`Store::durable_next_offset`]).
    pub fn watch_head(&self) -> watch::Receiver<u64> {
        self.inner.head_rx.clone()
    }

    pub fn run_head(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.inner
            .trees
            .runs
            .get(run_id.as_bytes())?
            .map(|v| decode_head(&v))
            .transpose()
    }

    /// Every run head, in run-id order.
    pub fn runs(&self) -> impl Iterator<Item = Result<RunHead>> + '_ {
        self.inner.trees.runs.iter().map(|kv| decode_head(&kv?.1))
    }

    /// The runs of a session, oldest first.
    pub fn session_runs(&self, session: &SessionId) -> Result<Vec<RunId>> {
        let prefix = keys::session_prefix(session);
        let mut out = Vec::new();
        for kv in self.inner.trees.sessions.scan_prefix(prefix) {
            let (k, _) = kv?;
            out.extend(keys::run_from_session_key(&k));
        }
        Ok(out)
    }

    /// The event at a global offset.
    pub fn get(&self, offset: u64) -> Result<Option<Envelope>> {
        let t = &self.inner.trees;
        t.events
            .get(keys::offset_key(offset))
            .map_err(|e| unreadable(offset, &e))?
            .map(|v| decode_stored(t, offset, &v))
            .transpose()
    }

    /// The seq of `run`'s newest event that passed its durability barrier (what subscribers have
    /// seen), or `None` if none has yet. A batch being made durable right now is excluded.
    pub fn durable_seq(&self, run_id: RunId) -> Result<Option<u64>> {
        let durable = self.durable_next_offset();
        let range = keys::stream_key(run_id, 0)..=keys::stream_key(run_id, u64::MAX);
        for kv in self.inner.trees.streams.range(range).rev() {
            let (k, off) = kv?;
            if keys::parse_u64(&off).is_some_and(|o| o < durable) {
                return Ok(keys::parse_u64(&k[16..]));
            }
        }
        Ok(None)
    }

    /// Events with offsets in `from..to`, in order.
    pub fn read_range(&self, from: u64, to: u64) -> impl Iterator<Item = Result<Envelope>> + '_ {
        let range = keys::offset_key(from)..keys::offset_key(to.max(from));
        let t = &self.inner.trees;
        let mut next = from;
        t.events.range(range).map(move |kv| {
            let (k, v) = kv.map_err(|e| unreadable(next, &e))?;
            let offset = keys::parse_u64(&k).unwrap_or(u64::MAX);
            next = offset.saturating_add(1);
            decode_stored(t, offset, &v)
        })
    }

    /// A run's events with seq in `from_seq..=to_seq`, in order.
    pub fn read_run(
        &self,
        run_id: RunId,
        from_seq: u64,
        to_seq: u64,
    ) -> impl Iterator<Item = Result<Envelope>> + '_ {
        let range =
            keys::stream_key(run_id, from_seq)..=keys::stream_key(run_id, to_seq.max(from_seq));
        let t = &self.inner.trees;
        t.streams.range(range).map(move |kv| {
            let (_, off) = kv?;
            let offset = keys::parse_u64(&off)
                .ok_or_else(|| Error::Decode("streams value is not a u64".into()))?;
            let rec = t
                .events
                .get(off)
                .map_err(|e| unreadable(offset, &e))?
                .ok_or_else(|| Error::Corrupt {
                    offset,
                    reason: format!("indexed by run {run_id} but missing"),
                })?;
            decode_stored(t, offset, &rec)
        })
    }

    /// Follows the log from `from` (a global offset): first what is stored, then every new
    /// durable event as it arrives. Offsets are dense and read in order, so the stream never
    /// skips or repeats one. Ends when the receiver is dropped or the store closes.
    pub fn follow(&self, from: u64) -> ReceiverStream<Result<Envelope>> {
        let (tx, rx) = mpsc::channel(self.inner.opts.follow_buffer_events.max(1));
        // A follower must not keep the store open: it holds a weak handle and upgrades it only
        // while it reads, so dropping the last `Store` closes sled even with followers around.
        let weak = Arc::downgrade(&self.inner);
        let mut head = self.inner.head_rx.clone();
        tokio::spawn(async move {
            let mut pos = from;
            loop {
                let durable = *head.borrow_and_update();
                while pos < durable {
                    // Bounded chunks, so a far-behind follower holds no long sled iterator.
                    let end = durable.min(pos + FOLLOW_CHUNK_EVENTS);
                    let Some(inner) = weak.upgrade() else { return };
                    let chunk: Vec<_> = Store { inner }.read_range(pos, end).collect();
                    if chunk.len() as u64 != end - pos {
                        let gap = Error::Corrupt {
                            offset: pos,
                            reason: "gap in the log".into(),
                        };
                        let _ = tx.send(Err(gap)).await;
                        return;
                    }
                    for ev in chunk {
                        if tx.send(ev).await.is_err() {
                            return;
                        }
                    }
                    pos = end;
                }
                tokio::select! {
                    changed = head.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                }
            }
        });
        ReceiverStream::new(rx)
    }

    /// Checks every record: dense offsets, decodable bodies, intact hashes, unbroken per-run
    /// chains, and heads and `meta` that match the log. Names the first bad offset.
    pub fn verify(&self) -> Result<VerifyReport> {
        catching_panics(|| verify::verify(&self.inner.trees, None))?
    }

    /// [`Store::verify`] restricted to one run's chain (offsets are still checked for density).
    pub fn verify_run(&self, run_id: RunId) -> Result<VerifyReport> {
        catching_panics(|| verify::verify(&self.inner.trees, Some(run_id)))?
    }

    /// Stores a large payload as `<dir>/blobs/<blake3>`, fsynced before this returns, so an event
    /// appended afterwards can reference it.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<chronicle_schemas::BlobRef> {
        if let Some(why) = self.failure() {
            return Err(Error::Stopped(why));
        }
        let reserve = self.inner.opts.disk_reserve_bytes;
        let needed = bytes.len() as u64 + reserve;
        let available = bodies::available_bytes(&self.inner.dir)?;
        if available < needed {
            return Err(Error::StorageFull {
                needed: bytes.len() as u64,
                available,
                reserve,
            });
        }
        blobs::put(&self.inner.dir.join("blobs"), bytes).map_err(|e| match e {
            blobs::PutError::Write(e) => Error::Io(e).or_storage_full(bytes.len() as u64, reserve),
            // A failed fsync is fail-stop, as for the log itself.
            blobs::PutError::Durability(e) => self
                .inner
                .barrier
                .fail(&format!("making a blob durable failed: {e}")),
        })
    }

    pub fn read_blob(&self, blob: &chronicle_schemas::BlobRef) -> Result<Vec<u8>> {
        blobs::read(&self.inner.dir.join("blobs"), &blob.hash)
    }

    /// Caches a projection of `state.run_id` at `state.last_seq`. A snapshot too large for a
    /// sled value goes to a blob file and sled keeps its hash.
    pub fn put_snapshot(&self, state: &RunState) -> Result<()> {
        let (Some(run), Some(seq)) = (state.run_id, state.last_seq) else {
            return Ok(());
        };
        // A cache: skipped rather than written into a store that is short of space or stopped.
        if self.health() != StorageHealth::Ok {
            return Ok(());
        }
        let mut value = snapshot::encode(state);
        if value.len() > SLED_VALUE_BYTES_MAX {
            let blob = self.put_blob(&value)?;
            value = Vec::with_capacity(41);
            value.push(SNAPSHOT_IN_BLOB);
            value.extend_from_slice(&blob.hash.0);
            value.extend_from_slice(&blob.bytes.to_be_bytes());
        }
        self.inner
            .trees
            .snapshots
            .insert(keys::stream_key(run, seq), value)?;
        Ok(())
    }

    /// The newest intact snapshot of `run_id` at or before `seq`.
    pub fn latest_snapshot(&self, run_id: RunId, seq: u64) -> Result<Option<RunState>> {
        let range = keys::stream_key(run_id, 0)..=keys::stream_key(run_id, seq);
        for kv in self.inner.trees.snapshots.range(range).rev() {
            let value = kv?.1;
            let state = match value.first() {
                // A blob that is gone or damaged is a missing cache entry, not an error.
                Some(&SNAPSHOT_IN_BLOB) if value.len() == 41 => {
                    let blob = chronicle_schemas::BlobRef {
                        hash: Hash(value[1..33].try_into().expect("32 bytes")),
                        bytes: keys::parse_u64(&value[33..]).unwrap_or(0),
                    };
                    self.read_blob(&blob)
                        .ok()
                        .and_then(|b| snapshot::decode(&b))
                }
                _ => snapshot::decode(&value),
            };
            if state.is_some() {
                return Ok(state);
            }
        }
        Ok(None)
    }

    /// Deletes every snapshot (they are a cache; replays re-derive everything).
    pub fn clear_snapshots(&self) -> Result<()> {
        self.inner.trees.snapshots.clear()?;
        Ok(())
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
        let interval = self.inner.opts.snapshot_interval_events;
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

/// sled's I/O threads may keep a just-dropped database (and its file lock) for a moment; a lock
/// held longer than `wait_ms` is another live process, and that is an error.
fn open_waiting_for_lock(config: &sled::Config, wait_ms: u64) -> Result<sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
    loop {
        match catching_panics(|| config.open())? {
            // sled reports a held lock only in its message: this is the one place that reads it.
            Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                if std::time::Instant::now() >= deadline {
                    return Err(Error::Locked(e.to_string()));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other.map_err(|e| unopenable_or(e, "opening")),
        }
    }
}

/// Tag of a `snapshots` value that holds a blob's hash and size instead of the snapshot.
const SNAPSHOT_IN_BLOB: u8 = 0xFF;

/// A sled read that failed, named by the event offset it was reading.
fn unreadable(offset: u64, e: &sled::Error) -> Error {
    Error::Corrupt {
        offset,
        reason: format!("sled cannot read the record: {e}"),
    }
}

/// Decodes the record stored at `offset`, reading its body from the body file when it is stored
/// out of line. Any damage is [`Error::Corrupt`] naming the offset (and the run and seq when the
/// stub still tells them).
pub(crate) fn decode_stored(t: &Trees, offset: u64, bytes: &[u8]) -> Result<Envelope> {
    let corrupt = |reason: String| Error::Corrupt { offset, reason };
    let env = if bytes.first() == Some(&RECORD_FORMAT_EXTERNAL) {
        let (header, ext) = parse_external_stub(bytes).map_err(|e| corrupt(e.to_string()))?;
        let at = |e: &dyn std::fmt::Display| {
            corrupt(format!(
                "run {} seq {}: body at {}+{} of the body file: {e}",
                ext.run_id, ext.seq, ext.position, ext.len
            ))
        };
        let body = t.bodies.read(ext.position, ext.len).map_err(|e| at(&e))?;
        decode_record_body(&header, &body).map_err(|e| at(&e))?
    } else {
        decode_record(bytes).map_err(|e| corrupt(e.to_string()))?
    };
    if env.offset != offset {
        return Err(Error::Corrupt {
            offset,
            reason: format!("record claims offset {}", env.offset),
        });
    }
    Ok(env)
}

thread_local! {
    /// Set while [`catching_panics`] runs: the panic becomes an error, so it is not printed.
    static QUIET_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, turning a panic inside sled (it panics on some damaged files) into an error.
pub(crate) fn catching_panics<T>(f: impl FnOnce() -> T) -> Result<T> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    let was = QUIET_PANICS.with(|q| q.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET_PANICS.with(|q| q.set(was));
    result.map_err(|p| {
        let why = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        Error::Unopenable(format!("panicked while reading the store: {why}"))
    })
}

fn unopenable_or(e: sled::Error, what: &str) -> Error {
    match e {
        sled::Error::Corruption { .. } | sled::Error::ReportableBug(_) => {
            Error::Unopenable(format!("{what}: {e}"))
        }
        other => Error::Sled(other),
    }
}

/// fsyncs the directories (and sled's files) a new store created, so a power loss right after
/// the first acknowledgement cannot lose a directory entry.
fn sync_tree_entries(dir: &Path) -> Result<()> {
    for file in ["sled/conf", "sled/db"] {
        if let Ok(f) = std::fs::File::open(dir.join(file)) {
            f.sync_all()?;
        }
    }
    for d in ["sled/blobs", "sled", "blobs", ""] {
        let path = dir.join(d);
        if path.is_dir() {
            std::fs::File::open(path)?.sync_all()?;
        }
    }
    if let Some(parent) = dir.parent().filter(|p| p.is_dir()) {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

pub(crate) fn decode_head(bytes: &[u8]) -> Result<RunHead> {
    rmp_serde::from_slice(bytes).map_err(|e| Error::Decode(format!("run head: {e}")))
}
