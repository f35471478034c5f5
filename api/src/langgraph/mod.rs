//! The LangGraph Agent Server API, served at the root (`/info`, `/assistants/...`) beside
//! Chronicle's own routes, so a LangGraph client (`langgraph-sdk`, agent-chat-ui) is given the
//! server's plain URL and works unchanged. Threads are Chronicle sessions, a LangGraph run is one
//! Chronicle run (a turn), interrupts are pending approvals.
//!
//! Errors on these paths are LangGraph's `{"detail": "..."}` with the status Chronicle would give:
//! every error response carries its message in an [`ErrorMessage`] extension, and
//! [`detail_errors`] re-says it in that shape for the paths of this API (refusals before a handler
//! runs included: Host, Origin, token, body).

pub(crate) mod assistants;
mod branch;
mod filter;
pub(crate) mod info;
mod records;
pub(crate) mod runs;
mod stream;
pub(crate) mod threads;
pub mod views;

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use chronicle_wire::langgraph::Detail;
use chronicle_wire::langgraph::PAGE_MAX;

use crate::error::{ApiError, ApiResult, ErrorMessage};
use crate::state::AppState;

/// The first segments of this API's paths; none is one of Chronicle's own.
const ROOTS: [&str; 4] = ["info", "assistants", "threads", "runs"];

/// The LangGraph routes, to be merged into the API's router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/info", get(info::info))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/{assistant_id}", get(assistants::get_assistant))
        .route("/assistants/{assistant_id}/graph", get(assistants::graph))
        .route(
            "/assistants/{assistant_id}/schemas",
            get(assistants::schemas),
        )
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route(
            "/threads/{thread_id}",
            get(threads::get).delete(threads::delete),
        )
        .route(
            "/threads/{thread_id}/state",
            get(threads::state).post(threads::update_state),
        )
        .route(
            "/threads/{thread_id}/state/checkpoint",
            post(threads::state_at_checkpoint_post),
        )
        .route(
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(threads::state_at_checkpoint),
        )
        .route("/threads/{thread_id}/history", post(threads::history))
        .route("/threads/{thread_id}/copy", post(threads::copy))
        .route(
            "/threads/{thread_id}/runs",
            get(runs::list).post(runs::create_on_thread),
        )
        .route(
            "/threads/{thread_id}/runs/stream",
            post(runs::stream_on_thread),
        )
        .route("/threads/{thread_id}/runs/wait", post(runs::wait_on_thread))
        .route(
            "/threads/{thread_id}/runs/{run_id}",
            get(runs::get).delete(runs::delete),
        )
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(runs::join_stream),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(runs::cancel),
        )
        .route("/runs", post(runs::create_stateless))
        .route("/runs/cancel", post(runs::cancel_many))
        .route("/runs/stream", post(runs::stream_stateless))
        .route("/runs/wait", post(runs::wait_stateless))
}

/// A page's size: `limit` (10 when absent) within 1..=1000, else 422.
pub(crate) fn page_limit(limit: Option<u64>) -> ApiResult<usize> {
    let limit = limit.unwrap_or(10);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::unprocessable(format!(
            "limit must be between 1 and {PAGE_MAX}, got {limit}"
        )));
    }
    Ok(limit as usize)
}

/// One page of `all` as JSON, with `X-Pagination-Total` (and `X-Pagination-Next` when more
/// follow).
pub(crate) fn paged<T: serde::Serialize>(
    all: Vec<T>,
    offset: Option<u64>,
    limit: usize,
) -> Response {
    let total = all.len();
    let offset = usize::try_from(offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let page: Vec<T> = all.into_iter().skip(offset).take(limit).collect();
    page_of(page, total, offset, limit)
}

/// `page` (at `offset`, of `total` in all) as JSON with the pagination headers.
pub(crate) fn page_of<T: serde::Serialize>(
    page: Vec<T>,
    total: usize,
    offset: usize,
    limit: usize,
) -> Response {
    let mut res = Json(page).into_response();
    let headers = res.headers_mut();
    headers.insert("x-pagination-total", HeaderValue::from(total));
    let next = offset.saturating_add(limit);
    if next < total {
        headers.insert("x-pagination-next", HeaderValue::from(next));
    }
    res
}

/// Is `path` one of this API's (answered with `{"detail"}` errors)?
pub fn is_route(path: &str) -> bool {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    ROOTS.contains(&first)
}

/// Middleware: an error answer to a LangGraph path, re-said as `{"detail"}`.
pub async fn detail_errors(req: Request, next: Next) -> Response {
    let ours = is_route(req.uri().path());
    let res = next.run(req).await;
    if ours { as_detail(res) } else { res }
}

/// `res` with a `{"detail"}` body when it is an error response (status and headers kept).
pub(crate) fn as_detail(res: Response) -> Response {
    let Some(ErrorMessage(detail)) = res.extensions().get::<ErrorMessage>().cloned() else {
        return res;
    };
    let body = serde_json::to_vec(&Detail { detail }).unwrap_or_default();
    let (mut parts, _) = res.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn langgraph_paths() {
        for ours in [
            "/info",
            "/assistants/search",
            "/threads/x/runs",
            "/runs/stream",
        ] {
            assert!(is_route(ours), "{ours}");
        }
        for theirs in [
            "/api/v1/runs",
            "/chat",
            "/infos",
            "/healthz",
            "/",
            "/openapi.json",
        ] {
            assert!(!is_route(theirs), "{theirs}");
        }
    }
}
