//! The single writer and the durability barrier.
//!
//! Group commit: the writer blocks for one append request, then takes every request already
//! queued (up to `append_batch_events_max` events) and writes them all to sled, with an end mark
//! that makes a crashed batch recognizable (see `Writer::write`).
//! In `sync` mode the barrier runs on a thread of its own: the writer hands it the answers of
//! the batch's appends and goes on with the next batch while the barrier runs, and each barrier
//! covers every batch written before it started, so under load one barrier covers many appends.
//! Appends made with `append_written` are answered as soon as their batch is written and ask for
//! no barrier: the next one covers them, run when someone waits for durability or asks for it
//! (`request_barrier`, which a run does whenever it has nothing more to do for now).
//!
//! The barrier is sled's `flush` *plus* `fdatasync` of sled's data file, because sled 0.34's flush
//! issues `sync_file_range` on Linux, which survives a killed process but not a power loss. Before
//! the batch goes to sled, the bodies of the batch's large records are written to the body file and
//! fdatasynced (see `bodies`). As a backstop the barrier also fsyncs any file sled put under
//! `sled/blobs/` since the last barrier (the value limit means there should be none).
//!
//! Before anything is written the writer checks the free disk space: a batch that would leave
//! less than the reserve is refused (`StorageFull`) and writes nothing. Every failure after the
//! batch reached the body file's fsync or sled is fail-stop: the barrier records why, every later
//! append is refused with `Stopped`, nothing is acknowledged, and no fsync is retried.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc as std_mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use chronicle_schemas::{Envelope, RECORD_HEADER_BYTES, RunId, external_stub};
use tokio::sync::{mpsc, watch};

use super::bodies::SLED_VALUE_BYTES_MAX;
use super::compress;
use super::recent::Recent;
use super::space::{self, Space};
use super::{AppendRequest, Trees, encode_head, groups, keys};
use crate::append::{Clock, Staged, stage};
use crate::{Error, Options, Result, RunHead};
/// Heads kept in the writer's memory before the cache is dropped and refilled from `runs`.
const HEAD_CACHE_RUNS_MAX: usize = 100_000;

pub(crate) struct Barrier {
    db: sled::Db,
    data_file: File,
    sled_blobs: PathBuf,
    /// Files under `sled/blobs/` already fsynced; also serializes barriers, so that a failure
    /// seen by one (Linux reports a writeback error once) is seen before another acknowledges.
    synced_blobs: Mutex<HashSet<OsString>>,
    failure: Arc<watch::Sender<Option<String>>>,
    /// One past the newest offset written to sled (async mode publishes up to it after a barrier).
    written_next: AtomicU64,
    /// Barriers passed since the store opened.
    pub(crate) passed: AtomicU64,
    /// How long each barrier took, and how many events each batch the writer wrote held.
    pub(crate) timings: crate::LogTimings,
    stop: Mutex<Option<std_mpsc::Sender<()>>>,
    stop_rx: Mutex<Option<std_mpsc::Receiver<()>>>,
}

impl Barrier {
    pub(crate) fn new(
        trees: &Trees,
        sled_dir: &Path,
        failure: Arc<watch::Sender<Option<String>>>,
    ) -> Result<Self> {
        let (tx, rx) = std_mpsc::channel();
        Ok(Self {
            db: trees.db.clone(),
            // fdatasync works through any descriptor of the file: it flushes the inode's pages.
            data_file: File::open(sled_dir.join("db"))?,
            sled_blobs: sled_dir.join("blobs"),
            synced_blobs: Mutex::new(HashSet::new()),
            failure,
            written_next: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            timings: crate::LogTimings::default(),
            stop: Mutex::new(Some(tx)),
            stop_rx: Mutex::new(Some(rx)),
        })
    }

