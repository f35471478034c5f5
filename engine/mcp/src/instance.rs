//! A server that stays usable: started on its first need, restarted with backoff after it exits
//! or hangs, stopped on demand. Every tool call goes through [`Instance::call`]: a (re)start has
//! [`START_TIMEOUT_MS`], then the call itself has the entry's `timeout_ms`, so a slow start never
//! eats into a short call's time.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, PingRequest,
};
use rmcp::service::PeerRequestOptions;
use tokio::time::Instant;

use crate::config::Resolved;
use crate::conn::Conn;
use crate::handler::Handler;

/// The wait before the first restart after a failure; it doubles with each failure in a row.
pub const RESTART_BACKOFF_MS_MIN: u64 = 100;
/// The longest wait between restarts.
pub const RESTART_BACKOFF_MS_MAX: u64 = 30_000;
/// How long starting a server and its handshake may take.
pub const START_TIMEOUT_MS: u64 = 30_000;
/// After a call timed out, how long the server has at most to answer a ping before it counts as
/// hung (and is restarted); never longer than the call's own timeout.
const PING_TIMEOUT_MAX: Duration = Duration::from_secs(5);

/// How long the ping after a timed-out call may take, for a call timeout of `timeout`.
pub(crate) fn ping_bound(timeout: Duration) -> Duration {
    timeout.min(PING_TIMEOUT_MAX)
}

/// Why a call got no answer from the server; the text is what the agent reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CallError {
    #[error("MCP server `{server}` is not available: {reason}")]
    Unavailable { server: String, reason: String },
    #[error(
        "MCP server `{server}` {how} during the call; the call's outcome is unknown, and the server is restarted for the next call"
    )]
    Lost { server: String, how: String },
    #[error("timed out after {ms} ms; the call was cancelled")]
    Timeout { ms: u64 },
    #[error(
        "timed out after {ms} ms; the call was cancelled, and MCP server `{server}` does not answer a ping either: it is restarted for the next call"
    )]
    Hung { server: String, ms: u64 },
    #[error("MCP server `{server}` refused the call: {message}")]
    Refused { server: String, message: String },
}

/// The connection and what its failures have been.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Conn>>,
    /// Starts or connections that failed in a row.
    failures: u32,
    /// No start before this.
    retry_at: Option<Instant>,
    /// Started once already: a later start lists the tools again.
    started: bool,
}

impl Slot {
    fn failed(&mut self) {
        self.failures = self.failures.saturating_add(1);
        let shift = self.failures.saturating_sub(1).min(16);
        let ms = RESTART_BACKOFF_MS_MIN
            .saturating_mul(1 << shift)
            .min(RESTART_BACKOFF_MS_MAX);
        self.retry_at = Some(Instant::now() + Duration::from_millis(ms));
    }
}

