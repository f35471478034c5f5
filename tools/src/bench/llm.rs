//! An `llm` agent's loop through the run, in `sync` durability, over an in-process scripted model
//! that answers at once (so the rows are the engine's cost, not a model's): each turn asks for one
//! tool call (`write_file` and `read_file` in turn, small files). Measured: the events and bytes
//! one model turn stores (its `LlmCalled`, its checkpoint, its tool call), the loop's turns per
//! second, and recovery — the engine stopped after N recorded turns, reopened, and the agent's
//! re-run answered every recorded turn and tool call from the log until it reaches the first
//! unrecorded one.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_engine::agents::{AgentInfo, LlmAgent, LlmAgentConfig, Registry};
use chronicle_engine::llm::{
    ChatRequest, ChatResponse, LlmError, LlmProvider, Message, OnDelta, ToolCall, Usage,
};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::tools::ToolRegistry;
use chronicle_engine::{Engine, Settings, StartRun};
use chronicle_schemas::{Event, HitlMode, RunId, RunStatus};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

use super::report::{Row, num};
use super::{Plan, ms, progress};

const AGENT: &str = "bench_llm";

/// A model that answers every request at once: a tool call for turns 1..=`turns`, then the final
/// answer. While `hold` is set it never answers the final turn (the bench stops the engine there,
/// as a crash would), and it notes when each pass reaches it.
struct ScriptedModel {
    turns: usize,
    hold: AtomicBool,
    asked: Mutex<usize>,
    reached_end: Mutex<Option<Instant>>,
    held: Notify,
}

#[async_trait::async_trait]
impl LlmProvider for ScriptedModel {
    fn model(&self) -> &str {
        "bench-scripted"
    }

    async fn chat(&self, _: &str, _: &str) -> Result<String, LlmError> {
        Err(LlmError::Unsupported(
            "the bench model only runs agent loops".into(),
        ))
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        _on_delta: &OnDelta<'_>,
    ) -> Result<ChatResponse, LlmError> {
        *self.asked.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let turn = 1 + request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let usage = Some(Usage {
            prompt_tokens: 40 * turn as u64,
            completion_tokens: 20,
            total_tokens: 40 * turn as u64 + 20,
        });
        if turn > self.turns {
            *self.reached_end.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            if self.hold.load(Ordering::SeqCst) {
                self.held.notify_one();
                std::future::pending::<()>().await;
            }
            return Ok(ChatResponse {
                content: Some("done".into()),
                usage,
                finish_reason: Some("stop".into()),
                ..ChatResponse::default()
            });
        }
        let file = format!("/workspace/t{}.txt", turn / 2);
        let (name, arguments) = if turn % 2 == 1 {
            (
                "write_file",
                serde_json::json!({"file_path": file, "content": "x".repeat(256)}),
            )
        } else {
            ("read_file", serde_json::json!({"file_path": file}))
        };
        Ok(ChatResponse {
            content: None,
            tool_calls: vec![ToolCall {
                id: format!("call_{turn}"),
                name: name.into(),
                arguments: arguments.to_string(),
            }],
            usage,
            finish_reason: Some("tool_calls".into()),
            ..ChatResponse::default()
        })
    }
}

fn open(rt: &Runtime, dir: &Path, model: &Arc<ScriptedModel>) -> Result<Engine> {
    let store = Store::open(dir, Options::default())
        .with_context(|| format!("opening a store in {}", dir.display()))?;
    let turns = model.turns as u32;
    let config = LlmAgentConfig {
        info: AgentInfo::new(AGENT, "bench", "calls a tool each turn"),
        system_prompt: "You are a bench agent.".into(),
        tools: vec!["write_file".into(), "read_file".into()],
        max_turns: turns + 1,
        max_tool_calls: turns,
        model: None,
        context_budget_tokens: chronicle_engine::agents::CONTEXT_BUDGET_TOKENS_DEFAULT,
    };
    let mut registry = Registry::empty();
    registry.register(Arc::new(LlmAgent::new(config, &ToolRegistry::builtin())?));
    let settings = Settings {
        registry,
        llm: Some(model.clone()),
        ..Settings::default()
    };
    Ok(rt.block_on(Engine::open(store, settings))?)
}

