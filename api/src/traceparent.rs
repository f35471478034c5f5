//! The W3C trace context a request comes with: a run it starts (a turn, a run, a LangGraph run)
//! becomes part of the caller's trace, its root span a child of the caller's span.
//!
//! A `traceparent` header that does not parse is ignored, as the W3C recommendation asks of a
//! receiver: the request is served and its run starts a trace of its own.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use chronicle_engine::trace::{TraceParent, within};

/// The header's name.
pub const TRACEPARENT: &str = "traceparent";

/// Serves the request inside the caller's trace context, when it sent a valid one.
pub(crate) async fn context(req: Request, next: Next) -> Response {
    let parent = req
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| TraceParent::parse(v).ok());
    match parent {
        Some(p) => within(p, next.run(req)).await,
        None => next.run(req).await,
    }
}
