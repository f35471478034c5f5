//! The engine's errors; each names the offending values.

use chronicle_schemas::{ApprovalId, ApprovalStatus, CheckpointId, RunId, TodoId, TodoStatus};

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The store refused a write for lack of disk space (nothing was written; try again later).
    pub fn is_storage_full(&self) -> bool {
        matches!(self, Error::Store(crate::store::Error::StorageFull { .. }))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("run {0} not found")]
    RunNotFound(RunId),
    #[error("approval {0} not found")]
    ApprovalNotFound(ApprovalId),
    #[error("approval {approval_id} is already {}", status.as_str())]
    AlreadyDecided {
        approval_id: ApprovalId,
        status: ApprovalStatus,
    },
    #[error("todo {0} not found")]
    TodoNotFound(TodoId),
    #[error("checkpoint {0} not found")]
    CheckpointNotFound(CheckpointId),
    #[error("illegal transition {todo}: {from} -> {to}")]
    IllegalTransition {
        todo: TodoId,
        from: TodoStatus,
        to: TodoStatus,
    },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("nothing to decide: {0}")]
    NothingPending(String),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error("the engine is shutting down")]
    ShuttingDown,
}
