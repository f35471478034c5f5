//! Chronicle's engine. So far: the sled event store ([`store`]). The run actor, the supervisor
//! state machine, agents, HITL, commands and recovery arrive with the engine issue.
//!
//! Architecture Invariant: nothing here knows about HTTP.

pub mod store;

pub use store::Store;
