//! The event log on sled.
//!
//! Trees: `events` (offset → the records of one append from that offset on, see `groups`,
//! usually compressed, see `compress`),
//! `streams` (run ‖ seq → the offset and count of that group), `runs` (run → head), `sessions`
//! (session ‖ created_at ‖ run → ()), `snapshots` (run ‖ seq → projection cache) and `meta`
//! (schema version, next offset); beside the log, the named records in `records` and
//! `record_chunks` (see `records`), written outside the writer and made durable by the same
//! barrier. One writer thread owns every append: it validates `expected_seq`, assigns dense
//! offsets and seqs, writes a whole batch of appends to sled (its end marked by `meta`'s next
//! offset, so that open can drop a batch a crash cut short), passes one
//! durability barrier for the batch (group commit), and only then acknowledges the callers and
//! publishes the new head to followers.
//!
//! Records over [`SLED_VALUE_BYTES_MAX`] that do not compress below it keep a stub in sled and
//! their body in `<data>/bodies` (see `bodies`), so sled never writes a page to a file of its own.
//!
//! Failures: a write refused for lack of disk space is [`Error::StorageFull`] and changes
//! nothing; the next append tries again. A failed fsync (or any failure after a batch reached
//! sled) is fail-stop: the store refuses every later write with [`Error::Stopped`] and reports
//! it through `watch_failure`, and recovery happens on the next open. A read that fails with an
//! I/O error is [`Error::ReadFailed`] (the device, not the record); damage is [`Error::Corrupt`].

mod blobs;
mod bodies;
mod compress;
mod groups;
mod keys;
mod private;
mod recent;
mod records;
mod space;
mod verify;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use chronicle_projections::{RunState, snapshot};
use chronicle_schemas::{
    BlobRef, Envelope, Event, Hash, RECORD_FORMAT_EXTERNAL, RunId, SessionId, decode_record,
    decode_record_body, parse_external_stub,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::index::{IndexEntry, IndexOp, IndexRange};
use crate::log::{Events, SharedEvents};
use crate::records::{RecordOp, RecordRange};
use crate::{
    Durability, Error, EventLog, Options, Problem, Result, RunHead, StorageHealth, VerifyReport,
};
use groups::Group;
use space::Space;

pub use bodies::SLED_VALUE_BYTES_MAX;

/// Where the `index` tree keeps its watermark: a key no index key can be (they never start with
/// a 0 byte).
const INDEX_WATERMARK_KEY: &[u8] = b"\0watermark";

/// The on-disk schema version kept in `meta`. Version 2 stores an append's records as groups
/// (see `groups`); version 3 stores values compressed (see `compress`). A store of an earlier
/// version (one record per value, or plain groups) reads the same way and is marked 3 when
/// opened, so an older binary refuses it rather than misreading a group or a compressed value.
pub const SCHEMA_VERSION: u64 = 3;

pub(crate) struct Trees {
    pub db: sled::Db,
    pub events: sled::Tree,
    pub streams: sled::Tree,
    pub runs: sled::Tree,
    pub sessions: sled::Tree,
    pub snapshots: sled::Tree,
    pub meta: sled::Tree,
    pub records: sled::Tree,
    pub record_chunks: sled::Tree,
    /// The index beside the log, with its watermark under [`INDEX_WATERMARK_KEY`].
    pub index: sled::Tree,
    pub bodies: bodies::BodyFile,
}

pub(crate) struct AppendRequest {
    pub run_id: RunId,
    pub expected_seq: u64,
    pub events: Vec<Event>,
    /// Answer after the batch's barrier (`append`) rather than once written (`append_written`).
    pub durable: bool,
    pub reply: oneshot::Sender<Result<Vec<Envelope>>>,
}

impl AppendRequest {
    /// A request and where its answer arrives.
    fn new(
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
        durable: bool,
    ) -> (Self, oneshot::Receiver<Result<Vec<Envelope>>>) {
        let (reply, rx) = oneshot::channel();
        let req = AppendRequest {
            run_id,
            expected_seq,
            events,
            durable,
            reply,
        };
        (req, rx)
    }
}

/// The event log in a data directory: sled in `dir/sled`, large record bodies in `dir/bodies`,
/// blobs in `dir/blobs`.
pub struct SledLog {
    dir: PathBuf,
    trees: Arc<Trees>,
    opts: Options,
    tx: Mutex<Option<mpsc::Sender<AppendRequest>>>,
    /// Sync mode: the barrier thread's queue, for `request_barrier`.
    barrier_tx: Mutex<Option<std::sync::mpsc::Sender<writer::Waiting>>>,
    head_rx: watch::Receiver<u64>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    barrier: Arc<writer::Barrier>,
    failure: watch::Receiver<Option<String>>,
    /// The newest written events, decoded (what followers read next).
    recent: Arc<recent::Recent>,
    /// Free disk space against the reserve (shared with the writer).
    space: Arc<Space>,
    /// The thread that writes sled's page-table snapshot as the log grows, and its stop signal.
    snapshotter: Mutex<Option<(std::sync::mpsc::Sender<()>, JoinHandle<()>)>>,
}

/// sled writes a snapshot of its page table after this many bytes of log, so that an open
/// replays at most about this much (sled alone writes one only at open, and the first open after
/// a long-lived process replayed everything it wrote).
const SNAPSHOT_EVERY_BYTES: u64 = 256 << 20;

/// How often the snapshot thread looks at how much log was written since the last snapshot.
const SNAPSHOT_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes sled's snapshot each time `SNAPSHOT_EVERY_BYTES` of log were written, until stopped.
fn spawn_snapshotter(db: sled::Db) -> Result<(std::sync::mpsc::Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let handle = std::thread::Builder::new()
        .name("chronicle-sled-snapshot".into())
        .spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(SNAPSHOT_CHECK_EVERY)
            {
                if db.log_bytes_since_snapshot() >= SNAPSHOT_EVERY_BYTES {
                    write_sled_snapshot(&db);
                }
            }
        })?;
    Ok((stop, handle))
}

