//! The engine's errors: one variant per failure a caller may handle, each naming the offending
//! values. Callers match on variants, never on the text.

use std::time::Duration;

use chronicle_schemas::{
    ApprovalId, ApprovalStatus, CheckpointId, Decision, RunId, RunStatus, TodoId, TodoStatus,
};

use crate::plugin::agents::UnknownAgent;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Not found.
    #[error("run {0} not found")]
    RunNotFound(RunId),
    #[error("approval {0} not found")]
    ApprovalNotFound(ApprovalId),
    #[error("todo {0} not found")]
    TodoNotFound(TodoId),
    #[error("checkpoint {0} not found")]
    CheckpointNotFound(CheckpointId),
    #[error("session {0} not found")]
    SessionNotFound(String),
    #[error("memory {0} not found")]
    MemoryNotFound(String),

    // Refused requests: the caller can fix them.
    #[error("query must not be empty")]
    EmptyQuery,
    #[error(
        "query of {chars} characters exceeds {}",
        chronicle_schemas::QUERY_CHARS_MAX
    )]
    QueryTooLong { chars: usize },
    #[error(
        "session id must be 1..={} characters without NUL, got {chars} characters{}",
        chronicle_schemas::SESSION_ID_CHARS_MAX,
        if *contains_nul { " with a NUL" } else { "" }
    )]
    BadSessionId { chars: usize, contains_nul: bool },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    UnknownAgent(#[from] UnknownAgent),
    #[error(
        "approval_timeout_ms must be {}..={} (1 second to 30 days), got {ms}",
        chronicle_schemas::APPROVAL_TIMEOUT_MS_MIN,
        chronicle_schemas::APPROVAL_TIMEOUT_MS_MAX
    )]
    ApprovalTimeout { ms: u64 },
    #[error("decision edit needs edited_args (a JSON object)")]
    EditWithoutArgs,
    #[error("edited_args only go with decision edit, not {}", .0.as_str())]
    ArgsWithoutEdit(Decision),
    #[error("user_id {given:?} is not yours: only an admin may start runs for another user")]
    NotYourUser { given: String },
    /// A list of another principal's items, asked for by an ordinary principal.
    #[error("owner {given:?} is not you: only an admin may list another principal's items")]
    NotYourOwner { given: String },
    #[error("seq {seq} is beyond the run's last seq {last}")]
    SeqBeyondEnd { seq: u64, last: u64 },
    #[error(
        "invalid status {0:?}; one of pending, in_progress, completed, failed, skipped, blocked, waiting_approval"
    )]
    BadStatus(String),
    /// A `cursor` that no page of this listing gave out.
    #[error("invalid cursor {0:?}: pass the `next_cursor` of the previous page unchanged")]
    BadCursor(String),
    #[error("limit must be 1..={max}, got {limit}")]
    PageLimit { limit: usize, max: usize },
    /// Values set on a run must set (or remove) at least one key.
    #[error("values must name at least one key")]
    NoValues,
    /// The values a person sets on a run may hold at most `max` bytes of JSON in all.
    #[error(
        "the run's values would hold {bytes} bytes of JSON, more than {max}: remove keys (set them to null) or set smaller values"
    )]
    ValuesTooLarge { bytes: usize, max: usize },
    /// A key of the values a person sets that the workflow's own state already has.
    #[error(
        "{0:?} is a field of the run's own state: it changes through commands, not by setting values"
    )]
    OwnStateKey(String),
    /// A slash command that does not parse or cannot be carried out; it is recorded as a
    /// refused `CommandReceived` all the same. `help` is the deployment's command help.
    #[error("{reason}")]
    Command { reason: String, help: String },
    /// A slash command the run's state refused ([`Error::is_conflict`]: no approval is pending,
    /// it is already decided ...): recorded as a refused `CommandReceived` like
    /// [`Error::Command`], and a conflict like the same refusal on any other route.
    #[error("{reason}")]
    CommandConflict { reason: String, help: String },

    // Conflicts with the run's state.
    #[error("approval {approval_id} is already {}", status.as_str())]
    AlreadyDecided {
        approval_id: ApprovalId,
        status: ApprovalStatus,
    },
    #[error("illegal transition {todo}: {from} -> {to}")]
    IllegalTransition {
        todo: TodoId,
        from: TodoStatus,
        to: TodoStatus,
    },
    #[error("no approval is pending")]
    NothingPending,
    #[error("no pending approval for {0}")]
    NoPendingFor(String),
    #[error("{} approvals are pending ({}); name one, or use all", .0.len(), .0.join(", "))]
    SeveralPending(Vec<String>),
    #[error("run {run} is already {}", status.as_str())]
    RunFinished { run: RunId, status: RunStatus },
    #[error("the run is past execution; restore a checkpoint to change its plan")]
    PastExecution,
    #[error("the run has no plan yet")]
    NoPlanYet,
    #[error("the run already has {0} TODOs, the max_todos limit")]
    TodoLimit(usize),
    /// Values are set on a settled run only: one that waits for a human or has ended.
    #[error("the run is busy: values can be set once it waits for approval or has ended")]
    RunBusy(RunId),
    #[error("the run changed concurrently; try again")]
    Concurrent,
    /// A new turn on a session whose latest run still works, under [`crate::Multitask::Reject`].
    #[error("session {session} is busy with run {run}; multitask strategy is reject")]
    SessionBusy { session: String, run: RunId },

    // Waiting.
    #[error("timed out after {after:?} waiting for run {run}")]
    Timeout { run: RunId, after: Duration },

    // The engine or its store cannot serve.
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error("an Idempotency-Key is 1 to 255 bytes of visible ASCII, got {bytes} bytes")]
    BadIdempotencyKey { bytes: usize },
    /// The key was sent before with another request (another session or query).
    #[error("this Idempotency-Key was used for another request; use a new key for a new request")]
    IdempotencyKeyReused,
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// The run's session is driven by another node of the cluster: a change to it is that
    /// node's to make (a surface forwards the request to `url`).
    #[error("session {session} is driven by node {node}")]
    Elsewhere {
        session: String,
        node: String,
        url: String,
    },
    #[error("the run did not settle after {0} steps")]
    Unsettled(usize),
    #[error("a recorded value does not decode: {0}")]
    Decode(String),
    #[error("the model client cannot start: {0}")]
    Llm(#[from] crate::plugin::llm::LlmError),
}

