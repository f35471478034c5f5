//! WebSocket (stub; being written).

use axum::extract::State;
use axum::response::Response;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

#[utoipa::path(get, path = "/ws", tag = "streams", responses((status = 101, description = "WebSocket upgrade")))]
pub async fn handler(State(_st): State<AppState>, _p: Principal) -> ApiResult<Response> {
    Err(ApiError::internal("not yet"))
}
