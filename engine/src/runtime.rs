//! `Engine`: the handle callers use. It starts runs, routes decisions, commands, restores and
//! cancels to each run's actor (spawning one on demand), serves subscriptions from the bus, and
//! on open recovers every run that is not terminal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalId, Decision, Envelope, Event, HitlMode, ParentLink, Phase, RunConfig, RunId,
    SessionId, Strategy,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actor::{Msg, RestoreTarget, RunActor};
use crate::agents::Registry;
use crate::bus::Bus;
use crate::llm::{LlmConfig, LlmProvider, OpenAiCompat};
use crate::planner::{NoPlanner, Planner};
use crate::store::{self, Store};
use crate::texts::{English, Text, Texts};
use crate::tools::{ToolContext, ToolRegistry};
use crate::{Error, Result};

/// Engine settings; every limit carries its unit.
#[derive(Clone)]
pub struct Settings {
    /// The config a run gets when its request leaves a field out (the server default).
    pub defaults: RunConfig,
    /// The agents runs may use; empty unless a domain registers some.
    pub registry: Registry,
    /// The domain's intent, plan, evaluation and response.
    pub planner: Arc<dyn Planner>,
    /// The words the engine says to people (notes, TODO names, approval messages, replies).
    pub texts: Arc<dyn Texts>,
    /// The model planners may ask; `None` for rules only.
    pub llm: Option<Arc<dyn LlmProvider>>,
    /// Messages queued for one run actor before senders wait.
    pub actor_mailbox_messages: usize,
    /// Live events buffered per run for subscribers before a slow one falls back to the log.
    pub bus_buffer_events: usize,
    /// Agent results larger than this go to a blob file instead of the event.
    pub inline_payload_bytes_max: usize,
    /// Queries longer than this are refused.
    pub query_bytes_max: usize,
    /// The tools agents may call.
    pub tools: ToolRegistry,
    /// Tool outputs larger than this (as JSON) are written to a file in the workspace and the
    /// call returns its path instead (seed 003's offload rule).
    pub tool_output_offload_bytes: usize,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("defaults", &self.defaults)
            .field("registry", &self.registry)
            .field("tools", &self.tools)
            .field("llm", &self.llm.as_ref().map(|l| l.model().to_owned()))
            .finish_non_exhaustive()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            defaults: RunConfig {
                max_retries: 2,
                ..RunConfig::default()
            },
            registry: Registry::empty(),
            planner: Arc::new(NoPlanner),
            texts: Arc::new(English),
            llm: None,
            actor_mailbox_messages: 64,
            bus_buffer_events: 1024,
            inline_payload_bytes_max: 16 * 1024,
            query_bytes_max: 8 * 1024,
            tools: ToolRegistry::builtin(),
            tool_output_offload_bytes: 16 * 1024,
        }
    }
}

impl Settings {
    /// The defaults, plus an OpenAI-compatible model when `CHRONICLE_LLM_BASE_URL` or an API key
    /// (`CHRONICLE_LLM_API_KEY` / `OPENAI_API_KEY`) is set; without either, rules only.
    pub fn from_env() -> Result<Self> {
        let mut s = Settings::default();
        if let Some(cfg) = LlmConfig::from_env() {
            let client = OpenAiCompat::new(cfg).map_err(|e| Error::Invalid(e.to_string()))?;
            s.llm = Some(Arc::new(client));
        }
        Ok(s)
    }
}

/// What a caller asks for when starting a run; `None` fields take the server defaults.
#[derive(Clone, Debug, Default)]
pub struct StartRun {
    pub query: String,
    pub session_id: Option<SessionId>,
    pub user_id: Option<String>,
    pub hitl: Option<HitlMode>,
    pub strategy: Option<Strategy>,
    pub approval_timeout_ms: Option<u64>,
    pub config: Option<RunConfig>,
    pub parent: Option<ParentLink>,
}

/// A started run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    pub run_id: RunId,
    pub session_id: SessionId,
}

