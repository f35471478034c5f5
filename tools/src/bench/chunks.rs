//! Live chunk fan-out: how long a piece of a model's answer takes from the model to 100 SSE
//! subscribers of the run. The server (the production router on loopback, over a sled store in
//! `sync` durability) runs on a runtime of its own, as a separate process would; the
//! subscribers are the one client, on the bench's runtime; both share the machine's cores.
//!
//! The model is a stand-in inside the server's process that writes its answer a piece at a
//! time, each piece the time it was written (microseconds since a shared start), once every
//! subscriber is listening: a subscriber's delay is the time it read the piece minus that. So
//! the delay covers the engine's streaming path end to end (the answer's text extraction, the
//! run's chunk channel, each subscriber's task, SSE encoding, loopback, the client's parser),
//! but not a model's network.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_client::{Client, EventsFrom, StreamItem};
use chronicle_engine::llm::{Delta, LlmError, LlmProvider, OnDelta};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{
    AgentResult, Engine, EvaluationOutcome, Intent, Plan, PlanContext, Planner, Settings, StartRun,
};
use chronicle_schemas::{Source, Strategy};
use serde_json::Value;
use tokio::runtime::Runtime;
use tokio::sync::Notify;

use super::report::Row;
use super::{percentile, progress};

/// Subscribers of the run.
const SUBSCRIBERS: usize = 100;
/// The pause between two pieces: the model's pace, well above a piece's delivery time, so the
/// delay is a piece's own and not a queue's.
const PIECE_PACE: Duration = Duration::from_millis(2);

/// The stand-in model: waits until told to go, then writes `pieces` pieces, each the time since
/// `start` in microseconds.
struct PacedModel {
    start: Instant,
    go: Arc<Notify>,
    pieces: usize,
}

#[async_trait::async_trait]
impl LlmProvider for PacedModel {
    fn model(&self) -> &str {
        "bench-paced"
    }

    async fn chat(&self, system: &str, user: &str) -> Result<String, LlmError> {
        self.chat_streaming(system, user, &|_| {}).await
    }

    async fn chat_streaming(
        &self,
        _: &str,
        _: &str,
        on_delta: &OnDelta<'_>,
    ) -> Result<String, LlmError> {
        self.go.notified().await;
        let mut text = String::new();
        for _ in 0..self.pieces {
            let piece = format!("{} ", self.start.elapsed().as_micros());
            on_delta(Delta::Text(&piece));
            text.push_str(&piece);
            tokio::time::sleep(PIECE_PACE).await;
        }
        Ok(text)
    }
}

/// A planner that plans nothing and has the model write the answer (plain text, so every piece
/// streams as the message).
struct AnswerOnly;

#[async_trait::async_trait]
impl Planner for AnswerOnly {
    async fn intent(&self, _: &PlanContext<'_>) -> Intent {
        Intent {
            intent_type: "bench".into(),
            confidence: 1.0,
            keywords: vec![],
            entities: Value::Null,
            source: Source::Rules,
        }
    }

    async fn plan(&self, _: &PlanContext<'_>, _: &Intent) -> Plan {
        Plan {
            strategy: Strategy::Sequential,
            steps: vec![],
            parallel_groups: vec![],
            estimated_total_time: 0.0,
            source: Source::Rules,
        }
    }

    async fn evaluate(&self, _: &PlanContext<'_>, _: &[AgentResult]) -> EvaluationOutcome {
        EvaluationOutcome {
            quality_score: 1.0,
            completeness: 1.0,
            needs_retry: false,
            retry_agents: vec![],
            add_agents: vec![],
            feedback: "nothing to judge".into(),
            source: Source::Rules,
        }
    }

    async fn respond(&self, cx: &PlanContext<'_>, _: &Intent, _: &[AgentResult]) -> Value {
        let text = cx
            .llm
            .ask("response", "write", "the answer", |t| Ok(t.to_owned()))
            .await;
        serde_json::json!({ "answer": text.unwrap_or_default() })
    }
}

