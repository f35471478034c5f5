//! Pure folds from events to state: the supervisor and planning state, the checkpoint tree and the
//! approvals, combined in [`RunState`]; restore semantics; snapshot encoding; the audit rows of
//! approval decisions ([`Audit`]).
//!
//! Architecture Invariant: no I/O, no clock, no randomness, no tokio and no sled. The same
//! `apply` runs live in the engine and in every replay, so live state == replay state.

mod approvals;
mod audit;
mod branches;
mod checkpoints;
pub mod diff;
mod facts;
#[doc(hidden)]
pub mod fixtures;
mod run;
pub mod snapshot;
mod supervisor;
#[cfg(test)]
mod tests;
pub mod trace;

pub use approvals::Approvals;
pub use audit::{Audit, EXPIRY_DECIDED_BY, audit_rows};
pub use branches::{Branches, restore_of, restores_of};
pub use checkpoints::CheckpointList;
pub use facts::{PendingApproval, RunFacts, SettledApproval};
pub use run::{EventSource, NoSnapshots, RunState, VecSource, replay, replay_from_zero};
pub use snapshot::SNAPSHOT_INTERVAL_EVENTS;
