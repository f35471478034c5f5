//! What every handler shares: the engine, the tokens, the limits, the metrics, shutdown.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use chronicle_engine::Engine;
use tokio_util::sync::CancellationToken;

use crate::auth::{Sessions, Tickets, Tokens};
use crate::browser::Site;
use crate::config::ApiConfig;
use crate::limits::Streams;
use crate::metrics::Metrics;
use crate::quota::{WriteQuota, Writes};

/// Shared by every handler; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    pub engine: Engine,
    pub tokens: Tokens,
    pub config: Arc<ApiConfig>,
    pub metrics: Arc<Metrics>,
    /// Cancelled at shutdown: every SSE and WebSocket stream ends on it, or graceful shutdown
    /// would wait for them forever.
    pub shutdown: CancellationToken,
    /// Stream tickets issued and not yet used.
    pub tickets: Arc<Tickets>,
    /// The console's signed-in sessions.
    pub sessions: Arc<Sessions>,
    /// Which Host and Origin headers the server accepts; set from the bound address by
    /// [`crate::serve`].
    pub site: Arc<Site>,
    /// The open SSE and WebSocket streams, counted against their caps.
    pub(crate) streams: Arc<Streams>,
    /// When this state was made (the server's start): the LangGraph assistants' creation time.
    pub started_at: chronicle_schemas::Timestamp,
    /// Each ordinary principal's quota on writes.
    pub(crate) quota: Arc<WriteQuota>,
    /// On a node of a cluster: how it sends a change on to the node that drives its session.
    pub cluster: Option<Arc<crate::cluster::Link>>,
}

// What the extractors and middlewares take of the state (they do not know `AppState`).
impl FromRef<AppState> for Tokens {
    fn from_ref(st: &AppState) -> Self {
        st.tokens.clone()
    }
}

impl FromRef<AppState> for Arc<Tickets> {
    fn from_ref(st: &AppState) -> Self {
        st.tickets.clone()
    }
}

impl FromRef<AppState> for Arc<Sessions> {
    fn from_ref(st: &AppState) -> Self {
        st.sessions.clone()
    }
}

impl FromRef<AppState> for Arc<Site> {
    fn from_ref(st: &AppState) -> Self {
        st.site.clone()
    }
}

impl FromRef<AppState> for Writes {
    fn from_ref(st: &AppState) -> Self {
        Writes {
            quota: st.quota.clone(),
            tokens: st.tokens.clone(),
            sessions: st.sessions.clone(),
            metrics: st.metrics.clone(),
            config: st.config.clone(),
        }
    }
}

impl AppState {
    pub fn new(engine: Engine, tokens: Tokens, config: ApiConfig) -> Self {
        let site = Site::new(None, &config.allowed_hosts, &config.cors_origins);
        let metrics = Arc::new(Metrics::new(engine.store()));
        let streams = Arc::new(Streams::new(&config, metrics.clone()));
        // Once per store, before anything is served: a store whose thread records predate
        // the thread index gets it built (a store whose index is built is not read). A failure
        // is logged, and thread search answers that the index is not built.
        match crate::langgraph::build_thread_index(engine.store()) {
            Ok(0) => {}
            Ok(n) => tracing::info!(threads = n, "built the LangGraph thread index"),
            Err(e) => {
                tracing::error!(error = %e.message, "building the LangGraph thread index failed")
            }
        }
        let quota = WriteQuota::new(
            config.writes_per_principal_per_s,
            config.writes_per_principal_burst,
        );
        let shutdown = CancellationToken::new();
        // Outside a runtime (a tool that only renders pages) nothing runs, so nothing is counted.
        if tokio::runtime::Handle::try_current().is_ok() {
            metrics.follow(engine.store(), shutdown.clone());
        }
        Self {
            quota: Arc::new(quota),
            engine,
            tokens,
            config: Arc::new(config),
            metrics,
            shutdown,
            tickets: Arc::default(),
            sessions: Arc::default(),
            site: Arc::new(site),
            streams,
            started_at: now(),
            cluster: None,
        }
    }

    /// Shows the live trace export's counters on `/metrics`.
    pub fn with_traces(self, stats: Arc<chronicle_telemetry::TraceStats>) -> Self {
        let _ = self.metrics.traces.set(stats);
        self
    }

    /// On a node of a cluster (the engine's settings say so): requests carrying the cluster's
    /// secret act for the principal they name, and changes to sessions other nodes drive are
    /// sent there. Unchanged on a single server.
    pub fn in_cluster(mut self) -> Result<Self, String> {
        let Some(secret) = self
            .engine
            .settings()
            .cluster
            .as_ref()
            .map(|c| c.secret.clone())
        else {
            return Ok(self);
        };
        self.tokens = self.tokens.with_cluster_secret(&secret)?;
        self.cluster = Some(Arc::new(crate::cluster::Link::new(&secret)?));
        Ok(self)
    }

    /// The state of a server bound to `addr`: its Host and Origin checks know the address.
    pub fn bound_to(mut self, addr: std::net::SocketAddr) -> Self {
        let c = &self.config;
        self.site = Arc::new(Site::new(Some(addr), &c.allowed_hosts, &c.cors_origins));
        self
    }

    pub fn chat_wait(&self) -> Duration {
        Duration::from_millis(self.config.chat_wait_ms)
    }
}

pub(crate) fn now() -> chronicle_schemas::Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    chronicle_schemas::Timestamp::from_micros(
        i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX),
    )
}
