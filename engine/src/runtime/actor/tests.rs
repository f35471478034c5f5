//! The run actor on the in-memory store, through the engine's handle: transitions, retries,
//! approvals, restore and commands — no sled, no sockets, no domain (the engine's own
//! [`crate::NoPlanner`] and fixed plans).

use crate::Principal;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronicle_projections::RunState;
use chronicle_schemas::{
    ApprovalStatus, Decision, Event, Follows, HitlMode, PlanStep, RunConfig, RunId, RunStatus,
    Strategy, TodoStatus,
};
use chronicle_wire::CommandOutcome;
use serde_json::{Value, json};

use crate::plugin::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use crate::store::Store;
use crate::{Engine, Error, RestoreTarget, Settings, StartRun};

const WAIT: Duration = Duration::from_secs(10);

/// Answers each call with the next scripted outcome, then succeeds; counts its calls. A gated
/// one waits for its gate to open first.
struct Scripted {
    info: AgentInfo,
    script: Mutex<VecDeque<Result<Value, AgentError>>>,
    calls: Mutex<u32>,
    gate: Option<Arc<tokio::sync::Notify>>,
}

impl Scripted {
    fn new(name: &str, script: Vec<Result<Value, AgentError>>) -> Arc<Scripted> {
        Arc::new(Scripted {
            info: AgentInfo::new(name, "test", "a scripted agent"),
            script: Mutex::new(script.into()),
            calls: Mutex::new(0),
            gate: None,
        })
    }

    fn gated(name: &str, gate: Arc<tokio::sync::Notify>) -> Arc<Scripted> {
        Arc::new(Scripted {
            info: AgentInfo::new(name, "test", "a gated agent"),
            script: Mutex::default(),
            calls: Mutex::new(0),
            gate: Some(gate),
        })
    }

    fn calls(&self) -> u32 {
        *self.calls.lock().unwrap()
    }
}

#[async_trait::async_trait]
impl Agent for Scripted {
    fn info(&self) -> &AgentInfo {
        &self.info
    }

    async fn run(&self, ctx: &AgentContext, _input: Value) -> Result<AgentOutput, AgentError> {
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        *self.calls.lock().unwrap() += 1;
        let next = self.script.lock().unwrap().pop_front();
        next.unwrap_or_else(|| Ok(json!({"answer": format!("{} done", self.info.name)})))
            .map(|result| AgentOutput { result })
            .map_err(|e| AgentError {
                message: format!("{} (attempt {})", e.message, ctx.attempt),
                ..e
            })
    }
}

async fn engine(agents: &[Arc<Scripted>]) -> Engine {
    let mut registry = Registry::empty();
    for a in agents {
        registry.register(a.clone());
    }
    let settings = Settings {
        registry,
        ..Settings::default()
    };
    Engine::open(Store::memory(), settings).await.unwrap()
}

fn step(agent: &str, deps: &[&str], optional: bool) -> PlanStep {
    PlanStep {
        agent_name: agent.into(),
        dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
        retry_count: 1,
        optional,
        ..PlanStep::default()
    }
}

async fn start(engine: &Engine, hitl: HitlMode, plan: Vec<PlanStep>) -> RunId {
    let config = RunConfig {
        hitl,
        strategy: Some(Strategy::Sequential),
        plan: Some(plan),
        max_retries: 1,
        ..RunConfig::default()
    };
    let req = StartRun {
        query: "a test request".into(),
        config: Some(config),
        ..StartRun::default()
    };
    engine.start_run(req).await.unwrap().run_id
}

async fn ended(engine: &Engine, run: RunId) -> RunState {
    engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap()
}

fn status(s: &RunState, todo: &str) -> TodoStatus {
    let p = s.supervisor.planning_state.as_ref().unwrap();
    p.todo(&todo.into()).unwrap().status
}

fn kinds(engine: &Engine, run: RunId) -> Vec<&'static str> {
    engine
        .store()
        .read_run(run, 0, u64::MAX)
        .map(|e| e.unwrap().event.kind())
        .collect()
}

