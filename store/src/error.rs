//! The store's errors: one variant per failure a caller may handle, each naming the offending
//! values.

use chronicle_schemas::{Hash, RunId};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An index batch written from another point than the index's watermark: another indexer
    /// moved it first, and nothing was written.
    #[error("index conflict: the batch starts at offset {expected}, but the index is at {actual}")]
    IndexConflict { expected: u64, actual: u64 },
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
    #[error("an append to run {run_id} needs at least one event")]
    EmptyAppend { run_id: RunId },
    #[error("the first event of run {run_id} must be RunStarted, not {kind}")]
    FirstEventNotRunStarted { run_id: RunId, kind: &'static str },
    #[error(
        "RunStarted may only be a run's first event, but it would be seq {seq} of run {run_id}"
    )]
    RunStartedNotFirst { run_id: RunId, seq: u64 },
    /// Session ids go into index keys: bounded, and without the NUL that ends them there.
    #[error(
        "session id must be 1..={max} bytes without NUL, got {bytes} bytes{}",
        if *contains_nul { " with a NUL" } else { "" }
    )]
    BadSessionId {
        bytes: usize,
        max: usize,
        contains_nul: bool,
    },
    /// Record keys go into index keys: bounded, and never empty.
    #[error("a record key must be 1..={max} bytes, got {bytes}")]
    BadRecordKey { bytes: usize, max: usize },
    #[error("a record value may be at most {max} bytes, got {bytes}")]
    RecordTooLarge { bytes: usize, max: usize },
    #[error(
        "a write of records may hold at most {max_ops} operations and {max_bytes} bytes, got {ops} and {bytes}"
    )]
    RecordBatchTooLarge {
        ops: usize,
        bytes: usize,
        max_ops: usize,
        max_bytes: usize,
    },
    /// A write of records that expected a value under `key` found another: nothing was written.
    #[error("conflict on record {key:?}: it no longer holds the value the write expected")]
    RecordConflict { key: String },
    /// What the store holds at `offset` is damaged: it does not decode, or does not hash.
    #[error("corrupt log at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// Reading the record at `offset` failed with an I/O error (a device or file system that is
    /// failing or gone). Nothing says the record is damaged: the same read may work later.
    #[error("reading the record at offset {offset} failed: {source}")]
    ReadFailed { offset: u64, source: std::io::Error },
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
    #[error("store schema version {found} is not {supported}")]
    SchemaVersion { found: u64, supported: u64 },
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
    /// The database cannot take the request now (unreachable, restarting, too busy, or a wait
    /// for a lock ran out): nothing was written, and the same request may work later.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// PostgreSQL refused the request for another reason (its message and SQLSTATE).
    /// A joined node wrote to a session it does not own (any more): another node took it over.
    #[error("fenced: {0}")]
    Fenced(String),
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
    #[error("sled transaction: {0}")]
    Transaction(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("stored value does not decode: {0}")]
    Decode(String),
}

/// A sled transaction whose closure never aborts: a storage error, or (never) an abort.
impl From<sled::transaction::TransactionError<()>> for Error {
    fn from(e: sled::transaction::TransactionError<()>) -> Self {
        match e {
            sled::transaction::TransactionError::Storage(e) => Error::Sled(e),
            sled::transaction::TransactionError::Abort(()) => Error::Transaction("aborted".into()),
        }
    }
}

impl Error {
    /// Whether this is damage to what the store holds (as opposed to an I/O failure, a full
    /// disk, a stopped store or a caller's mistake): reading it again will not help.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. }
                | Error::BlobMissing(_)
                | Error::BlobCorrupt { .. }
                | Error::Decode(_)
                | Error::Unopenable(_)
        )
    }

    /// Whether this passes by itself (the database is out of reach or busy): the same request
    /// may work later, and nothing was written.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

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
    pub fn same_again(&self) -> Error {
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
            Error::Unavailable(why) => Error::Unavailable(why.clone()),
            Error::Postgres(why) => Error::Postgres(why.clone()),
            Error::Fenced(why) => Error::Fenced(why.clone()),
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
