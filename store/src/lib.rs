//! Chronicle's event store: one append-only log of events shared by all runs, behind the
//! [`EventLog`] trait (its rules are in its doc comment), with three implementations —
//! [`SledLog`] on disk (the embedded default), [`PgLog`] on a PostgreSQL that several processes
//! share, and [`MemoryLog`] in memory — and one conformance suite that every implementation
//! passes. [`Store`] is the cheap-to-clone handle everyone holds; what is written once over the
//! trait lives there (following the log, replay from the store, [`LiveRun`]).
//!
//! Architecture Invariant: the store knows nothing of what runs mean. It checks only what keeps
//! the log a log (offsets, seqs, the chain, a `RunStarted` first, size limits); every other rule
//! is the engine's.

mod append;
mod copy;
mod error;
pub mod index;
mod live;
mod location;
mod log;
mod membership;
mod memory_log;
mod options;
mod pg_log;
mod records;
mod sled_log;
mod store;
mod timings;
mod verify;

#[cfg(any(test, feature = "conformance"))]
#[doc(hidden)]
pub mod conformance;

pub use append::SESSION_ID_BYTES_MAX;
pub use copy::{Copied, copy};
pub use error::{Error, Result};
pub use index::{INDEX_KEY_BYTES_MAX, IndexEntry, IndexOp, IndexRange};
pub use live::LiveRun;
pub use location::Location;
pub use log::{EventLog, Events, RunHead, SharedEvents, StorageHealth};
pub use membership::{Claim, Lease, Membership, Node, Release};
pub use memory_log::MemoryLog;
pub use options::{Durability, Options};
pub use pg_log::{Create, DEFAULT_SCHEMA, Migrated, PG_SCHEMA_VERSION, PgLog, Target};
pub use records::{
    RECORD_BATCH_BYTES_MAX, RECORD_BATCH_OPS_MAX, RECORD_KEY_BYTES_MAX, RECORD_VALUE_BYTES_MAX,
    RecordOp, RecordRange,
};
pub use sled_log::{
    SCHEMA_VERSION, SLED_VALUE_BYTES_MAX, SledLog, plain_events_value, stored_record_bytes,
};
pub use store::{FOLLOW_CHUNK_EVENTS, ReadCounts, RunSource, Store, Tail};
pub use timings::{
    EVENTS_BUCKETS, Histogram, HistogramSnapshot, LogTimings, SECONDS_BUCKETS, WriteTimings,
};
pub use verify::{Problem, VerifyReport};
