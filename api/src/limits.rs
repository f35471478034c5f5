//! The caps on open streams (SSE and WebSocket): in all, and per principal. A stream over a cap
//! is refused with 503 `too_many_streams` and `Retry-After` before it subscribes to anything, so a
//! refused stream costs nothing; an open one holds a [`StreamPermit`] until it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::ApiConfig;
use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;

/// The streams open now, by principal.
#[derive(Debug)]
pub(crate) struct Streams {
    open: Mutex<Open>,
    total_max: usize,
    per_principal_max: usize,
    retry_after_s: u64,
    metrics: Arc<Metrics>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    /// Only principals with a stream open: an entry goes when its last stream ends.
    by_principal: HashMap<String, usize>,
}

impl Streams {
    pub(crate) fn new(config: &ApiConfig, metrics: Arc<Metrics>) -> Self {
        Self {
            open: Mutex::default(),
            total_max: config.streams_max,
            per_principal_max: config.streams_per_principal_max,
            retry_after_s: config.retry_after_s,
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for one more stream of `principal`, or 503 `too_many_streams` when a cap is full.
    pub(crate) fn open(self: &Arc<Self>, principal: &str) -> ApiResult<StreamPermit> {
        let mut open = self.lock();
        let (cap, message) = if open.total >= self.total_max {
            (
                "streams",
                format!("the server holds its maximum of {} streams", self.total_max),
            )
        } else if open.by_principal.get(principal).copied().unwrap_or(0) >= self.per_principal_max {
            (
                "streams_per_principal",
                format!(
                    "{principal} holds its maximum of {} streams; close one first",
                    self.per_principal_max
                ),
            )
        } else {
            open.total += 1;
            *open.by_principal.entry(principal.to_owned()).or_default() += 1;
            self.metrics.open_streams.inc();
            return Ok(StreamPermit {
                streams: self.clone(),
                principal: principal.to_owned(),
            });
        };
        drop(open);
        self.metrics.refuse(cap);
        Err(ApiError::capped(
            "too_many_streams",
            message,
            self.retry_after_s,
        ))
    }
}

/// One open stream, counted (also in `metrics.open_streams`) for as long as it lives.
#[derive(Debug)]
pub(crate) struct StreamPermit {
    streams: Arc<Streams>,
    principal: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.streams.lock();
        open.total -= 1;
        if let Some(n) = open.by_principal.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                open.by_principal.remove(&self.principal);
            }
        }
        self.streams.metrics.open_streams.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streams(total: usize, per_principal: usize) -> Arc<Streams> {
        let config = ApiConfig {
            streams_max: total,
            streams_per_principal_max: per_principal,
            ..ApiConfig::default()
        };
        let store = chronicle_engine::store::Store::memory();
        Arc::new(Streams::new(&config, Arc::new(Metrics::new(&store))))
    }

    #[test]
    fn caps_hold_at_their_boundary_and_a_closed_stream_frees_its_slot() {
        let s = streams(3, 2);
        let a1 = s.open("alice").unwrap();
        let _a2 = s.open("alice").unwrap();
        let refused = s.open("alice").unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (503, "too_many_streams")
        );
        assert_eq!(
            refused.retry_after_s,
            Some(ApiConfig::default().retry_after_s)
        );
        let _b1 = s.open("bob").unwrap();
        assert!(
            s.open("carol")
                .unwrap_err()
                .message
                .contains("maximum of 3")
        );
        drop(a1);
        let _c1 = s.open("carol").unwrap();
        assert_eq!(s.metrics.open_streams.get(), 3);
    }

    #[test]
    fn a_principal_without_streams_leaves_no_entry() {
        let s = streams(8, 8);
        drop(s.open("alice").unwrap());
        assert!(s.lock().by_principal.is_empty());
        assert_eq!(s.lock().total, 0);
    }
}
