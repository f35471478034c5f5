//! The trace context of the work being done: which span of which run's trace an agent, a tool or
//! a model call works for. The run actor sets it around each call it starts; what calls out of
//! the process (an `http` agent, an MCP server, the model's server) sends it on as the W3C
//! `traceparent` header, so the callee's spans join the run's trace. The spans themselves come
//! from the log (`chronicle_projections::trace`), with the same ids.

use std::future::Future;

pub use chronicle_projections::trace::TraceParent;

tokio::task_local! {
    static CURRENT: TraceParent;
}

/// The trace context of the task that asks, if it works for a run's span.
pub fn current() -> Option<TraceParent> {
    CURRENT.try_with(|t| *t).ok()
}

/// The `traceparent` header value for the work in progress, if any.
pub fn traceparent() -> Option<String> {
    current().map(|t| t.to_string())
}

/// Runs `work` as part of span `parent`.
pub fn within<F: Future>(parent: TraceParent, work: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(parent, work)
}
