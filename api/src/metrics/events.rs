//! Metrics of what runs did, counted from the durable log: a follower tails it from the head at
//! start, so every node counts what is committed (whoever wrote it), once, and nothing a crash
//! lost.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chronicle_engine::store::{self, Store};
use chronicle_schemas::{ApprovalId, Envelope, Event, Timestamp, ToolCallId};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{HistogramFamily, Labels, histogram_family, labels};

/// Distinct values one label (a model's or a tool's name) takes at most; later ones are counted
/// as `other`, so a log with many models cannot make the series unbounded.
pub const LABEL_VALUES_MAX: usize = 64;

/// The longest label value kept; a longer name is counted as `other`.
const LABEL_VALUE_BYTES_MAX: usize = 128;

/// Approvals (their request time) and tool calls (their tool) remembered until they are
/// answered; past it the oldest are forgotten (an approval forgotten is counted as untimed when
/// it is decided; a call forgotten completes as tool `unknown`).
pub const OPEN_ITEMS_MAX: usize = 10_000;

/// Model calls, in seconds: a few milliseconds (a cache) to several minutes (a long answer).
const MODEL_SECONDS_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];

/// Tool calls, in seconds.
const TOOL_SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Approval waits, in seconds: a person answers in seconds to days.
const APPROVAL_SECONDS_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14_400.0, 86_400.0, 604_800.0,
];

/// The metrics the log's events drive.
#[derive(Debug)]
pub(crate) struct EventMetrics {
    runs_started: Counter,
    /// By `status`: `completed`, `failed`, `cancelled`.
    runs_finished: Family<Labels, Counter>,
    /// By `decision`: `approve`, `reject`, `edit`.
    decisions: Family<Labels, Counter>,
    /// By `model` and `outcome` (`ok`, `error`).
    model_seconds: HistogramFamily,
    /// By `model` and `type` (`input`, `output`).
    model_tokens: Family<Labels, Counter>,
    /// By `tool` and `outcome`.
    tool_seconds: HistogramFamily,
    /// By `outcome`: the decision, or `expired`.
    approval_seconds: HistogramFamily,
    approvals_untimed: Counter,
    models: Capped,
    tools: Capped,
    open: Mutex<Open>,
    /// One past the newest offset counted.
    progress: watch::Sender<u64>,
    following: AtomicBool,
}

/// A label's values, capped at [`LABEL_VALUES_MAX`].
#[derive(Debug, Default)]
struct Capped(Mutex<HashSet<String>>);

impl Capped {
    fn label(&self, value: &str) -> String {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(value) {
            return value.to_owned();
        }
        if value.is_empty() || value.len() > LABEL_VALUE_BYTES_MAX || seen.len() >= LABEL_VALUES_MAX
        {
            return "other".to_owned();
        }
        seen.insert(value.to_owned());
        value.to_owned()
    }
}

/// Requests seen and not yet answered, oldest first, at most [`OPEN_ITEMS_MAX`] of each.
#[derive(Debug, Default)]
struct Open {
    approvals: Bounded<ApprovalId, Timestamp>,
    tool_calls: Bounded<ToolCallId, String>,
}

#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Clone + Eq + std::hash::Hash, V> Bounded<K, V> {
    fn insert(&mut self, k: K, v: V) {
        while self.map.len() >= OPEN_ITEMS_MAX {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.map.remove(&old);
        }
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
        }
    }

    /// Takes `k` out. Its place in `order` stays until it reaches the front (a stale key
    /// removes nothing then), so a removal costs no scan.
    fn take(&mut self, k: &K) -> Option<V> {
        let v = self.map.remove(k)?;
        if self.order.len() > 2 * OPEN_ITEMS_MAX {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
        Some(v)
    }
}

