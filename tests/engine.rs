//! The engine, black-box: the TODO state machine (retries, optional, blocked, reject, edit),
//! strategies, several approvals at once, expiry across a restart, restore.

use chronicle_engine::Principal;
use std::sync::Arc;
use std::time::Duration;

use chronicle_engine::agents::AgentError;
use chronicle_engine::{Error, RestoreTarget};
use chronicle_schemas::{
    ApprovalStatus, Decision, Envelope, Event, HitlMode, RunStatus, Strategy, TodoStatus,
};
use serde_json::json;

use crate::agents::{Scripted, registry, step};
use crate::support::{
    WAIT, approval_of, approve, completed, edit, engine_in, events, finished, plan_config, reject,
    start, start_plan, todo_status,
};

fn kinds_for(evs: &[Envelope], todo: &str) -> Vec<String> {
    evs.iter()
        .filter_map(|e| match &e.event {
            Event::AgentStarted {
                todo_id, attempt, ..
            } if todo_id.as_str() == todo => Some(format!("started#{attempt}")),
            Event::AgentCompleted {
                todo_id, attempt, ..
            } if todo_id.as_str() == todo => Some(format!("completed#{attempt}")),
            Event::AgentFailed {
                todo_id, attempt, ..
            } if todo_id.as_str() == todo => Some(format!("failed#{attempt}")),
            Event::TodoStatusChanged { todo_id, to, .. } if todo_id.as_str() == todo => {
                Some(to.to_string())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_then_success() {
    let dir = tempfile::tempdir().unwrap();
    let a = Scripted::with(
        "a",
        "general",
        vec![Err(AgentError::retryable("flaky"))],
        None,
    );
    let engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
    let run = start_plan(
        &engine,
        vec![step("a", &[], false, 2)],
        HitlMode::None,
        Strategy::Sequential,
    )
    .await;
    let state = completed(&engine, run).await;
    assert_eq!(
        kinds_for(&events(&engine, run), "todo_001"),
        [
            "in_progress",
            "started#1",
            "failed#1",
            "failed",
            "pending",
            "in_progress",
            "started#2",
            "completed#2",
            "completed"
        ]
    );
    let t = state
        .supervisor
        .planning_state
        .as_ref()
        .unwrap()
        .todo(&"todo_001".into())
        .unwrap()
        .clone();
    assert_eq!((t.retry_count, t.attempts), (1, 2));
    assert_eq!(a.calls().len(), 2);
    assert!(state.supervisor.final_response.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_exhausted_on_a_required_todo_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let fails = (0..5)
        .map(|_| Err(AgentError::retryable("db down")))
        .collect();
    let a = Scripted::with("a", "general", fails, None);
    let b = Scripted::new("b");
    let engine = engine_in(dir.path(), registry(&[a.clone(), b.clone()])).await;
    let plan = vec![step("a", &[], false, 1), step("b", &["a"], false, 1)];
    let run = start_plan(&engine, plan, HitlMode::None, Strategy::Sequential).await;
    let state = finished(&engine, run).await;
    assert_eq!(state.supervisor.run_status, RunStatus::Failed);
    assert_eq!(
        state.supervisor.error_log.last().unwrap(),
        "todo_001 (a) failed after 2 attempt(s): db down"
    );
    assert_eq!(a.calls().len(), 2);
    assert!(b.calls().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_failure_is_skipped_and_its_dependent_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let a = Scripted::with(
        "a",
        "general",
        vec![Err(AgentError::fatal("bad input"))],
        None,
    );
    let (b, c) = (Scripted::new("b"), Scripted::new("c"));
    let engine = engine_in(dir.path(), registry(&[a.clone(), b.clone(), c.clone()])).await;
    let plan = vec![
        step("a", &[], true, 3),
        step("b", &["a"], false, 1),
        step("c", &[], false, 1),
    ];
    let run = start_plan(&engine, plan, HitlMode::None, Strategy::Sequential).await;
    let state = completed(&engine, run).await;
    let p = state.supervisor.planning_state.as_ref().unwrap();
    let a_todo = p.todo(&"todo_001".into()).unwrap();
    assert_eq!(a_todo.status, TodoStatus::Skipped);
    assert_eq!(
        a_todo.error.as_deref(),
        Some("Skipped: Failed but optional: bad input")
    );
    assert_eq!(a.calls().len(), 1, "a non-retryable error is not retried");
    let b_todo = p.todo(&"todo_002".into()).unwrap();
    assert_eq!(b_todo.status, TodoStatus::Blocked);
    assert_eq!(
        b_todo.error.as_deref(),
        Some("Blocked: dependency todo_001 was skipped")
    );
    assert!(b.calls().is_empty());
    assert_eq!(todo_status(&state, "todo_003"), TodoStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_skips_and_never_retries_edit_changes_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Scripted::new("a"), Scripted::new("b"));
    let engine = engine_in(dir.path(), registry(&[a.clone(), b.clone()])).await;
    let plan = vec![step("a", &[], false, 3), step("b", &[], false, 3)];
    let run = start_plan(&engine, plan, HitlMode::EveryTodo, Strategy::Sequential).await;

    let first = approval_of(&engine, run, "todo_001").await;
    assert!(
        first.message.starts_with("todo_001: a을(를) 실행할까요?"),
        "{}",
        first.message
    );
    let decided = reject(
        &engine,
        run,
        first.approval_id.clone(),
        "alice",
        Some("not now"),
    )
    .await;
    assert_eq!(
        (decided.status, decided.decided_by.as_deref()),
        (ApprovalStatus::Rejected, Some("alice"))
    );

    let second = approval_of(&engine, run, "todo_002").await;
    let edited = json!({"purpose": "b 작업", "n": 42});
    let d = edit(
        &engine,
        run,
        second.approval_id.clone(),
        "bob",
        edited.clone(),
    )
    .await;
    assert_eq!(d.effective_args, Some(edited.clone()));

    let state = completed(&engine, run).await;
    let t1 = state
        .supervisor
        .planning_state
        .as_ref()
        .unwrap()
        .todo(&"todo_001".into())
        .unwrap()
        .clone();
    assert_eq!(
        (t1.status, t1.error.as_deref()),
        (
            TodoStatus::Skipped,
            Some("Skipped: rejected by alice: not now")
        )
    );
    assert!(a.calls().is_empty(), "a rejected TODO never runs");
    assert_eq!(
        b.calls(),
        [(1, edited.clone())],
        "the agent got the edited input"
    );
    let evs = events(&engine, run);
    assert!(evs.iter().any(|e| matches!(&e.event, Event::AgentStarted { todo_id, input, .. } if todo_id.as_str() == "todo_002" && *input == edited)));
    assert!(!evs.iter().any(|e| matches!(&e.event, Event::AgentStarted { todo_id, .. } if todo_id.as_str() == "todo_001")));

    // A decided approval cannot be decided again, and nothing is written.
    let before = evs.len();
    let err = engine
        .decide(
            run,
            first.approval_id.clone(),
            Decision::Approve,
            None,
            &Principal::admin("alice"),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::AlreadyDecided {
                status: ApprovalStatus::Rejected,
                ..
            }
        ),
        "{err}"
    );
    let err = engine
        .decide(
            run,
            "nope".into(),
            Decision::Approve,
            None,
            &Principal::admin("alice"),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ApprovalNotFound(_)), "{err}");
    assert_eq!(events(&engine, run).len(), before);
}

/// Two agents that can only finish together (a barrier of 2): the run completes only if both
/// were in progress at once.
async fn concurrent_run(strategy: Strategy) {
    let dir = tempfile::tempdir().unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let a = Scripted::with("a", "general", vec![], Some(barrier.clone()));
    let b = Scripted::with("b", "general", vec![], Some(barrier));
    let engine = engine_in(dir.path(), registry(&[a, b])).await;
    let plan = vec![step("a", &[], false, 0), step("b", &[], false, 0)];
    let run = start_plan(&engine, plan, HitlMode::None, strategy).await;
    let state = finished(&engine, run).await;
    assert_eq!(
        state.supervisor.run_status,
        RunStatus::Completed,
        "{:?}",
        state.supervisor.error_log
    );
    let evs = events(&engine, run);
    let first_done = evs
        .iter()
        .position(|e| matches!(e.event, Event::AgentCompleted { .. }))
        .unwrap();
    let started = evs[..first_done]
        .iter()
        .filter(|e| matches!(e.event, Event::AgentStarted { .. }))
        .count();
    assert_eq!(started, 2, "both TODOs in progress before either completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_runs_independent_todos_at_once() {
    concurrent_run(Strategy::Parallel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_runs_independent_todos_at_once() {
    concurrent_run(Strategy::Dag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_under_every_todo_asks_for_both_and_each_decision_touches_one() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (Scripted::new("a"), Scripted::new("b"), Scripted::new("c"));
    let engine = engine_in(dir.path(), registry(&[a.clone(), b.clone(), c.clone()])).await;
    let plan = vec![
        step("a", &[], false, 0),
        step("b", &[], false, 0),
        step("c", &["a", "b"], false, 0),
    ];
    let run = start_plan(&engine, plan, HitlMode::EveryTodo, Strategy::Dag).await;
    let state = engine
        .wait_until(run, WAIT, |s| s.approvals.pending().count() == 2)
        .await
        .unwrap();
    assert_eq!(state.supervisor.pending_approval_ids.len(), 2);
    assert_eq!(state.supervisor.run_status, RunStatus::WaitingForApproval);
    let ids: Vec<_> = state
        .approvals
        .pending()
        .map(|a| a.approval_id.clone())
        .collect();
    assert_ne!(ids[0], ids[1]);

    approve(&engine, run, ids[0].clone(), "alice").await;
    let state = engine
        .wait_until(run, WAIT, |s| {
            todo_status(s, "todo_001") == TodoStatus::Completed
        })
        .await
        .unwrap();
    assert_eq!(todo_status(&state, "todo_002"), TodoStatus::WaitingApproval);
    assert_eq!(
        state.approvals.get(&ids[1]).unwrap().status,
        ApprovalStatus::Pending
    );
    assert!(b.calls().is_empty());

    reject(&engine, run, ids[1].clone(), "bob", None).await;
    let state = finished(&engine, run).await;
    assert_eq!(todo_status(&state, "todo_001"), TodoStatus::Completed);
    assert_eq!(todo_status(&state, "todo_002"), TodoStatus::Skipped);
    assert_eq!(todo_status(&state, "todo_003"), TodoStatus::Blocked);
    assert!(b.calls().is_empty() && c.calls().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_expires_also_across_a_restart() {
    for restart in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let a = Scripted::new("a");
        let mut engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
        let mut config = plan_config(
            vec![step("a", &[], false, 0)],
            HitlMode::EveryTodo,
            Strategy::Sequential,
        );
        config.approval_timeout_ms = Some(1000);
        let run = start(&engine, config).await;
        let approval = approval_of(&engine, run, "todo_001").await;
        assert!(approval.expires_at.is_some());
        if restart {
            engine.shutdown().await;
            drop(engine);
            tokio::time::sleep(Duration::from_millis(1200)).await;
            engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
        }
        let state = finished(&engine, run).await;
        let t = state
            .supervisor
            .planning_state
            .as_ref()
            .unwrap()
            .todo(&"todo_001".into())
            .unwrap()
            .clone();
        assert_eq!(t.status, TodoStatus::Skipped, "restart={restart}");
        assert_eq!(
            t.error,
            Some(format!(
                "Skipped: approval {} expired",
                approval.approval_id
            ))
        );
        assert_eq!(
            state.approvals.get(&approval.approval_id).unwrap().status,
            ApprovalStatus::Expired
        );
        assert!(a.calls().is_empty());
        engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_to_an_approval_checkpoint_asks_again_under_a_new_id() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Scripted::new("a"), Scripted::new("b"));
    let engine = engine_in(dir.path(), registry(&[a.clone(), b.clone()])).await;
    let plan = vec![step("a", &[], false, 0), step("b", &["a"], false, 0)];
    let run = start_plan(&engine, plan, HitlMode::EveryTodo, Strategy::Sequential).await;
    let first = approval_of(&engine, run, "todo_001").await;
    approve(&engine, run, first.approval_id, "alice").await;
    let second = approval_of(&engine, run, "todo_002").await;
    approve(&engine, run, second.approval_id.clone(), "alice").await;
    let done = completed(&engine, run).await;

    // The approval checkpoint that waited for todo_002.
    let cp = done
        .checkpoints
        .checkpoints
        .iter()
        .filter(|c| c.node == "approval")
        .nth(1)
        .unwrap()
        .clone();
    let restored = engine
        .restore(
            run,
            RestoreTarget::Checkpoint(cp.checkpoint_id.clone()),
            &Principal::admin("carol"),
        )
        .await
        .unwrap();
    assert_eq!(restored.checkpoint_id, cp.checkpoint_id);
    let again = approval_of(&engine, run, "todo_002").await;
    assert_ne!(again.approval_id, second.approval_id);
    let state = engine.state(run, None).unwrap();
    assert_eq!(
        state.supervisor.restored_from.as_ref(),
        Some(&cp.checkpoint_id)
    );
    assert_eq!(todo_status(&state, "todo_001"), TodoStatus::Completed);
    assert_eq!(
        state.supervisor.pending_approval_ids,
        std::slice::from_ref(&again.approval_id)
    );
    // The decided approval keeps its decision in the audit view.
    assert_eq!(
        state.approvals.get(&second.approval_id).unwrap().status,
        ApprovalStatus::Approved
    );

    approve(&engine, run, again.approval_id, "carol").await;
    completed(&engine, run).await;
    assert_eq!(b.calls().len(), 2, "todo_002 ran on both branches");
    assert_eq!(
        a.calls().len(),
        1,
        "todo_001 was not re-run: it was completed at the restored point"
    );
    assert!(engine.store().verify().unwrap().ok());

    let bad = engine
        .restore(
            run,
            RestoreTarget::Checkpoint("cp_999".into()),
            &Principal::admin("carol"),
        )
        .await
        .unwrap_err();
    assert!(matches!(bad, Error::CheckpointNotFound(_)), "{bad}");
    let bad = engine
        .restore(run, RestoreTarget::Seq(10_000), &Principal::admin("carol"))
        .await
        .unwrap_err();
    assert!(
        bad.to_string().contains("beyond the run's last seq"),
        "{bad}"
    );
}

/// The evaluate → retry loop: an optional TODO that used up its own retries is skipped;
/// the evaluation names its agent, the engine adds a retry TODO, and the second round succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluation_retries_the_named_agent() {
    let dir = tempfile::tempdir().unwrap();
    let flaky = vec![
        Err(AgentError::retryable("timeout")),
        Err(AgentError::retryable("timeout")),
    ];
    let a = Scripted::with("a", "general", flaky, None);
    let engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
    let run = start_plan(
        &engine,
        vec![step("a", &[], true, 1)],
        HitlMode::None,
        Strategy::Sequential,
    )
    .await;
    let state = completed(&engine, run).await;
    let p = state.supervisor.planning_state.as_ref().unwrap();
    let ids: Vec<(&str, TodoStatus)> = p.todos.iter().map(|t| (t.id.as_str(), t.status)).collect();
    assert_eq!(
        ids,
        [
            ("todo_001", TodoStatus::Skipped),
            ("todo_002", TodoStatus::Completed)
        ]
    );
    assert_eq!(p.todos[1].metadata["retry_of"], "a");
    assert_eq!(state.supervisor.evaluation_rounds, 2);
    assert!(!state.supervisor.evaluation.as_ref().unwrap().needs_retry);
    assert_eq!(a.calls().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_result_the_full_disk_refused_is_recorded_once_space_frees() {
    use chronicle_engine::store::StorageHealth;
    let scratch = tempfile::tempdir().unwrap();
    let tmpfs = crate::support::Tmpfs::mount(scratch.path(), "96m");
    let gate = Arc::new(tokio::sync::Barrier::new(2));
    let agent = Scripted::with(
        "gate",
        "general",
        vec![Ok(json!({"report": "r".repeat(30_000)}))],
        Some(gate.clone()),
    );
    let engine = engine_in(
        &tmpfs.0.join("data"),
        registry(std::slice::from_ref(&agent)),
    )
    .await;
    let plan = vec![step("gate", &[], false, 0)];
    let run = start_plan(&engine, plan, HitlMode::None, Strategy::Sequential).await;
    // The agent is called right after its start is recorded; no event follows until it
    // answers, so this waits on the agent itself, not on the run's events.
    let deadline = tokio::time::Instant::now() + WAIT;
    while agent.calls().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent was never called"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The disk fills while the agent works; then it answers.
    let filler = tmpfs.fill();
    assert!(matches!(
        engine.store().health(),
        StorageHealth::Full { .. }
    ));
    gate.wait().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let state = engine.state(run, None).unwrap();
    assert_eq!(
        todo_status(&state, "todo_001"),
        TodoStatus::InProgress,
        "the result waits for space; the TODO neither completes nor fails"
    );
    // Space frees: the same result is recorded, once, and the run completes.
    std::fs::remove_file(filler).unwrap();
    let state = engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    assert_eq!(state.supervisor.run_status, RunStatus::Completed);
    let completions = events(&engine, run)
        .iter()
        .filter(|e| matches!(e.event, Event::AgentCompleted { .. }))
        .count();
    assert_eq!(completions, 1);
    assert_eq!(agent.calls().len(), 1, "the agent ran once");
    assert!(engine.store().verify().unwrap().ok());
    engine.shutdown().await;
}