/// A failed snapshot costs only a longer replay at the next open: it is logged, not fatal.
fn write_sled_snapshot(db: &sled::Db) {
    match catching_panics(|| db.write_snapshot_quiesced()) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "writing sled's snapshot failed"),
        Err(e) => tracing::warn!(error = %e, "writing sled's snapshot failed"),
    }
}

impl Drop for SledLog {
    fn drop(&mut self) {
        // Closing the queue ends the writer (after a last barrier); joining makes sure sled is
        // closed before a reopen in the same process.
        self.tx.lock().map(|mut t| t.take()).ok();
        self.barrier_tx.lock().map(|mut t| t.take()).ok();
        self.barrier.stop();
        if let Ok(mut threads) = self.threads.lock() {
            for t in threads.drain(..) {
                let _ = t.join();
            }
        }
        if let Some((stop, handle)) = self.snapshotter.lock().ok().and_then(|mut s| s.take()) {
            drop(stop);
            let _ = handle.join();
            // A clean close leaves a snapshot of everything: the next open replays nothing.
            if self.barrier.stopped().is_ok() {
                write_sled_snapshot(&self.trees.db);
            }
        }
    }
}

impl std::fmt::Debug for SledLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledLog")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl SledLog {
    /// Opens (or creates, private to its user) the store in `dir`: sled lives in `dir/sled`,
    /// blobs in `dir/blobs`. Checks the newest records and refuses a broken tail unless
    /// `repair_truncate_tail`; names a damaged body among them and opens (see `verify`).
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<SledLog> {
        let dir = dir.as_ref().to_path_buf();
        private::prepare(&dir)?;
        let config = sled::Config::new()
            .path(dir.join("sled"))
            .cache_capacity(opts.cache_capacity_bytes)
            .mode(sled::Mode::HighThroughput)
            // No sled background flusher: every acknowledgement passes our own barrier (and async
            // mode runs its own flusher), and sled's thread would hold the database (and its file
            // lock) for up to its interval after the store is dropped.
            .flush_every_ms(None);
        let db = open_setting_aside_a_damaged_snapshot(&dir, &config, opts.open_lock_wait_ms)?;
        private::restrict_sled(&dir.join("sled"))?;
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
            records: open_tree("records")?,
            record_chunks: open_tree("record_chunks")?,
            index: open_tree("index")?,
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
            None if dir.join(STORE_MARKER).exists() => {
                return Err(Error::Unopenable(format!(
                    "sled holds no log but {} says a store was created here: sled's files were lost or emptied",
                    dir.join(STORE_MARKER).display()
                )));
            }
            None => {
                // A new store: make it durable before anything references it (sled creates
                // its files without syncing their directory entries), then mark the directory.
                trees
                    .meta
                    .insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
                trees.db.flush()?;
                sync_tree_entries(&dir)?;
                mark_store(&dir)?;
            }
            // A store created before the marker existed gets it now.
            Some(1..=SCHEMA_VERSION) if !dir.join(STORE_MARKER).exists() => mark_store(&dir)?,
            // One made before the store kept its files private.
            Some(1..=SCHEMA_VERSION) => {
                private::restrict(&dir.join(STORE_MARKER), private::FILE_MODE)?
            }
            Some(v) => {
                return Err(Error::SchemaVersion {
                    found: v,
                    supported: SCHEMA_VERSION,
                });
            }
        }
        catching_panics(|| verify::drop_unfinished_batch(&trees))??;
        let damaged = catching_panics(|| {
            verify::check_tail(
                &trees,
                opts.open_verify_tail_events,
                opts.repair_truncate_tail,
            )
        })??;
        say_damaged(&damaged);
        // An earlier version reads as it is; once its tail checked out, it is marked current.
        if trees.meta.get("schema_version")?.as_deref() != Some(&SCHEMA_VERSION.to_be_bytes()) {
            trees
                .meta
                .insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
            trees.db.flush()?;
        }
        let next_offset = verify::next_offset(&trees)?;
        let recent = Arc::new(recent::Recent::new(next_offset));
        let space = Arc::new(Space::new(&dir, opts.disk_reserve_bytes));
        let (failure_tx, failure) = watch::channel(None);
        let barrier = Arc::new(writer::Barrier::new(
            &trees,
            &dir.join("sled"),
            Arc::new(failure_tx),
        )?);
        let (head_tx, head_rx) = watch::channel(next_offset);
        let head_tx = Arc::new(head_tx);
        let (tx, rx) = mpsc::channel(opts.write_queue_requests.max(1));
        let barrier_thread = match opts.durability {
            Durability::Sync => Some(writer::spawn_barrier_thread(
                barrier.clone(),
                head_tx.clone(),
            )?),
            Durability::Async => None,
        };
        let barrier_tx = barrier_thread.as_ref().map(|(tx, _)| tx.clone());
        // The writer is joined first: it ends with a last barrier, then the barrier thread ends.
        let mut threads = vec![writer::spawn(
            writer::Start {
                trees: trees.clone(),
                barrier: barrier.clone(),
                head_tx: head_tx.clone(),
                space: space.clone(),
                next_offset,
                bodies_end,
                barrier_tx: barrier_tx.clone(),
                recent: recent.clone(),
            },
            rx,
            &opts,
        )?];
        threads.extend(barrier_thread.map(|(_, handle)| handle));
        if opts.durability == Durability::Async {
            threads.push(writer::spawn_flusher(
                barrier.clone(),
                head_tx,
                opts.async_flush_ms,
            )?);
        }
        let snapshotter = spawn_snapshotter(trees.db.clone())?;
        Ok(SledLog {
            dir,
            snapshotter: Mutex::new(Some(snapshotter)),
            trees,
            opts,
            tx: Mutex::new(Some(tx)),
            barrier_tx: Mutex::new(barrier_tx),
            head_rx,
            threads: Mutex::new(threads),
            barrier,
            failure,
            recent,
            space,
        })
    }

    /// Queues an append for the writer, which stores it with its batch and answers once it is
    /// written (`durable: false`), or after a barrier that covers it (`sync`), or right after
    /// it is written (`async`).
    async fn queue(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
        durable: bool,
    ) -> Result<Vec<Envelope>> {
        let (req, rx) = AppendRequest::new(run_id, expected_seq, events, durable);
        self.sender()?.send(req).await.map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    fn sender(&self) -> Result<mpsc::Sender<AppendRequest>> {
        self.tx
            .lock()
            .ok()
            .and_then(|t| t.clone())
            .ok_or(Error::Closed)
    }

    /// Writes a record (or deletes it) and passes a barrier before answering, in either
    /// durability mode. A failed barrier stops the store.
    fn write_record(&self, key: &str, value: Option<&[u8]>) -> Result<()> {
        self.write_record_to(key, value, false).map(drop)
    }

    /// Writes (or with `value: None` deletes) the record under `key`; with `if_absent`, only
    /// where no record is, answering the value there instead.
    fn write_record_to(
        &self,
        key: &str,
        value: Option<&[u8]>,
        if_absent: bool,
    ) -> Result<Option<Vec<u8>>> {
        crate::records::check(key, value)?;
        self.barrier.stopped()?;
        // Counted as the writer counts events.
        let needed = space::counted(value.map_or(0, |v| v.len() as u64));
        if value.is_some() {
            self.space.check(needed)?;
        }
        let reserve = self.space.reserve();
        let there = records::write(&self.trees, key, value, if_absent).map_err(|e| match e {
            Error::Sled(sled::Error::Io(e)) => Error::Io(e).or_storage_full(needed, reserve),
            other => other,
        })?;
        if there.is_some() {
            return Ok(there);
        }
        self.barrier.run()?;
        Ok(None)
    }

    fn verify_only(&self, only: Option<RunId>) -> Result<VerifyReport> {
        catching_panics(|| verify::verify(&self.trees, only))?
    }
}

