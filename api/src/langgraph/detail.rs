//! Which paths are the LangGraph API's, and their errors in LangGraph's shape: every error
//! response carries its message in an [`ErrorMessage`] extension, and [`detail_errors`] re-says
//! it as `{"detail": "..."}` for the paths of this API (refusals before a handler runs included:
//! Host, Origin, token, body).

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use chronicle_wire::langgraph::Detail;

use crate::error::ErrorMessage;

/// The first segments of this API's paths; none is one of Chronicle's own.
const ROOTS: [&str; 4] = ["info", "assistants", "threads", "runs"];

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
