//! Chronicle's engine: the event store ([`store`]), the run actors and the supervisor state
//! machine, agents ([`agents`]), intent/plan/evaluation with an optional LLM ([`llm`]), HITL
//! policies, the command interpreter, crash recovery and the subscription bus.
//!
//! Architecture Invariant: nothing here knows about HTTP servers (clients for LLMs and `http`
//! agents are fine).

mod actor;
pub mod agents;
mod bus;
pub mod commands;
mod error;
pub mod hitl;
pub mod llm;
mod runtime;
pub mod todo;
pub mod tools;

pub use actor::RestoreTarget;
pub use bus::Bus;
pub use error::{Error, Result};
pub use runtime::{Engine, Settings, StartRun, Started, child_run_id};
pub use store::Store;

/// The event store is its own crate; the alias keeps `chronicle_engine::store::…` and
/// `crate::store::…` paths working.
pub use chronicle_store as store;
