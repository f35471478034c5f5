//! The one mapping from failures to HTTP: `{"error": {"code", "message"}}` with 400 / 401 / 403 /
//! 404 / 408 / 409 / 413 / 422 / 500 / 503 / 507. Internal errors send a generic message and log the real one;
//! storage failures say what happened (full disk, a store that cannot be read or written now,
//! corrupt log at an offset).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chronicle_engine::Error as EngineError;
use chronicle_engine::store::Error as StoreError;
use chronicle_wire::ErrorBody;
use serde_json::{Value, json};

/// An error response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Extra top-level fields (e.g. the pending approval of a 409 from `/chat`).
    pub extra: Option<Value>,
    /// Sent as `Retry-After` (seconds): when a refusal for a cap is worth retrying.
    pub retry_after_s: Option<u64>,
    /// The node a change belongs to, on a node of a cluster (the request is sent on there).
    pub elsewhere: Option<Box<crate::cluster::Elsewhere>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            extra: None,
            retry_after_s: None,
            elsewhere: None,
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
            message,
        )
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }
    pub fn internal(err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; see the server log",
        )
    }
    pub fn with(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }
    /// A 429 for a principal over a rate (`too_many_writes`): worth retrying after
    /// `retry_after_s`.
    pub fn too_many(code: &'static str, message: impl Into<String>, retry_after_s: u64) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, code, message);
        e.retry_after_s = Some(retry_after_s);
        e
    }
    /// A 503 for a cap that is full (`too_many_connections`, `too_many_streams`): worth retrying
    /// after `retry_after_s`.
    pub fn capped(code: &'static str, message: impl Into<String>, retry_after_s: u64) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
        e.retry_after_s = Some(retry_after_s);
        e
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = ErrorMessage(self.message.clone());
        let mut body = ErrorBody::new(self.code, self.message);
        if let Some(extra) = self.extra {
            body = body.with_extra(extra);
        }
        let mut res = (self.status, Json(body)).into_response();
        if let Some(s) = self.retry_after_s {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res.extensions_mut().insert(message);
        if let Some(elsewhere) = self.elsewhere {
            res.extensions_mut().insert(*elsewhere);
        }
        res
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        use EngineError as E;
        match e {
            E::RunNotFound(_)
            | E::ApprovalNotFound(_)
            | E::TodoNotFound(_)
            | E::CheckpointNotFound(_)
            | E::SessionNotFound(_)
            | E::MemoryNotFound(_) => ApiError::not_found(e.to_string()),
            E::BadCursor(_) | E::PageLimit { .. } | E::BadIdempotencyKey { .. } => {
                ApiError::bad_request(e.to_string())
            }
            E::NotYourOwner { .. } => ApiError::forbidden(e.to_string()),
            E::Command { reason, help } => {
                ApiError::bad_request(reason).with(json!({"help": help}))
            }
            E::CommandConflict { reason, help } => {
                ApiError::conflict(reason).with(json!({"help": help}))
            }
            E::EmptyQuery
            | E::QueryTooLong { .. }
            | E::BadSessionId { .. }
            | E::ApprovalTimeout { .. }
            | E::Plan(_)
            | E::UnknownAgent(_)
            | E::EditWithoutArgs
            | E::ArgsWithoutEdit(_)
            | E::SeqBeyondEnd { .. }
            | E::BadStatus(_)
            | E::NotYourUser { .. }
            | E::NoValues
            | E::ValuesTooLarge { .. } => ApiError::unprocessable(e.to_string()),
            // `EngineError::is_conflict`: the same 409 on every route (a test keeps the two
            // lists equal).
            E::AlreadyDecided { .. }
            | E::IllegalTransition { .. }
            | E::NothingPending
            | E::NoPendingFor(_)
            | E::SeveralPending(_)
            | E::RunFinished { .. }
            | E::PastExecution
            | E::NoPlanYet
            | E::TodoLimit(_)
            | E::RunBusy(_)
            // The key is the workflow's: the request conflicts with who owns that part of the
            // state (commands change it), as a decision on a decided approval does.
            | E::OwnStateKey(_)
            | E::Concurrent
            | E::SessionBusy { .. }
            | E::IdempotencyKeyReused => ApiError::conflict(e.to_string()),
            E::Store(e) => e.into(),
            E::Elsewhere {
                ref session,
                ref node,
                ref url,
            } => {
                let elsewhere = crate::cluster::Elsewhere {
                    session: session.clone(),
                    node: node.clone(),
                    url: url.clone(),
                };
                let mut e = ApiError::capped(
                    "session_elsewhere",
                    format!("{e}, and could not be sent there; try again"),
                    1,
                );
                e.elsewhere = Some(Box::new(elsewhere));
                e
            }
            E::ShuttingDown => ApiError::capped("shutting_down", e.to_string(), 1),
            E::Timeout { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", e.to_string())
            }
            E::Unsettled(_) | E::Decode(_) | E::Llm(_) => ApiError::internal(e),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if let Some((bytes, max)) = e.event_too_large() {
            return ApiError::too_large(format!(
                "the request would record an event of {bytes} bytes; one event may be at most {max} bytes"
            ));
        }
        match e {
            // A caller's mistake reaching the store: the request was wrong, nothing was written.
            StoreError::EmptyAppend { .. }
            | StoreError::FirstEventNotRunStarted { .. }
            | StoreError::RunStartedNotFirst { .. }
            | StoreError::BadSessionId { .. }
            | StoreError::BadRecordKey { .. }
            | StoreError::RecordTooLarge { .. }
            | StoreError::RecordBatchTooLarge { .. } => ApiError::unprocessable(e.to_string()),
            StoreError::Conflict { .. }
            | StoreError::IndexConflict { .. }
            | StoreError::RecordConflict { .. } => ApiError::conflict(e.to_string()),
            StoreError::StorageFull { .. } => ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "insufficient_storage",
                format!("{e}; nothing was written, try again once space is freed"),
            ),
            // The store cannot be reached as it should: the device, the file system, sled or the
            // database failed or is out of reach (a read may work again later), or the store
            // stopped. Nothing says that what it holds is damaged.
            StoreError::Stopped(_)
            | StoreError::Fenced(_)
            | StoreError::Unavailable(_)
            | StoreError::Postgres(_)
            | StoreError::Closed
            | StoreError::Io(_)
            | StoreError::ReadFailed { .. }
            | StoreError::Sled(_)
            | StoreError::Transaction(_) => {
                tracing::error!(error = %e, "storage unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "storage_unavailable",
                    format!("the store cannot take this request: {e}"),
                )
            }
            // What the store holds is damaged: reading it again will not help.
            StoreError::Corrupt { .. }
            | StoreError::BlobMissing(_)
            | StoreError::BlobCorrupt { .. }
            | StoreError::Decode(_)
            | StoreError::Unopenable(_) => {
                tracing::error!(error = %e, "corrupt log");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "corrupt_log",
                    format!("{e}; run `chronicle verify` on the data directory"),
                )
            }
            // An event that does not encode (other than by its size, answered above), or a store
            // that cannot be opened: never a request's fault.
            StoreError::Encode { .. }
            | StoreError::SchemaVersion { .. }
            | StoreError::Locked(_) => ApiError::internal(e),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The message of an error response, kept in the response's extensions so that a surface with
/// another error shape (the LangGraph routes' `{"detail"}`) can re-say it without parsing bodies.
#[derive(Clone, Debug)]
pub struct ErrorMessage(pub String);

#[cfg(test)]
mod tests {
    use chronicle_schemas::{ApprovalStatus, RunId, RunStatus, TodoStatus};

    use super::*;

    /// What the engine calls a conflict with a run's state is a 409 on every route, a refused
    /// command included ("no approval is pending" was a 400 on the commands route).
    #[test]
    fn every_conflict_is_a_409_and_nothing_else_is() {
        use EngineError as E;
        let errors = [
            E::AlreadyDecided {
                approval_id: "a".into(),
                status: ApprovalStatus::Approved,
            },
            E::IllegalTransition {
                todo: "todo_001".into(),
                from: TodoStatus::Completed,
                to: TodoStatus::Pending,
            },
            E::NothingPending,
            E::NoPendingFor("todo_001".into()),
            E::SeveralPending(vec!["todo_001".into()]),
            E::RunFinished {
                run: RunId::from_u128(1),
                status: RunStatus::Completed,
            },
            E::PastExecution,
            E::NoPlanYet,
            E::TodoLimit(50),
            E::RunBusy(RunId::from_u128(1)),
            E::OwnStateKey("todos".into()),
            E::Concurrent,
            E::IdempotencyKeyReused,
            E::BadIdempotencyKey { bytes: 0 },
            E::CommandConflict {
                reason: "no approval is pending".into(),
                help: "help".into(),
            },
            E::Command {
                reason: "Unknown command".into(),
                help: "help".into(),
            },
            E::NoValues,
            E::RunNotFound(RunId::from_u128(1)),
        ];
        for e in errors {
            let conflict = e.is_conflict();
            let what = e.to_string();
            let status = ApiError::from(e).status;
            assert_eq!(status == StatusCode::CONFLICT, conflict, "{what}: {status}");
        }
    }
}