/// Events and encoded bytes of the agent loop's records, by kind.
fn loop_records(store: &Store, run: RunId) -> Result<BTreeMap<&'static str, (u64, u64)>> {
    let mut kinds: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    for env in store.read_run(run, 0, u64::MAX) {
        let env = env?;
        let looped = match &env.event {
            Event::LlmCalled { turn, .. } => turn.is_some(),
            Event::CheckpointSaved { node, .. } => node == "agent_turn",
            Event::ToolCallRequested { .. } | Event::ToolCallCompleted { .. } => true,
            _ => false,
        };
        if looped {
            let k = kinds.entry(env.event.kind()).or_default();
            k.0 += 1;
            k.1 += env.encode()?.len() as u64;
        }
    }
    Ok(kinds)
}

pub(super) fn section(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let turns = plan.llm_turns;
    progress(&format!(
        "llm: an agent loop of {turns} model turns, then recovery answering them from the log"
    ));
    let dir = root.join("llm");
    let model = Arc::new(ScriptedModel {
        turns,
        hold: AtomicBool::new(true),
        asked: Mutex::new(0),
        reached_end: Mutex::new(None),
        held: Notify::new(),
    });
    let engine = open(rt, &dir, &model)?;
    let started = Instant::now();
    let run = rt.block_on(async {
        let run = engine
            .start_run(StartRun {
                query: "bench an agent loop".into(),
                hitl: Some(HitlMode::None),
                agent: Some(AGENT.into()),
                ..StartRun::default()
            })
            .await?
            .run_id;
        tokio::time::timeout(Duration::from_secs(600), model.held.notified())
            .await
            .context("the agent did not reach its last turn")?;
        anyhow::Ok(run)
    })?;
    let loop_time = started.elapsed();
    rt.block_on(engine.shutdown());
    drop(engine);
    let asked_first = *model.asked.lock().unwrap_or_else(|e| e.into_inner());

    // Recovery: the same attempt re-runs; every recorded turn and call comes from the log.
    model.hold.store(false, Ordering::SeqCst);
    let reopened = Instant::now();
    let engine = open(rt, &dir, &model)?;
    let state = rt.block_on(engine.wait_until(run, Duration::from_secs(600), |s| {
        s.supervisor.run_status.is_terminal()
    }))?;
    if state.supervisor.run_status != RunStatus::Completed {
        bail!("the recovered run ended {:?}", state.supervisor.error_log);
    }
    let recovered = model
        .reached_end
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .map_or(Duration::ZERO, |t| t.duration_since(reopened));
    let asked_again = *model.asked.lock().unwrap_or_else(|e| e.into_inner()) - asked_first;
    if asked_again != 1 {
        bail!("recovery asked the model {asked_again} times, not once (the last turn)");
    }
    let kinds = loop_records(engine.store(), run)?;
    rt.block_on(engine.shutdown());
    drop(engine);
    plan.discard(&dir);

    let per_turn = |v: u64| v as f64 / turns as f64;
    let events: u64 = kinds.values().map(|k| k.0).sum::<u64>();
    let bytes: u64 = kinds.values().map(|k| k.1).sum::<u64>();
    // The last turn (the answer) has no tool call: count the loop's tool-calling turns only.
    let breakdown = kinds
        .iter()
        .map(|(k, (n, b))| format!("{k} {} B", num(*b as f64 / *n as f64)))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(vec![
        Row::new(
            "llm_turn_events",
            "events stored per model turn with one tool call",
            per_turn(events),
            "events",
        )
        .note("LlmCalled, its checkpoint, ToolCallRequested, ToolCallCompleted"),
        Row::new(
            "llm_turn_bytes",
            "bytes stored per model turn with one tool call (encoded records)",
            per_turn(bytes),
            "B",
        )
        .note(breakdown),
        Row::new(
            "llm_loop_turns_per_s",
            "agent loop, instant model: turns/s, each turn durable before the next",
            turns as f64 / loop_time.as_secs_f64().max(f64::EPSILON),
            "turns/s",
        )
        .note(format!("{turns} turns in {:.0} ms", ms(loop_time))),
        Row::new(
            "llm_recovery_ms",
            format!("recovery answering {turns} recorded turns (and their calls) from the log"),
            ms(recovered),
            "ms",
        )
        .note(format!(
            "engine open to the first unrecorded turn; {:.0} µs per recorded turn; the model was asked once",
            ms(recovered) * 1000.0 / turns as f64
        )),
    ])
}