impl Error {
    /// A conflict with the run's state: the request was well formed, and the run (or an
    /// approval of it) is not in a state that allows it. (HTTP 409 on every route.)
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Error::AlreadyDecided { .. }
                | Error::IllegalTransition { .. }
                | Error::NothingPending
                | Error::NoPendingFor(_)
                | Error::SeveralPending(_)
                | Error::RunFinished { .. }
                | Error::PastExecution
                | Error::NoPlanYet
                | Error::TodoLimit(_)
                | Error::RunBusy(_)
                // The key is the workflow's: the request conflicts with who owns that part of
                // the state (commands change it), as a decision on a decided approval does.
                | Error::OwnStateKey(_)
                | Error::Concurrent
                | Error::SessionBusy { .. }
                | Error::CommandConflict { .. }
                // The key names an earlier request: this one conflicts with it.
                | Error::IdempotencyKeyReused
        )
    }

    /// The store refused a write for lack of disk space (nothing was written; try again later).
    /// A write the store refused for a reason that passes — a full disk, a database out of
    /// reach — and that wrote nothing: the same write may work later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Store(
                crate::store::Error::StorageFull { .. } | crate::store::Error::Unavailable(_)
            )
        )
    }
}

/// What is wrong with a plan that came with a run's request; the run is refused and nothing is
/// written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("plan step #{index} has no `agent_name` (the agent that runs it)")]
    NoAgent { index: usize },
    #[error("plan step #{index}: unknown agent {name:?} (`agent_name`); known: {}", known.join(", "))]
    UnknownAgent {
        index: usize,
        name: String,
        known: Vec<String>,
    },
    #[error(
        "plan step #{index} ({agent}) depends on {dependency:?}, which no step of the plan runs"
    )]
    DependencyOutside {
        index: usize,
        agent: String,
        dependency: String,
    },
    /// Agent mode names an agent the server does not have.
    #[error("unknown agent {name:?} (`agent`); known: {}", known.join(", "))]
    UnknownDriver { name: String, known: Vec<String> },
    /// Agent mode runs its agent alone: a plan may come with it only as that agent's one step.
    #[error("`agent` {agent:?} drives the run alone: a `plan` may only be its one step")]
    PlanBesideAgent { agent: String },
}
