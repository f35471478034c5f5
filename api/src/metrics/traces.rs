//! The live OTLP trace export's counters, read when `/metrics` is scraped (zeros while the
//! export is off, so that rates and alerts find the series).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};

use chronicle_telemetry::TraceStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::labels;

/// The export's counters, once the server starts it.
#[derive(Debug, Default)]
pub(crate) struct TraceCollector(pub Arc<OnceLock<Arc<TraceStats>>>);

impl Collector for TraceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let t = self.0.get();
        let load = |pick: fn(&TraceStats) -> &std::sync::atomic::AtomicU64| {
            t.map_or(0, |t| pick(t).load(Relaxed))
        };
        let mut e = encoder.encode_descriptor(
            "trace_spans",
            "Spans of the live OTLP trace export, by outcome: exported, dropped (the queue was full: a receiver down or slow) or failed (refused, unreachable or timed out)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, n) in [
            ("exported", load(|t| &t.exported)),
            ("dropped", load(|t| &t.dropped)),
            ("failed", load(|t| &t.failed)),
        ] {
            ConstCounter::new(n).encode(e.encode_family(&labels(&[("outcome", outcome)]))?)?;
        }
        let queued = ConstGauge::new(i64::try_from(load(|t| &t.queued)).unwrap_or(i64::MAX));
        queued.encode(encoder.encode_descriptor(
            "trace_spans_queued",
            "Spans of the live OTLP trace export waiting in its queue",
            None,
            queued.metric_type(),
        )?)
    }
}
