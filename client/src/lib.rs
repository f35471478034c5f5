//! One client for Chronicle's API: typed methods for the routes (start a run, status, state at a
//! seq, log pages, checkpoints, restore, cancel, commands, decisions, approvals, the inbox, the
//! audit export, chat, resume, runs, health), bearer tokens, errors as a typed [`Error`], and one
//! SSE reader ([`EventStream`]) that resumes a dropped connection where it stopped.
//!
//! Architecture Invariant: depends on `schemas` and `wire` only (no engine, no api); holds no
//! business rules. Every shape it sends or reads is a `chronicle_wire` type.

mod client;
mod error;
mod sse;

pub use client::{ChatReply, Client, Export};
pub use error::{Error, Result};
pub use sse::{EventStream, EventsFrom, StreamEvent, StreamItem};
