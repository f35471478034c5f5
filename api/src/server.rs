//! Serving the router: the bind policy, the accept loop with its connection cap, and graceful
//! shutdown that ends every stream, lets in-flight requests finish and flushes the store.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::connection::{self, Limits, Slot};
use crate::error::ApiError;
use crate::{AppState, Tokens, router};

/// Connections over the cap that are answered 503 at once; beyond these a connection over the
/// cap is closed without an answer, so refusing costs a bounded amount too.
const REFUSALS_MAX: usize = 64;

/// How long a refused connection may take to send its request head before it is closed
/// without an answer.
const REFUSAL_WAIT_MS: u64 = 1000;

/// How long accepting pauses after an error other than a failed handshake (e.g. out of file
/// descriptors, when retrying at once would spin).
const ACCEPT_ERROR_PAUSE_MS: u64 = 1000;

/// Refuses to expose an unauthenticated server beyond this machine unless told `insecure`.
pub fn check_bind(addr: SocketAddr, tokens: &Tokens, insecure: bool) -> Result<(), String> {
    if !addr.ip().is_loopback() && tokens.is_empty() && !insecure {
        return Err(format!(
            "refusing to bind {addr} without tokens: configure --tokens FILE or CHRONICLE_API_TOKEN, or pass --insecure"
        ));
    }
    Ok(())
}

/// Serves until `shutdown` resolves, then ends every SSE/WebSocket stream, lets in-flight
/// requests finish, stops the engine and flushes the store.
///
/// Each connection has its own task with its timeouts ([`connection::serve`]); at most
/// `connections_max` are served at once, and one more is answered 503 with `Retry-After`.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = state.bound_to(listener.local_addr()?);
    let stop = state.shutdown.clone();
    let engine = state.engine.clone();
    let config = state.config.clone();
    let metrics = state.metrics.clone();
    let limits = Limits::new(&config);
    // One router for every connection: building it per connection costs ~20 KiB each.
    let app = router(state);
    let connections = Arc::new(Semaphore::new(config.connections_max));
    let refusals = Arc::new(Semaphore::new(REFUSALS_MAX));
    let tasks = TaskTracker::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::error!(error = %e, "accept failed; pausing");
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)) => continue,
                }
            }
        };
        if let Ok(permit) = connections.clone().try_acquire_owned() {
            let slot = Slot::new(permit, &metrics);
            tasks.spawn(connection::serve(
                tcp,
                slot,
                app.clone(),
                limits,
                stop.clone(),
            ));
            continue;
        }
        metrics.refuse("connections");
        if let Ok(permit) = refusals.clone().try_acquire_owned() {
            let (max, retry_after_s) = (config.connections_max, config.retry_after_s);
            tasks.spawn(refuse(tcp, permit, max, retry_after_s, limits));
        }
        // Otherwise the socket is dropped here: closed at once.
    }
    tracing::info!("shutting down");
    drop(listener);
    stop.cancel();
    tasks.close();
    tasks.wait().await;
    engine.shutdown().await;
    Ok(())
}

/// Answers one request of a connection over the cap with 503 `too_many_connections` and
/// `Retry-After`, then closes it.
async fn refuse(
    tcp: TcpStream,
    _refusal: OwnedSemaphorePermit,
    connections_max: usize,
    retry_after_s: u64,
    limits: Limits,
) {
    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let message = format!(
            "the server serves its maximum of {connections_max} connections; try again later"
        );
        let mut res =
            ApiError::capped("too_many_connections", message, retry_after_s).into_response();
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        if crate::langgraph::detail::is_route(req.uri().path()) {
            res = crate::langgraph::detail::as_detail(res);
        }
        async move { Ok::<_, std::convert::Infallible>(res) }
    });
    let conn = http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(limits.buffer_bytes_max)
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(tcp), service);
    let wait = Duration::from_millis(REFUSAL_WAIT_MS);
    let _ = tokio::time::timeout(wait, conn).await;
}

/// A peer that gave up during the handshake: nothing to do but accept the next.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