#[tokio::test]
async fn a_retryable_failure_is_retried_and_the_run_completes() {
    let a = Scripted::new("a", vec![Err(AgentError::retryable("flaky"))]);
    let engine = engine(std::slice::from_ref(&a)).await;
    let run = start(&engine, HitlMode::None, vec![step("a", &[], false)]).await;
    let s = ended(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    let t = s.supervisor.planning_state.as_ref().unwrap().todos[0].clone();
    assert_eq!(
        (t.status, t.retry_count, t.attempts),
        (TodoStatus::Completed, 1, 2)
    );
    assert_eq!(a.calls(), 2);
    let k = kinds(&engine, run);
    assert_eq!(k.iter().filter(|k| **k == "AgentFailed").count(), 1);
    assert_eq!(k.last(), Some(&"RunCompleted"));
    // The engine's own planner answers with the results as they are.
    assert_eq!(
        s.supervisor.final_response,
        Some(json!({"results": {"a": {"answer": "a done"}}}))
    );
}

#[tokio::test]
async fn a_failed_required_todo_fails_the_run_and_an_optional_one_blocks_its_dependent() {
    let fatal = || Err(AgentError::fatal("bad input"));
    let a = Scripted::new("a", vec![fatal()]);
    let engine = engine(std::slice::from_ref(&a)).await;
    let run = start(&engine, HitlMode::None, vec![step("a", &[], false)]).await;
    let s = ended(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Failed);
    assert_eq!(
        s.supervisor.error_log.last().unwrap(),
        "todo_001 (a) failed after 1 attempt(s): bad input (attempt 1)"
    );

    let (b, c) = (
        Scripted::new("b", vec![fatal()]),
        Scripted::new("c", vec![]),
    );
    let engine = self::engine(&[b.clone(), c.clone()]).await;
    let plan = vec![step("b", &[], true), step("c", &["b"], false)];
    let run = start(&engine, HitlMode::None, plan).await;
    let s = ended(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    assert_eq!(status(&s, "todo_001"), TodoStatus::Skipped);
    assert_eq!(status(&s, "todo_002"), TodoStatus::Blocked);
    assert_eq!(c.calls(), 0, "a blocked TODO never runs");
}

#[tokio::test]
async fn a_wait_for_the_run_to_settle_is_answered_once_it_has_and_after_its_actor_stopped() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let engine = engine(&[Scripted::gated("a", gate.clone())]).await;
    let run = start(&engine, HitlMode::None, vec![step("a", &[], false)]).await;
    // Its agent is working: the run has not settled, so a short wait times out.
    let err = engine
        .wait_settled(run, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    let waiting = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.wait_settled(run, WAIT).await })
    };
    gate.notify_one();
    let s = waiting.await.unwrap().unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    // The state a reader sees: as of the run's newest event, durable.
    assert_eq!(s, engine.state(run, None).unwrap());
    // Once the run has ended and is durable, the answer is read from the log, actor or not.
    assert_eq!(engine.wait_settled(run, WAIT).await.unwrap(), s);
    let unknown = RunId(uuid::Uuid::now_v7());
    assert!(matches!(
        engine.wait_settled(unknown, WAIT).await,
        Err(Error::RunNotFound(r)) if r == unknown
    ));
}