    /// Makes everything written to sled durable. A failure stops the store for good.
    pub(crate) fn run(&self) -> Result<()> {
        let mut synced = self.synced_blobs.lock().unwrap_or_else(|p| p.into_inner());
        self.stopped()?;
        let started = std::time::Instant::now();
        let done = self
            .sync_sled_blobs(&mut synced)
            .and_then(|()| Ok(self.db.flush().map(|_| ())?))
            .and_then(|()| Ok(self.data_file.sync_data()?));
        self.timings
            .barrier_seconds
            .observe_duration(started.elapsed());
        done.map_err(|e| self.fail(&format!("durability barrier failed: {e}")))?;
        self.passed.fetch_add(1, Ordering::Relaxed);
        // Another path (the body file, a blob) may have failed meanwhile: acknowledge nothing.
        self.stopped()
    }

    /// `Err(Stopped)` once the store has failed.
    pub(crate) fn stopped(&self) -> Result<()> {
        match &*self.failure.borrow() {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Fail-stop: records why (the first reason wins) and returns the error for the callers.
    pub(crate) fn fail(&self, why: &str) -> Error {
        self.failure.send_if_modified(|f| {
            if f.is_none() {
                tracing::error!(reason = why, "the store stops accepting writes");
                *f = Some(why.to_owned());
                true
            } else {
                false
            }
        });
        Error::Stopped(self.failure.borrow().clone().unwrap_or_default())
    }

    /// fsyncs files sled wrote under `sled/blobs/` since the last barrier, then the directory.
    fn sync_sled_blobs(&self, synced: &mut HashSet<OsString>) -> Result<()> {
        let entries = match std::fs::read_dir(&self.sled_blobs) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let mut new = false;
        for entry in entries {
            let name = entry?.file_name();
            if synced.contains(&name) {
                continue;
            }
            match File::open(self.sled_blobs.join(&name)) {
                Ok(f) => f.sync_all()?,
                // sled removed it meanwhile: nothing to make durable.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
            tracing::warn!(file = ?name, "sled wrote a page to a blob file; fsynced it");
            synced.insert(name);
            new = true;
        }
        if new {
            File::open(&self.sled_blobs)?.sync_all()?;
        }
        Ok(())
    }

    pub(crate) fn stop(&self) {
        self.stop.lock().map(|mut s| s.take()).ok();
    }
}

/// What the writer starts from.
pub(crate) struct Start {
    pub trees: Arc<Trees>,
    pub barrier: Arc<Barrier>,
    pub head_tx: Arc<watch::Sender<u64>>,
    /// The free space of the data directory's file system.
    pub space: Arc<Space>,
    pub next_offset: u64,
    /// Where the next body goes in the body file.
    pub bodies_end: u64,
    /// Sync mode: the barrier thread's queue.
    pub barrier_tx: Option<std_mpsc::Sender<Waiting>>,
    /// Where each written batch goes for followers to read without sled.
    pub recent: Arc<Recent>,
}

pub(crate) fn spawn(
    start: Start,
    rx: mpsc::Receiver<AppendRequest>,
    opts: &Options,
) -> Result<JoinHandle<()>> {
    start
        .barrier
        .written_next
        .store(start.next_offset, Ordering::SeqCst);
    let mut w = Writer {
        trees: start.trees,
        barrier: start.barrier,
        head_tx: start.head_tx,
        barrier_tx: start.barrier_tx,
        recent: start.recent,
        space: start.space,
        next_offset: start.next_offset,
        bodies_end: start.bodies_end,
        heads: HashMap::new(),
        clock: Clock::default(),
        batch_events_max: opts.append_batch_events_max.max(1),
        compress: opts.compress_values,
    };
    Ok(std::thread::Builder::new()
        .name("chronicle-writer".into())
        .spawn(move || w.run(rx))?)
}

/// Answers waiting for the barrier that makes their appends durable.
pub(crate) type Waiting = Vec<(Reply, Vec<Envelope>)>;

type Reply = tokio::sync::oneshot::Sender<Result<Vec<Envelope>>>;

/// Sync mode: runs a barrier whenever it is handed answers to send (or an empty list: a
/// request), covering every batch written before it started, then publishes the new head and
/// sends the answers. With nothing new written since the last barrier it only answers.
pub(crate) fn spawn_barrier_thread(
    barrier: Arc<Barrier>,
    head_tx: Arc<watch::Sender<u64>>,
) -> Result<(std_mpsc::Sender<Waiting>, JoinHandle<()>)> {
    let (tx, rx) = std_mpsc::channel::<Waiting>();
    let handle = std::thread::Builder::new()
        .name("chronicle-barrier".into())
        .spawn(move || {
            while let Ok(mut waiting) = rx.recv() {
                while let Ok(more) = rx.try_recv() {
                    waiting.extend(more);
                }
                // Read before the barrier: everything below it was written before it started.
                let upto = barrier.written_next.load(Ordering::SeqCst);
                let done = if *head_tx.borrow() >= upto {
                    barrier.stopped()
                } else {
                    barrier.run()
                };
                match done {
                    Ok(()) => {
                        publish(&head_tx, upto);
                        for (reply, envelopes) in waiting {
                            let _ = reply.send(Ok(envelopes));
                        }
                    }
                    // Fail-stop: the barrier recorded why; nothing it covered is acknowledged.
                    Err(e) => {
                        for (reply, _) in waiting {
                            let _ = reply.send(Err(e.same_again()));
                        }
                    }
                }
            }
        })?;
    Ok((tx, handle))
}

/// Async mode: a barrier every `interval_ms`, then subscribers may see what it covered.
pub(crate) fn spawn_flusher(
    barrier: Arc<Barrier>,
    head_tx: Arc<watch::Sender<u64>>,
    interval_ms: u64,
) -> Result<JoinHandle<()>> {
    let stop_rx = barrier.stop_rx.lock().ok().and_then(|mut r| r.take());
    Ok(std::thread::Builder::new()
        .name("chronicle-flusher".into())
        .spawn(move || {
            let Some(stop_rx) = stop_rx else { return };
            loop {
                let stop = !matches!(
                    stop_rx.recv_timeout(Duration::from_millis(interval_ms.max(1))),
                    Err(std_mpsc::RecvTimeoutError::Timeout)
                );
                let upto = barrier.written_next.load(Ordering::SeqCst);
                if *head_tx.borrow() < upto {
                    match barrier.run() {
                        Ok(()) => publish(&head_tx, upto),
                        // Fail-stop: the barrier recorded why; never retry an fsync.
                        Err(_) => return,
                    }
                }
                if stop {
                    return;
                }
            }
        })?)
}

fn publish(head_tx: &watch::Sender<u64>, upto: u64) {
    head_tx.send_if_modified(|h| {
        let advanced = upto > *h;
        if advanced {
            *h = upto;
        }
        advanced
    });
}

struct Writer {
    trees: Arc<Trees>,
    barrier: Arc<Barrier>,
    head_tx: Arc<watch::Sender<u64>>,
    /// Sync mode: where the writer hands the barrier thread the answers that wait for it.
    barrier_tx: Option<std_mpsc::Sender<Waiting>>,
    recent: Arc<Recent>,
    space: Arc<Space>,
    next_offset: u64,
    bodies_end: u64,
    heads: HashMap<RunId, RunHead>,
    clock: Clock,
    batch_events_max: usize,
    /// Store `events` values compressed (see `compress`).
    compress: bool,
}

/// One accepted append, encoded and waiting to be written.
struct Pending {
    reply: Reply,
    /// Answer after a barrier rather than once written.
    durable: bool,
    append: Staged,
}

impl Writer {
    fn run(&mut self, mut rx: mpsc::Receiver<AppendRequest>) {
        while let Some(first) = rx.blocking_recv() {
            let mut events = first.events.len();
            let mut batch = vec![first];
            while events < self.batch_events_max {
                match rx.try_recv() {
                    Ok(req) => {
                        events += req.events.len();
                        batch.push(req);
                    }
                    Err(_) => break,
                }
            }
            self.barrier.timings.batch_events.observe(events as f64);
            self.commit(batch);
        }
        // The queue closed: the store is shutting down. Make everything written durable (a
        // stopped store runs no barrier).
        self.barrier_tx.take();
        if self.barrier.stopped().is_ok() && self.barrier.run().is_ok() {
            publish(&self.head_tx, self.next_offset);
        }
    }

    fn head(&mut self, run: RunId) -> Result<Option<RunHead>> {
        if let Some(h) = self.heads.get(&run) {
            return Ok(Some(h.clone()));
        }
        let head = self
            .trees
            .runs
            .get(run.as_bytes())?
            .map(|v| super::decode_head(&v))
            .transpose()?;
        if let Some(h) = &head {
            if self.heads.len() >= HEAD_CACHE_RUNS_MAX {
                self.heads.clear();
            }
            self.heads.insert(run, h.clone());
        }
        Ok(head)
    }

    fn commit(&mut self, batch: Vec<AppendRequest>) {
        if let Err(e) = self.barrier.stopped() {
            for req in batch {
                let _ = req.reply.send(Err(e.same_again()));
            }
            return;
        }
        let at = self.clock.now();
        let mut offset = self.next_offset;
        let mut staged: Vec<Pending> = Vec::with_capacity(batch.len());
        let mut new_heads: HashMap<RunId, RunHead> = HashMap::new();
        let mut sessions: Vec<Vec<u8>> = Vec::new();
        for req in batch {
            let head = match new_heads.get(&req.run_id) {
                Some(h) => Ok(Some(h.clone())),
                None => self.head(req.run_id),
            };
            let result = head.and_then(|head| {
                stage(
                    req.run_id,
                    req.expected_seq,
                    req.events,
                    head.as_ref(),
                    offset,
                    at,
                )
            });
            match result {
                Ok(append) => {
                    if append.starts_run() {
                        let h = &append.head;
                        sessions.push(keys::session_key(&h.session_id, h.created_at, h.run_id));
                    }
                    offset = append.next_offset();
                    new_heads.insert(req.run_id, append.head.clone());
                    staged.push(Pending {
                        reply: req.reply,
                        durable: req.durable,
                        append,
                    });
                }
                Err(e) => {
                    let _ = req.reply.send(Err(e));
                }
            }
        }
        if staged.is_empty() {
            return;
        }
        if let Err(e) = self.check_space(&staged) {
            return self.refuse_all(staged, e);
        }
        if let Err(e) = self.move_large_bodies(&mut staged) {
            return self.refuse_all(staged, e);
        }
        if let Err(e) = self.write(&staged, &new_heads, &sessions, offset) {
            // sled keeps an I/O error for good: nothing it holds can be trusted to reach disk.
            let e = self
                .barrier
                .fail(&format!("writing an append batch to sled failed: {e}"));
            return self.refuse_all(staged, e);
        }
        self.next_offset = offset;
        self.heads.extend(new_heads);
        self.recent.push(staged.iter().flat_map(|s| {
            let a = &s.append;
            a.envelopes.iter().zip(a.records.iter().map(Vec::as_slice))
        }));
        self.barrier.written_next.store(offset, Ordering::SeqCst);
        let Some(barrier_tx) = &self.barrier_tx else {
            for s in staged {
                let _ = s.reply.send(Ok(s.append.envelopes));
            }
            return;
        };
        let mut waiting = Vec::new();
        for s in staged {
            if s.durable {
                waiting.push((s.reply, s.append.envelopes));
            } else {
                let _ = s.reply.send(Ok(s.append.envelopes));
            }
        }
        if waiting.is_empty() {
            return;
        }
        if let Err(std_mpsc::SendError(waiting)) = barrier_tx.send(waiting) {
            let e = self.barrier.fail("the barrier thread stopped");
            for (reply, _) in waiting {
                let _ = reply.send(Err(e.same_again()));
            }
        }
    }

    /// Answers every append of the batch with `e` (nothing of it was acknowledged).
    fn refuse_all(&self, staged: Vec<Pending>, e: Error) {
        for s in staged {
            let _ = s.reply.send(Err(e.same_again()));
        }
    }

    /// Refuses the batch if writing it would leave less than the reserve free.
    fn check_space(&self, staged: &[Pending]) -> Result<()> {
        let bytes: u64 = staged
            .iter()
            .flat_map(|s| &s.append.records)
            .map(|r| r.len() as u64)
            .sum();
        self.space.check(space::counted(bytes))
    }

    /// Moves the bodies of records over the sled value limit to the body file, fsyncs it, and
    /// leaves stubs in their place. A failed write changes nothing; a failed fsync stops the
    /// store.
    fn move_large_bodies(&mut self, staged: &mut [Pending]) -> Result<()> {
        // A large record that compresses below the limit stays inline, as a group of its own.
        let compress = self.compress;
        let out_of_line: Vec<bool> = staged
            .iter()
            .flat_map(|s| &s.append.records)
            .map(|r| {
                r.len() > SLED_VALUE_BYTES_MAX
                    && !(compress
                        && compress::compress(r).is_some_and(|c| c.len() <= SLED_VALUE_BYTES_MAX))
            })
            .collect();
        let bodies: Vec<&[u8]> = staged
            .iter()
            .flat_map(|s| &s.append.records)
            .zip(&out_of_line)
            .filter(|(_, out)| **out)
            .map(|(r, _)| &r[RECORD_HEADER_BYTES..])
            .collect();
        if bodies.is_empty() {
            return Ok(());
        }
        let size: u64 = bodies.iter().map(|b| b.len() as u64).sum();
        let positions = self
            .trees
            .bodies
            .write(self.bodies_end, &bodies)
            .map_err(|e| Error::Io(e).or_storage_full(size, self.space.reserve()))?;
        self.bodies_end += size;
        if let Err(e) = self.trees.bodies.sync() {
            return Err(self
                .barrier
                .fail(&format!("fsync of the body file failed: {e}")));
        }
        let mut positions = positions.into_iter();
        let mut out_of_line = out_of_line.into_iter();
        for s in staged.iter_mut() {
            let a = &mut s.append;
            for (env, rec) in a.envelopes.iter().zip(a.records.iter_mut()) {
                if out_of_line.next() == Some(true) {
                    let at = positions.next().expect("one position per large record");
                    *rec = external_stub(rec, env.run_id, env.seq, at)
                        .map_err(|e| Error::Decode(e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// Plain sled inserts: first `meta`'s `batch` (the offsets the batch is about to take), then
    /// each append's records as groups (one `events` value and one `streams` entry each), the
    /// heads, the new sessions and, last, `meta`'s `next_offset`: the batch's end mark. sled
    /// recovers a prefix of its writes, so after a crash every group below `next_offset` is whole
    /// with its index entries, and whatever lies past it is within the batch `batch` names, which
    /// was never acknowledged and which open drops (`verify::drop_unfinished_batch`). A sled
    /// transaction would keep the batch whole by itself, but costs several times these inserts
    /// and writes sled's log buffer out twice.
    fn write(
        &self,
        staged: &[Pending],
        heads: &HashMap<RunId, RunHead>,
        sessions: &[Vec<u8>],
        next_offset: u64,
    ) -> Result<()> {
        let heads: Vec<(RunId, Vec<u8>)> = heads
            .iter()
            .map(|(run, h)| Ok((*run, encode_head(h)?)))
            .collect::<Result<_>>()?;
        let t = &self.trees;
        t.meta
            .insert("batch", &keys::batch_value(self.next_offset, next_offset))?;
        for s in staged {
            let (envelopes, records) = (&s.append.envelopes, &s.append.records);
            let mut at = 0;
            for n in groups::split(records) {
                let first = &envelopes[at];
                let value = groups::value(&records[at..at + n], self.compress);
                t.events
                    .insert(keys::offset_key(first.offset), value.as_ref())?;
                t.streams.insert(
                    keys::stream_key(first.run_id, first.seq),
                    groups::stream_value(first.offset, n),
                )?;
                at += n;
            }
        }
        for (run, head) in heads {
            t.runs.insert(run.as_bytes(), head)?;
        }
        for k in sessions {
            t.sessions.insert(k.as_slice(), &[])?;
        }
        t.meta.insert("next_offset", &next_offset.to_be_bytes())?;
        Ok(())
    }
}
