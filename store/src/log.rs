//! The event log every store implementation provides: the [`EventLog`] trait with its rules, and
//! the vocabulary it speaks (run heads, storage health).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chronicle_projections::RunState;
use chronicle_schemas::{BlobRef, Envelope, Event, Hash, RunId, SessionId, Timestamp};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::index::{IndexEntry, IndexOp, IndexRange};
use crate::records::{RecordOp, RecordRange};
use crate::{Options, Result, VerifyReport};

/// Events in order, each read or the reason it could not be.
pub type Events<'a> = Box<dyn Iterator<Item = Result<Envelope>> + Send + 'a>;

/// [`Events`], each shared rather than owned.
pub type SharedEvents<'a> = Box<dyn Iterator<Item = Result<Arc<Envelope>>> + Send + 'a>;

/// `events`, each shared.
pub(crate) fn shared(events: Events<'_>) -> SharedEvents<'_> {
    Box::new(events.map(|e| e.map(Arc::new)))
}

/// The events `keep` takes, and every error.
pub(crate) fn only(events: Events<'_>, keep: fn(&Event) -> bool) -> Events<'_> {
    Box::new(events.filter(move |e| e.as_ref().map_or(true, |e| keep(&e.event))))
}

/// One append-only log of events shared by all runs. Every implementation keeps these rules, and
/// the conformance suite checks each of them against every implementation:
///
/// - **Offsets** are global and dense from 0: the log is offsets `0..next` with no hole, and an
///   offset is given only to an event that is stored (a refused append uses none).
/// - **Seqs** are per run and dense from 0. Seq 0 is the run's `RunStarted`, and no later event
///   is a `RunStarted`.
/// - **Appends are optimistic**: `append(run, expected_seq, events)` stores the events only if
///   `expected_seq` is the run's next seq (0 for a new run); otherwise it is
///   [`Error::Conflict`](crate::Error::Conflict) `{ expected, actual }` and nothing is written. Of
///   appends racing with the same `expected_seq`, exactly one wins.
/// - **Appends are atomic**: the events of one append get consecutive offsets and seqs and one
///   `at`, and are all stored or none is. An empty append, an event whose record exceeds
///   `EVENT_BYTES_MAX` ([`Error::Encode`](crate::Error::Encode) naming it), a misplaced
///   `RunStarted` or a bad session id writes nothing.
/// - **Records** are encoded and chained by `chronicle_schemas::encode_record`: an event's
///   `prev_hash` is the hash of its run's previous event (`Hash::ZERO` at seq 0), so `verify`
///   means the same for every implementation.
/// - **Acknowledged means durable**: once `append` returns `Ok`, the events survive what the
///   implementation promises to survive. sled: a crash or a power loss (in
///   [`Durability::Async`](crate::Durability::Async) mode the last `async_flush_ms` may be lost);
///   memory: nothing outlives the last handle.
/// - **Followers see only durable events**: `durable_next_offset` and `watch_head` are one past
///   the newest durable offset, `durable_seq` is a run's newest durable seq, and
///   `Store::follow` yields every offset below that head exactly once, in order. Direct reads
///   (`get`, `read_range`, `read_run`, `run_head`) may also see a batch that is being made durable
///   right now; a reader that must show only durable state bounds its reads by those heads.
/// - **Sessions** index runs: `session_runs(s)` is every run whose `RunStarted` named `s`,
///   oldest first (creation time, then run id).
/// - **Snapshots** are a cache of `RunState` by run and seq: any of them may be missing, and
///   `clear_snapshots` may delete them all at any time; a damaged one reads as missing, and
///   failing to write one never fails anything else.
/// - **Blobs** are content-addressed: `put_blob` returns the blake3 of the bytes (and their
///   length), is idempotent, and is durable when it returns; `read_blob` returns exactly those
///   bytes, or [`Error::BlobMissing`](crate::Error::BlobMissing) /
///   [`Error::BlobCorrupt`](crate::Error::BlobCorrupt).
/// - **Named records** are small mutable values beside the log, by key: `put_record` replaces,
///   `put_record_if_absent` stores only where no record is (of callers racing for one key,
///   exactly one stores; the others get the value it stored), `delete_record` removes (nothing
///   when absent), `records(prefix)` lists in key order (byte
///   order of the UTF-8 keys). A key is 1..=`RECORD_KEY_BYTES_MAX` (512) bytes and a value at
///   most `RECORD_VALUE_BYTES_MAX` (`EVENT_BYTES_MAX`), otherwise
///   [`Error::BadRecordKey`](crate::Error::BadRecordKey) /
///   [`Error::RecordTooLarge`](crate::Error::RecordTooLarge) and nothing is written. Both writes
///   are durable when they return (fsynced, in either durability mode). A stopped store refuses
///   them with [`Error::Stopped`](crate::Error::Stopped); a `put_record` that would leave less
///   than the disk reserve free is [`Error::StorageFull`](crate::Error::StorageFull) and writes
///   nothing (a delete is not refused: the reserve is there for such small writes); a failed
///   fsync stops the store. Records are not events: they are not chained, take no offset, and
///   `verify` does not read them.
/// - **Record writes may be atomic over many keys**: `records_apply(ops)` makes every put and
///   delete of `ops`, or none (after a crash too), and only if every `Expect` in it holds (else
///   [`Error::RecordConflict`](crate::Error::RecordConflict)). Its limits
///   (`RECORD_BATCH_OPS_MAX`, `RECORD_BATCH_BYTES_MAX`, and each key's and value's) are checked
///   before anything is written ([`Error::RecordBatchTooLarge`](crate::Error::RecordBatchTooLarge)).
///   It is durable, refused when stopped or short of space, as `put_record` is.
/// - **Record reads are bounded by the caller**: `records_range` answers one page of a prefix
///   (after a key, either way, at most `limit`); `records(prefix)` reads them all, for callers
///   that know the prefix holds few.
/// - **Failure is fail-stop**: once `failure` is `Some`, no append, blob or record write is
///   acknowledged again; only a new store (a restart) recovers.
///
/// Everything else (what an event means, which events a run may hold after its first) is the
/// engine's business: the store knows nothing of what runs mean.
#[async_trait]
pub trait EventLog: Send + Sync + std::fmt::Debug + 'static {
    /// The settings it was opened with.
    fn options(&self) -> &Options;

    /// The data directory, for implementations that have one.
    fn dir(&self) -> Option<&Path>;

    /// Nodes and the sessions they own, for a store several processes share.
    fn membership(&self) -> Option<&dyn crate::Membership> {
        None
    }

    /// The database and schema, for a store on PostgreSQL.
    fn postgres(&self) -> Option<&crate::Target> {
        None
    }

    /// Appends `events` to `run_id` if the run's next seq is `expected_seq` (0 for a new run).
    /// Returns the stored envelopes once they are durable.
    async fn append(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>>;

    /// [`EventLog::append`] with the same rules and checks, but it returns once the events are
    /// written in the log's order, before they are durable: nothing written this way may be
    /// acknowledged to anyone until [`EventLog::wait_durable`] covers its offsets. A crash may
    /// lose such appends (whole ones, the newest), never an acknowledged one. A run's actor uses
    /// it for the steps between two acknowledgements, so they share one barrier.
    async fn append_written(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.append(run_id, expected_seq, events).await
    }

    /// Returns once every event below `next_offset` is as durable as an acknowledged append
    /// (at once for a log whose appends are acknowledged when written), or the store stopped.
    async fn wait_durable(&self, next_offset: u64) -> Result<()> {
        let _ = next_offset;
        match self.failure() {
            Some(why) => Err(crate::Error::Stopped(why)),
            None => Ok(()),
        }
    }

    /// Asks for a barrier soon, without waiting for it: what was only written becomes durable
    /// (and visible to followers) even if no one waits for it. A log without barriers does
    /// nothing.
    fn request_barrier(&self) {}

    /// Durability barriers (flush + fsync) passed since the store opened: what a benchmark
    /// divides by the work done. A log with no barriers says 0.
    fn barriers(&self) -> u64 {
        0
    }

    /// What the log's own writer measured: each durability barrier and each batch it wrote at
    /// once. `None` for a log without a writer of its own.
    fn timings(&self) -> Option<&crate::LogTimings> {
        None
    }

    /// How long the newest commits held a lock every writer of the store waits for, in µs,
    /// oldest first (PostgreSQL's log head); empty for a store without one.
    fn lock_hold_us(&self) -> Vec<u32> {
        Vec::new()
    }

    /// Bytes the store takes in its database (tables, indexes and their overflow storage), for a
    /// benchmark; `None` for a store that does not know (sled's directory is measured on disk).
    fn disk_bytes(&self) -> Result<Option<u64>> {
        Ok(None)
    }

    /// [`EventLog::append`] for callers outside an async runtime.
    fn append_blocking(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>>;

    /// A run's newest event, or `None` for a run with no events.
    fn run_head(&self, run_id: RunId) -> Result<Option<RunHead>>;

    /// [`EventLog::run_head`] that does not block the caller's runtime (a store over the network
    /// waits for its answer without holding a worker thread).
    async fn run_head_async(&self, run_id: RunId) -> Result<Option<RunHead>> {
        self.run_head(run_id)
    }

    /// Every run head, in run-id order.
    fn runs(&self) -> Box<dyn Iterator<Item = Result<RunHead>> + Send + '_>;

    /// The runs of a session, oldest first.
    fn session_runs(&self, session: &SessionId) -> Result<Vec<RunId>>;

    /// The event at a global offset; `None` past the end of the log.
    fn get(&self, offset: u64) -> Result<Option<Envelope>>;

    /// Events with offsets in `from..to`, in order (empty when `to <= from`).
    fn read_range(&self, from: u64, to: u64) -> Events<'_>;

    /// [`EventLog::read_range`] with each event shared: a log that keeps its newest events in
    /// memory hands them out without copying them (a follower reads every event right after it
    /// is written).
    fn read_range_shared(&self, from: u64, to: u64) -> SharedEvents<'_> {
        shared(self.read_range(from, to))
    }

    /// The events `from..to` (at most `to - from`, fewer at the end of the log), each shared,
    /// without blocking the caller's runtime: what a follower reads a chunk with.
    async fn read_range_async(&self, from: u64, to: u64) -> Result<Vec<Arc<Envelope>>> {
        self.read_range_shared(from, to).collect()
    }

    /// [`EventLog::read_range`] of only the events `keep` takes (and any error): a reader that
    /// wants a few kinds out of every event need not have the others cloned or decoded for it.
    fn read_range_where(&self, from: u64, to: u64, keep: fn(&Event) -> bool) -> Events<'_> {
        only(self.read_range(from, to), keep)
    }

    /// A run's events with seq in `from_seq..=to_seq`, in order (empty when `to_seq < from_seq`).
    fn read_run(&self, run_id: RunId, from_seq: u64, to_seq: u64) -> Events<'_>;

    /// [`EventLog::read_run`], all of it, without blocking the caller's runtime.
    async fn read_run_async(
        &self,
        run_id: RunId,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<Envelope>> {
        self.read_run(run_id, from_seq, to_seq).collect()
    }

    /// One past the newest durable offset: what followers may see.
    fn durable_next_offset(&self) -> u64;

    /// Watches [`EventLog::durable_next_offset`].
    fn watch_head(&self) -> watch::Receiver<u64>;

    /// The seq of the run's newest durable event, or `None` if none is durable yet.
    fn durable_seq(&self, run_id: RunId) -> Result<Option<u64>>;

    /// Caches `state` as the snapshot of `state.run_id` at `state.last_seq` (a state of no run
    /// is not cached).
    fn put_snapshot(&self, state: &RunState) -> Result<()>;

    /// The newest intact snapshot of `run_id` at or before `seq`.
    fn latest_snapshot(&self, run_id: RunId, seq: u64) -> Result<Option<RunState>>;

    /// Deletes every snapshot.
    fn clear_snapshots(&self) -> Result<()>;

    /// Stores a payload under its content hash, durably before this returns, so an event
    /// appended afterwards can reference it.
    fn put_blob(&self, bytes: &[u8]) -> Result<BlobRef>;

    fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>>;

    /// Stores `value` under `key`, replacing what was there; durable when it returns.
    fn put_record(&self, key: &str, value: &[u8]) -> Result<()>;

    /// Stores `value` under `key` when no record is there: `None` when it stored it (durable
    /// when this returns), else the value already there, untouched. Atomic: of callers racing
    /// for one key, exactly one stores.
    fn put_record_if_absent(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>>;

    /// The value stored under `key`.
    fn record(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// Every record whose key starts with `prefix`, in key order.
    fn records(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>>;

    /// Removes the record under `key` (nothing when absent); durable when it returns.
    fn delete_record(&self, key: &str) -> Result<()>;

    /// Applies every put and delete of `ops` if every expectation in it holds, atomically and
    /// durably (see the rules above); nothing is written when it fails.
    fn records_apply(&self, ops: &[RecordOp]) -> Result<()>;

    /// One page of records (see [`RecordRange`]).
    fn records_range(&self, range: &RecordRange) -> Result<Vec<(String, Vec<u8>)>>;

    /// Applies `ops` to the index and moves its watermark from `from` to `to`, atomically (see
    /// [`crate::index`]): all of it or, after a crash, none. Made durable by the log's next
    /// barrier. Optimistic, as appends are: when the watermark is not at `from`
    /// ([`Error::IndexConflict`](crate::Error::IndexConflict)), a bad key or value
    /// ([`Error::BadRecordKey`](crate::Error::BadRecordKey),
    /// [`Error::RecordTooLarge`](crate::Error::RecordTooLarge)) or a stopped store, nothing is
    /// written.
    fn index_apply(&self, ops: &[IndexOp], from: u64, to: u64) -> Result<()>;

    /// The offset the index has taken the log in up to (exclusive); 0 for a store whose index
    /// was never written.
    fn index_watermark(&self) -> Result<u64>;

    /// The value of one index key.
    fn index_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// A page of index entries (see [`IndexRange`]).
    fn index_range(&self, range: &IndexRange) -> Result<Vec<IndexEntry>>;

    /// Whether appends can be taken: failed, short of space, or fine.
    fn health(&self) -> StorageHealth;

    /// Why the store stopped accepting writes (fail-stop), if it did.
    fn failure(&self) -> Option<String>;

    /// Changes to `Some(reason)` once, when the store stops accepting writes.
    fn watch_failure(&self) -> watch::Receiver<Option<String>>;

    /// Stops the store for good, as a failed fsync does (fail-stop): every later write is
    /// refused with [`Error::Stopped`](crate::Error::Stopped) naming `why`. A fault drill, so
    /// the conformance suite can check what a stopped store does in every implementation.
    #[doc(hidden)]
    fn fail_stop(&self, why: &str);

    /// Makes everything acknowledged so far durable now (at shutdown).
    fn flush(&self) -> Result<()>;

    /// Checks every record: dense offsets, decodable records, intact hashes, unbroken per-run
    /// chains, and heads that match the log. Names the first bad offset, and reports the heads
    /// it saw (a chain cannot show that its newest events were cut off; a remembered head can).
    fn verify(&self) -> Result<VerifyReport>;

    /// [`EventLog::verify`] restricted to one run's chain (offsets are still checked for density).
    fn verify_run(&self, run_id: RunId) -> Result<VerifyReport>;
}

/// What `/healthz` reports about the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageHealth {
    Ok,
    /// Less is free than the reserve plus what one event of the largest size needs (`needed`):
    /// such an append would be refused. Smaller appends may still fit; health says full as soon
    /// as any append could be refused, so that it never calls a refused write fine.
    Full {
        available: u64,
        reserve: u64,
        needed: u64,
    },
    /// Fail-stop after a failed durability barrier; only a restart recovers.
    Failed(String),
}

/// The newest event of a run.
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
