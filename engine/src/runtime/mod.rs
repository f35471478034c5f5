//! What drives runs: each run's actor and its mailbox, the state the actors share, a run's life
//! outside its actor, the public [`engine::Engine`] handle, chat turns, sessions, the bus that
//! feeds subscribers, the long-term memory index and the TODO rules.
//!
//! Dependencies point one way: `mailbox` (what an actor receives) ← `shared` (the store, the
//! settings, the actors' mailboxes, with `cluster`, the node's side of session ownership, which
//! it asks before an actor starts) ← `runs` ← `actor` ← `engine` ← `turn`. The runtime uses
//! the plug-in side (`plugin/`); never the other way round.

pub(crate) mod actor;
pub(crate) mod bus;
pub(crate) mod cluster;
pub(crate) mod engine;
pub mod index;
pub(crate) mod mailbox;
pub(crate) mod memory;
pub(crate) mod runs;
pub(crate) mod sessions;
pub(crate) mod shared;
pub mod todo;
pub(crate) mod turn;