#[async_trait]
impl EventLog for SledLog {
    fn options(&self) -> &Options {
        &self.opts
    }

    fn dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    async fn append(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.queue(run_id, expected_seq, events, true).await
    }

    /// Answered right after the batch is written; the next barrier makes it durable.
    async fn append_written(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.queue(run_id, expected_seq, events, false).await
    }

    async fn wait_durable(&self, next_offset: u64) -> Result<()> {
        // In async mode an append is acknowledged once written: nothing to wait for.
        let next_offset = match self.opts.durability {
            Durability::Async => 0,
            Durability::Sync => next_offset,
        };
        let mut failure = self.failure.clone();
        let mut head = self.head_rx.clone();
        if *head.borrow() < next_offset {
            self.request_barrier();
        }
        loop {
            if let Some(why) = failure.borrow_and_update().clone() {
                return Err(Error::Stopped(why));
            }
            if *head.borrow_and_update() >= next_offset {
                return Ok(());
            }
            tokio::select! {
                r = head.changed() => r.map_err(|_| Error::Closed)?,
                r = failure.changed() => r.map_err(|_| Error::Closed)?,
            }
        }
    }

    fn request_barrier(&self) {
        if let Ok(Some(tx)) = self.barrier_tx.lock().as_deref() {
            let _ = tx.send(Vec::new());
        }
    }

