//! SSE streams (stub; being written).

use axum::extract::State;
use axum::response::Response;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::Path;
use crate::state::AppState;

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/events", tag = "streams", params(("run_id" = String, Path)), responses((status = 200, description = "text/event-stream")))]
pub async fn run_events(
    State(_st): State<AppState>,
    _p: Principal,
    Path(_run): Path<String>,
) -> ApiResult<Response> {
    Err(ApiError::internal("not yet"))
}

#[utoipa::path(get, path = "/api/v1/events", tag = "streams", responses((status = 200, description = "text/event-stream")))]
pub async fn all_events(State(_st): State<AppState>, _p: Principal) -> ApiResult<Response> {
    Err(ApiError::internal("not yet"))
}
