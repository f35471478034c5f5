//! Chronicle's JSON on the wire: one typed home for every shape more than one surface uses (the
//! API, the WebSocket, the CLI, the client, the tests). Each type reproduces the JSON the API has
//! always sent, and both encodes and decodes it.
//!
//! - [`names`]: the one table from events to SSE names and the stream's `type`/`subtype`, and
//!   the `data` object ([`EventData`]) every stream sends;
//! - requests: [`RunRequest`], [`ChatRequest`], [`ResumeRequest`], [`CommandRequest`],
//!   [`CancelRequest`], [`RestoreRequest`], [`DecisionRequest`] (an edit cannot come without its args), and the
//!   query strings of the read routes;
//! - views: approvals, the checkpoint list, the TODO list, run status, runs, sessions, chat
//!   turns, health, and the error body `{"error": {"code", "message"}}`;
//! - [`CommandOutcome`]: every reply a slash command gives;
//! - [`audit`]: the export's JSON Lines and CSV encodings of `AuditRow`, both ways;
//! - [`langgraph`]: the LangGraph Agent Server shapes (info, assistants, threads, thread states,
//!   runs, messages).
//!
//! Architecture Invariant: depends on `schemas` only (plus serde); holds no business rules. A
//! type here says what the JSON looks like, never what the engine decides.

pub mod audit;
mod commands;
mod error;
pub mod langgraph;
pub mod names;
#[cfg(feature = "openapi")]
pub mod openapi;
mod requests;
pub mod summary;
pub mod tag;
mod views;

pub use commands::{
    Added, Approved, ApprovedAll, CommandOutcome, Rejected, Restored, Skipped, TodosReply, Updated,
};
pub use error::{ErrorBody, ErrorDetail};
pub use names::{ChunkData, EventData};
pub use requests::{
    CancelRequest, ChatRequest, CommandRequest, DecisionRequest, DeleteSessionRequest, EventsQuery,
    ExportQuery, ForgetRequest, InboxQuery, LogQuery, MemoriesQuery, Order, PlanStepRequest,
    RestoreRequest, ResumeRequest, RunRequest, RunsQuery, SessionsQuery, StateQuery,
    StreamTicketRequest, Verdict,
};
pub use views::{
    ApprovalView, ChatCommand, ChatTurn, ChatWaiting, CheckpointEntry, CheckpointList, DamagedRun,
    DecisionAccepted, Health, HealthStatus, Inbox, InboxItem, MEMORIES_PAGE_MAX, RUNS_PAGE_MAX,
    RunCancelled, RunList, RunSummary, SESSION_TITLE_CHARS_MAX, SESSIONS_PAGE_DEFAULT,
    SESSIONS_PAGE_MAX, SessionCheckpoints, SessionDeletedView, SessionDetail, SessionList,
    SessionStatus, SessionSummary, SessionTurn, SessionView, Started, Status, StorageState,
    StreamTicket, SubRun, TodoIds, TodoList, TodoSummary, TurnCheckpoints, UserMemories,
    answer_text, clock, date_time, one_line, session_title,
};
