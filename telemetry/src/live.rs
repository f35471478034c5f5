//! The live export: every durable event folded into its run's trace as it commits; the spans it
//! ends go through a bounded queue to the OTLP exporter. Nothing here is on a run's path: the
//! fold follows the durable log the way a subscriber does, and a span that finds the queue full
//! (a receiver that is down or slow) is dropped and counted, never waited for.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chronicle_projections::trace::{RunTrace, Span, TraceOptions, TraceParent, trace_id};
use chronicle_schemas::{Envelope, Event, RunId};
use chronicle_store::{FOLLOW_CHUNK_EVENTS, Store};
use opentelemetry_sdk::trace::SpanExporter as _;
use tokio::sync::mpsc;

use crate::otlp::{Config, ConfigError, Sampler, span_data};

/// Runs whose trace state is kept at once; past it the least recently active one is let go and
/// folded again from its events when it next moves (a run waiting for a person, say).
pub const RUNS_TRACED_MAX: usize = 4096;

/// What the live export has done, for `/metrics`.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans handed to the exporter and accepted by the receiver.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Spans whose export failed (the receiver refused them, was unreachable or timed out).
    pub failed: AtomicU64,
    /// Spans waiting in the queue now.
    pub queued: AtomicU64,
}

/// One run's fold, or the decision not to trace it.
enum Traced {
    Yes(Box<RunTrace>),
    No,
}

struct Follow {
    store: Store,
    opts: TraceOptions,
    sampler: Sampler,
    runs: HashMap<RunId, (Traced, u64)>,
    tick: u64,
    queue: mpsc::Sender<Span>,
    stats: Arc<TraceStats>,
    ours: Ours,
}

