//! `/api/v1/sessions`: a principal's sessions (the runs started with one `session_id`, each root
//! run a turn), one session with all its turns, and deleting one (a recorded tombstone; see the
//! engine's `sessions` module).

use axum::extract::State;
use chronicle_wire::{
    DeleteSessionRequest, ErrorBody, SessionDeletedView, SessionDetail, SessionList, SessionsQuery,
};

use crate::auth::Principal;
use crate::error::ApiError;
use crate::extract::{Json, Query, SessionPath, SessionsCursor, ThreadId};
use crate::refusals::{ReadError, WriteError};
use crate::state::AppState;

#[utoipa::path(get, path = "/api/v1/sessions", tag = "sessions", operation_id = "list_sessions", security(("bearer" = [])),
    params(
        ("user" = Option<String>, Query, description = "Only the sessions of this `user_id`"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 100, description = "At most this many sessions (default 20)"),
        ("cursor" = inline(Option<SessionsCursor>), Query, description = "Where the page starts: the previous page's `next_cursor`"),
        ("owner" = Option<String>, Query, description = "Only the sessions of this owner: an admin may name any; another principal only itself (403 `forbidden` otherwise)"),
    ),
    responses(
        (status = 200, description = "The sessions the caller may see (an admin: all), the most recently active first; `next_cursor` continues the listing (null on the last page)", body = SessionList),
        (status = 400, description = "A bad `limit` or a `cursor` no page gave out (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn list(
    State(st): State<AppState>,
    Principal(who): Principal,
    Query(q): Query<SessionsQuery>,
) -> Result<axum::Json<SessionList>, ReadError> {
    let engine = st.engine.clone();
    // Listing replays the page's turns, reading sled synchronously: off the async workers.
    let list = tokio::task::spawn_blocking(move || engine.sessions(&who, &q))
        .await
        .map_err(ApiError::internal)??;
    Ok(axum::Json(list))
}

#[utoipa::path(get, path = "/api/v1/sessions/{session_id}", tag = "sessions", operation_id = "get_session", security(("bearer" = [])),
    params(("session_id" = inline(ThreadId), Path, description = "The session")),
    responses(
        (status = 200, description = "The session and all its turns, oldest first", body = SessionDetail),
        (status = 400, description = "A bad session id (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such session, another principal's, or a deleted one (`not_found`: the same answer)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn get(
    State(st): State<AppState>,
    Principal(who): Principal,
    SessionPath(session): SessionPath,
) -> Result<axum::Json<SessionDetail>, ReadError> {
    Ok(axum::Json(st.engine.session(&who, &session)?))
}

#[utoipa::path(delete, path = "/api/v1/sessions/{session_id}", tag = "sessions", operation_id = "delete_session", request_body = DeleteSessionRequest, security(("bearer" = [])),
    params(("session_id" = inline(ThreadId), Path, description = "The session")),
    responses(
        (status = 200, description = "The session is deleted: each of its runs (turns and sub-agent runs) ends with a `SessionDeleted` event, runs still going were cancelled first, and its workspace directory is removed. The events stay in the log (the chain and the audit export keep them); every read answers 404 for the session and its runs from now on", body = SessionDeletedView),
        (status = 400, description = "A bad session id (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such session, another principal's, or one already deleted (`not_found`)", body = ErrorBody),
        (status = 409, description = "A run of the session changed at the same moment (`conflict`): try again", body = ErrorBody),
        (status = 422, description = "A body other than `{}` (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn delete(
    State(st): State<AppState>,
    Principal(who): Principal,
    SessionPath(session): SessionPath,
    Json(DeleteSessionRequest {}): Json<DeleteSessionRequest>,
) -> Result<axum::Json<SessionDeletedView>, WriteError> {
    Ok(axum::Json(st.engine.delete_session(&who, &session).await?))
}
