//! What every handler shares: the engine, the tokens, the limits, the metrics, shutdown.

use std::sync::Arc;
use std::time::Duration;

use chronicle_engine::Engine;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::auth::{Tickets, Tokens};
use crate::browser::Site;

/// API limits; each carries its unit.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    pub request_body_bytes_max: usize,
    /// How long `POST /chat` and `resume` wait for a run to finish or need a human.
    pub chat_wait_ms: u64,
    pub sse_keepalive_ms: u64,
    /// Events one `/log` page returns at most.
    pub log_page_events_max: usize,
    /// Host names the server answers to besides its bound address and loopback names:
    /// `name` (any port) or `name:port`.
    pub allowed_hosts: Vec<String>,
    /// Origins of browser UIs served elsewhere that may call the API (CORS).
    pub cors_origins: Vec<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            request_body_bytes_max: 256 * 1024,
            chat_wait_ms: 60_000,
            sse_keepalive_ms: 15_000,
            log_page_events_max: 1000,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub registry: Registry,
    /// Requests by status class (`2xx`, `4xx`, ...).
    pub http_requests: Family<Vec<(String, String)>, Counter>,
    pub runs_started: Counter,
    pub decisions: Counter,
    pub open_streams: Gauge,
}

impl Metrics {
    fn new() -> Self {
        let mut m = Metrics::default();
        let mut registry = Registry::with_prefix("chronicle");
        registry.register(
            "http_requests",
            "HTTP requests by status class",
            m.http_requests.clone(),
        );
        registry.register(
            "runs_started",
            "Runs started through the API",
            m.runs_started.clone(),
        );
        registry.register(
            "approval_decisions",
            "Approval decisions accepted",
            m.decisions.clone(),
        );
        registry.register(
            "open_streams",
            "Open SSE and WebSocket streams",
            m.open_streams.clone(),
        );
        m.registry = registry;
        m
    }
}

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
    /// Which Host and Origin headers the server accepts; set from the bound address by
    /// [`crate::serve`].
    pub site: Arc<Site>,
}

impl AppState {
    pub fn new(engine: Engine, tokens: Tokens, config: ApiConfig) -> Self {
        let site = Site::new(None, &config.allowed_hosts, &config.cors_origins);
        Self {
            engine,
            tokens,
            config: Arc::new(config),
            metrics: Arc::new(Metrics::new()),
            shutdown: CancellationToken::new(),
            tickets: Arc::default(),
            site: Arc::new(site),
        }
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
