//! The run actor: one tokio task per active run that owns the run's state. It decides the next
//! step from the projected state, performs it, appends the resulting events with `expected_seq`
//! (through `LiveRun`), and applies them. Commands, decisions, restores and cancels are messages,
//! so a run never races with itself. Agents run in their own tasks and report back by message.
//!
//! Every node appends its events in one append (one atomic batch): a crash keeps a node's events
//! all or none, so recovery simply decides the next step again from what is stored.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronicle_projections::RunState;
use chronicle_schemas::{
    Actor as By, Approval, ApprovalId, ApprovalStatus, CheckpointId, Decision, Envelope, Event,
    ExpiryAction, Payload, Phase, Subject, SupervisorTodo, Timestamp, TodoId, TodoStatus,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::agents::{AgentContext, AgentError, AgentOutput};
use crate::commands::{self, Command};
use crate::llm::{Llm, LlmCall};
use crate::planner::{AgentResult, Intent, PlanContext};
use crate::runtime::Shared;
use crate::store::{self, LiveRun, StorageHealth};
use crate::texts::Text;
use crate::tools::{ToolCallMsg, ToolHost};
use crate::{Error, Result, hitl, todo};

/// What a planner's node appends besides its result: the model calls it made, then its notes.
fn planner_events(cx: PlanContext<'_>) -> Vec<Event> {
    let (calls, notes) = cx.finish();
    calls
        .into_iter()
        .map(llm_event)
        .chain(
            notes
                .into_iter()
                .map(|message| Event::Reasoning { message }),
        )
        .collect()
}

/// The HITL category of a TODO's agent: as recorded with the TODO, or (TODOs of older logs) as
/// the agent declares it now.
fn category_of<'a>(registry: &'a crate::agents::Registry, t: &'a SupervisorTodo) -> &'a str {
    if !t.category.is_empty() {
        return &t.category;
    }
    registry
        .get(&t.agent_name)
        .map_or("general", |a| a.category())
}

mod tools;

use tools::{ToolDone, Waiter};

/// How long a run waits before retrying a step the full disk refused.
const STORAGE_FULL_RETRY: Duration = Duration::from_millis(500);

/// Sends an outcome the full disk refused back to the actor after [`STORAGE_FULL_RETRY`].
fn redeliver<T: Send + 'static>(tx: mpsc::Sender<T>, outcome: T) {
    tokio::spawn(async move {
        tokio::time::sleep(STORAGE_FULL_RETRY).await;
        let _ = tx.send(outcome).await;
    });
}

/// Where a restore goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreTarget {
    Checkpoint(CheckpointId),
    Seq(u64),
}

pub(crate) enum Msg {
    Decide {
        approval_id: ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        by: String,
        comment: Option<String>,
        reply: oneshot::Sender<Result<Approval>>,
    },
    Command {
        text: String,
        by: String,
        reply: oneshot::Sender<Result<Value>>,
    },
    Restore {
        target: RestoreTarget,
        by: String,
        reply: oneshot::Sender<Result<Value>>,
    },
    Cancel {
        by: String,
        reason: Option<String>,
        reply: oneshot::Sender<Result<()>>,
    },
}

#[derive(Clone)]
struct AgentDone {
    todo_id: TodoId,
    attempt: u32,
    epoch: u64,
    outcome: Result<AgentOutput, AgentError>,
    duration_ms: u64,
}

pub(crate) struct RunActor {
    shared: Arc<Shared>,
    live: LiveRun,
    /// Bumped by every restore and cancel: results of agents started before are discarded.
    epoch: u64,
    running: HashMap<TodoId, (u32, AbortHandle)>,
    done_tx: mpsc::Sender<AgentDone>,
    done_rx: mpsc::Receiver<AgentDone>,
    /// Agents' tool calls arrive here (the tool host).
    tool_host: ToolHost,
    tool_rx: mpsc::Receiver<ToolCallMsg>,
    tool_done_tx: mpsc::Sender<ToolDone>,
    tool_done_rx: mpsc::Receiver<ToolDone>,
    /// Calls waiting for a human, by tool call.
    parked: HashMap<chronicle_schemas::ToolCallId, Waiter>,
    /// Tool executions in flight, with the TODO whose agent made the call.
    tool_tasks: HashMap<chronicle_schemas::ToolCallId, (TodoId, AbortHandle)>,
}

/// The next thing the run should do, decided from its state alone.
#[derive(Debug)]
enum Step {
    Wait,
    Fail(String),
    AnalyzeIntent,
    BuildPlan,
    Block(Vec<(TodoId, String)>),
    RequestApprovals(Vec<TodoId>),
    ReAsk(Vec<(TodoId, Option<ApprovalId>)>),
    Start(Vec<TodoId>),
    Rerun(Vec<TodoId>),
    SkipRejected(Vec<(TodoId, String)>),
    Evaluate,
    AddRetries(Vec<String>, u32),
    Aggregate,
    Respond,
}

pub(crate) fn now() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0),
    )
}

fn user(by: &str) -> By {
    By::user(by)
}

/// The checkpoint closing a node; `just_completed` counts a TODO completed by the same append.
fn checkpoint(state: &RunState, node: &str, just_completed: usize) -> Event {
    let n = state.checkpoints.checkpoints.len() + 1;
    let done = just_completed
        + state
            .supervisor
            .planning_state
            .as_ref()
            .map_or(0, |p| p.completed_todo_ids.len());
    Event::CheckpointSaved {
        checkpoint_id: CheckpointId(format!("cp_{n:03}")),
        node: node.to_owned(),
        todos_completed: done as u32,
    }
}

fn llm_event(call: LlmCall) -> Event {
    Event::LlmCalled {
        purpose: call.purpose,
        model: call.model,
        prompt_hash: call.prompt_hash,
        response: Payload::Inline(Value::String(call.response)),
        duration_ms: call.duration_ms,
        error: call.error,
    }
}

fn phase_events(state: &RunState, phase: Phase) -> Option<Event> {
    (state.supervisor.current_phase != phase).then_some(Event::PhaseChanged { phase })
}

/// A TODO has a standing go-ahead from a human on the effective history (so a retry does not
/// ask again).
fn approved(t: &SupervisorTodo, on_expiry: ExpiryAction) -> bool {
    match t.approval_status {
        Some(ApprovalStatus::Approved | ApprovalStatus::Edited) => true,
        Some(ApprovalStatus::Expired) => on_expiry == ExpiryAction::Approve,
        _ => false,
    }
}

fn todo_to_json(t: &SupervisorTodo) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

impl RunActor {
    pub(crate) fn new(shared: Arc<Shared>, live: LiveRun) -> Self {
        let (done_tx, done_rx) = mpsc::channel(64);
        let (tool_tx, tool_rx) = mpsc::channel(64);
        let (tool_done_tx, tool_done_rx) = mpsc::channel(64);
        Self {
            shared,
            live,
            epoch: 0,
            running: HashMap::new(),
            done_tx,
            done_rx,
            tool_host: ToolHost { tx: tool_tx },
            tool_rx,
            tool_done_tx,
            tool_done_rx,
            parked: HashMap::new(),
            tool_tasks: HashMap::new(),
        }
    }

    fn state(&self) -> &RunState {
        self.live.state()
    }

