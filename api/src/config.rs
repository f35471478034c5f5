//! The API's configuration (its limits, each with its unit) and its metrics.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// API limits; each carries its unit. Every connection and every stream has a bounded cost: see
/// docs/decisions/connections.md for what each bounds and why.
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
    /// How long a request head may take to arrive: from the connection's opening for its first
    /// request, from the first byte of each later one. A connection past it is closed.
    pub header_read_timeout_ms: u64,
    /// How long a request body may take to arrive, from the end of its head: past it the request
    /// is answered 408 and the connection closed.
    pub body_read_timeout_ms: u64,
    /// How long a keep-alive connection may wait, with no request in flight, for the next one.
    pub idle_timeout_ms: u64,
    /// Connections served at once (a WebSocket counts until it closes). One more is answered 503
    /// with `Retry-After` and closed.
    pub connections_max: usize,
    /// What one connection buffers at most: the largest request head, and the response bytes
    /// queued for a client that reads slowly (hyper's buffer; at least 8 KiB).
    pub connection_buffer_bytes_max: usize,
    /// SSE and WebSocket streams open at once, in all.
    pub streams_max: usize,
    /// SSE and WebSocket streams one principal may hold open at once.
    pub streams_per_principal_max: usize,
    /// Events a stream reads ahead of its client; a client that stops reading holds no more
    /// (the stream reads the rest from the log when it reads again).
    pub sse_stream_buffer_events: usize,
    /// Frames a WebSocket queues for its client before its runs' streams wait.
    pub ws_outbox_messages: usize,
    /// The largest WebSocket message a client may send; a larger one is answered with an `error`
    /// frame (`payload_too_large`) and a close with code 1009.
    pub ws_message_bytes_max: usize,
    /// What `Retry-After` tells a client refused for a cap.
    pub retry_after_s: u64,
    /// How long a response may wait for its client to take more of it: a connection whose
    /// writes make no progress that long is closed (a client that sent a request and stopped
    /// reading holds nothing longer than this).
    pub send_timeout_ms: u64,
    /// State-changing requests one ordinary principal may make a second, on average (0: no
    /// quota); past it (after a burst) 429 `too_many_writes`. Admins are not limited.
    pub writes_per_principal_per_s: u32,
    /// The burst of such requests a principal may make at once.
    pub writes_per_principal_burst: u32,
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
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            connections_max: 4096,
            connection_buffer_bytes_max: 64 * 1024,
            streams_max: 2048,
            streams_per_principal_max: 256,
            sse_stream_buffer_events: 16,
            ws_outbox_messages: 32,
            ws_message_bytes_max: 256 * 1024,
            retry_after_s: 2,
            send_timeout_ms: 30_000,
            writes_per_principal_per_s: 100,
            writes_per_principal_burst: 1000,
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
    pub open_connections: Gauge,
    /// Connections and streams refused for a cap, by cap (`connections`, `streams`,
    /// `streams_per_principal`).
    pub refused: Family<Vec<(String, String)>, Counter>,
    /// The engine's caches: entries and events held (by `cache`), and lookups answered or
    /// missed; what was read from the store; how far the index is behind the log. Brought up
    /// to date when /metrics is read ([`Metrics::observe`]).
    pub cache_entries: Family<Vec<(String, String)>, Gauge>,
    pub cache_events: Family<Vec<(String, String)>, Gauge>,
    pub cache_hits: Family<Vec<(String, String)>, Counter>,
    pub cache_misses: Family<Vec<(String, String)>, Counter>,
    pub store_events_read: Counter,
    pub store_heads_read: Counter,
    pub index_behind_events: Gauge,
    /// Runs with an actor now.
    pub run_actors: Gauge,
    /// On a node of a cluster: the sessions it owns now.
    pub node_sessions: Gauge,
}

impl Metrics {
    /// Counts one refusal for `cap`.
    pub(crate) fn refuse(&self, cap: &str) {
        self.refused
            .get_or_create(&vec![("cap".to_owned(), cap.to_owned())])
            .inc();
    }

    /// Brings the cache and store metrics to what the engine says now.
    pub(crate) fn observe(&self, c: &chronicle_engine::CacheStats) {
        let cache = |name: &str| vec![("cache".to_owned(), name.to_owned())];
        let to = |counter: &Counter, total: u64| {
            counter.inc_by(total.saturating_sub(counter.get()));
        };
        let gauge = |g: &Gauge, v: u64| {
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
        };
        gauge(
            &self.cache_entries.get_or_create(&cache("run_facts")),
            c.facts_runs,
        );
        gauge(
            &self.cache_entries.get_or_create(&cache("ended_runs")),
            c.idle_runs,
        );
        gauge(
            &self.cache_events.get_or_create(&cache("ended_runs")),
            c.idle_events,
        );
        to(
            &self.cache_hits.get_or_create(&cache("run_facts")),
            c.facts_hits,
        );
        to(
            &self.cache_misses.get_or_create(&cache("run_facts")),
            c.facts_misses,
        );
        to(
            &self.cache_hits.get_or_create(&cache("ended_runs")),
            c.idle_hits,
        );
        to(
            &self.cache_misses.get_or_create(&cache("ended_runs")),
            c.idle_misses,
        );
        to(&self.store_events_read, c.store_events_read);
        to(&self.store_heads_read, c.store_heads_read);
        gauge(&self.index_behind_events, c.index_behind_events);
        gauge(&self.run_actors, c.actors);
        gauge(&self.node_sessions, c.node_sessions);
    }

    pub(crate) fn new() -> Self {
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
        registry.register(
            "open_connections",
            "Open HTTP connections (WebSockets included)",
            m.open_connections.clone(),
        );
        registry.register(
            "refused",
            "Connections and streams refused for a cap, by cap",
            m.refused.clone(),
        );
        registry.register(
            "cache_entries",
            "Entries an engine cache holds, by cache",
            m.cache_entries.clone(),
        );
        registry.register(
            "cache_events",
            "Events the states an engine cache holds fold, by cache",
            m.cache_events.clone(),
        );
        registry.register(
            "cache_hits",
            "Lookups an engine cache answered, by cache",
            m.cache_hits.clone(),
        );
        registry.register(
            "cache_misses",
            "Lookups an engine cache could not answer, by cache",
            m.cache_misses.clone(),
        );
        registry.register(
            "store_events_read",
            "Events read from the store",
            m.store_events_read.clone(),
        );
        registry.register(
            "store_heads_read",
            "Run heads read by walking every run",
            m.store_heads_read.clone(),
        );
        registry.register(
            "index_behind_events",
            "Durable events the index has not taken in yet",
            m.index_behind_events.clone(),
        );
        registry.register(
            "run_actors",
            "Runs with an actor now: those going on, and those just stopping",
            m.run_actors.clone(),
        );
        registry.register(
            "node_sessions",
            "On a node of a cluster: the sessions it owns now (0 on a single server)",
            m.node_sessions.clone(),
        );
        m.registry = registry;
        m
    }
}