/// The delays (µs) one subscriber saw: every message chunk, until the run ends.
async fn subscriber(
    client: Client,
    run: chronicle_schemas::RunId,
    start: Instant,
    ready: Arc<AtomicUsize>,
) -> Result<Vec<f64>> {
    let mut events = client.run_events(run, EventsFrom::default()).await?;
    // Subscribed: the server has this stream's subscription before it answers.
    ready.fetch_add(1, Ordering::SeqCst);
    let mut delays = Vec::new();
    while let Some(item) = events.next_item().await {
        if let StreamItem::Chunk(c) = item? {
            let now = start.elapsed().as_micros() as f64;
            for sent in c.content.text.split_whitespace() {
                let sent: f64 = sent.parse().context("a piece is a time")?;
                delays.push(now - sent);
            }
        }
    }
    Ok(delays)
}

pub fn section(rt: &Runtime, dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let pieces = if quick { 100 } else { 500 };
    progress(&format!(
        "api: live chunk fan-out, {pieces} pieces to {SUBSCRIBERS} SSE subscribers"
    ));
    let start = Instant::now();
    let go = Arc::new(Notify::new());
    let settings = Settings {
        planner: Arc::new(AnswerOnly),
        llm: Some(Arc::new(PacedModel {
            start,
            go: go.clone(),
            pieces,
        })),
        ..Settings::default()
    };
    // The server's own runtime, as a process of its own would have.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the server's runtime")?;
    let store_dir = dir.join("chunks-store");
    let (base, engine, stop) = server_rt.block_on(async {
        let store = Store::open(&store_dir, Options::default())?;
        let engine = Engine::open(store, settings).await?;
        let state = AppState::new(engine.clone(), Tokens::none(), ApiConfig::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = chronicle_api::serve(listener, state, async move {
                let _ = stopped.await;
            })
            .await;
        });
        anyhow::Ok((base, engine, stop))
    })?;
    let run = server_rt
        .block_on(engine.start_run(StartRun {
            query: "chunk fan-out".into(),
            ..StartRun::default()
        }))?
        .run_id;
    let measured = rt.block_on(measure(Client::new(&base)?, &engine, run, start, go));
    let _ = stop.send(());
    server_rt.block_on(engine.shutdown());
    drop(server_rt);
    let mut delays = measured?;
    let expected = pieces * SUBSCRIBERS;
    let note = format!(
        "model → SSE client over loopback, {} of {expected} pieces delivered; server and clients share the cores",
        delays.len()
    );
    let p50 = percentile(&mut delays, 0.5) / 1000.0;
    let p99 = percentile(&mut delays, 0.99) / 1000.0;
    Ok(vec![
        Row::new(
            "chunk_fanout_p50",
            format!("chunk fan-out delay p50, {SUBSCRIBERS} subscribers"),
            p50,
            "ms",
        )
        .note(note),
        Row::new(
            "chunk_fanout_p99",
            format!("chunk fan-out delay p99, {SUBSCRIBERS} subscribers"),
            p99,
            "ms",
        )
        .note(format!(
            "one piece every {} ms; a subscriber that falls behind loses pieces, never slows the run",
            PIECE_PACE.as_millis()
        )),
    ])
}

/// Connects the subscribers, lets the model write once all listen, and collects the delays.
async fn measure(
    client: Client,
    engine: &Engine,
    run: chronicle_schemas::RunId,
    start: Instant,
    go: Arc<Notify>,
) -> Result<Vec<f64>> {
    let ready = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| tokio::spawn(subscriber(client.clone(), run, start, ready.clone())))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready.load(Ordering::SeqCst) < SUBSCRIBERS {
        if Instant::now() > deadline {
            bail!(
                "only {} subscribers connected",
                ready.load(Ordering::SeqCst)
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The model starts when told (a permit waits for it if it is not in the call yet).
    go.notify_one();
    while !engine.state(run, None)?.supervisor.run_status.is_terminal() {
        if Instant::now() > deadline {
            bail!("the run did not end");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut delays = Vec::new();
    for t in tasks {
        delays.extend(
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .context("a subscriber stalled")???,
        );
    }
    Ok(delays)
}
