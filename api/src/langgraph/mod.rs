//! The LangGraph Agent Server API, served at the root (`/info`, `/assistants/...`) beside
//! Chronicle's own routes, so a LangGraph client (`langgraph-sdk`, agent-chat-ui) is given the
//! server's plain URL and works unchanged. Threads are Chronicle sessions, a LangGraph run is one
//! Chronicle run (a turn), interrupts are pending approvals.
//!
//! Errors on these paths are LangGraph's `{"detail": "..."}` with the status Chronicle would give:
//! every error response carries its message in an [`ErrorMessage`] extension, and
//! [`detail_errors`] re-says it in that shape for the paths of this API (refusals before a handler
//! runs included: Host, Origin, token, body).

mod assistants;
mod branch;
mod filter;
mod graphs;
mod info;
mod loaded;
mod records;
mod request;
mod runs;
mod stream;
mod threads;
pub mod views;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use chronicle_wire::langgraph::Detail;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ErrorMessage;
use crate::state::AppState;

/// The first segments of this API's paths; none is one of Chronicle's own.
const ROOTS: [&str; 4] = ["info", "assistants", "threads", "runs"];

/// The LangGraph routes, to be merged into the API's router: each path's handlers, whose
/// `#[utoipa::path]` gives the route and its OpenAPI entry.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(info::info))
        .routes(routes!(assistants::search))
        .routes(routes!(assistants::get_assistant))
        .routes(routes!(assistants::graph))
        .routes(routes!(assistants::schemas))
        .routes(routes!(threads::create))
        .routes(routes!(threads::search))
        .routes(routes!(threads::get, threads::delete))
        .routes(routes!(threads::state, threads::update_state))
        .routes(routes!(threads::state_at_checkpoint_post))
        .routes(routes!(threads::state_at_checkpoint))
        .routes(routes!(threads::history))
        .routes(routes!(threads::copy))
        .routes(routes!(runs::list, runs::create_on_thread))
        .routes(routes!(runs::stream_on_thread))
        .routes(routes!(runs::wait_on_thread))
        .routes(routes!(runs::get, runs::delete))
        .routes(routes!(runs::join))
        .routes(routes!(runs::join_stream))
        .routes(routes!(runs::cancel))
        .routes(routes!(runs::create_stateless))
        .routes(routes!(runs::cancel_many))
        .routes(routes!(runs::stream_stateless))
        .routes(routes!(runs::wait_stateless))
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
