//! Tool calls through the run's tool host, in `sync` durability: one agent making ungated calls
//! back to back (`write_file` and `read_file` in turn, small files), each answered only after its
//! `ToolCallCompleted` is durable; then the same agent re-run by recovery after the engine
//! stopped mid-attempt, where every call is answered from the log instead of being executed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Settings, StartRun};
use chronicle_schemas::{HitlMode, PlanStep, RunConfig, RunStatus};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

use super::report::{Row, num};
use super::{Plan, ms, percentile, progress};

/// Makes `calls` tool calls, timing each; with `hold` set it then waits forever (the bench stops
/// the engine under it, as a crash would).
struct Caller {
    info: AgentInfo,
    calls: usize,
    hold: AtomicBool,
    held: Notify,
    latencies_ms: Mutex<Vec<f64>>,
    loop_time: Mutex<Duration>,
}

#[async_trait::async_trait]
impl Agent for Caller {
    fn info(&self) -> &AgentInfo {
        &self.info
    }
    async fn run(&self, ctx: &AgentContext, _input: Value) -> Result<AgentOutput, AgentError> {
        let started = Instant::now();
        let mut lat = Vec::with_capacity(self.calls);
        for i in 0..self.calls {
            let file = format!("/workspace/f{}.txt", i / 2);
            let (tool, args) = if i % 2 == 0 {
                (
                    "write_file",
                    json!({"file_path": file, "content": "x".repeat(256)}),
                )
            } else {
                ("read_file", json!({"file_path": file}))
            };
            let t0 = Instant::now();
            ctx.tools
                .call(tool, args)
                .await
                .map_err(|e| AgentError::fatal(e.to_string()))?;
            lat.push(ms(t0.elapsed()));
        }
        *self.loop_time.lock().unwrap_or_else(|e| e.into_inner()) = started.elapsed();
        *self.latencies_ms.lock().unwrap_or_else(|e| e.into_inner()) = lat;
        if self.hold.load(Ordering::SeqCst) {
            self.held.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(AgentOutput {
            result: json!({"calls": self.calls}),
        })
    }
}

fn open(rt: &Runtime, dir: &Path, caller: &Arc<Caller>) -> Result<Engine> {
    let store = Store::open(dir, Options::default())
        .with_context(|| format!("opening a store in {}", dir.display()))?;
    let mut registry = Registry::empty();
    registry.register(caller.clone());
    let settings = Settings {
        registry,
        ..Settings::default()
    };
    Ok(rt.block_on(Engine::open(store, settings))?)
}

/// Latency rows of one pass: p50 with p99 and the rate in the note.
fn pass(caller: &Caller) -> (f64, f64, f64) {
    let mut lat = std::mem::take(
        &mut *caller
            .latencies_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    let secs = caller
        .loop_time
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_secs_f64();
    let rate = lat.len() as f64 / secs.max(f64::EPSILON);
    (percentile(&mut lat, 0.5), percentile(&mut lat, 0.99), rate)
}

pub(super) fn section(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let calls = plan.tool_calls;
    progress(&format!(
        "tools: {calls} tool calls in one attempt, then recovery answering them from the log"
    ));
    let dir = root.join("tools");
    let caller = Arc::new(Caller {
        info: AgentInfo::new(
            "bench_tool_caller",
            "bench",
            "makes tool calls back to back",
        ),
        calls,
        hold: AtomicBool::new(true),
        held: Notify::new(),
        latencies_ms: Mutex::new(Vec::new()),
        loop_time: Mutex::new(Duration::ZERO),
    });

    let engine = open(rt, &dir, &caller)?;
    let config = RunConfig {
        hitl: HitlMode::None,
        plan: Some(vec![PlanStep {
            agent_name: "bench_tool_caller".into(),
            team: "bench".into(),
            timeout: 600,
            ..PlanStep::default()
        }]),
        ..RunConfig::default()
    };
    let run = rt.block_on(async {
        let run = engine
            .start_run(StartRun {
                query: "tool calls".into(),
                config: Some(config),
                ..StartRun::default()
            })
            .await?
            .run_id;
        tokio::time::timeout(Duration::from_secs(300), caller.held.notified())
            .await
            .context("the agent did not finish its calls")?;
        anyhow::Ok(run)
    })?;
    let first = pass(&caller);
    rt.block_on(engine.shutdown());
    drop(engine);

    caller.hold.store(false, Ordering::SeqCst);
    let engine = open(rt, &dir, &caller)?;
    let state = rt.block_on(engine.wait_until(run, Duration::from_secs(300), |s| {
        s.supervisor.run_status.is_terminal()
    }))?;
    if state.supervisor.run_status != RunStatus::Completed {
        bail!("the recovered run ended {:?}", state.supervisor.error_log);
    }
    let replayed = pass(&caller);
    let executed = state
        .supervisor
        .tool_calls
        .iter()
        .filter(|c| c.duration_ms.is_some())
        .count();
    if executed != calls {
        bail!("{executed} calls recorded for {calls} made");
    }
    rt.block_on(engine.shutdown());
    drop(engine);
    plan.discard(&dir);

    Ok(vec![
        Row::new(
            "tool_call_p50_ms",
            "tool call (ungated write_file/read_file), request → durable completion → answer",
            first.0,
            "ms",
        )
        .note(format!(
            "p99 {:.2} ms; {} calls/s from one agent",
            first.1,
            num(first.2)
        )),
        Row::new(
            "tool_call_replayed_p50_ms",
            "the same calls repeated after recovery, answered from the log",
            replayed.0,
            "ms",
        )
        .note(format!(
            "p99 {:.2} ms; {} calls/s",
            replayed.1,
            num(replayed.2)
        )),
    ])
}
