//! The per-principal quota on writes: every state-changing request (POST, PUT, PATCH, DELETE)
//! of an ordinary principal takes one token from that principal's bucket, which refills at
//! `writes_per_principal_per_s` up to `writes_per_principal_burst`; an empty bucket is 429
//! `too_many_writes` with `Retry-After`. What a principal writes is kept forever (refused
//! commands included), so without it one principal could fill the disk for everyone. Admins
//! (and `local`, the principal of a server without tokens) are not limited: they run the
//! server. Stream tickets have their own cap and write nothing.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use crate::auth::Tokens;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;

/// Principals whose buckets are kept at once; beyond it the full ones are forgotten (a full
/// bucket is what a forgotten one starts as).
const BUCKETS_MAX: usize = 65_536;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets, by principal name.
#[derive(Debug)]
pub(crate) struct WriteQuota {
    per_s: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl WriteQuota {
    /// `per_s` writes a second, `burst` at once; `per_s == 0` is no quota.
    pub(crate) fn new(per_s: u32, burst: u32) -> Self {
        Self {
            per_s: f64::from(per_s),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::default(),
        }
    }

    /// Takes one write from `who`'s bucket; `Err(seconds)` until the next one when it is empty.
    fn take(&self, who: &str, now: Instant) -> Result<(), u64> {
        if self.per_s <= 0.0 {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= BUCKETS_MAX && !buckets.contains_key(who) {
            let (per_s, burst) = (self.per_s, self.burst);
            buckets
                .retain(|_, b| b.tokens + per_s * now.duration_since(b.at).as_secs_f64() < burst);
        }
        let bucket = buckets.entry(who.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let refilled = self.per_s * now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + refilled).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait_s = (1.0 - bucket.tokens) / self.per_s;
        Err(wait_s.ceil().max(1.0) as u64)
    }
}

/// Whether `req` changes something (and so counts against its principal's quota).
fn is_write(req: &Request) -> bool {
    matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) && req.uri().path() != "/api/v1/stream-tickets"
}

/// What the middleware takes of the server's state.
#[derive(Clone, Debug)]
pub(crate) struct Writes {
    pub(crate) quota: Arc<WriteQuota>,
    pub(crate) tokens: Tokens,
    pub(crate) sessions: Arc<crate::auth::Sessions>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) config: Arc<ApiConfig>,
}

/// The middleware: a write of an ordinary principal over its quota is answered 429 before its
/// handler runs. A request without a valid principal goes on (its handler answers 401).
pub(crate) async fn writes(State(st): State<Writes>, req: Request, next: Next) -> Response {
    if !is_write(&req) {
        return next.run(req).await;
    }
    let who = match crate::auth::principal_of(&st.tokens, &st.sessions, req.headers()) {
        Some(who) if !who.admin => who,
        _ => return next.run(req).await,
    };
    match st.quota.take(&who.name, Instant::now()) {
        Ok(()) => next.run(req).await,
        Err(retry_after_s) => {
            st.metrics.refuse("writes_per_principal");
            ApiError::too_many(
                "too_many_writes",
                format!(
                    "{} is over its quota of {} writes a second (bursts of {}); try again in {retry_after_s} s",
                    who.name, st.config.writes_per_principal_per_s, st.config.writes_per_principal_burst
                ),
                retry_after_s,
            )
            .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let q = WriteQuota::new(10, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(q.take("bob", t0), Ok(()));
        }
        assert_eq!(q.take("bob", t0), Err(1));
        // Another principal has a bucket of its own.
        assert_eq!(q.take("alice", t0), Ok(()));
        // A tenth of a second later bob has one more write, and no more.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(q.take("bob", t1), Ok(()));
        assert_eq!(q.take("bob", t1), Err(1));
        // Refilled up to the burst, never beyond.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(q.take("bob", t2), Ok(()));
        }
        assert!(q.take("bob", t2).is_err());
    }

    #[test]
    fn a_zero_rate_is_no_quota() {
        let q = WriteQuota::new(0, 1);
        let t = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(q.take("bob", t), Ok(()));
        }
    }
}
