//! `GET /api/v1/runs`: the runs of the store, oldest first (or newest first), a page at a time,
//! each with its status and query ([`page`], which `chronicle runs` and the console list by too).

use chronicle_engine::index::RunScope;
use chronicle_schemas::{RunId, RunStatus};
use chronicle_wire::{ErrorBody, Order, RunList, RunsQuery};

use axum::extract::State;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::extract::Query;
use crate::refusals::ReadError;
use crate::state::AppState;

pub use crate::lists::{PageError, page};

#[utoipa::path(get, path = "/api/v1/runs", tag = "runs", operation_id = "list_runs", security(("bearer" = [])),
    params(
        ("session_id" = Option<String>, Query, description = "Only the runs of this session"),
        ("status" = Option<RunStatus>, Query, description = "Only runs in this state"),
        ("after" = Option<RunId>, Query, description = "Continue after this run (the previous page's `next`)"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "Look at most at this many runs (default 1000)"),
        ("order" = Option<Order>, Query, description = "By creation time: `asc`, oldest first (default), or `desc`, newest first; `after` continues the same way"),
        ("owner" = Option<String>, Query, description = "Only the runs of this owner: an admin may name any; another principal only itself (403 `forbidden` otherwise)"),
    ),
    responses(
        (status = 200, description = "The runs the caller may see (an admin: all), oldest first (newest first with `order=desc`); `next` is where the next page starts (null on the last page); a run whose records are damaged is named in `damaged` instead", body = RunList),
        (status = 400, description = "A bad `status`, `after` (not a UUID) or `limit` (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "`after` names no run the caller may see (`not_found`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn list(
    State(st): State<AppState>,
    Principal(who): Principal,
    Query(q): Query<RunsQuery>,
) -> Result<axum::Json<RunList>, ReadError> {
    let store = st.engine.store().clone();
    // Replaying runs reads sled synchronously: keep it off the async workers.
    let list = tokio::task::spawn_blocking(move || {
        let scope = match who.list_owner(q.owner.as_deref())? {
            None => RunScope::Visible,
            Some(owner) => RunScope::Owner(owner),
        };
        page(&store, &q, scope, &mut || {}).map_err(ApiError::from)
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(axum::Json(list))
}
