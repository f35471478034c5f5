//! The operator's routes: health, metrics and the OpenAPI document.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chronicle_engine::store::StorageHealth;
use chronicle_wire::{ErrorBody, Health, HealthStatus, StorageState};
use serde_json::Value;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::openapi::{Generated, document};
use crate::response::HealthOrBusy;
use crate::state::AppState;

/// 200 `{"status":"ok","storage":"ok"}` while appends can be taken; 503 with `"storage":"full"`
/// (appends answer 507 until space is freed; reads work) or `"storage":"failed"` (a failed fsync
/// stopped the store; the server exits and a restart recovers).
///
/// Full means less is free than the disk reserve plus what one event of the largest size needs:
/// such an append would be refused (smaller ones may still fit), so health never calls fine a
/// store that refuses a write.
#[utoipa::path(get, path = "/healthz", tag = "ops",
    responses(
        (status = 200, description = "Serving; `storage` is `ok`", body = Health),
        (status = 400, description = "A `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 503, description = "`storage` is `full` (less is free than `reserve_bytes` plus `needed_bytes`, what one event of the largest size needs: such an append is refused with 507 until space is freed; reads work) or `failed` (the store stopped after a failed fsync; the server exits so that a restart recovers); or, with the error body and `Retry-After`, the server holds as many connections as it may (`too_many_connections`)", body = HealthOrBusy),
    ))]
pub(crate) async fn healthz(State(st): State<AppState>) -> Response {
    let store = st.engine.store();
    let mut body = Health {
        status: HealthStatus::Ok,
        storage: StorageState::Ok,
        durable_next_offset: store.durable_next_offset(),
        available_bytes: None,
        reserve_bytes: None,
        needed_bytes: None,
        reason: None,
    };
    match store.health() {
        StorageHealth::Ok => {}
        StorageHealth::Full {
            available,
            reserve,
            needed,
        } => {
            body.status = HealthStatus::Degraded;
            body.storage = StorageState::Full;
            body.available_bytes = Some(available);
            body.reserve_bytes = Some(reserve);
            body.needed_bytes = Some(needed);
        }
        StorageHealth::Failed(reason) => {
            body.status = HealthStatus::Failed;
            body.storage = StorageState::Failed;
            body.reason = Some(reason);
        }
    }
    let status = if body.storage == StorageState::Ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

/// The server's metrics, for Prometheus. A scrape first waits (a second at most) until the
/// events durable when it came are counted, so it shows at least what was committed before it.
#[utoipa::path(get, path = "/metrics", tag = "ops", security(("bearer" = [])),
    responses(
        (status = 200, description = "The metrics: in the OpenMetrics text format when `Accept` asks for `application/openmetrics-text` (as Prometheus does), otherwise in the Prometheus text format (`text/plain; version=0.0.4`)", content((String = "text/plain"), (String = "application/openmetrics-text"))),
        (status = 400, description = "A `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 500, description = "An internal error (`internal_error`)", body = ErrorBody),
    ))]
pub(crate) async fn metrics(
    State(st): State<AppState>,
    _p: Principal,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let head = st.engine.store().durable_next_offset();
    st.metrics.caught_up(head).await;
    let engine = st.engine.clone();
    let stats = tokio::task::spawn_blocking(move || engine.cache_stats())
        .await
        .map_err(ApiError::internal)?;
    st.metrics.observe(&stats);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (body, content_type) = st.metrics.encode(accept).map_err(ApiError::internal)?;
    Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

#[utoipa::path(get, path = "/openapi.json", tag = "ops",
    responses(
        (status = 200, description = "This document (OpenAPI 3.1)", body = Object),
        (status = 400, description = "A `Host` header that names another server (`bad_host`)", body = ErrorBody),
    ))]
pub(crate) async fn openapi(
    State(st): State<AppState>,
    Extension(generated): Extension<Generated>,
) -> axum::Json<Value> {
    axum::Json(document(&st, &generated))
}