    fn timings(&self) -> Option<&crate::LogTimings> {
        Some(&self.barrier.timings)
    }

    fn barriers(&self) -> u64 {
        self.barrier
            .passed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn append_blocking(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        let (req, rx) = AppendRequest::new(run_id, expected_seq, events, true);
        self.sender()?
            .blocking_send(req)
            .map_err(|_| Error::Closed)?;
        rx.blocking_recv().map_err(|_| Error::Closed)?
    }

    fn run_head(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.trees
            .runs
            .get(run_id.as_bytes())?
            .map(|v| decode_head(&v))
            .transpose()
    }

    fn runs(&self) -> Box<dyn Iterator<Item = Result<RunHead>> + Send + '_> {
        Box::new(self.trees.runs.iter().map(|kv| decode_head(&kv?.1)))
    }

    fn session_runs(&self, session: &SessionId) -> Result<Vec<RunId>> {
        let prefix = keys::session_prefix(session);
        let mut out = Vec::new();
        for kv in self.trees.sessions.scan_prefix(prefix) {
            let (k, _) = kv?;
            out.extend(keys::run_from_session_key(&k));
        }
        Ok(out)
    }

    fn get(&self, offset: u64) -> Result<Option<Envelope>> {
        if let Some(env) = self.recent.range(offset, offset.saturating_add(1)) {
            return Ok(env.into_iter().next().map(Arc::unwrap_or_clone));
        }
        let t = &self.trees;
        let Some(group) = Group::holding(t, offset)? else {
            return Ok(None);
        };
        group
            .record(offset)?
            .map(|r| decode_stored(t, offset, r))
            .transpose()
    }

    fn read_range(&self, from: u64, to: u64) -> Events<'_> {
        if from >= to {
            return Box::new(std::iter::empty());
        }
        if let Some(envs) = self.recent.range(from, to) {
            return Box::new(envs.into_iter().map(|e| Ok(Arc::unwrap_or_clone(e))));
        }
        let t = &self.trees;
        // The group holding `from` may start before it.
        let start = match Group::holding(t, from) {
            Ok(g) => g.map_or(from, |g| g.first),
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let range = keys::offset_key(start)..keys::offset_key(to);
        let mut next = from;
        Box::new(t.events.range(range).flat_map(move |kv| {
            let group = kv
                .map_err(|e| unreadable(next, &e))
                .and_then(|(k, v)| Group::new(&k, v));
            match group {
                Ok(g) => {
                    let envelopes = g.envelopes(t, from, to);
                    if let Some(Ok(last)) = envelopes.last() {
                        next = last.offset + 1;
                    }
                    envelopes
                }
                Err(e) => vec![Err(e)],
            }
        }))
    }