/// Whether this process writes a session's events (see [`start`]).
pub type Ours = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl Follow {
    /// A run first seen at `env`: its fold of the events before it (read from the log: a run
    /// that started before this process, or was let go; nothing for its start), or `No` when
    /// the sampler leaves it out. What those events ended is not sent again.
    async fn load(&self, env: &Envelope) -> Traced {
        let earlier = match env.seq {
            0 => Vec::new(),
            seq => match self.store.read_run_async(env.run_id, 0, seq - 1).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(run = %env.run_id, error = %e, "a run's trace could not be read; it is not exported");
                    return Traced::No;
                }
            },
        };
        let first = earlier.first().unwrap_or(env);
        let Event::RunStarted { traceparent, .. } = &first.event else {
            return Traced::No;
        };
        let caller = traceparent
            .as_deref()
            .and_then(|t| TraceParent::parse(t).ok());
        let id = trace_id(env.run_id, traceparent.as_deref());
        if !self.sampler.sampled(id.0, caller.map(|c| c.sampled)) {
            return Traced::No;
        }
        let mut trace = RunTrace::new(env.run_id, self.opts);
        for e in &earlier {
            let _ = trace.apply(e);
        }
        Traced::Yes(Box::new(trace))
    }

    async fn apply(&mut self, env: &Envelope) {
        if !self.runs.contains_key(&env.run_id) {
            if self.runs.len() >= RUNS_TRACED_MAX {
                let oldest = self
                    .runs
                    .iter()
                    .min_by_key(|(_, (_, t))| *t)
                    .map(|(r, _)| *r);
                if let Some(r) = oldest {
                    self.runs.remove(&r);
                }
            }
            let traced = self.load(env).await;
            self.runs.insert(env.run_id, (traced, 0));
        }
        self.tick += 1;
        let Some((Traced::Yes(trace), touched)) = self.runs.get_mut(&env.run_id) else {
            return;
        };
        *touched = self.tick;
        let spans = trace.apply(env);
        let ours = !spans.is_empty() && trace.session_id().is_some_and(|s| (self.ours)(s));
        if trace.ended() {
            self.runs.remove(&env.run_id);
        }
        if !ours {
            return;
        }
        for span in spans {
            match self.queue.try_send(span) {
                Ok(()) => self.stats.queued.fetch_add(1, Ordering::Relaxed),
                Err(_) => self.stats.dropped.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

/// The live export, running.
#[derive(Debug)]
pub struct Export {
    pub stats: Arc<TraceStats>,
    /// Ends after the last export, once `shutdown` resolved.
    pub done: tokio::task::JoinHandle<()>,
}

/// Starts the live export of every run's spans from the store's durable head; it ends when
/// `shutdown` resolves, after one last export of what is queued. Of a log several processes
/// write (the nodes of a cluster), each sends the spans that the events it wrote end: `ours`
/// says whether this process writes a session's events now.
pub fn start(
    store: Store,
    config: &Config,
    opts: TraceOptions,
    ours: Ours,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Export, ConfigError> {
    let exporter = config.exporter()?;
    let stats = Arc::new(TraceStats::default());
    let (tx, rx) = mpsc::channel(config.queue_spans.max(1));
    let mut follow = Follow {
        store: store.clone(),
        opts,
        sampler: config.sampler,
        runs: HashMap::new(),
        tick: 0,
        queue: tx,
        stats: stats.clone(),
        ours,
    };
    let mut tail = store.tail(store.durable_next_offset(), FOLLOW_CHUNK_EVENTS);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut stop_follow = stop_rx.clone();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                next = tail.next() => next,
                _ = stop_follow.changed() => return,
            };
            match next {
                Some(Ok(env)) => follow.apply(&env).await,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "the trace export stopped following the log");
                    return;
                }
                None => return,
            }
        }
    });
    let (batch, delay, timeout) = (config.batch_spans, config.delay, config.export_timeout);
    let stats_out = stats.clone();
    let done = tokio::spawn(async move {
        let mut rx = rx;
        let mut exporter = exporter;
        loop {
            let mut spans = Vec::with_capacity(batch);
            let stopping = tokio::select! {
                n = rx.recv_many(&mut spans, batch) => n == 0,
                _ = stop_rx.changed() => true,
            };
            if !stopping && spans.len() < batch {
                // Wait for the batch to fill, at most the schedule delay.
                let deadline = tokio::time::Instant::now() + delay;
                while spans.len() < batch {
                    let room = batch - spans.len();
                    tokio::select! {
                        n = rx.recv_many(&mut spans, room) => if n == 0 { break },
                        _ = tokio::time::sleep_until(deadline) => break,
                        _ = stop_rx.changed() => break,
                    }
                }
            }
            if stopping {
                while let Ok(s) = rx.try_recv() {
                    spans.push(s);
                }
            }
            send(&exporter, spans, timeout, &stats_out).await;
            if stopping || *stop_rx.borrow() {
                let mut rest = Vec::new();
                while let Ok(s) = rx.try_recv() {
                    rest.push(s);
                }
                send(&exporter, rest, timeout, &stats_out).await;
                let _ = exporter.shutdown();
                return;
            }
        }
    });
    Ok(Export { stats, done })
}

async fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    spans: Vec<Span>,
    timeout: Duration,
    stats: &TraceStats,
) {
    if spans.is_empty() {
        return;
    }
    let n = spans.len() as u64;
    stats.queued.fetch_sub(n, Ordering::Relaxed);
    let data = spans.iter().map(span_data).collect();
    match tokio::time::timeout(timeout, exporter.export(data)).await {
        Ok(Ok(())) => {
            stats.exported.fetch_add(n, Ordering::Relaxed);
        }
        Ok(Err(e)) => {
            stats.failed.fetch_add(n, Ordering::Relaxed);
            tracing::debug!(error = %e, spans = n, "a trace export failed");
        }
        Err(_) => {
            stats.failed.fetch_add(n, Ordering::Relaxed);
            tracing::debug!(spans = n, "a trace export timed out");
        }
    }
}

/// Sends `spans` once, now (what `chronicle trace export` does).
pub async fn export_once(config: &Config, spans: &[Span]) -> Result<(), String> {
    let exporter = config.exporter().map_err(|e| e.to_string())?;
    let data = spans.iter().map(span_data).collect();
    let out = tokio::time::timeout(config.export_timeout, exporter.export(data))
        .await
        .map_err(|_| format!("the export timed out after {:?}", config.export_timeout))?
        .map_err(|e| e.to_string());
    let mut exporter = exporter;
    let _ = exporter.shutdown();
    out
}
