//! Serving the router: the bind policy and graceful shutdown that ends every stream and flushes
//! the store.

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::{AppState, Tokens, router};

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
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = state.bound_to(listener.local_addr()?);
    let streams = state.shutdown.clone();
    let engine = state.engine.clone();
    let app = router(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("shutting down");
            streams.cancel();
        })
        .await?;
    engine.shutdown().await;
    Ok(())
}