    fn read_range_shared(&self, from: u64, to: u64) -> SharedEvents<'_> {
        match self.recent.range(from, to) {
            Some(envs) => Box::new(envs.into_iter().map(Ok)),
            None => crate::log::shared(self.read_range(from, to)),
        }
    }

    fn read_range_where(&self, from: u64, to: u64, keep: fn(&Event) -> bool) -> Events<'_> {
        match self.recent.range_where(from, to, keep) {
            Some(envs) => Box::new(envs.into_iter().map(|e| Ok(Arc::unwrap_or_clone(e)))),
            None => crate::log::only(self.read_range(from, to), keep),
        }
    }

    fn read_run(&self, run_id: RunId, from_seq: u64, to_seq: u64) -> Events<'_> {
        if to_seq < from_seq {
            return Box::new(std::iter::empty());
        }
        let t = &self.trees;
        // The entry of the group holding `from_seq` may be keyed by an earlier seq.
        let start = match groups::stream_floor(t, run_id, from_seq) {
            Ok(floor) => floor.map_or(from_seq, |(seq, _, _)| seq),
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let range = keys::stream_key(run_id, start)..=keys::stream_key(run_id, to_seq);
        Box::new(t.streams.range(range).flat_map(move |kv| {
            match run_group(t, run_id, kv) {
                // Only the records of the seqs asked for are decoded.
                Ok((seq, g)) => g
                    .envelopes(
                        t,
                        g.first.saturating_add(from_seq.saturating_sub(seq)),
                        g.first.saturating_add((to_seq - seq).saturating_add(1)),
                    )
                    .into_iter()
                    .map(|e| match e {
                        Ok(e) if e.run_id != run_id => Err(Error::Corrupt {
                            offset: e.offset,
                            reason: format!("indexed by run {run_id} but of run {}", e.run_id),
                        }),
                        other => other,
                    })
                    .collect(),
                Err(e) => vec![Err(e)],
            }
        }))
    }

    fn durable_next_offset(&self) -> u64 {
        *self.head_rx.borrow()
    }

    fn watch_head(&self) -> watch::Receiver<u64> {
        self.head_rx.clone()
    }

    /// A batch being made durable right now is excluded.
    fn durable_seq(&self, run_id: RunId) -> Result<Option<u64>> {
        let durable = self.durable_next_offset();
        // Most often the run's newest writes tell (a barrier makes whole batches durable), or
        // its head says so, without a scan.
        if let Some(seq) = self.recent.durable_seq(run_id, durable) {
            return Ok(Some(seq));
        }
        if let Some(head) = self.run_head(run_id)?
            && head.last_offset < durable
        {
            return Ok(Some(head.last_seq));
        }
        // A group is one sled value, so it is durable whole or not at all.
        let range = keys::stream_key(run_id, 0)..=keys::stream_key(run_id, u64::MAX);
        for kv in self.trees.streams.range(range).rev() {
            let (k, v) = kv?;
            let (seq, first, count) = groups::stream_entry(run_id, &k, &v)?;
            if first < durable {
                return Ok(Some(seq + count - 1));
            }
        }
        Ok(None)
    }

    /// A snapshot too large for a sled value goes to a blob file and sled keeps its hash.
    fn put_snapshot(&self, state: &RunState) -> Result<()> {
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
        self.trees
            .snapshots
            .insert(keys::stream_key(run, seq), value)?;
        Ok(())
    }

    fn latest_snapshot(&self, run_id: RunId, seq: u64) -> Result<Option<RunState>> {
        let range = keys::stream_key(run_id, 0)..=keys::stream_key(run_id, seq);
        for kv in self.trees.snapshots.range(range).rev() {
            let value = kv?.1;
            let state = match value.first() {
                // A blob that is gone or damaged is a missing cache entry, not an error.
                Some(&SNAPSHOT_IN_BLOB) if value.len() == 41 => {
                    let blob = BlobRef {
                        hash: Hash(value[1..33].try_into().expect("32 bytes")),
                        bytes: keys::parse_u64(&value[33..]).unwrap_or(0),
                    };
                    // Read back under its content hash: verified already.
                    self.read_blob(&blob)
                        .ok()
                        .and_then(|b| snapshot::decode_verified(&b))
                }
                _ => snapshot::decode(&value),
            };
            if state.is_some() {
                return Ok(state);
            }
        }
        Ok(None)
    }

    fn clear_snapshots(&self) -> Result<()> {
        self.trees.snapshots.clear()?;
        Ok(())
    }

    /// Stores the payload as `<dir>/blobs/<blake3>`, fsynced (with its directory entry) before
    /// this returns.
    fn put_blob(&self, bytes: &[u8]) -> Result<BlobRef> {
        if let Some(why) = self.failure() {
            return Err(Error::Stopped(why));
        }
        let reserve = self.space.reserve();
        self.space.check(bytes.len() as u64)?;
        blobs::put(&self.dir.join("blobs"), bytes).map_err(|e| match e {
            blobs::PutError::Write(e) => Error::Io(e).or_storage_full(bytes.len() as u64, reserve),
            // A failed fsync is fail-stop, as for the log itself.
            blobs::PutError::Durability(e) => self
                .barrier
                .fail(&format!("making a blob durable failed: {e}")),
        })
    }

    fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        blobs::read(&self.dir.join("blobs"), &blob.hash)
    }

    /// One sled transaction on the `index` tree: the watermark checked and moved with the ops.
    fn index_apply(&self, ops: &[IndexOp], from: u64, to: u64) -> Result<()> {
        use sled::transaction::{ConflictableTransactionError, TransactionError};
        crate::index::check(ops)?;
        self.barrier.stopped()?;
        let result = self.trees.index.transaction(|tx| {
            let at = tx
                .get(INDEX_WATERMARK_KEY)?
                .and_then(|v| keys::parse_u64(&v))
                .unwrap_or(0);
            if at != from {
                return Err(ConflictableTransactionError::Abort(at));
            }
            for op in ops {
                match op {
                    IndexOp::Put(k, v) => tx.insert(k.as_slice(), v.as_slice()).map(drop)?,
                    IndexOp::Delete(k) => tx.remove(k.as_slice()).map(drop)?,
                }
            }
            tx.insert(INDEX_WATERMARK_KEY, &to.to_be_bytes())?;
            Ok(())
        });
        match result {
            Ok(()) => Ok(()),
            Err(TransactionError::Abort(actual)) => Err(Error::IndexConflict {
                expected: from,
                actual,
            }),
            Err(TransactionError::Storage(e)) => Err(e.into()),
        }
    }

    fn index_watermark(&self) -> Result<u64> {
        Ok(self
            .trees
            .index
            .get(INDEX_WATERMARK_KEY)?
            .and_then(|v| keys::parse_u64(&v))
            .unwrap_or(0))
    }

    fn index_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.trees.index.get(key)?.map(|v| v.to_vec()))
    }

    fn index_range(&self, range: &IndexRange) -> Result<Vec<IndexEntry>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let entries = self
            .trees
            .index
            .range::<Vec<u8>, _>((range.start.clone(), range.end.clone()));
        let entries: Box<dyn Iterator<Item = _>> = if range.reverse {
            Box::new(entries.rev())
        } else {
            Box::new(entries)
        };
        let mut out = Vec::new();
        for kv in entries {
            let (k, v) = kv?;
            if k.as_ref() == INDEX_WATERMARK_KEY {
                continue;
            }
            out.push((k.to_vec(), v.to_vec()));
            if out.len() >= range.limit {
                break;
            }
        }
        Ok(out)
    }

    fn put_record(&self, key: &str, value: &[u8]) -> Result<()> {
        self.write_record(key, Some(value))
    }

    fn put_record_if_absent(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>> {
        self.write_record_to(key, Some(value), true)
    }

    fn record(&self, key: &str) -> Result<Option<Vec<u8>>> {
        records::read(&self.trees, key)
    }

    fn records(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        records::list(&self.trees, prefix)
    }

    fn delete_record(&self, key: &str) -> Result<()> {
        self.write_record(key, None)
    }

    /// One sled transaction over both record trees, then a barrier, as a single record write.
    fn records_apply(&self, ops: &[RecordOp]) -> Result<()> {
        crate::records::check_batch(ops)?;
        self.barrier.stopped()?;
        let written: u64 = ops
            .iter()
            .filter_map(RecordOp::written)
            .map(|v| v.len() as u64)
            .sum();
        let needed = space::counted(written);
        let puts = ops.iter().any(|op| op.written().is_some());
        if puts {
            self.space.check(needed)?;
        }
        let reserve = self.space.reserve();
        records::apply(&self.trees, ops).map_err(|e| match e {
            Error::Sled(sled::Error::Io(e)) => Error::Io(e).or_storage_full(needed, reserve),
            other => other,
        })?;
        if ops.iter().any(|op| !matches!(op, RecordOp::Expect(..))) {
            self.barrier.run()?;
        }
        Ok(())
    }

    fn records_range(&self, range: &RecordRange) -> Result<Vec<(String, Vec<u8>)>> {
        records::range(&self.trees, range)
    }

    fn health(&self) -> StorageHealth {
        if let Some(why) = self.failure() {
            return StorageHealth::Failed(why);
        }
        match self.space.short() {
            Some(short) => StorageHealth::Full {
                available: short.available,
                reserve: short.reserve,
                needed: short.needed,
            },
            None => StorageHealth::Ok,
        }
    }

    fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    fn watch_failure(&self) -> watch::Receiver<Option<String>> {
        self.failure.clone()
    }

    fn fail_stop(&self, why: &str) {
        self.barrier.fail(why);
    }

    /// Runs a durability barrier now (in `sync` mode every acknowledgement already passed one).
    fn flush(&self) -> Result<()> {
        self.barrier.run()
    }

    /// Also checks the `streams` index and `meta.next_offset` against the records.
    fn verify(&self) -> Result<VerifyReport> {
        self.verify_only(None)
    }

    fn verify_run(&self, run_id: RunId) -> Result<VerifyReport> {
        self.verify_only(Some(run_id))
    }
}

