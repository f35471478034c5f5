//! The store's metrics, read when `/metrics` is scraped: what its appends, durability waits and
//! barriers took (histograms the store keeps in atomics: it knows no metrics library), and
//! whether it takes appends.

use chronicle_engine::store::{HistogramSnapshot, StorageHealth, Store};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::labels;

/// Encodes the store's metrics on every scrape.
#[derive(Debug)]
pub(crate) struct StoreCollector(pub Store);

fn histogram(encoder: MetricEncoder<'_>, h: &HistogramSnapshot) -> std::fmt::Result {
    let mut encoder = encoder;
    encoder.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)
}

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let w = self.0.write_timings();
        let mut e = encoder.encode_descriptor(
            "store_append_duration_seconds",
            "Appends to the log, by what they waited for before they answered (durable: the barrier; written: only the write)",
            None,
            MetricType::Histogram,
        )?;
        for (ack, h) in [
            ("durable", &w.append_durable_seconds),
            ("written", &w.append_written_seconds),
        ] {
            histogram(e.encode_family(&labels(&[("ack", ack)]))?, &h.snapshot())?;
        }
        histogram(
            encoder.encode_descriptor(
                "store_append_events",
                "Events per append",
                None,
                MetricType::Histogram,
            )?,
            &w.append_events.snapshot(),
        )?;
        histogram(
            encoder.encode_descriptor(
                "store_durable_wait_duration_seconds",
                "Waits for written events to become durable",
                None,
                MetricType::Histogram,
            )?,
            &w.durable_wait_seconds.snapshot(),
        )?;
        if let Some(t) = self.0.log_timings() {
            histogram(
                encoder.encode_descriptor(
                    "store_barrier_duration_seconds",
                    "Durability barriers (flush and fsync)",
                    None,
                    MetricType::Histogram,
                )?,
                &t.barrier_seconds.snapshot(),
            )?;
            histogram(
                encoder.encode_descriptor(
                    "store_commit_batch_events",
                    "Events per batch the log's writer wrote at once (group commit)",
                    None,
                    MetricType::Histogram,
                )?,
                &t.batch_events.snapshot(),
            )?;
        }
        let barriers = ConstCounter::new(self.0.barriers());
        barriers.encode(encoder.encode_descriptor(
            "store_barriers",
            "Durability barriers passed since the store opened",
            None,
            barriers.metric_type(),
        )?)?;
        let health = self.0.health();
        let mut e = encoder.encode_descriptor(
            "storage_health",
            "Whether the store takes appends: 1 for the state it is in (ok, full, failed), 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for state in ["ok", "full", "failed"] {
            let now = match &health {
                StorageHealth::Ok => "ok",
                StorageHealth::Full { .. } => "full",
                StorageHealth::Failed(_) => "failed",
            };
            ConstGauge::new(i64::from(state == now))
                .encode(e.encode_family(&labels(&[("state", state)]))?)?;
        }
        Ok(())
    }
}