    async fn append(&mut self, events: Vec<Event>) -> Result<Vec<Envelope>> {
        match self.live.append(events).await {
            Err(store::Error::Conflict { .. }) => {
                // Someone else wrote to this run (an actor being replaced): start from the log.
                self.live = self.shared.store.load(self.live.run_id())?;
                Err(Error::Invalid(
                    "the run changed concurrently; try again".into(),
                ))
            }
            other => Ok(other?),
        }
    }

    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let shutdown = self.shared.shutdown.clone();
        loop {
            // While the disk is full no step runs (it could not record what it did, and a step
            // may call a model) and outcomes wait; the mailbox is still served (its writes are
            // refused with the full-disk error), and a timer looks again.
            let mut full = matches!(self.shared.store.health(), StorageHealth::Full { .. });
            if !full && let Err(e) = self.advance().await {
                tracing::error!(run = %self.live.run_id(), error = %e, "run step failed");
                if e.is_storage_full() {
                    // The step wrote nothing: it runs again once there may be space.
                    full = true;
                } else if matches!(e, Error::Store(_)) {
                    // The store is unusable (closing or broken): stop; recovery resumes the run.
                    return;
                }
            }
            if self.state().supervisor.run_status.is_terminal() && self.running.is_empty() {
                // Answer what is already queued (commands on a finished run), then stop.
                match rx.try_recv() {
                    Ok(msg) => {
                        self.handle(msg).await;
                        continue;
                    }
                    Err(_) => return,
                }
            }
            let expiry = self.next_expiry();
            let deadline = self.run_deadline();
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => {
                        self.handle(msg).await;
                        self.resume_parked_logged().await;
                    }
                    None => return,
                },
                Some(call) = self.tool_rx.recv(), if !full => {
                    if let Err(e) = self.on_tool_call(call).await {
                        tracing::error!(run = %self.live.run_id(), error = %e, "recording a tool call failed");
                    }
                }
                Some(done) = self.tool_done_rx.recv(), if !full => {
                    if let Err(e) = self.on_tool_done(done).await {
                        tracing::error!(run = %self.live.run_id(), error = %e, "recording a tool result failed");
                    }
                }
                Some(done) = self.done_rx.recv(), if !full => {
                    let (again, running) = (done.clone(), self.running.get(&done.todo_id).cloned());
                    match self.on_agent_done(done).await {
                        Err(e) if e.is_storage_full() => {
                            // Nothing was recorded: deliver the outcome again once there may be
                            // space (the attempt stays running meanwhile).
                            if let Some(r) = running {
                                self.running.insert(again.todo_id.clone(), r);
                            }
                            redeliver(self.done_tx.clone(), again);
                        }
                        Err(e) => {
                            tracing::error!(run = %self.live.run_id(), error = %e, "recording an agent result failed");
                        }
                        Ok(()) => {}
                    }
                }
                // Past the run timeout: the next `advance` fails the run and aborts its agents.
                _ = sleep_until(deadline), if deadline.is_some() => {}
                _ = sleep_until(expiry), if expiry.is_some() => {
                    if let Err(e) = self.expire_due().await {
                        tracing::error!(run = %self.live.run_id(), error = %e, "expiring approvals failed");
                    }
                    self.resume_parked_logged().await;
                }
                _ = tokio::time::sleep(STORAGE_FULL_RETRY), if full => {}
                _ = shutdown.cancelled() => {
                    self.abort_agents();
                    return;
                }
            }
        }
    }

    // ---------------------------------------------------------------- deciding

    fn next_step(&self) -> Step {
        let state = self.state();
        let s = &state.supervisor;
        let cfg = &s.config;
        if s.run_status.is_terminal() {
            return Step::Wait;
        }
        let steps = state.checkpoints.checkpoints.len() as u32;
        if steps >= cfg.limits.max_steps {
            return Step::Fail(format!(
                "max_steps limit of {} node executions reached",
                cfg.limits.max_steps
            ));
        }
        if let Some(start) = s.start_time {
            let elapsed_ms = (now().as_micros() - start.as_micros()).max(0) as u64 / 1000;
            if elapsed_ms > cfg.limits.run_timeout_ms {
                return Step::Fail(format!(
                    "run timeout of {} ms exceeded",
                    cfg.limits.run_timeout_ms
                ));
            }
        }
        let Some(p) = s
            .planning_state
            .as_ref()
            .filter(|p| !p.analyzed_intent.is_null())
        else {
            return Step::AnalyzeIntent;
        };
        if s.execution_plan.is_none() {
            return Step::BuildPlan;
        }
        if matches!(
            s.current_phase,
            Phase::Aggregation | Phase::ResponseGeneration | Phase::Finished
        ) {
            return Step::Respond;
        }

        // Executing.
        let orphans: Vec<TodoId> = p
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::InProgress && !self.running.contains_key(&t.id))
            .map(|t| t.id.clone())
            .collect();
        if !orphans.is_empty() {
            return Step::Rerun(orphans);
        }
        let r = todo::readiness(p);
        if !r.blocked.is_empty() {
            return Step::Block(r.blocked);
        }
        let mut reask = Vec::new();
        let mut rejected = Vec::new();
        let mut startable: Vec<TodoId> = Vec::new();
        let mut waiting = 0;
        for t in p
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::WaitingApproval)
        {
            // The TODO's approval as the effective history sees it, checked against the whole log:
            // pending on both means a human is still to answer; pending here but not in the log
            // means a restore cancelled it, or it was decided on an abandoned branch.
            let logged = t
                .approval_id
                .as_ref()
                .and_then(|id| state.approvals.get(id))
                .map(|a| a.status);
            match t.approval_status {
                Some(ApprovalStatus::Pending) if logged == Some(ApprovalStatus::Pending) => {
                    waiting += 1
                }
                _ if approved(t, cfg.on_expiry) => startable.push(t.id.clone()),
                Some(ApprovalStatus::Rejected | ApprovalStatus::Expired) => {
                    let reason = t
                        .approval_id
                        .as_ref()
                        .and_then(|id| state.approvals.get(id))
                        .and_then(|a| {
                            a.cancel_reason.clone().or_else(|| {
                                a.decided_by.as_ref().map(|b| format!("rejected by {b}"))
                            })
                        });
                    rejected.push((t.id.clone(), reason.unwrap_or_else(|| "rejected".into())));
                }
                _ => reask.push((t.id.clone(), t.approval_id.clone())),
            }
        }
        if !rejected.is_empty() {
            return Step::SkipRejected(rejected);
        }
        if !reask.is_empty() {
            return Step::ReAsk(reask);
        }
        let in_flight = self.running.len();
        let sequential = p.execution_strategy == "sequential";
        let mut to_request = Vec::new();
        for id in &r.ready {
            let Some(t) = p.todo(id) else { continue };
            let category = category_of(&self.shared.registry, t);
            if hitl::todo_needs_approval(cfg, category) && !approved(t, cfg.on_expiry) {
                to_request.push(id.clone());
            } else {
                startable.push(id.clone());
            }
        }
        // Keep plan order across the two sources.
        let order = |id: &TodoId| {
            p.todos
                .iter()
                .position(|t| &t.id == id)
                .unwrap_or(usize::MAX)
        };
        startable.sort_by_key(order);
        if sequential {
            // One at a time, in plan order: the first TODO that can move is the only one that may.
            if in_flight > 0 || waiting > 0 {
                return Step::Wait;
            }
            let first_start = startable.first().map(order);
            let first_request = to_request.first().map(order);
            return match (first_start, first_request) {
                (Some(a), Some(b)) if b < a => {
                    Step::RequestApprovals(vec![to_request.swap_remove(0)])
                }
                (Some(_), _) => Step::Start(vec![startable.swap_remove(0)]),
                (None, Some(_)) => Step::RequestApprovals(vec![to_request.swap_remove(0)]),
                (None, None) => self.after_execution(),
            };
        }
        if !to_request.is_empty() {
            return Step::RequestApprovals(to_request);
        }
        let capacity = (cfg.limits.max_concurrency.max(1) as usize).saturating_sub(in_flight);
        if !startable.is_empty() && capacity > 0 {
            startable.truncate(capacity);
            return Step::Start(startable);
        }
        if in_flight > 0 || waiting > 0 || !startable.is_empty() {
            return Step::Wait;
        }
        self.after_execution()
    }

    /// Every TODO settled (or none can move): evaluate, retry, or aggregate.
    fn after_execution(&self) -> Step {
        let state = self.state();
        let s = &state.supervisor;
        let Some(p) = s.planning_state.as_ref() else {
            return Step::AnalyzeIntent;
        };
        let unsettled: Vec<&SupervisorTodo> = p
            .todos
            .iter()
            .filter(|t| {
                matches!(
                    t.status,
                    TodoStatus::Pending | TodoStatus::InProgress | TodoStatus::WaitingApproval
                )
            })
            .collect();
        if !unsettled.is_empty() {
            // Pending TODOs whose dependencies can never finish (a cycle): block them.
            let stuck = unsettled
                .iter()
                .filter(|t| t.status == TodoStatus::Pending)
                .map(|t| {
                    (
                        t.id.clone(),
                        "dependencies can never complete (cycle)".to_owned(),
                    )
                })
                .collect::<Vec<_>>();
            return if stuck.is_empty() {
                Step::Wait
            } else {
                Step::Block(stuck)
            };
        }
        let round = 1 + p
            .todos
            .iter()
            .filter_map(|t| t.metadata.get("round").and_then(Value::as_u64))
            .max()
            .unwrap_or(0) as u32;
        if s.evaluation_rounds < round {
            return Step::Evaluate;
        }
        if let Some(ev) = &s.evaluation {
            let agents: Vec<String> = ev
                .retry_agents
                .iter()
                // Only agents that exist and whose failure was retryable (`failed_teams` holds the
                // non-retryable ones).
                .filter(|a| self.shared.registry.get(a).is_some() && !s.failed_teams.contains(a))
                .cloned()
                .collect();
            if ev.needs_retry && !agents.is_empty() && round <= s.config.max_retries {
                return Step::AddRetries(agents, round);
            }
        }
        Step::Aggregate
    }

    /// Performs steps until the run has to wait for something.
    async fn advance(&mut self) -> Result<()> {
        for _ in 0..10_000 {
            let step = self.next_step();
            if matches!(step, Step::Wait) {
                return Ok(());
            }
            self.perform(step).await?;
        }
        Err(Error::Invalid(
            "the run did not settle after 10000 steps".into(),
        ))
    }

    // ---------------------------------------------------------------- doing

    async fn perform(&mut self, step: Step) -> Result<()> {
        // What the steps read of the supervisor state, copied once: not the whole state (a long
        // plan would make every step copy every TODO).
        let s = StepInputs::of(&self.state().supervisor);
        match step {
            Step::Wait => Ok(()),
            Step::Fail(reason) => {
                self.cancel_sub_runs("engine", None);
                self.abort_agents();
                self.append(vec![Event::RunFailed { error: reason }])
                    .await
                    .map(drop)
            }
            Step::AnalyzeIntent => {
                let cx = self.plan_context(&s.query);
                let intent = self.shared.planner.intent(&cx).await;
                let mut ev: Vec<Event> = phase_events(self.state(), Phase::Planning)
                    .into_iter()
                    .collect();
                ev.extend(planner_events(cx));
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::IntentAnalyzed {
                        intent_type: &intent.intent_type,
                        confidence: intent.confidence,
                        by_model: intent.source == chronicle_schemas::Source::Llm,
                    }),
                });
                ev.push(Event::IntentAnalyzed {
                    intent_type: intent.intent_type,
                    confidence: intent.confidence,
                    keywords: intent.keywords,
                    entities: intent.entities,
                    source: intent.source,
                });
                ev.push(checkpoint(self.state(), "analyze_intent", 0));
                self.append(ev).await.map(drop)
            }
            Step::BuildPlan => {
                let intent = intent_of(self.state());
                let names: Vec<&str> = self.shared.registry.names().collect();
                let cx = self.plan_context(&s.query);
                let plan = match &s.config.plan {
                    Some(steps) => provided_plan(steps, s.config.strategy),
                    None => self.shared.planner.plan(&cx, &intent).await,
                };
                let mut ev: Vec<Event> = planner_events(cx);
                let max_todos = s.config.limits.max_todos as usize;
                if plan.steps.len() > max_todos {
                    ev.push(Event::RunFailed {
                        error: format!(
                            "the plan has {} TODOs, over the max_todos limit of {max_todos}",
                            plan.steps.len()
                        ),
                    });
                    return self.append(ev).await.map(drop);
                }
                let strategy = s.config.strategy.unwrap_or(plan.strategy);
                let todos = todo::convert_plan(
                    &plan.steps,
                    0,
                    now(),
                    &self.shared.registry,
                    self.shared.texts.as_ref(),
                );
                let agents: Vec<&str> =
                    plan.steps.iter().map(|st| st.agent_name.as_str()).collect();
                ev.push(Event::PlanCreated {
                    strategy: plan.strategy,
                    steps: plan.steps.clone(),
                    parallel_groups: plan.parallel_groups.clone(),
                    estimated_total_time: plan.estimated_total_time,
                    available_agents: names.iter().map(|n| (*n).to_owned()).collect(),
                    available_teams: self.shared.registry.teams(),
                    source: plan.source,
                });
                ev.extend(todos.into_iter().map(|todo| Event::TodoAdded {
                    todo,
                    added_by: By::Engine,
                }));
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::PlanBuilt {
                        agents: &agents,
                        strategy: strategy.as_str(),
                    }),
                });
                ev.push(checkpoint(self.state(), "build_plan", 0));
                self.append(ev).await.map(drop)
            }
            Step::Block(list) => {
                let ev = engine_moves(list, TodoStatus::Pending, TodoStatus::Blocked);
                self.append(ev).await.map(drop)
            }
            Step::SkipRejected(list) => {
                let ev = engine_moves(list, TodoStatus::WaitingApproval, TodoStatus::Skipped);
                self.append(ev).await.map(drop)
            }
            Step::RequestApprovals(ids) => {
                let mut ev = Vec::new();
                let mut first = None;
                for id in ids {
                    let Some(t) = self.todo(&id) else { continue };
                    ev.push(Event::TodoStatusChanged {
                        todo_id: id.clone(),
                        from: t.status,
                        to: TodoStatus::WaitingApproval,
                        reason: Some(format!("HITL policy {}", s.config.hitl.as_str())),
                        attempt: t.attempts,
                        by: By::Engine,
                    });
                    let req = self.approval_request(&t, None);
                    if first.is_none() {
                        first = approval_id_of(&req);
                    }
                    ev.push(req);
                }
                ev.push(Event::RunInterrupted {
                    reason: "waiting for approval".into(),
                    approval_id: first,
                });
                ev.push(checkpoint(self.state(), "approval", 0));
                self.append(ev).await.map(drop)
            }
            Step::ReAsk(list) => {
                let mut ev = Vec::new();
                let mut first = None;
                for (id, old) in list {
                    let Some(t) = self.todo(&id) else { continue };
                    let req = self.approval_request(&t, old);
                    if first.is_none() {
                        first = approval_id_of(&req);
                    }
                    ev.push(req);
                }
                ev.push(Event::RunInterrupted {
                    reason: "waiting for approval".into(),
                    approval_id: first,
                });
                self.append(ev).await.map(drop)
            }
            Step::Start(ids) => {
                let mut ev: Vec<Event> = phase_events(self.state(), Phase::Executing)
                    .into_iter()
                    .collect();
                let mut starts = Vec::new();
                for id in ids {
                    let Some(t) = self.todo(&id) else { continue };
                    let attempt = t.attempts + 1;
                    let input = input_of(&t);
                    ev.push(Event::TodoStatusChanged {
                        todo_id: id.clone(),
                        from: t.status,
                        to: TodoStatus::InProgress,
                        reason: None,
                        attempt,
                        by: By::Engine,
                    });
                    ev.push(Event::AgentStarted {
                        todo_id: id.clone(),
                        agent: t.agent_name.clone(),
                        attempt,
                        input: input.clone(),
                    });
                    ev.push(Event::Reasoning {
                        message: self.shared.texts.say(Text::TodoStarted {
                            todo: &t.id,
                            agent: &t.agent_name,
                            attempt,
                        }),
                    });
                    starts.push((t, attempt, input));
                }
                self.append(ev).await?;
                for (t, attempt, input) in starts {
                    self.spawn_agent(&t, attempt, input);
                }
                Ok(())
            }
            Step::Rerun(ids) => {
                let mut ev = Vec::new();
                let mut starts = Vec::new();
                for id in ids {
                    let Some(t) = self.todo(&id) else { continue };
                    // The interrupted attempt again (not a new one): the calls it repeats are
                    // answered from the log.
                    let attempt = t.attempts.max(1);
                    let input = input_of(&t);
                    ev.push(Event::AgentStarted {
                        todo_id: id.clone(),
                        agent: t.agent_name.clone(),
                        attempt,
                        input: input.clone(),
                    });
                    ev.push(Event::Reasoning {
                        message: self.shared.texts.say(Text::TodoRerun {
                            todo: &t.id,
                            agent: &t.agent_name,
                            attempt,
                        }),
                    });
                    starts.push((t, attempt, input));
                }
                self.append(ev).await?;
                for (t, attempt, input) in starts {
                    self.spawn_agent(&t, attempt, input);
                }
                Ok(())
            }
            Step::Evaluate => {
                let results = self.results_for_evaluation();
                let cx = self.plan_context(&s.query);
                let ev_out = self.shared.planner.evaluate(&cx, &results).await;
                let mut ev: Vec<Event> = planner_events(cx);
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::Evaluated {
                        feedback: &ev_out.feedback,
                    }),
                });
                ev.push(Event::EvaluationRecorded {
                    quality_score: ev_out.quality_score,
                    completeness: ev_out.completeness,
                    needs_retry: ev_out.needs_retry,
                    retry_agents: ev_out.retry_agents,
                    feedback: ev_out.feedback,
                    source: ev_out.source,
                });
                ev.push(checkpoint(self.state(), "evaluate", 0));
                self.append(ev).await.map(drop)
            }
            Step::AddRetries(agents, round) => {
                let n = s.todos;
                let mut ev = Vec::new();
                for (i, agent) in agents.iter().enumerate() {
                    let mut t = self.new_todo(n + i, agent, vec![]);
                    t.name = self.shared.texts.say(Text::RetryTodoName { agent });
                    t.description = self.shared.texts.say(Text::RetryTodoDescription { agent });
                    t.metadata.insert("round".into(), json!(round));
                    t.metadata.insert("retry_of".into(), json!(agent));
                    ev.push(Event::TodoAdded {
                        todo: t,
                        added_by: By::Engine,
                    });
                }
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::RetryRound {
                        round,
                        agents: &agents,
                    }),
                });
                self.append(ev).await.map(drop)
            }
            Step::Aggregate => {
                // The full results are in the log once (`AgentCompleted`) and in `team_results`;
                // the aggregate names each agent's TODO and digests its result.
                let sup = &self.state().supervisor;
                let todo_of = |agent: &str| {
                    sup.planning_state.as_ref().and_then(|p| {
                        p.todos
                            .iter()
                            .rev()
                            .find(|t| t.agent_name == agent && t.status == TodoStatus::Completed)
                            .map(|t| t.id.clone())
                    })
                };
                let aggregated: serde_json::Map<String, Value> = sup
                    .team_results
                    .iter()
                    .map(|(agent, result)| {
                        (
                            agent.clone(),
                            json!({"todo_id": todo_of(agent), "digest": digest(result)}),
                        )
                    })
                    .collect();
                let mut ev: Vec<Event> = phase_events(self.state(), Phase::Aggregation)
                    .into_iter()
                    .collect();
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::Aggregated {
                        agents: aggregated.len(),
                    }),
                });
                ev.push(Event::ResultsAggregated {
                    aggregated: Value::Object(aggregated),
                });
                ev.push(checkpoint(self.state(), "aggregate", 0));
                self.append(ev).await.map(drop)
            }
            Step::Respond => {
                let intent = intent_of(self.state());
                let results: Vec<AgentResult> = self
                    .results_for_evaluation()
                    .into_iter()
                    .filter(|r| r.result.is_some())
                    .collect();
                let cx = self.plan_context(&s.query);
                let response = self.shared.planner.respond(&cx, &intent, &results).await;
                let mut ev: Vec<Event> = phase_events(self.state(), Phase::ResponseGeneration)
                    .into_iter()
                    .collect();
                ev.extend(planner_events(cx));
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::Responding),
                });
                ev.push(Event::ResponseGenerated {
                    final_response: response,
                });
                ev.push(checkpoint(self.state(), "generate_response", 0));
                ev.push(Event::PhaseChanged {
                    phase: Phase::Finished,
                });
                let total = s.start_time.map_or(0, |t| {
                    (now().as_micros() - t.as_micros()).max(0) as u64 / 1000
                });
                ev.push(Event::RunCompleted {
                    total_execution_time_ms: total,
                });
                self.append(ev).await.map(drop)
            }
        }
    }

    fn todo(&self, id: &TodoId) -> Option<SupervisorTodo> {
        self.state()
            .supervisor
            .planning_state
            .as_ref()?
            .todo(id)
            .cloned()
    }

    /// What a planner sees of the run, with the model when one is configured.
    fn plan_context<'a>(&'a self, query: &'a str) -> PlanContext<'a> {
        PlanContext::new(
            self.live.run_id(),
            query,
            &self.shared.registry,
            Llm::new(self.shared.llm.clone()),
        )
    }

    fn new_todo(&self, index: usize, agent: &str, deps: Vec<TodoId>) -> SupervisorTodo {
        let (team, category) = todo::declared(&self.shared.registry, agent, "");
        SupervisorTodo {
            id: TodoId(format!("todo_{:03}", index + 1)),
            name: self.shared.texts.say(Text::AddedTodoName { agent }),
            description: self.shared.texts.say(Text::AddedTodoDescription { agent }),
            agent_name: agent.to_owned(),
            team,
            category,
            agent_purpose: self
                .shared
                .registry
                .get(agent)
                .map(|a| a.purpose().to_owned())
                .unwrap_or_default(),
            dependencies: deps,
            created_at: now(),
            max_retries: self.state().supervisor.config.max_retries,
            ..SupervisorTodo::default()
        }
    }

    fn approval_request(&self, t: &SupervisorTodo, supersedes: Option<ApprovalId>) -> Event {
        let cfg = &self.state().supervisor.config;
        let category = category_of(&self.shared.registry, t).to_owned();
        Event::ApprovalRequested {
            approval_id: ApprovalId(uuid::Uuid::new_v4().to_string()),
            subject: Subject::Todo {
                todo_id: t.id.clone(),
            },
            tool_name: t.agent_name.clone(),
            args: input_of(t),
            preview: json!({
                "todo_id": t.id,
                "name": t.name,
                "agent": t.agent_name,
                "category": category,
                "priority": t.priority,
                "dependencies": t.dependencies,
            }),
            policy: cfg.hitl.as_str().to_owned(),
            message: self.shared.texts.say(Text::TodoApproval { todo: t }),
            expires_at: cfg
                .approval_timeout_ms
                .map(|ms| Timestamp(now().as_micros() + ms as i64 * 1000)),
            supersedes,
        }
    }

    fn spawn_agent(&mut self, t: &SupervisorTodo, attempt: u32, input: Value) {
        let s = &self.state().supervisor;
        let ctx = AgentContext {
            run_id: self.live.run_id(),
            session_id: s.session_id.clone(),
            user_id: s.user_id.clone(),
            todo_id: t.id.clone(),
            attempt,
            query: s.query.clone(),
            intent: s
                .planning_state
                .as_ref()
                .map(|p| p.analyzed_intent.clone())
                .unwrap_or(Value::Null),
            team_results: s.team_results.clone(),
            tools: self.tool_host.handle(t.id.clone(), attempt, self.epoch),
        };
        let limit_ms = s.config.limits.agent_timeout_ms;
        let timeout_ms = t
            .metadata
            .get("timeout")
            .and_then(Value::as_u64)
            .map_or(limit_ms, |secs| (secs * 1000).min(limit_ms))
            .max(1);
        let agent = self.shared.registry.get(&t.agent_name).cloned();
        let agent_name = t.agent_name.clone();
        let (tx, epoch, todo_id) = (self.done_tx.clone(), self.epoch, t.id.clone());
        let handle = tokio::spawn(async move {
            let started = Instant::now();
            let outcome = match agent {
                None => Err(AgentError::fatal(format!("unknown agent {agent_name}"))),
                Some(agent) => run_with_timeout(agent.as_ref(), &ctx, input, timeout_ms).await,
            };
            let duration_ms = started.elapsed().as_millis() as u64;
            let _ = tx
                .send(AgentDone {
                    todo_id: ctx.todo_id,
                    attempt,
                    epoch,
                    outcome,
                    duration_ms,
                })
                .await;
        });
        self.running
            .insert(todo_id, (attempt, handle.abort_handle()));
    }

    /// Stops every agent and tool execution of the run; their late results are discarded.
    fn abort_agents(&mut self) {
        self.epoch += 1;
        for (_, (_, h)) in self.running.drain() {
            h.abort();
        }
        for (_, (_, h)) in self.tool_tasks.drain() {
            h.abort();
        }
        self.parked.clear();
    }

    async fn on_agent_done(&mut self, done: AgentDone) -> Result<()> {
        if done.epoch != self.epoch
            || self.running.get(&done.todo_id).map(|r| r.0) != Some(done.attempt)
        {
            return Ok(()); // superseded by a restore, a cancel or a newer attempt
        }
        self.running.remove(&done.todo_id);
        let Some(t) = self
            .todo(&done.todo_id)
            .filter(|t| t.status == TodoStatus::InProgress)
        else {
            return Ok(()); // skipped or changed by a human meanwhile
        };
        // Calls the agent left behind (it stopped waiting for them) do not outlive it.
        let mut ev = self.release_todo(&t.id, "engine", "the agent finished without this call");
        match done.outcome {
            Ok(out) => {
                ev.push(Event::AgentCompleted {
                    todo_id: t.id.clone(),
                    agent: t.agent_name.clone(),
                    attempt: done.attempt,
                    result: self.payload(out.result)?,
                    duration_ms: done.duration_ms,
                });
                ev.push(Event::TodoStatusChanged {
                    todo_id: t.id.clone(),
                    from: TodoStatus::InProgress,
                    to: TodoStatus::Completed,
                    reason: None,
                    attempt: done.attempt,
                    by: By::Engine,
                });
                ev.push(Event::Reasoning {
                    message: self.shared.texts.say(Text::TodoCompleted {
                        todo: &t.id,
                        agent: &t.agent_name,
                        duration_ms: done.duration_ms,
                    }),
                });
                ev.push(checkpoint(self.state(), "execute_todo", 1));
            }
            Err(err) => {
                ev.push(Event::AgentFailed {
                    todo_id: t.id.clone(),
                    agent: t.agent_name.clone(),
                    attempt: done.attempt,
                    error: err.message.clone(),
                    retryable: err.retryable,
                });
                ev.push(Event::TodoStatusChanged {
                    todo_id: t.id.clone(),
                    from: TodoStatus::InProgress,
                    to: TodoStatus::Failed,
                    reason: Some(err.message.clone()),
                    attempt: done.attempt,
                    by: By::Engine,
                });
                if err.retryable && t.retry_count < t.max_retries {
                    ev.push(Event::TodoStatusChanged {
                        todo_id: t.id.clone(),
                        from: TodoStatus::Failed,
                        to: TodoStatus::Pending,
                        reason: Some(format!("retry {}/{}", t.retry_count + 1, t.max_retries)),
                        attempt: done.attempt,
                        by: By::Engine,
                    });
                } else if t.is_optional() {
                    ev.push(Event::TodoStatusChanged {
                        todo_id: t.id.clone(),
                        from: TodoStatus::Failed,
                        to: TodoStatus::Skipped,
                        reason: Some(format!("Failed but optional: {}", err.message)),
                        attempt: done.attempt,
                        by: By::Engine,
                    });
                } else {
                    ev.push(Event::RunFailed {
                        error: format!(
                            "{} ({}) failed after {} attempt(s): {}",
                            t.id, t.agent_name, done.attempt, err.message
                        ),
                    });
                }
            }
        }
        let run_fails = ev.iter().any(|e| matches!(e, Event::RunFailed { .. }));
        self.append(ev).await?;
        // Only once the failure is recorded: an append the full disk refused leaves the run as
        // it was, so the outcome can be delivered again.
        if run_fails {
            self.cancel_sub_runs("engine", None);
            self.abort_agents();
        }
        Ok(())
    }

    /// Large results go to a blob; the event keeps the reference.
    fn payload(&self, v: Value) -> Result<Payload> {
        let bytes = serde_json::to_vec(&v).map_err(|e| Error::Invalid(e.to_string()))?;
        if bytes.len() <= self.shared.inline_payload_bytes_max {
            Ok(Payload::Inline(v))
        } else {
            Ok(Payload::Blob(self.shared.store.put_blob(&bytes)?))
        }
    }

    /// Each agent's latest TODO that ran, in plan order, with its result or its failure (a
    /// successful retry supersedes an earlier failure). TODOs a human rejected or skipped, and
    /// blocked ones, did not fail: they are left out.
    fn results_for_evaluation(&self) -> Vec<AgentResult> {
        let s = &self.state().supervisor;
        let Some(p) = s.planning_state.as_ref() else {
            return vec![];
        };
        let mut latest: Vec<AgentResult> = Vec::new();
        for t in &p.todos {
            let (result, error) = match t.status {
                TodoStatus::Completed => (s.team_results.get(&t.agent_name).cloned(), None),
                TodoStatus::Skipped
                    if t.error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("Skipped: Failed")) =>
                {
                    (None, t.error.clone())
                }
                _ => continue,
            };
            let entry = AgentResult {
                agent: t.agent_name.clone(),
                team: t.team.clone(),
                todo_id: t.id.clone(),
                result,
                error,
            };
            match latest.iter_mut().find(|r| r.agent == entry.agent) {
                Some(slot) => *slot = entry,
                None => latest.push(entry),
            }
        }
        latest
    }

    // ---------------------------------------------------------------- expiry

    fn run_deadline(&self) -> Option<Timestamp> {
        let s = &self.state().supervisor;
        let ms = s.config.limits.run_timeout_ms as i64;
        s.start_time
            .map(|t| Timestamp(t.as_micros() + ms * 1000 + 1000))
    }

    fn next_expiry(&self) -> Option<Timestamp> {
        self.state()
            .approvals
            .pending()
            .filter_map(|a| a.expires_at)
            .min()
    }

    async fn expire_due(&mut self) -> Result<()> {
        let now = now();
        let on_expiry = self.state().supervisor.config.on_expiry;
        let due: Vec<Approval> = self
            .state()
            .approvals
            .pending()
            .filter(|a| a.expires_at.is_some_and(|t| t <= now))
            .cloned()
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let decision = match on_expiry {
            ExpiryAction::Reject => Decision::Reject,
            ExpiryAction::Approve => Decision::Approve,
        };
        let mut ev = Vec::new();
        for a in due {
            ev.push(Event::ApprovalExpired {
                approval_id: a.approval_id.clone(),
                on_expiry: decision,
            });
            if let (ExpiryAction::Reject, Some(Subject::Todo { todo_id })) = (on_expiry, &a.subject)
                && self
                    .todo(todo_id)
                    .is_some_and(|t| t.status == TodoStatus::WaitingApproval)
            {
                ev.push(Event::TodoStatusChanged {
                    todo_id: todo_id.clone(),
                    from: TodoStatus::WaitingApproval,
                    to: TodoStatus::Skipped,
                    reason: Some(format!("approval {} expired", a.approval_id)),
                    attempt: 0,
                    by: By::Engine,
                });
            }
        }
        self.append(ev).await.map(drop)
    }

    // ---------------------------------------------------------------- messages

    async fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Decide {
                approval_id,
                decision,
                edited_args,
                by,
                comment,
                reply,
            } => {
                let r = self
                    .decide(&approval_id, decision, edited_args, &by, comment, vec![])
                    .await;
                let _ = reply.send(r);
            }
            Msg::Command { text, by, reply } => {
                let r = self.command(&text, &by).await;
                let _ = reply.send(r);
            }
            Msg::Restore { target, by, reply } => {
                let r = self.restore(target, &by, vec![]).await;
                let _ = reply.send(r);
            }
            Msg::Cancel { by, reason, reply } => {
                let r = if self.state().supervisor.run_status.is_terminal() {
                    Err(Error::Invalid(format!(
                        "run is already {}",
                        self.state().supervisor.run_status.as_str()
                    )))
                } else {
                    self.cancel_sub_runs(&by, None);
                    self.abort_agents();
                    self.append(vec![Event::RunCancelled {
                        by: user(&by),
                        reason,
                    }])
                    .await
                    .map(drop)
                };
                let _ = reply.send(r);
            }
        }
    }

    /// Records a decision (with `prefix` events, e.g. the command that asked for it).
    async fn decide(
        &mut self,
        approval_id: &ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        by: &str,
        comment: Option<String>,
        prefix: Vec<Event>,
    ) -> Result<Approval> {
        let a = self
            .state()
            .approvals
            .get(approval_id)
            .cloned()
            .ok_or_else(|| Error::ApprovalNotFound(approval_id.clone()))?;
        if a.status != ApprovalStatus::Pending {
            return Err(Error::AlreadyDecided {
                approval_id: approval_id.clone(),
                status: a.status,
            });
        }
        match (decision, &edited_args) {
            (Decision::Edit, Some(Value::Object(_)))
            | (Decision::Approve | Decision::Reject, None) => {}
            (Decision::Edit, _) => {
                return Err(Error::Invalid(
                    "decision edit needs edited_args (a JSON object)".into(),
                ));
            }
            (_, Some(_)) => {
                return Err(Error::Invalid(format!(
                    "edited_args only go with decision edit, not {}",
                    decision.as_str()
                )));
            }
        }
        let mut ev = prefix;
        ev.push(Event::ApprovalDecided {
            approval_id: approval_id.clone(),
            decision,
            edited_args,
            decided_by: by.to_owned(),
            comment: comment.clone(),
        });
        if let (Decision::Reject, Some(Subject::Todo { todo_id })) = (decision, &a.subject)
            && self
                .todo(todo_id)
                .is_some_and(|t| t.status == TodoStatus::WaitingApproval)
        {
            ev.push(Event::TodoStatusChanged {
                todo_id: todo_id.clone(),
                from: TodoStatus::WaitingApproval,
                to: TodoStatus::Skipped,
                reason: Some(match &comment {
                    Some(c) => format!("rejected by {by}: {c}"),
                    None => format!("rejected by {by}"),
                }),
                attempt: 0,
                by: user(by),
            });
        }
        if self.state().approvals.pending().count() == 1 {
            ev.push(Event::RunResumed { by: user(by) });
        }
        self.append(ev).await?;
        self.state()
            .approvals
            .get(approval_id)
            .cloned()
            .ok_or_else(|| Error::ApprovalNotFound(approval_id.clone()))
    }

    async fn restore(
        &mut self,
        target: RestoreTarget,
        by: &str,
        prefix: Vec<Event>,
    ) -> Result<Value> {
        let state = self.state();
        let (checkpoint_id, to_seq) = match target {
            RestoreTarget::Checkpoint(id) => {
                let cp = state
                    .checkpoints
                    .get(&id)
                    .ok_or_else(|| Error::CheckpointNotFound(id.clone()))?;
                (id, cp.seq)
            }
            RestoreTarget::Seq(seq) => {
                if seq >= state.next_seq() {
                    return Err(Error::Invalid(format!(
                        "seq {seq} is beyond the run's last seq {}",
                        state.next_seq().saturating_sub(1)
                    )));
                }
                (CheckpointId(format!("seq_{seq}")), seq)
            }
        };
        self.abort_agents();
        let children_before = self.sub_run_calls();
        let mut ev = prefix;
        ev.push(Event::RunRestored {
            checkpoint_id: checkpoint_id.clone(),
            to_seq,
            by: user(by),
        });
        self.append(ev).await?;
        // Sub-agent runs of calls the restore abandoned stop; those of calls still on the
        // effective history keep running (their calls find them again).
        let kept = self.sub_run_calls();
        let abandoned: Vec<_> = children_before
            .into_iter()
            .filter(|c| !kept.contains(c))
            .collect();
        self.cancel_children(by, abandoned);
        let p = self
            .state()
            .supervisor
            .planning_state
            .clone()
            .unwrap_or_default();
        Ok(json!({
            "status": "restored",
            "checkpoint_id": checkpoint_id,
            "to_seq": to_seq,
            "current_todo_id": p.current_todo_id,
            "summary": todo::summary(&p),
            "message": self.shared.texts.say(Text::Restored { checkpoint: checkpoint_id.as_str() }),
        }))
    }

    /// Runs one slash command; every command, accepted or not, is recorded as `CommandReceived`.
    async fn command(&mut self, text: &str, by: &str) -> Result<Value> {
        let received = |accepted: bool| Event::CommandReceived {
            command: text.to_owned(),
            by: user(by),
            accepted,
        };
        let cmd = match commands::parse(text) {
            Ok(cmd) => cmd,
            Err(error) => {
                self.append(vec![received(false)]).await?;
                return Ok(json!({"error": error, "help": self.shared.texts.say(Text::Help)}));
            }
        };
        match self.execute(cmd, by, received(true)).await {
            Ok(v) => Ok(v),
            Err(Error::Store(e)) => Err(Error::Store(e)),
            Err(e) => {
                self.append(vec![received(false)]).await?;
                Ok(json!({"error": e.to_string(), "help": self.shared.texts.say(Text::Help)}))
            }
        }
    }

    async fn execute(&mut self, cmd: Command, by: &str, received: Event) -> Result<Value> {
        // What the commands read, copied once (the arms append, so they cannot keep borrowing
        // the state): not the whole state, whose team results may be large.
        let cur = self.state();
        let state = &CommandView {
            pending_approval_ids: cur.supervisor.pending_approval_ids.clone(),
            run_status: cur.supervisor.run_status,
            current_phase: cur.supervisor.current_phase,
            has_plan: cur.supervisor.execution_plan.is_some(),
            max_todos: cur.supervisor.config.limits.max_todos as usize,
            checkpoints: cur.checkpoints.clone(),
            approvals: cur.approvals.clone(),
        };
        let p = cur.supervisor.planning_state.clone().unwrap_or_default();
        match cmd {
            Command::Help => {
                self.append(vec![received]).await?;
                Ok(json!({"help": self.shared.texts.say(Text::Help)}))
            }
            Command::Todos => {
                let checkpoint_id = state.checkpoints.head.clone();
                let sub_runs =
                    crate::Engine::from_shared(self.shared.clone()).sub_runs(self.state());
                self.append(vec![received]).await?;
                Ok(json!({
                    "todos": p.todos.iter().map(todo_to_json).collect::<Vec<_>>(),
                    "summary": todo::summary(&p),
                    "current_todo_id": p.current_todo_id,
                    "checkpoint_id": checkpoint_id,
                    "pending_approval_ids": state.pending_approval_ids,
                    "sub_runs": sub_runs,
                }))
            }
            Command::CheckpointList => {
                let cps = &state.checkpoints;
                let list: Vec<Value> = cps
                    .with_abandoned()
                    .into_iter()
                    .map(|(c, abandoned)| {
                        json!({
                            "checkpoint_id": c.checkpoint_id,
                            "timestamp": c.at,
                            "node": c.node,
                            "todos_completed": c.todos_completed,
                            "seq": c.seq,
                            "parent": c.parent,
                            "branch": c.branch,
                            "abandoned": abandoned,
                        })
                    })
                    .collect();
                self.append(vec![received]).await?;
                Ok(json!({"checkpoints": list}))
            }
            Command::CheckpointRestore { checkpoint } => {
                self.restore(
                    RestoreTarget::Checkpoint(CheckpointId(checkpoint)),
                    by,
                    vec![received],
                )
                .await
            }
            Command::Approve { target } => {
                let ids = self.resolve_pending(target.as_deref())?;
                let mut out = Vec::new();
                let mut prefix = vec![received];
                for id in ids {
                    let a = self
                        .decide(
                            &id,
                            Decision::Approve,
                            None,
                            by,
                            None,
                            std::mem::take(&mut prefix),
                        )
                        .await?;
                    let todo_id = a.subject.as_ref().map(|s| s.todo_id().clone());
                    out.push(json!({
                        "status": "resumed",
                        "todo_id": todo_id,
                        "approval_id": id,
                        "message": match &a.subject {
                            Some(Subject::ToolCall { todo_id, .. }) => self.shared.texts.say(Text::ToolCallApproved { todo: todo_id, tool: &a.tool_name }),
                            _ => self.shared.texts.say(Text::TodoApproved { todo: todo_id.as_ref().map_or("", |t| t.as_str()) }),
                        },
                    }));
                }
                Ok(if out.len() == 1 {
                    out.remove(0)
                } else {
                    json!({"status": "resumed", "approved": out})
                })
            }
            Command::Reject { words } => {
                let pending: Vec<&Approval> = state.approvals.pending().collect();
                let names_one = words.first().is_some_and(|w| {
                    pending.iter().any(|a| {
                        a.approval_id.as_str() == w
                            || a.subject
                                .as_ref()
                                .is_some_and(|s| s.todo_id().as_str() == w)
                    })
                });
                let (target, reason_words) = if names_one {
                    (words.first().map(String::as_str), &words[1..])
                } else {
                    (None, &words[..])
                };
                let reason = (!reason_words.is_empty()).then(|| reason_words.join(" "));
                let id = match self.resolve_pending(target)?.as_slice() {
                    [one] => one.clone(),
                    _ => return Err(Error::Invalid("/todo reject takes one approval".into())),
                };
                let a = self
                    .decide(
                        &id,
                        Decision::Reject,
                        None,
                        by,
                        reason.clone(),
                        vec![received],
                    )
                    .await?;
                let todo_id = a
                    .subject
                    .as_ref()
                    .map(|s| s.todo_id().clone())
                    .unwrap_or_default();
                Ok(json!({
                    "status": "rejected",
                    "todo_id": todo_id,
                    "approval_id": id,
                    "message": match &a.subject {
                        Some(Subject::ToolCall { .. }) => self.shared.texts.say(Text::ToolCallRejected { todo: &todo_id, tool: &a.tool_name, reason: reason.as_deref().unwrap_or("User rejected") }),
                        _ => self.shared.texts.say(Text::TodoRejected { todo: &todo_id, reason: reason.as_deref().unwrap_or("User rejected") }),
                    },
                }))
            }
            Command::Skip { todo, reason } => {
                let id = TodoId(todo);
                let t = p
                    .todo(&id)
                    .cloned()
                    .ok_or_else(|| Error::TodoNotFound(id.clone()))?;
                todo::check_transition(&t, TodoStatus::Skipped)?;
                let reason = reason.unwrap_or_else(|| "User skipped".into());
                // Skipping a TODO that waits for approval answers that approval too.
                let pending = t.approval_id.clone().filter(|aid| {
                    state
                        .approvals
                        .get(aid)
                        .is_some_and(|a| a.status == ApprovalStatus::Pending)
                });
                if t.status == TodoStatus::WaitingApproval
                    && let Some(aid) = pending
                {
                    self.decide(
                        &aid,
                        Decision::Reject,
                        None,
                        by,
                        Some(reason.clone()),
                        vec![received],
                    )
                    .await?;
                } else {
                    let mut ev = vec![received];
                    ev.extend(self.stop_agent(&id, by, &reason));
                    ev.push(Event::TodoStatusChanged {
                        todo_id: id.clone(),
                        from: t.status,
                        to: TodoStatus::Skipped,
                        reason: Some(reason.clone()),
                        attempt: t.attempts,
                        by: user(by),
                    });
                    self.append(ev).await?;
                }
                Ok(json!({
                    "status": "skipped",
                    "todo_id": id,
                    "message": self.shared.texts.say(Text::TodoSkipped { todo: &id, reason: &reason }),
                }))
            }
            Command::Add { agent, after } => {
                if let Err(e) = self.shared.registry.find(&agent) {
                    return Err(Error::Invalid(e.to_string()));
                }
                if state.run_status.is_terminal()
                    || matches!(
                        state.current_phase,
                        Phase::Aggregation | Phase::ResponseGeneration | Phase::Finished
                    )
                {
                    return Err(Error::Invalid(
                        "the run is past execution; restore a checkpoint to change its plan".into(),
                    ));
                }
                if !state.has_plan {
                    return Err(Error::Invalid("the run has no plan yet".into()));
                }
                let max = state.max_todos;
                if p.todos.len() >= max {
                    return Err(Error::Invalid(format!(
                        "the run already has {} TODOs, the max_todos limit",
                        p.todos.len()
                    )));
                }
                let deps: Vec<TodoId> = after.into_iter().map(TodoId).collect();
                if let Some(bad) = deps.iter().find(|d| p.todo(d).is_none()) {
                    return Err(Error::TodoNotFound(bad.clone()));
                }
                let mut t = self.new_todo(p.todos.len(), &agent, deps);
                t.metadata.insert("added_by".into(), json!("user"));
                t.metadata.insert("manual".into(), json!(true));
                t.metadata.insert("optional".into(), json!(false));
                let view = todo_to_json(&t);
                let id = t.id.clone();
                self.append(vec![
                    received,
                    Event::TodoAdded {
                        todo: t,
                        added_by: user(by),
                    },
                ])
                .await?;
                Ok(
                    json!({"status": "added", "todo": view, "message": self.shared.texts.say(Text::TodoAdded { todo: &id })}),
                )
            }
            Command::Update { todo, status } => {
                let id = TodoId(todo);
                let to = TodoStatus::parse(&status)
                    .ok_or_else(|| Error::Invalid(format!("Invalid status: {status}")))?;
                let t = p
                    .todo(&id)
                    .cloned()
                    .ok_or_else(|| Error::TodoNotFound(id.clone()))?;
                todo::check_transition(&t, to)?;
                let reason = format!("manual update by {by}");
                let mut ev = vec![received];
                if to != TodoStatus::InProgress {
                    ev.extend(self.stop_agent(&id, by, &reason));
                }
                ev.push(Event::TodoStatusChanged {
                    todo_id: id.clone(),
                    from: t.status,
                    to,
                    reason: Some(reason),
                    attempt: t.attempts,
                    by: user(by),
                });
                self.append(ev).await?;
                Ok(json!({
                    "status": "updated",
                    "todo_id": id,
                    "new_status": to,
                    "message": self.shared.texts.say(Text::TodoUpdated { todo: &id, status: to }),
                }))
            }
        }
    }

    /// Resolves `/todo approve|reject [<approval_id>|<todo_id>|all]` against pending approvals.
    fn resolve_pending(&self, target: Option<&str>) -> Result<Vec<ApprovalId>> {
        let pending: Vec<&Approval> = self.state().approvals.pending().collect();
        if pending.is_empty() {
            return Err(Error::NothingPending("no approval is pending".into()));
        }
        match target {
            None if pending.len() == 1 => Ok(vec![pending[0].approval_id.clone()]),
            None => Err(Error::Invalid(format!(
                "{} approvals are pending ({}); name one, or use all",
                pending.len(),
                pending
                    .iter()
                    .map(|a| a
                        .subject
                        .as_ref()
                        .map_or(a.approval_id.to_string(), |s| s.todo_id().to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            Some("all") => Ok(pending.iter().map(|a| a.approval_id.clone()).collect()),
            Some(id) => pending
                .iter()
                .find(|a| {
                    a.approval_id.as_str() == id
                        || a.subject
                            .as_ref()
                            .is_some_and(|s| s.todo_id().as_str() == id)
                })
                .map(|a| vec![a.approval_id.clone()])
                .ok_or_else(|| Error::NothingPending(format!("no pending approval for {id}"))),
        }
    }
}

/// What the slash commands read of the run's state.
struct CommandView {
    pending_approval_ids: Vec<ApprovalId>,
    run_status: chronicle_schemas::RunStatus,
    current_phase: Phase,
    has_plan: bool,
    max_todos: usize,
    checkpoints: chronicle_projections::CheckpointList,
    approvals: chronicle_projections::Approvals,
}

/// The few fields of the supervisor state that performing a step reads.
struct StepInputs {
    query: String,
    config: chronicle_schemas::RunConfig,
    start_time: Option<Timestamp>,
    todos: usize,
}

impl StepInputs {
    fn of(s: &chronicle_schemas::SupervisorState) -> Self {
        Self {
            query: s.query.clone(),
            config: s.config.clone(),
            start_time: s.start_time,
            todos: s.planning_state.as_ref().map_or(0, |p| p.todos.len()),
        }
    }
}

/// A small summary of an agent result: its scalar fields (short strings, numbers, flags) and the
/// length of its lists.
fn digest(v: &Value) -> Value {
    const STRING_BYTES_MAX: usize = 200;
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, v)| match v {
                    Value::Bool(_) | Value::Number(_) => Some((k.clone(), v.clone())),
                    Value::String(s) if s.len() <= STRING_BYTES_MAX => Some((k.clone(), v.clone())),
                    Value::Array(a) => Some((format!("{k}_count"), json!(a.len()))),
                    _ => None,
                })
                .collect(),
        ),
        Value::Array(a) => json!({"count": a.len()}),
        other => other.clone(),
    }
}

