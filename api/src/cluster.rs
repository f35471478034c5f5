//! A request for a session another node drives, sent on to that node.
//!
//! On a node of a cluster, any node answers reads and streams from the shared log, and a change
//! to a session goes to the node that drives it. When the engine answers that the session is
//! driven elsewhere ([`chronicle_engine::Error::Elsewhere`]), this layer sends the same request
//! (method, path, query, body, headers) to that node, with the cluster's secret and the
//! caller's principal in place of the caller's credentials, and relays the answer as it comes
//! (a stream too). The owner decides as for a local call: the same status codes, the same
//! `decided_by`. A forwarded request is never forwarded again: if its session moved meanwhile,
//! it is answered 503 with `Retry-After: 1`.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;

use crate::error::ApiError;
use crate::state::AppState;

/// The header a node proves itself with on another node: the cluster's secret.
pub const CLUSTER_TOKEN: &str = chronicle_engine::CLUSTER_TOKEN_HEADER;
/// The principal a forwarded request acts for: `admin:<name in hex>` or `user:<name in hex>`.
pub const PRINCIPAL: &str = "x-chronicle-principal";

/// How long a node waits to connect to another.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What a node needs to forward requests.
#[derive(Debug)]
pub struct Link {
    secret: HeaderValue,
    http: reqwest::Client,
}

impl Link {
    pub fn new(secret: &str) -> Result<Link, String> {
        let secret =
            HeaderValue::from_str(secret).map_err(|_| "the cluster token is not header text")?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("the cluster's HTTP client: {e}"))?;
        Ok(Link { secret, http })
    }
}

/// Which node a response's request belongs to: set on the error response of a change the
/// engine refused as driven elsewhere.
#[derive(Clone, Debug)]
pub struct Elsewhere {
    pub session: String,
    /// The node that drives the session, and where it is reached.
    pub node: String,
    pub url: String,
}

/// How often a node sending a request on looks whether the node it waits for still lives.
const OWNER_LOOK: Duration = Duration::from_millis(250);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn principal_header(p: &chronicle_engine::Principal) -> Option<HeaderValue> {
    let role = if p.admin { "admin" } else { "user" };
    HeaderValue::from_str(&format!("{role}:{}", hex(p.name.as_bytes()))).ok()
}

/// The principal a forwarded request names.
pub(crate) fn principal_from_header(v: &str) -> Option<chronicle_engine::Principal> {
    let (role, name) = v.split_once(':')?;
    let name = String::from_utf8(unhex(name)?).ok()?;
    match role {
        "admin" => Some(chronicle_engine::Principal::admin(name)),
        "user" => Some(chronicle_engine::Principal::user(name)),
        _ => None,
    }
}

/// Headers that belong to one connection, or name the caller's credentials: not sent on.
fn stays(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "origin"
            | "referer"
            | "content-length"
            | "authorization"
            | "x-api-key"
            | "cookie"
            | CLUSTER_TOKEN
            | PRINCIPAL
    )
}

/// The middleware: runs the request here, and sends it to the session's node when the engine
/// says the session is driven there.
pub(crate) async fn forward(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(link) = state.cluster.clone() else {
        return next.run(req).await;
    };
    // A WebSocket upgrade cannot be replayed elsewhere; its messages are answered here (a change
    // is refused there as driven elsewhere, and the client may send it over HTTP).
    if req.headers().contains_key(header::UPGRADE) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, state.config.request_body_bytes_max).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::too_large(format!(
                "a request body may be at most {} bytes",
                state.config.request_body_bytes_max
            ))
            .into_response();
        }
    };
    let (method, uri, headers) = (
        parts.method.clone(),
        parts.uri.clone(),
        parts.headers.clone(),
    );
    let res = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    let Some(elsewhere) = res.extensions().get::<Elsewhere>().cloned() else {
        return res;
    };
    if headers.contains_key(CLUSTER_TOKEN) {
        // Forwarded here, and moved on meanwhile: the caller tries again.
        return res;
    }
    let Some(principal) = crate::auth::principal_of(&state.tokens, &state.sessions, &headers)
    else {
        return res;
    };
    let forwarded = relay(
        &link,
        &elsewhere.url,
        method,
        &uri,
        &headers,
        bytes,
        &principal,
    );
    // Until its answer begins, the owner is watched: one that stops being heard from (a stopped
    // process, a partition) would keep the caller waiting until its lease ends.
    tokio::select! {
        res = forwarded => res,
        () = owner_silent(&state, &elsewhere) => ApiError::capped(
            "owner_unreachable",
            format!(
                "node {} that drives session {} stopped answering; try again",
                elsewhere.node, elsewhere.session
            ),
            1,
        )
        .into_response(),
    }
}

