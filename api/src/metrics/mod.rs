//! The metrics `/metrics` serves, in Prometheus' conventions (prefix `chronicle_`, base units,
//! counters ending in `_total`): HTTP requests and their latency, what runs did (counted from
//! the durable log), the store's appends and barriers, and the server's connections, streams,
//! caches and refusals. Every label takes a bounded set of values.

mod events;
mod http;
mod store;
pub(crate) mod text;
mod traces;

use std::sync::Arc;
use std::time::Duration;

use chronicle_engine::store::Store;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

pub use events::{LABEL_VALUES_MAX, OPEN_ITEMS_MAX};
pub use http::UNMATCHED;
pub(crate) use http::{Route, count, tag_route};

/// A series' labels.
pub(crate) type Labels = Vec<(String, String)>;

pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A family of histograms, each with the same upper bounds.
pub(crate) type HistogramFamily = Family<Labels, Histogram, Buckets>;

/// The upper bounds of a family's histograms.
#[derive(Clone, Debug)]
pub(crate) struct Buckets(&'static [f64]);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

pub(crate) fn histogram_family(buckets: &'static [f64]) -> HistogramFamily {
    Family::new_with_constructor(Buckets(buckets))
}

/// How long a scrape waits for the log's follower to count what was durable when it came.
const SCRAPE_CATCH_UP: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    pub(crate) http: http::HttpMetrics,
    pub(crate) events: Arc<events::EventMetrics>,
    pub open_streams: Gauge,
    pub open_connections: Gauge,
    /// Connections, streams and writes refused for a cap, by cap (`connections`, `streams`,
    /// `streams_per_principal`, `writes_per_principal`).
    pub refused: Family<Labels, Counter>,
    /// The engine's caches: entries and events held (by `cache`), and lookups answered or
    /// missed; what was read from the store; how far the index is behind the log. Brought up
    /// to date when /metrics is read ([`Metrics::observe`]).
    pub cache_entries: Family<Labels, Gauge>,
    pub cache_events: Family<Labels, Gauge>,
    pub cache_hits: Family<Labels, Counter>,
    pub cache_misses: Family<Labels, Counter>,
    pub store_events_read: Counter,
    pub store_heads_read: Counter,
    pub index_behind_events: Gauge,
    /// Runs with an actor now.
    pub run_actors: Gauge,
    /// On a node of a cluster: the sessions it owns now.
    pub node_sessions: Gauge,
    /// Approvals waiting for a decision, of every run (the index's count, read at scrape).
    pub approvals_pending: Gauge,
    /// The live OTLP trace export's counters, once the server starts it (read at scrape).
    pub(crate) traces: Arc<std::sync::OnceLock<Arc<chronicle_telemetry::TraceStats>>>,
}

impl Metrics {
    /// The metrics of a server over `store`; the store's own are read from it at every scrape.
    pub fn new(store: &Store) -> Self {
        let mut registry = Registry::with_prefix("chronicle");
        let http = http::HttpMetrics::new(&mut registry);
        let events = Arc::new(events::EventMetrics::new(&mut registry));
        registry.register_collector(Box::new(store::StoreCollector(store.clone())));
        let m = Metrics {
            http,
            events,
            open_streams: Gauge::default(),
            open_connections: Gauge::default(),
            refused: Family::default(),
            cache_entries: Family::default(),
            cache_events: Family::default(),
            cache_hits: Family::default(),
            cache_misses: Family::default(),
            store_events_read: Counter::default(),
            store_heads_read: Counter::default(),
            index_behind_events: Gauge::default(),
            run_actors: Gauge::default(),
            node_sessions: Gauge::default(),
            approvals_pending: Gauge::default(),
            traces: Arc::default(),
            registry: Registry::default(),
        };
        m.register(registry)
    }

    fn register(mut self, mut registry: Registry) -> Self {
        let r = &mut registry;
        r.register(
            "open_streams",
            "Open SSE and WebSocket streams",
            self.open_streams.clone(),
        );
        r.register(
            "open_connections",
            "Open HTTP connections (WebSockets included)",
            self.open_connections.clone(),
        );
        r.register(
            "refused",
            "Connections, streams and writes refused for a cap, by cap",
            self.refused.clone(),
        );
        r.register(
            "approvals_pending",
            "Approvals waiting for a decision, of every run",
            self.approvals_pending.clone(),
        );
        r.register(
            "cache_entries",
            "Entries an engine cache holds, by cache",
            self.cache_entries.clone(),
        );
        r.register(
            "cache_events",
            "Events the states an engine cache holds fold, by cache",
            self.cache_events.clone(),
        );
        r.register(
            "cache_hits",
            "Lookups an engine cache answered, by cache",
            self.cache_hits.clone(),
        );
        r.register(
            "cache_misses",
            "Lookups an engine cache could not answer, by cache",
            self.cache_misses.clone(),
        );
        r.register(
            "store_events_read",
            "Events read from the store",
            self.store_events_read.clone(),
        );
        r.register(
            "store_heads_read",
            "Run heads read by walking every run",
            self.store_heads_read.clone(),
        );
        r.register(
            "index_behind_events",
            "Durable events the index has not taken in yet",
            self.index_behind_events.clone(),
        );
        r.register(
            "run_actors",
            "Runs with an actor now: those going on, and those just stopping",
            self.run_actors.clone(),
        );
        r.register(
            "node_sessions",
            "On a node of a cluster: the sessions it owns now (0 on a single server)",
            self.node_sessions.clone(),
        );
        r.register_collector(Box::new(traces::TraceCollector(self.traces.clone())));
        self.registry = registry;
        self
    }

    /// Starts counting what runs do from the log's durable head (see [`events`]), until `stop`
    /// or the store closes.
    pub(crate) fn follow(&self, store: &Store, stop: CancellationToken) {
        events::follow(store, self.events.clone(), stop);
    }

    /// Waits (briefly) until the events durable at `head` are counted.
    pub(crate) async fn caught_up(&self, head: u64) {
        self.events.caught_up(head, SCRAPE_CATCH_UP).await;
    }

    /// Counts one refusal for `cap`.
    pub(crate) fn refuse(&self, cap: &str) {
        self.refused.get_or_create(&labels(&[("cap", cap)])).inc();
    }

    /// Brings the cache and store metrics to what the engine says now.
    pub(crate) fn observe(&self, c: &chronicle_engine::CacheStats) {
        let cache = |name: &str| labels(&[("cache", name)]);
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
        gauge(&self.approvals_pending, c.pending_approvals);
    }

    /// The metrics as text: OpenMetrics when `accept` asks for it, else the Prometheus text
    /// format. Returns the body and its content type.
    pub(crate) fn encode(
        &self,
        accept: Option<&str>,
    ) -> Result<(String, &'static str), std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(if text::wants_openmetrics(accept) {
            (out, text::OPENMETRICS)
        } else {
            (text::to_prometheus_text(&out), text::PROMETHEUS_TEXT)
        })
    }
}
