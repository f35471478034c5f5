//! Chronicle's engine: the sled event store ([`store`]), agents ([`agents`]), intent/plan/
//! evaluation with an optional LLM ([`llm`]), and (next) the run actors.
//!
//! Architecture Invariant: nothing here knows about HTTP servers (clients for LLMs and `http`
//! agents are fine).

pub mod agents;
pub mod llm;
pub mod store;

pub use store::Store;
