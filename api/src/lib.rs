//! Chronicle's HTTP surface: the axum router — REST, SSE, WebSocket — with bearer
//! principals, limits, one error mapping, metrics and an OpenAPI document generated from the
//! handlers.
//!
//! Architecture Invariant: no business rules here. Handlers translate HTTP to `Engine` calls.

// Handlers: each route's handler file (a handler file imports no other handler file).
mod audit;
mod console;
mod memory;
mod ops;
mod rest;
pub mod runs;
mod sessions;
mod sse;
mod tickets;
mod traceparent;
mod ws;

// What the handlers share, and the server around them.
pub mod auth;
pub mod browser;
pub mod cluster;
mod config;
mod connection;
pub mod error;
mod events;
mod extract;
pub mod langgraph;
#[cfg(test)]
mod layering;
mod limits;
mod lists;
mod metrics;
pub mod openapi;
mod quota;
mod refusals;
mod response;
mod server;
mod state;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, FromRef, MatchedPath, Request};
use axum::middleware;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::{Extension, Router};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::{TICKETS_PER_PRINCIPAL_MAX, Tokens};
pub use config::ApiConfig;
pub use error::ApiError;
pub use metrics::{LABEL_VALUES_MAX, Metrics, OPEN_ITEMS_MAX, UNMATCHED};
pub use openapi::{ApiDoc, document};
pub use server::{check_bind, serve};
pub use state::AppState;

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.uri().path()
    ))
}

/// A route that exists, asked with a method it does not take: 405 in the API's error format
/// (axum adds the `Allow` header naming the methods it takes), counted under its route.
async fn method_not_allowed(req: Request) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let mut res = ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {}", req.uri().path(), req.method()),
    )
    .into_response();
    if let Some(route) = route {
        res.extensions_mut().insert(metrics::Route(route));
    }
    res
}

/// Every route of the API, each declared once: its path, its method and its OpenAPI entry all
/// come from its handler's `#[utoipa::path]`; the handlers of one path share a `routes!`.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(rest::chat))
        .routes(routes!(rest::session))
        .routes(routes!(rest::resume))
        .routes(routes!(rest::session_checkpoints))
        .routes(routes!(rest::start_run))
        .routes(routes!(runs::list))
        .routes(routes!(sessions::list))
        .routes(routes!(sessions::get, sessions::delete))
        .routes(routes!(sse::run_events))
        .routes(routes!(rest::status))
        .routes(routes!(rest::approvals))
        .routes(routes!(rest::approval))
        .routes(routes!(rest::decide))
        .routes(routes!(rest::command))
        .routes(routes!(rest::todos))
        .routes(routes!(rest::state))
        .routes(routes!(rest::log))
        .routes(routes!(rest::trace))
        .routes(routes!(rest::checkpoints))
        .routes(routes!(rest::restore))
        .routes(routes!(rest::cancel))
        .routes(routes!(memory::list, memory::forget_all))
        .routes(routes!(memory::forget))
        .routes(routes!(sse::all_events))
        .routes(routes!(audit::inbox))
        .routes(routes!(audit::export))
        .routes(routes!(tickets::issue_ticket))
        .routes(routes!(ws::handler))
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::openapi))
        .merge(langgraph::routes())
}

/// The whole API as one router (tests drive it with `oneshot` or a real listener).
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.request_body_bytes_max;
    let (router, generated) = routes().split_for_parts();
    // The console's pages are HTML, not part of the API's document.
    let router = router
        .merge(console::routes())
        .merge(cluster::routes())
        .route_layer(middleware::from_fn(browser::json_only))
        .route_layer(middleware::from_fn(traceparent::context))
        .route_layer(middleware::from_fn(metrics::tag_route))
        .route_layer(middleware::from_fn_with_state(
            quota::Writes::from_ref(&state),
            quota::writes,
        ))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(Extension(openapi::Generated(Arc::new(generated))))
        .layer(DefaultBodyLimit::max(body_limit));
    let router = match state.site.cors_layer() {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router
        .layer(middleware::from_fn_with_state(
            (state.site.clone(), state.tokens.clone()),
            browser::guard,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            cluster::forward,
        ))
        .layer(middleware::from_fn(langgraph::detail::detail_errors))
        .layer(middleware::from_fn_with_state(
            state.metrics.clone(),
            metrics::count,
        ))
        // Paths only: a query string may hold a stream ticket.
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(|req: &Request| {
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path())
            }),
        )
        .with_state(state)
}
