//! Chronicle's shared vocabulary: the event envelope and every `Event` variant, the state types
//! the projections fold into, typed ids, the msgpack record encoding and the blake3 chain hash.
//!
//! Architecture Invariant: this crate does no I/O and never reads a clock or a random source;
//! time and ids arrive inside events (see `clippy.toml`).

mod approval;
mod audit;
mod checkpoint;
mod config;
pub mod contract;
mod envelope;
mod event;
mod hash;
mod ids;
mod lazy;
mod memory;
#[cfg(feature = "openapi")]
mod openapi;
mod state;
mod time;

#[doc(hidden)]
pub mod samples;

pub use approval::{Approval, ApprovalStatus, Decision, Subject};
pub use audit::{AuditDecision, AuditRow, SubjectKind};
pub use checkpoint::Checkpoint;
pub use config::{
    APPROVAL_TIMEOUT_MS_MAX, APPROVAL_TIMEOUT_MS_MIN, CONTEXT_BYTES_MAX, ContextBudget,
    ExpiryAction, Follows, HitlMode, Limits, OnReject, RunConfig, Strategy,
};
pub use envelope::{
    EVENT_BYTES_MAX, Envelope, Error, ExternalBody, RECORD_FORMAT_EXTERNAL, RECORD_FORMAT_V1,
    RECORD_HEADER_BYTES, RecordHeader, Result, decode_record, decode_record_body, encode_record,
    external_stub, parse_external_stub, peek_record_header,
};
pub use event::{
    Actor, BlobRef, Event, LoadedFile, ModelTurn, OWNER_OF_OLD_RUNS, ParentLink, Payload, Phase,
    PlanStep, QUERY_CHARS_MAX, Source, TokenUsage,
};
pub use hash::{Hash, chain_hash};
pub use ids::{
    ApprovalId, CheckpointId, RunId, SESSION_ID_CHARS_MAX, SessionId, TodoId, ToolCallId,
};
pub use lazy::LazyValue;
pub use memory::{Memory, MemoryKind, PriorTurn};
pub use state::{
    AgentStart, AnalysisTeamState, DocumentTeamState, Evaluation, ExecutionStepState,
    ModelTurnState, PLANNED_BY, PlanEdit, PlanningState, RunStatus, SearchTeamState,
    SupervisorState, SupervisorTodo, TeamState, TodoPriority, TodoStatus, ToolCallState,
    ToolCallStatus,
};
pub use time::Timestamp;
