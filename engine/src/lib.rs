//! Chronicle's engine: the run actors and the supervisor state machine over the traits a domain
//! supplies — [`agents::Agent`], [`tools::Tool`], [`Planner`] and [`llm::LlmProvider`] — with HITL
//! policies, the command interpreter, the tool host, crash recovery and the subscription bus.
//! The event store is [`store`].
//!
//! Architecture Invariants: nothing here knows about HTTP servers (clients for models are
//! fine), and nothing here knows a domain: no agent names, no language of its own beyond
//! [`texts::English`], no dataset. The engine ships with an empty agent registry.

mod actor;
pub mod agents;
mod bus;
pub mod commands;
mod error;
pub mod hitl;
pub mod llm;
mod planner;
mod runtime;
pub mod texts;
pub mod todo;
pub mod tools;

pub use actor::RestoreTarget;
pub use bus::Bus;
pub use error::{Error, Result};
pub use planner::{AgentResult, EvaluationOutcome, Intent, NoPlanner, Plan, PlanContext, Planner};
pub use runtime::{Engine, Settings, StartRun, Started, child_run_id};
pub use store::Store;

/// The event store is its own crate; the alias keeps `chronicle_engine::store::…` and
/// `crate::store::…` paths working.
pub use chronicle_store as store;