pub(crate) struct Instance {
    cfg: Arc<Resolved>,
    handler: Handler,
    /// Where a session's process runs; `None`: the entry's own `cwd`.
    cwd: Option<PathBuf>,
    slot: tokio::sync::Mutex<Slot>,
    in_flight: AtomicU32,
    last_used: Mutex<std::time::Instant>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("server", &self.cfg.name)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// An instance with a call in flight: while one is held the instance is not idle, and its drop
/// counts as the instance's last use.
pub(crate) struct Entered(pub Arc<Instance>);

impl Drop for Entered {
    fn drop(&mut self) {
        *self.0.last_used.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Instance {
    pub(crate) fn new(cfg: Arc<Resolved>, handler: Handler, cwd: Option<PathBuf>) -> Self {
        Self {
            cfg,
            handler,
            cwd,
            slot: tokio::sync::Mutex::default(),
            in_flight: AtomicU32::new(0),
            last_used: Mutex::new(std::time::Instant::now()),
        }
    }

    /// Counts a call in flight until the guard drops (take it where the instance is looked up,
    /// so an idle check cannot stop it in between).
    pub(crate) fn enter(self: &Arc<Self>) -> Entered {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Entered(self.clone())
    }

    fn unavailable(&self, reason: String) -> CallError {
        CallError::Unavailable {
            server: self.cfg.name.clone(),
            reason,
        }
    }

    /// Calls a tool, starting or restarting the server first if need be. The caller holds the
    /// instance [`enter`](Self::enter)ed.
    pub(crate) async fn call(
        self: &Arc<Self>,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, CallError> {
        let conn = self
            .conn(Instant::now() + Duration::from_millis(START_TIMEOUT_MS))
            .await?;
        let deadline = Instant::now() + self.cfg.timeout;
        let Some(peer) = conn.peer().cloned() else {
            return Err(self.unavailable("no connection".into()));
        };
        let answer = match tokio::time::timeout_at(deadline, peer.call_tool_once(params)).await {
            // Dropping the call's future sent the server `notifications/cancelled`.
            Err(_) => {
                let ms = self.cfg.timeout.as_millis() as u64;
                if self.answers_ping(&peer).await {
                    return Err(CallError::Timeout { ms });
                }
                tracing::warn!(server = %self.cfg.name, "an MCP server does not answer a ping after a timed-out call; it is restarted");
                self.lost(&conn, true).await;
                return Err(CallError::Hung {
                    server: self.cfg.name.clone(),
                    ms,
                });
            }
            Ok(answer) => answer,
        };
        match answer {
            Ok(CallToolResponse::Complete(result)) => {
                self.slot.lock().await.failures = 0;
                Ok(result)
            }
            Ok(CallToolResponse::InputRequired(_) | CallToolResponse::Task(_)) => {
                Err(CallError::Refused {
                    server: self.cfg.name.clone(),
                    message:
                        "it asked for input or started a task, which Chronicle does not answer"
                            .into(),
                })
            }
            Ok(_) => Err(self.unavailable("an answer of an unknown kind".into())),
            Err(ServiceError::McpError(e)) => Err(CallError::Refused {
                server: self.cfg.name.clone(),
                message: e.message.to_string(),
            }),
            Err(e) => {
                let how = match (conn.exit_status().await, &e) {
                    (Some(exit), _) => exit,
                    (None, ServiceError::TransportSend(t)) => format!(
                        "lost its connection ({})",
                        crate::conn::error_chain(&*t.error)
                    ),
                    (None, e) => format!("lost its connection ({e})"),
                };
                tracing::warn!(server = %self.cfg.name, how, "an MCP server failed during a call");
                self.lost(&conn, false).await;
                Err(CallError::Lost {
                    server: self.cfg.name.clone(),
                    how,
                })
            }
        }
    }

    /// The live connection, started now if there is none (or it died), after the backoff of
    /// the failures before it; all by `deadline`.
    async fn conn(&self, deadline: Instant) -> Result<Arc<Conn>, CallError> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = &slot.conn {
            if !conn.is_closed() {
                return Ok(conn.clone());
            }
            let dead = conn.clone();
            slot.conn = None;
            let how = dead.exit_status().await.unwrap_or_else(|| "closed".into());
            tracing::warn!(server = %self.cfg.name, how, "an MCP server stopped between calls; it is restarted");
            dead.stop().await;
            slot.failed();
        }
        if let Some(at) = slot.retry_at
            && at > Instant::now()
        {
            if at > deadline {
                let ms = at.saturating_duration_since(Instant::now()).as_millis();
                return Err(self.unavailable(format!(
                    "it failed {} times in a row; the next start is in {ms} ms",
                    slot.failures
                )));
            }
            tokio::time::sleep_until(at).await;
        }
        let limit = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(START_TIMEOUT_MS));
        match Conn::start(&self.cfg, self.cwd.as_deref(), self.handler.clone(), limit).await {
            Ok(conn) => {
                let conn = Arc::new(conn);
                tracing::info!(server = %self.cfg.name, pid = ?conn.pid(), cwd = ?self.cwd, "MCP server started");
                if slot.started
                    && let (Some(server), Some(peer)) =
                        (self.handler.server.upgrade(), conn.peer().cloned())
                {
                    // A restarted server may list other tools.
                    tokio::spawn(async move { server.refresh(&peer).await });
                }
                slot.started = true;
                slot.conn = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                slot.failed();
                tracing::warn!(server = %self.cfg.name, error = %e, "an MCP server could not be started");
                Err(self.unavailable(e.to_string()))
            }
        }
    }

    /// Starts the server now (at registration), for its tool list.
    pub(crate) async fn start(&self) -> Result<Arc<Conn>, crate::error::StartError> {
        let mut slot = self.slot.lock().await;
        let limit = Duration::from_millis(START_TIMEOUT_MS);
        let conn = Arc::new(
            Conn::start(&self.cfg, self.cwd.as_deref(), self.handler.clone(), limit).await?,
        );
        slot.started = true;
        slot.conn = Some(conn.clone());
        Ok(conn)
    }

    /// `conn` failed: it is stopped (`kill`: at once, it hangs) and its process reaped, and the
    /// next start waits its backoff.
    async fn lost(&self, conn: &Arc<Conn>, kill: bool) {
        let mut slot = self.slot.lock().await;
        if slot.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            slot.conn = None;
            slot.failed();
        }
        drop(slot);
        if kill {
            conn.kill().await;
        } else {
            conn.stop().await;
        }
    }

    /// Whether the server answers a ping within [`ping_bound`].
    async fn answers_ping(&self, peer: &rmcp::service::Peer<rmcp::service::RoleClient>) -> bool {
        let ping = ClientRequest::PingRequest(PingRequest::default());
        let options = PeerRequestOptions::with_timeout(ping_bound(self.cfg.timeout));
        match peer.send_request_with_option(ping, options).await {
            Ok(handle) => handle.await_response().await.is_ok(),
            Err(_) => false,
        }
    }

    /// Stops the server (its process reaped); a later call starts it again.
    pub(crate) async fn stop(&self) {
        let conn = self.slot.lock().await.conn.take();
        if let Some(conn) = conn {
            conn.stop().await;
        }
    }

    /// How long it has been unused; `None` while a call is in flight.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(
            self.last_used
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed(),
        )
    }

    /// The process id of a running stdio server.
    pub(crate) async fn pid(&self) -> Option<u32> {
        self.slot.lock().await.conn.as_ref().and_then(|c| c.pid())
    }
}
