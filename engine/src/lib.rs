//! Chronicle's engine: the run actors and the supervisor state machine over the traits a domain
//! supplies — [`agents::Agent`], [`tools::Tool`], [`Planner`] and [`llm::LlmProvider`] — with HITL
//! policies, the command interpreter, the tool host, crash recovery and the subscription bus.
//! The event store is [`store`].
//!
//! Two folders, one direction:
//!
//! - `plugin/` is what a domain implements or configures: agents, tools (the [`tools::Tool`]
//!   trait and the built-in tools), the model client, the planner and its reading of plain
//!   words, the texts, the HITL policy and the settings that bring them together.
//! - `runtime/` drives runs: `mailbox` (what an actor receives) ← `shared` (the store, the
//!   settings, the actors' mailboxes) ← `runs` (a run's life outside its actor) ← `actor` ←
//!   `engine` (the public handle), with the bus, the sessions, the long-term memory index and the
//!   TODO rules beside them.
//!
//! Beneath both: [`principal`](Principal), the slash-command grammar ([`commands`]) and the
//! errors ([`Error`]).
//!
//! Architecture Invariants: `plugin/` imports nothing from `runtime/` (a test reads the sources to
//! keep it so); what the runtime lends a plug-in goes through a narrow trait the plug-in side
//! declares (an agent's tool calls, a `task` call's child run). Nothing here knows about HTTP
//! servers (clients for models are fine), and nothing here knows a domain: no agent names, no
//! language of its own beyond [`texts::English`], no dataset. The engine ships with an empty
//! agent registry.

pub mod commands;
mod error;
mod plugin;
mod principal;
mod runtime;

#[cfg(test)]
mod layers;

pub use chronicle_projections::RunState;
pub use error::{Error, PlanError, Result};
pub use plugin::planner::{
    AgentResult, EvaluationOutcome, Intent, NoPlanner, Plan, PlanContext, Planner, Remembered,
};
pub use plugin::settings::{ClusterSettings, SUBAGENT_DEPTH_MAX_DEFAULT, Settings};
pub use plugin::{agents, chunks, hitl, llm, said, texts, tools, trace};
pub use principal::Principal;
pub use runtime::bus::{Bus, Live};
pub use runtime::cluster::{CLUSTER_TOKEN_HEADER, chunks_path};
pub use runtime::engine::{CacheStats, Engine};
pub use runtime::index;
pub use runtime::mailbox::RestoreTarget;
pub use runtime::runs::{
    IDEMPOTENCY_KEY_BYTES_MAX, StartRun, Started, check_idempotency_key, check_session_id,
    child_run_id, idempotent_run_id, is_settled,
};
pub use runtime::sessions::SessionReader;
pub use runtime::todo;
pub use runtime::turn::{Multitask, Turn, TurnInput, TurnOutcome};
pub use store::Store;

pub use chunks::Chunk;

/// The event store is its own crate; the alias keeps `chronicle_engine::store::…` and
/// `crate::store::…` paths working.
pub use chronicle_store as store;