/// The engine moving several TODOs from one status to another, each with its reason.
fn engine_moves(list: Vec<(TodoId, String)>, from: TodoStatus, to: TodoStatus) -> Vec<Event> {
    list.into_iter()
        .map(|(todo_id, reason)| Event::TodoStatusChanged {
            todo_id,
            from,
            to,
            reason: Some(reason),
            attempt: 0,
            by: By::Engine,
        })
        .collect()
}

fn approval_id_of(e: &Event) -> Option<ApprovalId> {
    match e {
        Event::ApprovalRequested { approval_id, .. } => Some(approval_id.clone()),
        _ => None,
    }
}

/// A plan that came with the request, as a `Plan` (strategy defaults to sequential).
fn provided_plan(
    steps: &[chronicle_schemas::PlanStep],
    strategy: Option<chronicle_schemas::Strategy>,
) -> crate::planner::Plan {
    crate::planner::Plan {
        strategy: strategy.unwrap_or_default(),
        steps: steps.to_vec(),
        parallel_groups: vec![],
        estimated_total_time: steps.iter().map(|s| s.timeout as f64).sum(),
        source: chronicle_schemas::Source::Request,
    }
}

/// What a TODO's agent runs with: a human's edited args, else the plan's input mapping.
fn input_of(t: &SupervisorTodo) -> Value {
    t.effective_input
        .clone()
        .or_else(|| t.metadata.get("input_mapping").cloned())
        .unwrap_or_else(|| json!({}))
}

