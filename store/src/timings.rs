//! How long writes take and how large they are: fixed-bucket histograms of atomics, cheap enough
//! to record on every append. The store knows no metrics library; whoever serves metrics reads
//! them ([`Histogram::snapshot`]) when it is scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of latency buckets, in seconds: 50 µs to 10 s, the range from an in-memory
/// append to a barrier on a slow disk.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Upper bounds of size buckets, in events: one event to the writer's largest batches.
pub const EVENTS_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// A histogram with fixed upper bounds; each observation is three relaxed atomic adds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, plus one for what exceeds the last (not cumulative).
    counts: Box<[AtomicU64]>,
    /// The sum of observations, as `f64` bits.
    sum: AtomicU64,
    count: AtomicU64,
}

/// What a [`Histogram`] held when it was read: cumulative counts per upper bound (the last one
/// `+Inf`), the sum and the count, as the Prometheus exposition wants them.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: f64) {
        let i = self.bounds.partition_point(|&b| b < value);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        // A CAS loop: there is no atomic f64 add. Contention is one writer thread and a few
        // actors, so it rarely loops.
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observes a duration, in seconds.
    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    /// The counts now. Read while others record, the buckets, sum and count may disagree by the
    /// observations in flight (a scrape is a sample, not a transaction); the `+Inf` bucket is the
    /// count, as the format requires.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut total = 0;
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .zip(self.counts.iter())
            .map(|(&b, c)| {
                total += c.load(Ordering::Relaxed);
                (b, total)
            })
            .collect();
        total += self.counts[self.bounds.len()].load(Ordering::Relaxed);
        buckets.push((f64::INFINITY, total));
        HistogramSnapshot {
            buckets,
            sum: f64::from_bits(self.sum.load(Ordering::Relaxed)),
            count: total,
        }
    }
}

/// What the writes through a [`crate::Store`] (and its clones) took: every append, by what it
/// waited for, and every wait for durability.
#[derive(Debug)]
pub struct WriteTimings {
    /// Appends acknowledged once durable (`append`), in seconds.
    pub append_durable_seconds: Histogram,
    /// Appends answered once written, before the barrier (`append_written`), in seconds.
    pub append_written_seconds: Histogram,
    /// Events per append.
    pub append_events: Histogram,
    /// Waits for written events to become durable (`wait_durable`), in seconds.
    pub durable_wait_seconds: Histogram,
}

impl Default for WriteTimings {
    fn default() -> Self {
        Self {
            append_durable_seconds: Histogram::new(SECONDS_BUCKETS),
            append_written_seconds: Histogram::new(SECONDS_BUCKETS),
            append_events: Histogram::new(EVENTS_BUCKETS),
            durable_wait_seconds: Histogram::new(SECONDS_BUCKETS),
        }
    }
}

/// What a log's own writer measured: each durability barrier (flush and fsync, or a commit) and
/// each batch it wrote at once (group commit). A log without a writer of its own has none.
#[derive(Debug)]
pub struct LogTimings {
    pub barrier_seconds: Histogram,
    /// Events per batch the writer wrote at once.
    pub batch_events: Histogram,
}

impl Default for LogTimings {
    fn default() -> Self {
        Self {
            barrier_seconds: Histogram::new(SECONDS_BUCKETS),
            batch_events: Histogram::new(EVENTS_BUCKETS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_at_the_count() {
        let h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 3.0] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(1.0, 2), (2.0, 3), (f64::INFINITY, 4)]);
        assert_eq!(s.count, 4);
        assert!((s.sum - 6.0).abs() < 1e-9);
    }
}
