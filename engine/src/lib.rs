//! Chronicle's engine: the run actors and the supervisor state machine over the traits a domain
//! supplies — [`agents::Agent`], [`tools::Tool`], [`Planner`] and [`llm::LlmProvider`] — with HITL
//! policies, the command interpreter, the tool host, crash recovery and the subscription bus.
//! The event store is [`store`].
//!
//! Architecture Invariants: nothing here knows about HTTP servers (clients for models are
//! fine), and nothing here knows a domain: no agent names, no language of its own beyond
//! [`texts::English`], no dataset. The engine ships with an empty agent registry.
//!
//! Inside, dependencies point one way: `mailbox` (message types) ← `shared` (the store, the
//! settings, the actors' mailboxes) ← `runs` (a run's life outside its actor) ← `actor` ←
//! `engine` (the public handle).

mod actor;
pub mod agents;
mod bus;
pub mod chunks;
mod engine;
mod error;
pub mod hitl;
pub mod llm;
mod mailbox;
mod memory;
mod planner;
mod principal;
mod runs;
pub mod said;
mod sessions;
mod settings;
mod shared;
pub mod texts;
pub mod todo;
pub mod tools;
mod turn;

pub use actor::commands;
pub use bus::{Bus, Live};
pub use chronicle_projections::RunState;
pub use chunks::Chunk;
pub use engine::Engine;
pub use error::{Error, PlanError, Result};
pub use mailbox::RestoreTarget;
pub use planner::{
    AgentResult, EvaluationOutcome, Intent, NoPlanner, Plan, PlanContext, Planner, Remembered,
};
pub use principal::Principal;
pub use runs::{StartRun, Started, check_session_id, child_run_id, is_settled};
pub use sessions::SessionReader;
pub use settings::{SUBAGENT_DEPTH_MAX_DEFAULT, Settings};
pub use store::Store;
pub use turn::{Turn, TurnInput, TurnOutcome};

/// The event store is its own crate; the alias keeps `chronicle_engine::store::…` and
/// `crate::store::…` paths working.
pub use chronicle_store as store;