/// The analysed intent back from the state (it was recorded by `IntentAnalyzed`).
fn intent_of(state: &RunState) -> Intent {
    let p = state.supervisor.planning_state.as_ref();
    let i = p.map(|p| p.analyzed_intent.clone()).unwrap_or(Value::Null);
    Intent {
        intent_type: i["intent_type"].as_str().unwrap_or("search").to_owned(),
        confidence: i["confidence"].as_f64().unwrap_or(0.0),
        keywords: serde_json::from_value(i["keywords"].clone()).unwrap_or_default(),
        entities: i["entities"].clone(),
        source: p.and_then(|p| p.intent_source).unwrap_or_default(),
    }
}

/// Runs an agent with its timeout, not counting the time it spends inside tool calls (waiting
/// for a human, a sub-agent run, or a tool with its own timeout).
async fn run_with_timeout(
    agent: &dyn crate::agents::Agent,
    ctx: &AgentContext,
    input: Value,
    timeout_ms: u64,
) -> Result<AgentOutput, AgentError> {
    let limit = Duration::from_millis(timeout_ms);
    let started = Instant::now();
    let run = agent.run(ctx, input);
    tokio::pin!(run);
    let mut wake = tokio::time::Instant::now() + limit;
    loop {
        tokio::select! {
            out = &mut run => return out,
            _ = tokio::time::sleep_until(wake) => {
                let working = started.elapsed().saturating_sub(ctx.tools.time_in_calls());
                if working >= limit {
                    return Err(AgentError::retryable(format!("timeout after {timeout_ms} ms")));
                }
                wake = tokio::time::Instant::now() + (limit - working);
            }
        }
    }
}

async fn sleep_until(t: Option<Timestamp>) {
    let wait_us = t.map_or(0, |t| (t.as_micros() - now().as_micros()).max(0)) as u64;
    tokio::time::sleep(Duration::from_micros(wait_us)).await;
}
