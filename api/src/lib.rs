//! Chronicle's HTTP surface: the axum router — REST, SSE, WebSocket — with bearer
//! principals, limits, one error mapping, metrics and an OpenAPI document generated from the
//! handlers.
//!
//! Architecture Invariant: no business rules here. Handlers translate HTTP to `Engine` calls.

pub mod audit;
pub mod auth;
pub mod browser;
mod connection;
pub mod error;
mod extract;
pub mod langgraph;
mod limits;
pub mod memory;
pub mod openapi;
mod quota;
pub mod rest;
pub mod runs;
mod server;
pub mod sessions;
pub mod sse;
mod state;
pub mod ws;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};

pub use auth::{TICKETS_PER_PRINCIPAL_MAX, Tokens};
pub use error::ApiError;
pub use openapi::{ApiDoc, document};
pub use server::{check_bind, serve};
pub use state::{ApiConfig, AppState, Metrics};

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.uri().path()
    ))
}

/// A route that exists, asked with a method it does not take: 405 in the API's error format
/// (axum adds the `Allow` header naming the methods it takes).
async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {}", req.uri().path(), req.method()),
    )
}

/// Counts requests by status class.
async fn count(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let class = format!("{}xx", res.status().as_u16() / 100);
    st.metrics
        .http_requests
        .get_or_create(&vec![("status".to_owned(), class)])
        .inc();
    res
}

/// The whole API as one router (tests drive it with `oneshot` or a real listener).
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.request_body_bytes_max;
    let router = Router::new()
        .route("/chat", post(rest::chat))
        .route("/api/sessions/{thread_id}", get(rest::session))
        .route("/api/sessions/{thread_id}/resume", post(rest::resume))
        .route(
            "/api/sessions/{thread_id}/checkpoints",
            get(rest::session_checkpoints),
        )
        .route("/api/v1/agent/run", post(rest::start_run))
        .route("/api/v1/runs", get(runs::list))
        .route("/api/v1/sessions", get(sessions::list))
        .route(
            "/api/v1/sessions/{session_id}",
            get(sessions::get).delete(sessions::delete),
        )
        .route("/api/v1/agent/{run_id}/events", get(sse::run_events))
        .route("/api/v1/agent/{run_id}/status", get(rest::status))
        .route("/api/v1/agent/{run_id}/approvals", get(rest::approvals))
        .route(
            "/api/v1/agent/{run_id}/approvals/{approval_id}",
            get(rest::approval),
        )
        .route(
            "/api/v1/agent/{run_id}/approvals/{approval_id}/decision",
            post(rest::decide),
        )
        .route("/api/v1/agent/{run_id}/commands", post(rest::command))
        .route("/api/v1/agent/{run_id}/todos", get(rest::todos))
        .route("/api/v1/agent/{run_id}/state", get(rest::state))
        .route("/api/v1/agent/{run_id}/log", get(rest::log))
        .route("/api/v1/agent/{run_id}/checkpoints", get(rest::checkpoints))
        .route(
            "/api/v1/agent/{run_id}/checkpoints/{checkpoint_id}/restore",
            post(rest::restore),
        )
        .route("/api/v1/agent/{run_id}/cancel", post(rest::cancel))
        .route(
            "/api/v1/users/{user}/memories",
            get(memory::list).delete(memory::forget_all),
        )
        .route(
            "/api/v1/users/{user}/memories/{memory_id}",
            delete(memory::forget),
        )
        .route("/api/v1/events", get(sse::all_events))
        .route("/api/v1/approvals", get(audit::inbox))
        .route("/api/v1/audit/approvals", get(audit::export))
        .route("/api/v1/stream-tickets", post(auth::issue_ticket))
        .route("/ws", get(ws::handler))
        .route("/healthz", get(rest::healthz))
        .route("/metrics", get(rest::metrics))
        .route("/openapi.json", get(openapi::openapi))
        .merge(langgraph::routes())
        .route_layer(middleware::from_fn(browser::json_only))
        .route_layer(middleware::from_fn_with_state(state.clone(), quota::writes))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit));
    let router = match state.site.cors_layer() {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router
        .layer(middleware::from_fn_with_state(state.clone(), browser::guard))
        .layer(middleware::from_fn(langgraph::detail_errors))
        .layer(middleware::from_fn_with_state(state.clone(), count))
        // Paths only: a query string may hold a stream ticket.
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(|req: &Request| {
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path())
            }),
        )
        .with_state(state)
}