pub(crate) struct Shared {
    pub store: Store,
    pub registry: Registry,
    pub planner: Arc<dyn Planner>,
    pub texts: Arc<dyn Texts>,
    pub llm: Option<Arc<dyn LlmProvider>>,
    pub shutdown: CancellationToken,
    pub tasks: TaskTracker,
    pub inline_payload_bytes_max: usize,
    pub tools: ToolRegistry,
    pub tool_output_offload_bytes: usize,
    settings: Settings,
    actors: Mutex<HashMap<RunId, mpsc::Sender<Msg>>>,
    bus: Bus,
}

/// The workflow engine; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.shared.store)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts the engine on an open store and recovers every run that is not terminal: each gets
    /// its actor back, which continues from its stored state (re-running an agent that was
    /// running, expiring approvals that expired meanwhile).
    pub async fn open(store: Store, settings: Settings) -> Result<Engine> {
        let shutdown = CancellationToken::new();
        let bus = Bus::start(store.clone(), settings.bus_buffer_events, shutdown.clone());
        let shared = Arc::new(Shared {
            planner: settings.planner.clone(),
            texts: settings.texts.clone(),
            llm: settings.llm.clone(),
            registry: settings.registry.clone(),
            inline_payload_bytes_max: settings.inline_payload_bytes_max,
            tools: settings.tools.clone(),
            tool_output_offload_bytes: settings.tool_output_offload_bytes,
            store,
            shutdown,
            tasks: TaskTracker::new(),
            settings,
            actors: Mutex::new(HashMap::new()),
            bus,
        });
        let engine = Engine { shared };
        let mut recovered = 0;
        let heads: Vec<_> = engine.shared.store.runs().collect::<Result<_, _>>()?;
        for head in heads.into_iter().filter(|h| !h.terminal) {
            engine.deliver(head.run_id, None).await?;
            recovered += 1;
        }
        if recovered > 0 {
            tracing::info!(runs = recovered, "recovered runs");
        }
        Ok(engine)
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> Engine {
        Engine { shared }
    }

    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// Stops every actor and subscription and waits for them (agents are aborted; their runs
    /// resume on the next open). Then flushes the store.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
        if let Err(e) = self.shared.store.flush() {
            tracing::error!(error = %e, "flush at shutdown failed");
        }
    }

    /// Hands `msg` to the actor of `run`, spawning one when there is none (or the last one
    /// finished). A new actor gets the message in its mailbox *before* it starts, so an actor of a
    /// finished run always answers what it was spawned for.
    async fn deliver(&self, run: RunId, msg: Option<Msg>) -> Result<()> {
        let existing = {
            let actors = self.shared.actors.lock().unwrap_or_else(|e| e.into_inner());
            actors.get(&run).filter(|tx| !tx.is_closed()).cloned()
        };
        let msg = match (existing, msg) {
            (Some(_), None) => return Ok(()),
            (Some(tx), Some(msg)) => match tx.send(msg).await {
                Ok(()) => return Ok(()),
                Err(back) => Some(back.0),
            },
            (None, msg) => msg,
        };
        if self.shared.shutdown.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        if self.shared.store.run_head(run)?.is_none() {
            return Err(Error::RunNotFound(run));
        }
        let live = self.shared.store.load(run)?;
        let (tx, rx) = mpsc::channel(self.shared.settings.actor_mailbox_messages.max(1));
        if let Some(msg) = msg {
            // A fresh channel has room for one message.
            let _ = tx.try_send(msg);
        }
        let raced = {
            let mut actors = self.shared.actors.lock().unwrap_or_else(|e| e.into_inner());
            match actors.get(&run).filter(|tx| !tx.is_closed()) {
                Some(old) => Some(old.clone()),
                None => {
                    actors.insert(run, tx);
                    None
                }
            }
        };
        if let Some(old) = raced {
            // Another caller spawned an actor meanwhile: this one is dropped unstarted and the
            // message goes there instead.
            let mut rx = rx;
            if let Ok(msg) = rx.try_recv() {
                old.send(msg).await.map_err(|_| Error::ShuttingDown)?;
            }
            return Ok(());
        }
        let shared = self.shared.clone();
        self.shared.tasks.spawn(async move {
            RunActor::new(shared, live).run(rx).await;
        });
        Ok(())
    }

    /// Sends a message built by `make` and awaits its reply; a reply lost to an actor that was
    /// just finishing is asked again once.
    async fn ask<T>(
        &self,
        run: RunId,
        make: impl Fn(oneshot::Sender<Result<T>>) -> Msg,
    ) -> Result<T> {
        for _ in 0..2 {
            let (reply, rx) = oneshot::channel();
            self.deliver(run, Some(make(reply))).await?;
            if let Ok(r) = rx.await {
                return r;
            }
        }
        Err(Error::ShuttingDown)
    }

    /// Starts a run: validates the query, records `RunStarted` and the initialize node, and hands
    /// the run to its actor.
    pub async fn start_run(&self, req: StartRun) -> Result<Started> {
        self.start_run_as(RunId(uuid::Uuid::now_v7()), req).await
    }

    /// A fixed plan is checked when it is submitted, before anything is written: every step
    /// names a registered agent, and depends only on agents the plan runs.
    /// (A plan longer than the run's TODO limit is the run's failure, recorded with its reason.)
    fn check_plan(&self, plan: &[chronicle_schemas::PlanStep]) -> Result<()> {
        let registry = &self.shared.registry;
        for (i, step) in plan.iter().enumerate() {
            if step.agent_name.is_empty() {
                return Err(Error::Invalid(format!(
                    "plan step #{i} has no `agent_name` (the agent that runs it)"
                )));
            }
            if let Err(e) = registry.find(&step.agent_name) {
                return Err(Error::Invalid(format!(
                    "plan step #{i}: unknown agent {:?} (`agent_name`); known: {}",
                    e.name,
                    e.known.join(", ")
                )));
            }
            if let Some(dep) = step
                .dependencies
                .iter()
                .find(|d| !plan.iter().any(|s| &s.agent_name == *d))
            {
                return Err(Error::Invalid(format!(
                    "plan step #{i} ({}) depends on {dep:?}, which no step of the plan runs",
                    step.agent_name
                )));
            }
        }
        Ok(())
    }

    async fn start_run_as(&self, run_id: RunId, req: StartRun) -> Result<Started> {
        // Refuse before writing anything: a run nobody would drive must not be half-started.
        if self.shared.shutdown.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        let query = req.query.trim();
        if query.is_empty() {
            return Err(Error::Invalid("query must not be empty".into()));
        }
        if query.len() > self.shared.settings.query_bytes_max {
            return Err(Error::Invalid(format!(
                "query of {} bytes exceeds {}",
                query.len(),
                self.shared.settings.query_bytes_max
            )));
        }
        let mut config = req
            .config
            .unwrap_or_else(|| self.shared.settings.defaults.clone());
        if let Some(h) = req.hitl {
            config.hitl = h;
        }
        if req.strategy.is_some() {
            config.strategy = req.strategy;
        }
        if req.approval_timeout_ms.is_some() {
            config.approval_timeout_ms = req.approval_timeout_ms;
        }
        if let Some(plan) = &config.plan {
            self.check_plan(plan)?;
        }
        let session_id = req
            .session_id
            .unwrap_or_else(|| SessionId(uuid::Uuid::new_v4().to_string()));
        let request_id = format!("req_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let mut live = self.shared.store.load(run_id)?;
        live.append(vec![
            Event::RunStarted {
                session_id: session_id.clone(),
                user_id: req.user_id,
                request_id,
                query: query.to_owned(),
                config,
                parent: req.parent,
            },
            Event::PhaseChanged {
                phase: Phase::Initialization,
            },
            Event::Reasoning {
                message: self.shared.texts.say(Text::RequestReceived { query }),
            },
            Event::CheckpointSaved {
                checkpoint_id: "cp_001".into(),
                node: "initialize".into(),
                todos_completed: 0,
            },
        ])
        .await
        .map_err(|e| match e {
            e @ store::Error::BadSessionId { .. } => Error::Invalid(e.to_string()),
            other => Error::Store(other),
        })?;
        drop(live);
        self.deliver(run_id, None).await?;
        Ok(Started { run_id, session_id })
    }

    /// The child run of a `task` call: started once (its id is derived from the parent run and
    /// the tool call, so executing the call again after a crash finds the same child), then
    /// awaited. Returns the child's final response, or why it did not finish.
    pub(crate) async fn run_child(
        &self,
        ctx: &ToolContext,
        req: crate::tools::ChildRequest,
    ) -> std::result::Result<Value, String> {
        let child = child_run_id(ctx.run_id, &ctx.tool_call_id);
        let fail = |e: Error| format!("sub-agent run {child}: {e}");
        if self
            .shared
            .store
            .run_head(child)
            .map_err(|e| fail(e.into()))?
            .is_none()
        {
            let mut config = ctx.config.clone();
            config.workspace_session = Some(
                config
                    .workspace_session
                    .clone()
                    .unwrap_or_else(|| ctx.session_id.clone()),
            );
            config.plan = match &req.agent {
                None => None,
                Some(name) => {
                    let agent = self.shared.registry.find(name).map_err(|e| {
                        format!(
                            "unknown subagent_type {name:?}; known: {}",
                            e.known.join(", ")
                        )
                    })?;
                    Some(vec![chronicle_schemas::PlanStep {
                        agent_name: name.clone(),
                        team: agent.team().to_owned(),
                        task: req.description.clone(),
                        description: req.description.clone(),
                        input_mapping: req.input.clone(),
                        timeout: config.limits.agent_timeout_ms.div_ceil(1000),
                        retry_count: config.max_retries,
                        ..Default::default()
                    }])
                }
            };
            let start = StartRun {
                query: req.description.clone(),
                config: Some(config),
                parent: Some(ParentLink {
                    run_id: ctx.run_id,
                    tool_call_id: ctx.tool_call_id.clone(),
                }),
                ..StartRun::default()
            };
            match self.start_run_as(child, start).await {
                Ok(_) | Err(Error::Store(store::Error::Conflict { .. })) => {}
                Err(e) => return Err(fail(e)),
            }
        }
        let limit = ctx.config.limits.run_timeout_ms.saturating_add(60_000);
        let state = self
            .wait_until(child, Duration::from_millis(limit), |s| {
                s.supervisor.run_status.is_terminal()
            })
            .await
            .map_err(fail)?;
        let s = &state.supervisor;
        match s.run_status {
            chronicle_schemas::RunStatus::Completed => Ok(serde_json::json!({
                "run_id": child,
                "status": "completed",
                "final_response": s.final_response,
            })),
            status => Err(format!(
                "sub-agent run {child} {}: {}",
                status.as_str(),
                s.error_log
                    .last()
                    .map_or("no reason recorded", String::as_str)
            )),
        }
    }

    /// The sub-agent runs started by `state`'s `task` calls, with their status (`not_started`
    /// while the call waits for its approval), for `/todos`.
    pub fn sub_runs(&self, state: &RunState) -> Vec<Value> {
        let Some(run_id) = state.run_id else {
            return vec![];
        };
        state
            .supervisor
            .tool_calls
            .iter()
            .filter(|c| c.tool == "task")
            .map(|c| {
                let child = child_run_id(run_id, &c.tool_call_id);
                let (status, phase) = match self.state(child, None) {
                    Ok(s) => (
                        serde_json::json!(s.supervisor.run_status.as_str()),
                        serde_json::json!(s.supervisor.current_phase),
                    ),
                    Err(_) => (serde_json::json!("not_started"), Value::Null),
                };
                serde_json::json!({
                    "todo_id": c.todo_id,
                    "tool_call_id": c.tool_call_id,
                    "run_id": child,
                    "status": status,
                    "phase": phase,
                })
            })
            .collect()
    }

    /// Decides a pending approval. `by` is the authenticated principal.
    pub async fn decide(
        &self,
        run: RunId,
        approval_id: ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        by: &str,
        comment: Option<String>,
    ) -> Result<Approval> {
        self.ask(run, |reply| Msg::Decide {
            approval_id: approval_id.clone(),
            decision,
            edited_args: edited_args.clone(),
            by: by.to_owned(),
            comment: comment.clone(),
            reply,
        })
        .await
    }

    /// Runs a slash command; the JSON result has seed 000's shape, or `{error, help}`.
    pub async fn command(&self, run: RunId, text: &str, by: &str) -> Result<Value> {
        self.ask(run, |reply| Msg::Command {
            text: text.to_owned(),
            by: by.to_owned(),
            reply,
        })
        .await
    }

    pub async fn restore(&self, run: RunId, target: RestoreTarget, by: &str) -> Result<Value> {
        self.ask(run, |reply| Msg::Restore {
            target: target.clone(),
            by: by.to_owned(),
            reply,
        })
        .await
    }

    pub async fn cancel(&self, run: RunId, by: &str, reason: Option<String>) -> Result<()> {
        self.ask(run, |reply| Msg::Cancel {
            by: by.to_owned(),
            reason: reason.clone(),
            reply,
        })
        .await
    }

    /// The run's projected state now (or right after `seq`), as of its newest *durable* event,
    /// so a reader never sees what a subscriber has not been sent (and a crash could still lose).
    pub fn state(&self, run: RunId, seq: Option<u64>) -> Result<RunState> {
        let head = self
            .shared
            .store
            .run_head(run)?
            .ok_or(Error::RunNotFound(run))?;
        let durable = self
            .shared
            .store
            .durable_seq(run)?
            .unwrap_or(0)
            .min(head.last_seq);
        let at = seq.map_or(durable, |s| s.min(durable));
        Ok(self.shared.store.state_at(run, at)?)
    }

    /// Every event of `run` from `from_seq`: history, then live; no gap, no duplicate.
    pub fn subscribe(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> Result<ReceiverStream<Result<Arc<Envelope>, store::Error>>> {
        if self.shared.store.run_head(run)?.is_none() {
            return Err(Error::RunNotFound(run));
        }
        Ok(self.shared.bus.subscribe(run, from_seq))
    }

    /// Waits until `done(state)` holds, re-checking after each event of the run (or `timeout`).
    pub async fn wait_until(
        &self,
        run: RunId,
        timeout: Duration,
        done: impl Fn(&RunState) -> bool,
    ) -> Result<RunState> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut events = self.subscribe(run, 0)?;
        loop {
            let state = self.state(run, None)?;
            if done(&state) {
                return Ok(state);
            }
            // Skip ahead to what is already stored, then wait for the next event.
            let next = state.next_seq();
            loop {
                match tokio::time::timeout_at(deadline, events.next()).await {
                    Err(_) => {
                        return Err(Error::Invalid(format!(
                            "timed out after {timeout:?} waiting for run {run}"
                        )));
                    }
                    Ok(None) => return Err(Error::ShuttingDown),
                    Ok(Some(Err(e))) => return Err(e.into()),
                    Ok(Some(Ok(env))) if env.seq + 1 >= next => break,
                    Ok(Some(Ok(_))) => {}
                }
            }
        }
    }

    /// Waits until the run needs nothing but a human or has ended: terminal, or waiting for an
    /// approval with no agent still working.
    pub async fn wait_settled(&self, run: RunId, timeout: Duration) -> Result<RunState> {
        self.wait_until(run, timeout, |s| {
            let sup = &s.supervisor;
            // An agent that waits for a human on a tool call is settled too.
            let waits_on_tool = |t: &chronicle_schemas::SupervisorTodo| {
                s.approvals.pending().any(|a| {
                    matches!(&a.subject, Some(chronicle_schemas::Subject::ToolCall { todo_id, .. }) if *todo_id == t.id)
                })
            };
            sup.run_status.is_terminal()
                || (!sup.pending_approval_ids.is_empty()
                    && sup.planning_state.as_ref().is_none_or(|p| {
                        p.todos.iter().all(|t| {
                            t.status != chronicle_schemas::TodoStatus::InProgress
                                || waits_on_tool(t)
                        })
                    }))
        })
        .await
    }
}

/// The run a `task` call starts: derived from the parent run and the call, so the call finds its
/// child again when it is executed a second time (after a crash).
pub fn child_run_id(parent: RunId, tool_call_id: &chronicle_schemas::ToolCallId) -> RunId {
    let mut h = blake3::Hasher::new_derive_key("chronicle task child run v1");
    h.update(parent.0.as_bytes());
    h.update(tool_call_id.as_str().as_bytes());
    let bytes: [u8; 16] = h.finalize().as_bytes()[..16].try_into().unwrap_or_default();
    RunId(uuid::Uuid::new_v8(bytes))
}
