//! A user's long-term memory: listed (a page at a time, newest first) and deleted per user, as
//! the caller's principal may see it (what its own runs saved; an admin: everyone's). A deletion
//! is recorded in the run that saved the item.

use axum::extract::State;
use chronicle_schemas::Memory;
use chronicle_wire::{ErrorBody, ForgetRequest, MEMORIES_PAGE_MAX, MemoriesQuery, UserMemories};

use crate::auth::Principal;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::refusals::{ReadError, WriteError};
use crate::state::AppState;

#[utoipa::path(get, path = "/api/v1/users/{user}/memories", tag = "memory", operation_id = "list_memories", security(("bearer" = [])),
    params(
        ("user" = String, Path, min_length = 1, description = "The user (a run's `user_id`, else its owner)"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "At most this many items (default 1000)"),
        ("before" = Option<u64>, Query, description = "Only items saved before this position: the previous page's `next_before`"),
    ),
    responses(
        (status = 200, description = "One page of the user's memory that the caller may see (what its own runs saved; an admin: everyone's), newest first; empty for a user with none; `next_before` continues the listing (null on the last page)", body = UserMemories),
        (status = 400, description = "A bad `limit` or `before` (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn list(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(user): Path<String>,
    Query(q): Query<MemoriesQuery>,
) -> Result<axum::Json<UserMemories>, ReadError> {
    let limit = q.limit.unwrap_or(MEMORIES_PAGE_MAX);
    if limit == 0 || limit > MEMORIES_PAGE_MAX {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..={MEMORIES_PAGE_MAX}, got {limit}"
        ))
        .into());
    }
    let (memories, next_before) = st.engine.memories_page(&who, &user, q.before, limit)?;
    Ok(axum::Json(UserMemories {
        user_id: user,
        memories,
        next_before,
    }))
}

#[utoipa::path(delete, path = "/api/v1/users/{user}/memories/{memory_id}", tag = "memory", operation_id = "delete_memory", request_body = ForgetRequest, security(("bearer" = [])),
    params(
        ("user" = String, Path, min_length = 1, description = "The user"),
        ("memory_id" = String, Path, min_length = 1, description = "The item (`mem_...`)"),
    ),
    responses(
        (status = 200, description = "The item is deleted (`MemoryDeleted` in the run that saved it): later turns no longer load it", body = Memory),
        (status = 400, description = "Malformed JSON (an empty body included) (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such item of that user (or another principal's) (`not_found`)", body = ErrorBody),
        (status = 409, description = "The run that saved it changed at the same moment (`conflict`)", body = ErrorBody),
        (status = 422, description = "A body other than `{}` (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn forget(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path((user, memory_id)): Path<(String, String)>,
    Json(ForgetRequest {}): Json<ForgetRequest>,
) -> Result<axum::Json<Memory>, WriteError> {
    Ok(axum::Json(st.engine.forget(&who, &user, &memory_id).await?))
}

#[utoipa::path(delete, path = "/api/v1/users/{user}/memories", tag = "memory", operation_id = "delete_memories", request_body = ForgetRequest, security(("bearer" = [])),
    params(("user" = String, Path, min_length = 1, description = "The user")),
    responses(
        (status = 200, description = "Every item of the user's memory the caller may see is deleted; the items deleted (none for a user with none)", body = UserMemories),
        (status = 400, description = "Malformed JSON (an empty body included) (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 409, description = "A run that saved one changed at the same moment (`conflict`)", body = ErrorBody),
        (status = 422, description = "A body other than `{}` (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn forget_all(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(user): Path<String>,
    Json(ForgetRequest {}): Json<ForgetRequest>,
) -> Result<axum::Json<UserMemories>, WriteError> {
    let memories = st.engine.forget_all(&who, &user).await?;
    Ok(axum::Json(UserMemories {
        user_id: user,
        memories,
        next_before: None,
    }))
}
