//! HTTP metrics: requests by route template, method and status, and how long each took to
//! answer.
//!
//! The route is the template the router matched (`/api/v1/runs/{run_id}`), never the path a
//! client sent, so the series stay bounded; a request that matched no route (a 404, or one
//! refused before routing: a bad `Host`) counts as `unmatched`. The router sets the template on
//! each request it routes; [`tag_route`], a route layer, copies it onto the response, where
//! [`count`], outside the router, reads it.
//!
//! The duration is until the response's head is ready. An SSE or WebSocket stream counts then,
//! when it starts: its life is not a request's latency, and a stream open for an hour would
//! otherwise fill the top bucket.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{HistogramFamily, Labels, Metrics, histogram_family, labels};

/// Seconds, from a cached read (a millisecond) to a chat turn that waits for its answer.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The route label of a request that matched none.
pub const UNMATCHED: &str = "unmatched";

#[derive(Debug)]
pub(crate) struct HttpMetrics {
    /// By `route`, `method` and `status` (the code).
    requests: Family<Labels, Counter>,
    /// By `route` and `method`.
    seconds: HistogramFamily,
}

impl HttpMetrics {
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let m = Self {
            requests: Family::default(),
            seconds: histogram_family(SECONDS_BUCKETS),
        };
        registry.register(
            "http_requests",
            "HTTP requests, by route template, method and status code",
            m.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to a response's head, by route template and method (a stream counts when it starts)",
            m.seconds.clone(),
        );
        m
    }
}

/// The route template a response answered, for [`count`].
#[derive(Clone, Debug)]
pub(crate) struct Route(pub MatchedPath);

/// Puts the template of the route the request matched on its response.
pub(crate) async fn tag_route(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let mut res = next.run(req).await;
    if let Some(route) = route {
        res.extensions_mut().insert(Route(route));
    }
    res
}

/// Counts and times every request the router answers.
pub(crate) async fn count(State(m): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let method = method_label(req.method());
    let started = Instant::now();
    let res = next.run(req).await;
    let elapsed = started.elapsed();
    let route = res
        .extensions()
        .get::<Route>()
        .map_or(UNMATCHED, |r| r.0.as_str());
    let status = res.status().as_u16().to_string();
    m.http
        .requests
        .get_or_create(&labels(&[
            ("route", route),
            ("method", method),
            ("status", &status),
        ]))
        .inc();
    m.http
        .seconds
        .get_or_create(&labels(&[("route", route), ("method", method)]))
        .observe(elapsed.as_secs_f64());
    res
}

/// The method, or `other` for one HTTP does not define (a client may send any token).
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}