impl EventMetrics {
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let m = Self {
            runs_started: Counter::default(),
            runs_finished: Family::default(),
            decisions: Family::default(),
            model_seconds: histogram_family(MODEL_SECONDS_BUCKETS),
            model_tokens: Family::default(),
            tool_seconds: histogram_family(TOOL_SECONDS_BUCKETS),
            approval_seconds: histogram_family(APPROVAL_SECONDS_BUCKETS),
            approvals_untimed: Counter::default(),
            models: Capped::default(),
            tools: Capped::default(),
            open: Mutex::default(),
            progress: watch::Sender::new(0),
            following: AtomicBool::new(false),
        };
        registry.register(
            "runs_started",
            "Runs started (RunStarted events committed)",
            m.runs_started.clone(),
        );
        registry.register(
            "runs_finished",
            "Runs ended, by status (completed, failed, cancelled)",
            m.runs_finished.clone(),
        );
        registry.register(
            "approval_decisions",
            "Approval decisions committed, by decision (approve, reject, edit)",
            m.decisions.clone(),
        );
        registry.register(
            "model_call_duration_seconds",
            "Model calls, by model and outcome (ok, error)",
            m.model_seconds.clone(),
        );
        registry.register(
            "model_tokens",
            "Tokens of model calls, by model and type (input, output)",
            m.model_tokens.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Tool calls, by tool and outcome (ok, error)",
            m.tool_seconds.clone(),
        );
        registry.register(
            "approval_wait_duration_seconds",
            "From an approval's request to its decision or expiry, by outcome (approve, reject, edit, expired)",
            m.approval_seconds.clone(),
        );
        registry.register(
            "approval_waits_untimed",
            "Approvals decided or expired whose request this server did not see (requested before it started, or forgotten)",
            m.approvals_untimed.clone(),
        );
        m
    }

    /// Counts one committed event.
    pub(crate) fn take(&self, env: &Envelope) {
        match &env.event {
            Event::RunStarted { .. } => {
                self.runs_started.inc();
            }
            Event::RunCompleted { .. } => self.finished("completed"),
            Event::RunFailed { .. } => self.finished("failed"),
            Event::RunCancelled { .. } => self.finished("cancelled"),
            Event::LlmCalled {
                model,
                duration_ms,
                usage,
                error,
                ..
            } => {
                let model = self.models.label(model);
                let outcome = if error.is_some() { "error" } else { "ok" };
                self.model_seconds
                    .get_or_create(&labels(&[("model", &model), ("outcome", outcome)]))
                    .observe(seconds(*duration_ms));
                if let Some(u) = usage {
                    for (kind, n) in [("input", u.prompt_tokens), ("output", u.completion_tokens)] {
                        self.model_tokens
                            .get_or_create(&labels(&[("model", &model), ("type", kind)]))
                            .inc_by(n);
                    }
                }
            }
            Event::ToolCallRequested {
                tool_call_id, tool, ..
            } => self
                .open()
                .tool_calls
                .insert(tool_call_id.clone(), tool.clone()),
            Event::ToolCallCompleted {
                tool_call_id,
                error,
                duration_ms,
                ..
            } => {
                let tool = self.open().tool_calls.take(tool_call_id);
                let tool = tool.map_or_else(|| "unknown".to_owned(), |t| self.tools.label(&t));
                let outcome = if error.is_some() { "error" } else { "ok" };
                self.tool_seconds
                    .get_or_create(&labels(&[("tool", &tool), ("outcome", outcome)]))
                    .observe(seconds(*duration_ms));
            }
            Event::ApprovalRequested {
                approval_id,
                supersedes,
                ..
            } => {
                let mut open = self.open();
                if let Some(old) = supersedes {
                    open.approvals.take(old);
                }
                open.approvals.insert(approval_id.clone(), env.at);
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                ..
            } => {
                self.decisions
                    .get_or_create(&labels(&[("decision", decision.as_str())]))
                    .inc();
                self.settled(approval_id, decision.as_str(), env.at);
            }
            Event::ApprovalExpired { approval_id, .. } => {
                self.settled(approval_id, "expired", env.at);
            }
            _ => {}
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn finished(&self, status: &str) {
        self.runs_finished
            .get_or_create(&labels(&[("status", status)]))
            .inc();
    }

    fn settled(&self, approval: &ApprovalId, outcome: &str, at: Timestamp) {
        let requested = self.open().approvals.take(approval);
        match requested {
            Some(requested) => {
                let waited = at.as_micros().saturating_sub(requested.as_micros()).max(0);
                self.approval_seconds
                    .get_or_create(&labels(&[("outcome", outcome)]))
                    .observe(waited as f64 / 1e6);
            }
            None => {
                self.approvals_untimed.inc();
            }
        }
    }

    /// Waits (at most `wait`) until every event durable now is counted, so that a scrape shows
    /// at least what was committed before it. A server whose follower is not running waits not.
    pub(crate) async fn caught_up(&self, head: u64, wait: Duration) {
        if !self.following.load(Ordering::Relaxed) {
            return;
        }
        let mut rx = self.progress.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|n| *n >= head)).await;
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Tails the log from its durable head now, counting each event, until `stop` or the store
/// closes. The task holds no `Store`: its tail lets the store close.
pub(crate) fn follow(store: &Store, metrics: Arc<EventMetrics>, stop: CancellationToken) {
    let from = store.durable_next_offset();
    metrics.progress.send_replace(from);
    metrics.following.store(true, Ordering::Relaxed);
    let mut tail = store.tail(from, store::FOLLOW_CHUNK_EVENTS);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                next = tail.next() => next,
                _ = stop.cancelled() => break,
            };
            match next {
                Some(Ok(env)) => {
                    metrics.take(&env);
                    metrics.progress.send_replace(env.offset + 1);
                }
                Some(Err(e)) => {
                    tracing::error!(error = %e, "the metrics' follower stopped");
                    break;
                }
                None => break,
            }
        }
        metrics.following.store(false, Ordering::Relaxed);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_takes_at_most_its_cap_of_values() {
        let c = Capped::default();
        for i in 0..LABEL_VALUES_MAX {
            assert_eq!(c.label(&format!("m{i}")), format!("m{i}"));
        }
        assert_eq!(c.label("one_more"), "other");
        assert_eq!(c.label("m0"), "m0");
        assert_eq!(c.label(&"x".repeat(LABEL_VALUE_BYTES_MAX + 1)), "other");
    }

    #[test]
    fn open_items_are_bounded_oldest_forgotten_first() {
        let mut b: Bounded<u64, ()> = Bounded::default();
        for i in 0..(OPEN_ITEMS_MAX as u64 + 5) {
            b.insert(i, ());
        }
        assert_eq!(b.map.len(), OPEN_ITEMS_MAX);
        assert!(b.take(&0).is_none());
        assert!(b.take(&5).is_some());
        for i in 0..(3 * OPEN_ITEMS_MAX as u64) {
            b.insert(1_000_000 + i, ());
            b.take(&(1_000_000 + i));
        }
        assert!(b.order.len() <= 2 * OPEN_ITEMS_MAX + 1);
    }
}