#[tokio::test]
async fn approvals_are_asked_decided_and_a_rejection_skips() {
    let (a, b) = (Scripted::new("a", vec![]), Scripted::new("b", vec![]));
    let engine = engine(&[a.clone(), b.clone()]).await;
    let run = start(
        &engine,
        HitlMode::EveryTodo,
        vec![step("a", &[], false), step("b", &[], false)],
    )
    .await;
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let asked = s.approvals.pending().next().unwrap().clone();
    assert_eq!(status(&s, "todo_001"), TodoStatus::WaitingApproval);
    assert_eq!(a.calls(), 0, "nothing runs before the human answers");
    // A decision on a decided approval is refused and changes nothing.
    let approved = engine
        .decide(
            run,
            asked.approval_id.clone(),
            Decision::Approve,
            None,
            &Principal::admin("alice"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(approved.decided_by.as_deref(), Some("alice"));
    let again = engine
        .decide(
            run,
            asked.approval_id.clone(),
            Decision::Reject,
            None,
            &Principal::admin("bob"),
            None,
        )
        .await;
    assert!(
        matches!(again, Err(Error::AlreadyDecided { .. })),
        "{again:?}"
    );
    // The second TODO waits; rejecting it skips it and the run completes without it.
    let s = engine
        .wait_until(run, WAIT, |s| {
            s.supervisor.planning_state.as_ref().is_some_and(|p| {
                p.todo(&"todo_002".into())
                    .is_some_and(|t| t.status == TodoStatus::WaitingApproval)
            })
        })
        .await
        .unwrap();
    let second = s.approvals.pending().next().unwrap().clone();
    let out = engine
        .command(run, "/todo reject not today", &Principal::admin("bob"))
        .await;
    assert!(matches!(out, Ok(CommandOutcome::Rejected(_))), "{out:?}");
    let s = ended(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    assert_eq!(status(&s, "todo_002"), TodoStatus::Skipped);
    assert_eq!(
        s.approvals.get(&second.approval_id).unwrap().status,
        ApprovalStatus::Rejected
    );
    assert_eq!((a.calls(), b.calls()), (1, 0));
}

#[tokio::test]
async fn a_restore_to_an_approval_asks_again_under_a_new_id() {
    let a = Scripted::new("a", vec![]);
    let engine = engine(std::slice::from_ref(&a)).await;
    let run = start(&engine, HitlMode::EveryTodo, vec![step("a", &[], false)]).await;
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let first = s.approvals.pending().next().unwrap().clone();
    let asked_at = first.requested_seq;
    engine
        .decide(
            run,
            first.approval_id.clone(),
            Decision::Approve,
            None,
            &Principal::admin("alice"),
            None,
        )
        .await
        .unwrap();
    ended(&engine, run).await;
    // Back to the moment the approval was asked: the run waits again, under a new id.
    let restored = engine
        .restore(
            run,
            RestoreTarget::Seq(asked_at),
            &Principal::admin("carol"),
        )
        .await
        .unwrap();
    assert_eq!(restored.to_seq, asked_at);
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let again = s.approvals.pending().next().unwrap().clone();
    assert_ne!(again.approval_id, first.approval_id);
    let old = s.approvals.get(&first.approval_id).unwrap();
    assert_eq!(
        old.status,
        ApprovalStatus::Approved,
        "decided on the abandoned branch"
    );
    assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);
    // Beyond the run's last seq is refused.
    let beyond = engine
        .restore(run, RestoreTarget::Seq(10_000), &Principal::admin("carol"))
        .await;
    assert!(
        matches!(beyond, Err(Error::SeqBeyondEnd { .. })),
        "{beyond:?}"
    );
    engine
        .decide(
            run,
            again.approval_id,
            Decision::Approve,
            None,
            &Principal::admin("carol"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        ended(&engine, run).await.supervisor.run_status,
        RunStatus::Completed
    );
    assert_eq!(a.calls(), 2, "the agent ran again on the new branch");
}

#[tokio::test]
async fn commands_answer_typed_and_refusals_are_recorded() {
    let a = Scripted::new("a", vec![]);
    let engine = engine(std::slice::from_ref(&a)).await;
    let run = start(&engine, HitlMode::EveryTodo, vec![step("a", &[], false)]).await;
    engine.wait_settled(run, WAIT).await.unwrap();
    let todos = engine
        .command(run, "/todos", &Principal::admin("alice"))
        .await
        .unwrap();
    let CommandOutcome::Todos(todos) = todos else {
        panic!("{todos:?}");
    };
    assert_eq!(
        (todos.summary.total, todos.summary.waiting_approval),
        (1, 1)
    );
    let refused = engine
        .command(run, "/todo skip todo_404", &Principal::admin("alice"))
        .await;
    match refused {
        Err(Error::Command { reason, help }) => {
            assert_eq!(reason, "todo todo_404 not found");
            assert!(help.contains("/todo approve"), "{help}");
        }
        other => panic!("{other:?}"),
    }
    let received: Vec<(String, bool)> = engine
        .store()
        .read_run(run, 0, u64::MAX)
        .filter_map(|e| match e.unwrap().event {
            Event::CommandReceived {
                command, accepted, ..
            } => Some((command, accepted)),
            _ => None,
        })
        .collect();
    assert_eq!(
        received,
        [
            ("/todos".to_owned(), true),
            ("/todo skip todo_404".to_owned(), false)
        ]
    );
    engine
        .cancel(run, &Principal::admin("alice"), None)
        .await
        .unwrap();
    let s = ended(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Cancelled);
    let twice = engine.cancel(run, &Principal::admin("alice"), None).await;
    assert!(matches!(twice, Err(Error::RunFinished { .. })), "{twice:?}");
}

#[tokio::test]
async fn an_approval_timeout_outside_its_range_is_refused_before_anything_is_written() {
    use chronicle_schemas::{APPROVAL_TIMEOUT_MS_MAX, APPROVAL_TIMEOUT_MS_MIN};
    let engine = engine(&[]).await;
    let req = |ms: u64| StartRun {
        query: "a test request".into(),
        approval_timeout_ms: Some(ms),
        ..StartRun::default()
    };
    for ms in [
        0,
        APPROVAL_TIMEOUT_MS_MIN - 1,
        APPROVAL_TIMEOUT_MS_MAX + 1,
        9_000_000_000_000_000,
        u64::MAX,
    ] {
        let refused = engine.start_run(req(ms)).await;
        assert!(
            matches!(refused, Err(Error::ApprovalTimeout { ms: got }) if got == ms),
            "{ms}: {refused:?}"
        );
    }
    // A whole config from a caller (the CLI, a sub-agent run) is held to the same range.
    let config = RunConfig {
        approval_timeout_ms: Some(APPROVAL_TIMEOUT_MS_MAX + 1),
        ..RunConfig::default()
    };
    let refused = engine
        .start_run(StartRun {
            query: "a test request".into(),
            config: Some(config),
            ..StartRun::default()
        })
        .await;
    assert!(
        matches!(refused, Err(Error::ApprovalTimeout { .. })),
        "{refused:?}"
    );
    assert_eq!(engine.store().durable_next_offset(), 0, "nothing written");
    for ms in [APPROVAL_TIMEOUT_MS_MIN, APPROVAL_TIMEOUT_MS_MAX] {
        let run = engine.start_run(req(ms)).await.unwrap().run_id;
        let s = engine.state(run, Some(0)).unwrap();
        assert_eq!(s.supervisor.config.approval_timeout_ms, Some(ms));
    }
    let e = engine.start_run(req(999)).await.unwrap_err().to_string();
    assert_eq!(
        e,
        "approval_timeout_ms must be 1000..=2592000000 (1 second to 30 days), got 999"
    );
}

#[tokio::test]
async fn a_run_takes_the_defaults_with_the_requests_plan_and_turn_over_them() {
    let a = Scripted::new("a", vec![]);
    let mut settings = Settings::default();
    settings.registry.register(a);
    settings.defaults.hitl = HitlMode::Tools;
    // A plan is a request's own: one left in the defaults is never a run's.
    settings.defaults.plan = Some(vec![step("a", &[], false)]);
    let engine = Engine::open(Store::memory(), settings).await.unwrap();
    let config = async |req: StartRun| {
        let run = engine.start_run(req).await.unwrap().run_id;
        engine.state(run, Some(0)).unwrap().supervisor.config
    };
    let bare = config(StartRun {
        query: "a test request".into(),
        ..StartRun::default()
    })
    .await;
    assert_eq!(
        (bare.hitl, bare.plan, bare.follows),
        (HitlMode::Tools, None, Follows::Previous)
    );
    let plan = vec![step("a", &[], true)];
    let own = config(StartRun {
        query: "a test request".into(),
        plan: Some(plan.clone()),
        follows: Some(Follows::Start),
        ..StartRun::default()
    })
    .await;
    assert_eq!(
        (own.hitl, own.plan, own.follows),
        (HitlMode::Tools, Some(plan), Follows::Start)
    );
    // A whole config stands for the defaults, its plan with it.
    let whole = RunConfig {
        plan: Some(vec![step("a", &[], false)]),
        ..RunConfig::default()
    };
    let given = config(StartRun {
        query: "a test request".into(),
        config: Some(whole.clone()),
        ..StartRun::default()
    })
    .await;
    assert_eq!((given.hitl, given.plan), (HitlMode::None, whole.plan));
}

#[tokio::test]
async fn a_new_turn_on_a_busy_session_is_refused_waits_or_cancels_as_multitask_says() {
    use crate::Multitask;
    let gate = Arc::new(tokio::sync::Notify::new());
    let engine = engine(&[Scripted::gated("a", gate.clone())]).await;
    let who = Principal::local();
    let busy = async || {
        let run = start(&engine, HitlMode::None, vec![step("a", &[], false)]).await;
        (run, engine.state(run, None).unwrap())
    };
    let (run, latest) = busy().await;
    let refused = engine
        .make_room(&latest, Multitask::Reject, WAIT, &who)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, Error::SessionBusy { run: r, .. } if *r == run),
        "{refused}"
    );
    assert!(refused.is_conflict());
    engine
        .make_room(&latest, Multitask::Interrupt, WAIT, &who)
        .await
        .unwrap();
    let s = ended(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Cancelled);
    let Some(Event::RunCancelled { reason, .. }) = engine
        .store()
        .read_run(run, 0, u64::MAX)
        .map(|e| e.unwrap().event)
        .last()
    else {
        panic!("the run ends cancelled");
    };
    assert_eq!(
        reason.as_deref(),
        Some("a new run on the thread (interrupt)")
    );
    // An ended run leaves room whatever the strategy says.
    engine
        .make_room(&s, Multitask::Reject, WAIT, &who)
        .await
        .unwrap();

    let (run, latest) = busy().await;
    let waits = {
        let (engine, who) = (engine.clone(), who.clone());
        tokio::spawn(async move {
            engine
                .make_room(&latest, Multitask::Enqueue, WAIT, &who)
                .await
        })
    };
    gate.notify_one();
    waits.await.unwrap().unwrap();
    let s = engine.state(run, None).unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
}