/// Opens sled; when sled refuses a store that has a snapshot file, opens it again without it.
///
/// sled's snapshot (`sled/snap.<lsn>`) is a cache of its page table: sled reads it to start
/// quickly and rebuilds it from its log when there is none ("entirely an optimization for
/// recovery, and can be deleted without impacting recovery correctness", sled's architecture
/// notes; `read_snapshot_or_default` starts from an empty table). A damaged one (or the
/// half-written `snap.<lsn>.generating` of a crash, which sled picks up too) makes sled refuse
/// the whole store. So the file is set aside as `<dir>/sled-snap.<lsn>.damaged`, outside sled's
/// directory where sled would read it again, and sled is opened without it; if sled refuses then
/// too, the damage is elsewhere: the file goes back, and the first refusal is the answer.
fn open_setting_aside_a_damaged_snapshot(
    dir: &Path,
    config: &sled::Config,
    wait_ms: u64,
) -> Result<sled::Db> {
    let refused = match open_waiting_for_lock(config, wait_ms) {
        Err(e @ (Error::Unopenable(_) | Error::Sled(_))) => e,
        other => return other,
    };
    let mut moved = Vec::new();
    for from in sled_snapshot_files(&dir.join("sled")) {
        let Some(name) = from.file_name() else {
            continue;
        };
        let to = dir.join(format!("sled-{}.damaged", name.to_string_lossy()));
        match std::fs::rename(&from, &to) {
            Ok(()) => moved.push((from, to)),
            Err(_) => break,
        }
    }
    if moved.is_empty() {
        return Err(refused);
    }
    match open_waiting_for_lock(config, wait_ms) {
        Ok(db) => {
            for (from, to) in &moved {
                tracing::warn!(
                    "sled refused its snapshot file {} ({refused}); it is set aside as {} and sled rebuilt its page table from its log",
                    from.display(),
                    to.display()
                );
            }
            Ok(db)
        }
        Err(_) => {
            for (from, to) in moved.iter().rev() {
                let _ = std::fs::rename(to, from);
            }
            Err(refused)
        }
    }
}

