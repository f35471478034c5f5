//! Approvals inbox and audit export (stub; being written).

use axum::extract::State;
use axum::response::Response;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

#[utoipa::path(get, path = "/api/v1/approvals", tag = "approvals", responses((status = 200)))]
pub async fn inbox(State(_st): State<AppState>, _p: Principal) -> ApiResult<Response> {
    Err(ApiError::internal("not yet"))
}

#[utoipa::path(get, path = "/api/v1/audit/approvals", tag = "audit", responses((status = 200)))]
pub async fn export(State(_st): State<AppState>, _p: Principal) -> ApiResult<Response> {
    Err(ApiError::internal("not yet"))
}