/// Returns once `elsewhere`'s node no longer drives its session, or has not been heard from for
/// its lease (a node late with a heartbeat under load may still be carrying the request out:
/// only the lease says it will not).
async fn owner_silent(state: &AppState, elsewhere: &Elsewhere) {
    let engine = &state.engine;
    let Some(grace) = engine.settings().cluster.as_ref().map(|c| c.lease_ms) else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(OWNER_LOOK).await;
        let Some(m) = engine.store().membership() else {
            return;
        };
        match m.owner(&elsewhere.session).await {
            Ok(Some(n)) if n.name == elsewhere.node && n.quiet_ms < grace => {}
            // The database out of reach: the answer may still come.
            Err(_) => {}
            Ok(_) => return,
        }
    }
}

async fn relay(
    link: &Link,
    url: &str,
    method: axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: axum::body::Bytes,
    principal: &chronicle_engine::Principal,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let target = format!("{}{path}", url.trim_end_matches('/'));
    let mut out = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        if !stays(name) {
            out.append(name.clone(), value.clone());
        }
    }
    // Host, Origin and Referer stay behind: this node checked them, and the owner skips the
    // checks for a request that carries the cluster's secret.
    out.insert(CLUSTER_TOKEN, link.secret.clone());
    if let Some(p) = principal_header(principal) {
        out.insert(PRINCIPAL, p);
    }
    let sent = link
        .http
        .request(method, &target)
        .headers(out)
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(url, error = %e, "forwarding to the session's node failed");
            return ApiError::capped(
                "owner_unreachable",
                "the node that drives this session cannot be reached now; try again",
                1,
            )
            .into_response();
        }
    };
    let mut res = Response::builder().status(answer.status());
    if let Some(h) = res.headers_mut() {
        for (name, value) in answer.headers() {
            if !stays(name) {
                h.append(name.clone(), value.clone());
            }
        }
    }
    let stream = answer.bytes_stream().map_err(std::io::Error::other);
    res.body(Body::from_stream(stream)).unwrap_or_else(|e| {
        ApiError::internal(format!("relaying a forwarded answer: {e}")).into_response()
    })
}

/// The routes only the other nodes of the cluster call (not in the API's document).
pub(crate) fn routes() -> axum::Router<AppState> {
    axum::Router::new().route(
        "/internal/v1/runs/{run_id}/chunks",
        axum::routing::get(run_chunks),
    )
}

/// The live chunks of a run this node drives, one JSON line each, for another node whose
/// subscribers follow the run. Only for a request with the cluster's secret (404 otherwise:
/// the route is not there for anyone else).
async fn run_chunks(
    State(st): State<AppState>,
    headers: HeaderMap,
    crate::extract::RunPath(run): crate::extract::RunPath,
) -> Response {
    if !st.tokens.is_from_cluster(&headers) {
        return ApiError::not_found("no such route").into_response();
    }
    // Only the node that drives the run serves its chunks: another one's would be relayed ones,
    // which could go round between nodes.
    let store = st.engine.store();
    let owned = match store.run_head(run) {
        Ok(Some(head)) => store
            .membership()
            .is_some_and(|m| m.owns(head.session_id.as_str())),
        Ok(None) => false,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !owned {
        return ApiError::conflict(format!("run {run} is not driven by this node")).into_response();
    }
    use futures_util::StreamExt;
    let lines = st.engine.run_chunks(run).map(|c| {
        let mut line = serde_json::to_vec(&c).unwrap_or_default();
        line.push(b'\n');
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(line))
    });
    let stop = st.shutdown.clone();
    let lines = lines.take_until(async move { stop.cancelled().await });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::from_stream(lines))
        .unwrap_or_else(|e| ApiError::internal(e).into_response())
}
