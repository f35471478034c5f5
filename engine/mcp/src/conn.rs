//! One live connection to an MCP server: a child process spoken to over stdio, or a
//! streamable-HTTP session, opened with the MCP handshake by the official SDK (`rmcp`). A stdio
//! server is our own child in its own process group: its stderr goes to the log line by line,
//! and stopping it closes its stdin (the MCP way to ask it to exit), then kills the group if it
//! lingers, and reaps it.

use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::service::{ClientInitializeError, Peer, RoleClient, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::config::{Resolved, Transport};
use crate::error::StartError;
use crate::handler::Handler;

/// How long a stopping server gets to exit by itself after its stdin closed (or its HTTP session
/// ended) before its process group is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The longest stderr line logged as it is; the rest of a longer one is cut.
const STDERR_LINE_BYTES_MAX: usize = 4096;

type Service = RunningService<RoleClient, Handler>;

/// A started server.
pub(crate) struct Conn {
    /// `None` only for a server whose handshake failed (never handed out).
    peer: Option<Peer<RoleClient>>,
    service: tokio::sync::Mutex<Option<Service>>,
    child: tokio::sync::Mutex<Option<tokio::process::Child>>,
    pid: Option<u32>,
    /// How the process ended, once known.
    exit: Mutex<Option<String>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("pid", &self.pid).finish()
    }
}

impl Conn {
    /// Starts the server (`cwd`: where a session's process runs) and completes the handshake
    /// within `limit`.
    pub(crate) async fn start(
        cfg: &Resolved,
        cwd: Option<&Path>,
        handler: Handler,
        limit: Duration,
    ) -> Result<Conn, StartError> {
        match &cfg.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd: own,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    // Its own group, so stopping it also stops what it started (a wrapper's
                    // interpreter), and a terminal's Ctrl-C reaches only the engine, which then
                    // stops it in order.
                    .process_group(0);
                if let Some(dir) = cwd.or(own.as_deref()) {
                    cmd.current_dir(dir);
                }
                let shown = command.display().to_string();
                let mut child = cmd.spawn().map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => StartError::CommandNotFound {
                        command: shown.clone(),
                    },
                    _ => StartError::Spawn {
                        command: shown.clone(),
                        message: e.to_string(),
                    },
                })?;
                if let Some(stderr) = child.stderr.take() {
                    tokio::spawn(log_stderr(cfg.name.clone(), stderr));
                }
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(StartError::Spawn {
                        command: shown,
                        message: "no stdio pipes".into(),
                    });
                };
                let served = tokio::time::timeout(limit, handler.serve((stdout, stdin))).await;
                Conn::finish_start(served, Some(child), limit).await
            }
            Transport::Http { url, headers } => {
                install_crypto_provider();
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers.iter().cloned().collect())
                    .reinit_on_expired_session(true);
                let transport = StreamableHttpClientTransport::from_config(config);
                let served = tokio::time::timeout(limit, handler.serve(transport)).await;
                Conn::finish_start(served, None, limit).await
            }
        }
    }

    /// The connection once the handshake is done; else the process stopped and the reason.
    async fn finish_start(
        served: Result<Result<Service, ClientInitializeError>, tokio::time::error::Elapsed>,
        child: Option<tokio::process::Child>,
        limit: Duration,
    ) -> Result<Conn, StartError> {
        let pid = child.as_ref().and_then(tokio::process::Child::id);
        let conn = |service: Option<Service>, peer| Conn {
            peer,
            service: tokio::sync::Mutex::new(service),
            child: tokio::sync::Mutex::new(child),
            pid,
            exit: Mutex::new(None),
        };
        let err = match served {
            Ok(Ok(service)) => {
                let peer = service.peer().clone();
                return Ok(conn(Some(service), Some(peer)));
            }
            Ok(Err(ClientInitializeError::TransportError { error, context })) => {
                StartError::Handshake(format!("{} (when {context})", error_chain(&*error.error)))
            }
            Ok(Err(e)) => StartError::Handshake(e.to_string()),
            Err(_) => StartError::Timeout(limit.as_millis() as u64),
        };
        let failed = conn(None, None);
        let err = match (err, failed.exit_status().await) {
            (StartError::Handshake(m), Some(exit)) => StartError::Handshake(format!(
                "{m}; the process {exit} (its stderr is in the log)"
            )),
            (err, _) => err,
        };
        failed.stop().await;
        Err(err)
    }

    /// The connection is gone (the process closed its stdout, the HTTP worker ended).
    pub(crate) fn is_closed(&self) -> bool {
        self.peer.as_ref().is_none_or(Peer::is_transport_closed)
    }

    pub(crate) fn peer(&self) -> Option<&Peer<RoleClient>> {
        self.peer.as_ref()
    }

    /// How the process ended (`exited with exit status: 1`, `was killed by signal 9`), waiting a
    /// little for one whose pipes closed; `None` while it runs, or for an HTTP server.
    pub(crate) async fn exit_status(&self) -> Option<String> {
        if let Some(known) = self.exit.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Some(known);
        }
        let mut child = self.child.lock().await;
        let child = child.as_mut()?;
        let status = tokio::time::timeout(Duration::from_millis(500), child.wait())
            .await
            .ok()?
            .ok()?;
        use std::os::unix::process::ExitStatusExt;
        let text = match status.signal() {
            Some(sig) => format!("was killed by signal {sig}"),
            None => format!("exited with {status}"),
        };
        *self.exit.lock().unwrap_or_else(|e| e.into_inner()) = Some(text.clone());
        Some(text)
    }

    /// Ends the connection and reaps the process: its stdin closes, then after [`STOP_GRACE`]
    /// its process group is killed.
    pub(crate) async fn stop(&self) {
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = service.close_with_timeout(STOP_GRACE).await;
        }
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            kill_group(self.pid);
            let _ = child.wait().await;
        }
    }

    /// Kills the process group at once (it hangs) and reaps it.
    pub(crate) async fn kill(&self) {
        if let Some(service) = self.service.lock().await.take() {
            service.cancellation_token().cancel();
        }
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        if child.try_wait().ok().flatten().is_none() {
            kill_group(self.pid);
        }
        let _ = child.wait().await;
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Not stopped in order (a panic, a runtime going away): the process group goes now;
        // `kill_on_drop` has the runtime reap the leader.
        if let Some(child) = self.child.get_mut()
            && child.try_wait().ok().flatten().is_none()
        {
            kill_group(self.pid);
        }
    }
}

/// An error with its sources, `: `-joined (a transport's error says little without them: a
/// refused connection is three levels down).
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// SIGKILL to the process group led by `pid` (which must not be reaped yet, so the group id
/// still names it).
fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// The crypto provider of the HTTP transport's rustls: `ring`, installed once for the process
/// (an already installed one stays).
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A stdio server's stderr, a line at a time, to the log (at `info`, under the server's name):
/// servers write their diagnostics there.
async fn log_stderr(server: String, mut stderr: impl AsyncRead + Unpin) {
    let mut buf = [0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&server, &line, cut);
                line.clear();
                cut = false;
            } else if line.len() < STDERR_LINE_BYTES_MAX {
                line.push(b);
            } else {
                cut = true;
            }
        }
    }
    if !line.is_empty() {
        emit(&server, &line, cut);
    }
}

fn emit(server: &str, line: &[u8], cut: bool) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if text.is_empty() {
        return;
    }
    let more = if cut { " …" } else { "" };
    tracing::info!(target: "chronicle_mcp::stderr", server, "{text}{more}");
}
