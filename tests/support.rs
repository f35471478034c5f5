//! Helpers shared by the integration tests: a store or an engine in a temp dir, a run started
//! and waited for, its events read back, an approval decided.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chronicle_engine::agents::Registry;
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Principal, Settings, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalId, Decision, Envelope, HitlMode, PlanStep, RunConfig, RunId, RunStatus,
    Strategy, Subject, TodoStatus,
};
use serde_json::Value;

pub use chronicle_store::conformance::{note, run, run_started};
pub use chronicle_testkit::tmpfs::Tmpfs;

/// How long a test waits for a run to reach the state it expects.
pub const WAIT: Duration = Duration::from_secs(20);

/// The engine child process (`engine_child.rs`, whose doc lists its modes) with `args`, its
/// stdout piped to the test.
pub fn engine_child<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_engine-child"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The run a child announces on its first line of output (`RUN <run>`).
pub fn announced_run(child: &mut Child) -> RunId {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().strip_prefix("RUN ").unwrap().parse().unwrap()
}

pub fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, Options::default()).expect("store opens")
}

/// An engine with `settings` over a store in `dir`.
pub async fn open_engine(dir: &std::path::Path, settings: Settings) -> Engine {
    let store = Store::open(dir, Options::default()).unwrap();
    Engine::open(store, settings).await.unwrap()
}

/// An engine with the real-estate domain's settings and these agents, in `dir`.
pub async fn engine_in(dir: &std::path::Path, registry: Registry) -> Engine {
    let settings = Settings {
        registry,
        ..chronicle_realestate::settings()
    };
    open_engine(dir, settings).await
}

/// A run configuration with a fixed plan (each TODO retried twice unless its step says so).
pub fn plan_config(plan: Vec<PlanStep>, hitl: HitlMode, strategy: Strategy) -> RunConfig {
    RunConfig {
        hitl,
        strategy: Some(strategy),
        plan: Some(plan),
        max_retries: 2,
        ..RunConfig::default()
    }
}

/// Starts a run of the fixed test query with `config`.
pub async fn start(engine: &Engine, config: RunConfig) -> RunId {
    let req = StartRun {
        query: "테스트 요청".into(),
        config: Some(config),
        ..StartRun::default()
    };
    engine.start_run(req).await.unwrap().run_id
}

/// Starts a run of the fixed test query with this plan ([`plan_config`]).
pub async fn start_plan(
    engine: &Engine,
    plan: Vec<PlanStep>,
    hitl: HitlMode,
    strategy: Strategy,
) -> RunId {
    start(engine, plan_config(plan, hitl, strategy)).await
}

/// Every event of `run`, in order.
pub fn events(engine: &Engine, run: RunId) -> Vec<Envelope> {
    engine
        .store()
        .read_run(run, 0, u64::MAX)
        .map(Result::unwrap)
        .collect()
}

pub fn todo_status(state: &RunState, id: &str) -> TodoStatus {
    state
        .supervisor
        .planning_state
        .as_ref()
        .unwrap()
        .todo(&id.into())
        .unwrap()
        .status
}

/// The run once it waits for a human's approval.
pub async fn waiting(engine: &Engine, run: RunId) -> RunState {
    engine
        .wait_until(run, WAIT, |s| {
            s.supervisor.run_status == RunStatus::WaitingForApproval
        })
        .await
        .unwrap()
}

/// The run once an approval of TODO `todo` is pending.
pub async fn asking_about(engine: &Engine, run: RunId, todo: &str) -> RunState {
    engine
        .wait_until(run, WAIT, |s| {
            s.approvals.pending().any(|a| {
                a.subject
                    .as_ref()
                    .is_some_and(|x| x.todo_id().as_str() == todo)
            })
        })
        .await
        .unwrap()
}

/// The pending approval of TODO `todo`, once it is asked.
pub async fn approval_of(engine: &Engine, run: RunId, todo: &str) -> Approval {
    asking_about(engine, run, todo)
        .await
        .approvals
        .pending()
        .find(|a| a.subject.as_ref().unwrap().todo_id().as_str() == todo)
        .unwrap()
        .clone()
}

/// The run once it ended, whatever its end.
pub async fn finished(engine: &Engine, run: RunId) -> RunState {
    engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap()
}

/// The run once it ended, which must be completed (the failure shows its error log).
pub async fn completed(engine: &Engine, run: RunId) -> RunState {
    let s = finished(engine, run).await;
    assert_completed(&s);
    s
}

/// The run is completed (the failure shows its error log).
pub fn assert_completed(s: &RunState) {
    assert_eq!(
        s.supervisor.run_status,
        RunStatus::Completed,
        "{:?}",
        s.supervisor.error_log
    );
}

/// `admin`, an admin principal, approves `approval` of `run` as it was asked.
pub async fn approve(engine: &Engine, run: RunId, approval: ApprovalId, admin: &str) -> Approval {
    decide(engine, run, approval, Decision::Approve, admin, None).await
}

/// `admin`, an admin principal, rejects `approval` of `run`, saying why or not.
pub async fn reject(
    engine: &Engine,
    run: RunId,
    approval: ApprovalId,
    admin: &str,
    comment: Option<&str>,
) -> Approval {
    decide(engine, run, approval, Decision::Reject, admin, comment).await
}

/// `admin`, an admin principal, approves `approval` of `run` with `args` instead of those asked.
pub async fn edit(
    engine: &Engine,
    run: RunId,
    approval: ApprovalId,
    admin: &str,
    args: Value,
) -> Approval {
    let by = Principal::admin(admin);
    engine
        .decide(run, approval, Decision::Edit, Some(args), &by, None)
        .await
        .unwrap()
}

/// The id of the first approval pending in `state`.
pub fn first_pending(state: &RunState) -> ApprovalId {
    state
        .approvals
        .pending()
        .next()
        .unwrap()
        .approval_id
        .clone()
}

async fn decide(
    engine: &Engine,
    run: RunId,
    approval: ApprovalId,
    decision: Decision,
    admin: &str,
    comment: Option<&str>,
) -> Approval {
    engine
        .decide(
            run,
            approval,
            decision,
            None,
            &Principal::admin(admin),
            comment.map(str::to_owned),
        )
        .await
        .unwrap()
}

/// The only approval pending in `state`: a call of `tool` waiting for a human.
pub fn pending_call(state: &RunState, tool: &str) -> Approval {
    let pending: Vec<_> = state.approvals.pending().cloned().collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(matches!(pending[0].subject, Some(Subject::ToolCall { .. })));
    assert_eq!(pending[0].tool_name, tool);
    pending[0].clone()
}
