//! Pure folds from events to state (DESIGN §4): the supervisor and planning state, the checkpoint
//! tree and the approvals, combined in [`RunState`]; restore semantics; snapshot encoding.
//!
//! Architecture Invariant: no I/O, no clock, no randomness, no tokio and no sled. The same
//! `apply` runs live in the engine and in every replay, so live state == replay state.

mod approvals;
mod checkpoints;
#[doc(hidden)]
pub mod fixtures;
mod run;
pub mod snapshot;
#[cfg(test)]
mod tests;
mod supervisor;

pub use approvals::Approvals;
pub use checkpoints::CheckpointList;
pub use run::{replay, replay_from_zero, EventSource, NoSnapshots, RunState, VecSource};
pub use snapshot::SNAPSHOT_INTERVAL_EVENTS;