/// The files sled takes for its snapshot: every name in `sled_dir` that starts with `snap.`.
fn sled_snapshot_files(sled_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(sled_dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("snap."))
        })
        .collect()
}

/// Damaged records the open found and kept, said at most this many times (then how many more).
const DAMAGED_SAID_MAX: usize = 10;

/// Says which records the open found damaged, with what reads of them do and what to do.
fn say_damaged(damaged: &[Problem]) {
    for p in damaged.iter().take(DAMAGED_SAID_MAX) {
        let of = match (p.run_id, p.seq) {
            (Some(run), Some(seq)) => format!(" (run {run} seq {seq})"),
            _ => String::new(),
        };
        tracing::error!(
            "the record at offset {}{of} is damaged: {}; the store is served with it kept as it is: reads of it fail naming it, and nothing was dropped. `chronicle verify` names the damaged records; a backup of the data directory holds their bytes",
            p.offset,
            p.reason
        );
    }
    if damaged.len() > DAMAGED_SAID_MAX {
        tracing::error!(
            "{} more damaged records among the newest; `chronicle verify` names them",
            damaged.len() - DAMAGED_SAID_MAX
        );
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

/// The plain bytes of a stored `events` value (a compressed one inflated), which the store reads
/// exactly as it reads the stored value: for tools and tests that examine or damage a store with
/// sled opened directly.
#[doc(hidden)]
pub fn plain_events_value(value: &[u8]) -> std::result::Result<Vec<u8>, String> {
    compress::unpack(value).map(std::borrow::Cow::into_owned)
}

/// Bytes of the log's records as the closed store in `dir` keeps them: sled's `events` values
/// (mostly compressed) and the body file; sled's own space and the indexes are not counted.
pub fn stored_record_bytes(dir: impl AsRef<Path>) -> Result<u64> {
    let dir = dir.as_ref();
    let config = sled::Config::new()
        .path(dir.join("sled"))
        .flush_every_ms(None);
    let db = open_waiting_for_lock(&config, Options::default().open_lock_wait_ms)?;
    let mut bytes = std::fs::metadata(dir.join("bodies")).map_or(0, |m| m.len());
    for kv in db.open_tree("events")?.iter() {
        bytes += kv?.1.len() as u64;
    }
    Ok(bytes)
}

/// Tag of a `snapshots` value that holds a blob's hash and size instead of the snapshot.
const SNAPSHOT_IN_BLOB: u8 = 0xFF;

/// The first seq of a `streams` entry of `run`, and the group it points at.
fn run_group(
    t: &Trees,
    run: RunId,
    kv: sled::Result<(sled::IVec, sled::IVec)>,
) -> Result<(u64, Group)> {
    let (k, v) = kv?;
    let (seq, first, _) = groups::stream_entry(run, &k, &v)?;
    let value = t
        .events
        .get(keys::offset_key(first))
        .map_err(|e| unreadable(first, &e))?
        .ok_or_else(|| Error::Corrupt {
            offset: first,
            reason: format!("indexed by run {run} seq {seq} but missing"),
        })?;
    Ok((seq, Group::at(first, value)?))
}

/// A sled read that failed, named by the event offset it was reading: an I/O error is
/// [`Error::ReadFailed`] (the device, not the record), anything else damage.
fn unreadable(offset: u64, e: &sled::Error) -> Error {
    match e {
        sled::Error::Io(io) => Error::ReadFailed {
            offset,
            source: std::io::Error::new(io.kind(), io.to_string()),
        },
        _ => Error::Corrupt {
            offset,
            reason: format!("sled cannot read the record: {e}"),
        },
    }
}

/// Decodes the record stored at `offset`, reading its body from the body file when it is stored
/// out of line. Any damage is [`Error::Corrupt`] naming the offset (and the run and seq when the
/// stub still tells them); a body file that cannot be read is [`Error::ReadFailed`].
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
        let body = t.bodies.read(ext.position, ext.len).map_err(|e| {
            // A body file that ends before the body lost it; any other failure is the device's.
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                at(&"the body file ends before it")
            } else {
                Error::ReadFailed { offset, source: e }
            }
        })?;
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

/// The file that says a data directory holds a store. It is written once the new store's sled is
/// durable, so a sled that holds no log beside it lost its files (and is refused rather than
/// opened as an empty log).
const STORE_MARKER: &str = "store";

fn mark_store(dir: &Path) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(STORE_MARKER);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(private::FILE_MODE)
        .open(&path)?;
    f.write_all(b"a Chronicle store: its log is in sled/\n")?;
    f.sync_all()?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
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

/// A `runs` value: the head's fields in order (it is rewritten with every append to its run, so
/// it carries no field names). Heads stored as named maps by earlier versions decode the same.
pub(crate) fn encode_head(head: &RunHead) -> Result<Vec<u8>> {
    rmp_serde::to_vec(head).map_err(|e| Error::Decode(format!("run head: {e}")))
}

pub(crate) fn decode_head(bytes: &[u8]) -> Result<RunHead> {
    rmp_serde::from_slice(bytes).map_err(|e| Error::Decode(format!("run head: {e}")))
}

#[cfg(test)]
mod conformance {
    crate::conformance_tests!(crate::conformance::Sled::default());
}

#[cfg(test)]
mod heads {
    use chronicle_schemas::{Hash, RunId, SessionId, Timestamp};

    use super::{decode_head, encode_head};
    use crate::RunHead;

    #[test]
    fn heads_are_stored_without_field_names_and_named_ones_still_read() {
        let head = RunHead {
            run_id: RunId::from_u128(7),
            last_seq: 12,
            last_hash: Hash([3; 32]),
            last_offset: 9_000,
            session_id: SessionId::from("ses_0123456789abcdef"),
            created_at: Timestamp::from_micros(1_790_000_000_000_000),
            updated_at: Timestamp::from_micros(1_790_000_000_250_000),
            terminal: true,
        };
        let stored = encode_head(&head).unwrap();
        let named = rmp_serde::to_vec_named(&head).unwrap();
        assert!(
            stored.len() + 60 < named.len(),
            "{} vs {}",
            stored.len(),
            named.len()
        );
        assert_eq!(decode_head(&stored).unwrap(), head);
        assert_eq!(
            decode_head(&named).unwrap(),
            head,
            "as earlier versions stored it"
        );
    }
}
