//! Values a person sets on a run (`Engine::update_values`, LangGraph's `update_state`),
//! black-box on a real store: merged key by key into the state, each update recorded with who
//! made it and the checkpoint it makes, also on a run that has ended; refusals write nothing;
//! an engine opened again on the same log shows the same state.

use std::sync::Arc;

use chronicle_engine::{Engine, Error, Principal, StartRun};
use chronicle_schemas::{
    Actor, CheckpointId, Decision, Event, HitlMode, RunConfig, RunId, RunStatus, Strategy,
    TodoStatus,
};
use serde_json::{Map, Value, json};

use crate::agents::{Scripted, registry, step};
use crate::support::{WAIT, completed, engine_in, events, first_pending, plan_config};

fn alice() -> Principal {
    Principal::user("alice")
}

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

/// A run of alice's with one TODO of agent `a`.
async fn start(engine: &Engine, hitl: HitlMode) -> RunId {
    let req = StartRun {
        by: alice(),
        query: "테스트 요청".into(),
        config: Some(plan_config(
            vec![step("a", &[], false, 0)],
            hitl,
            Strategy::Sequential,
        )),
        ..StartRun::default()
    };
    engine.start_run(req).await.unwrap().run_id
}

fn last_seq(engine: &Engine, run: RunId) -> u64 {
    engine.store().run_head(run).unwrap().unwrap().last_seq
}

/// The state's values, as JSON.
fn values_of(engine: &Engine, run: RunId) -> Value {
    Value::Object(engine.state(run, None).unwrap().supervisor.values)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_on_a_completed_run_merge_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let a = Scripted::new("a");
    let engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
    let run = start(&engine, HitlMode::None).await;
    let done = completed(&engine, run).await;
    let before = done.checkpoints.checkpoints.len();

    let values = map(json!({"note": "call back", "budget": 5}));
    let first = engine
        .update_values(run, values.clone(), None, &alice())
        .await
        .unwrap();
    assert_eq!(first, CheckpointId(format!("cp_{:03}", before + 1)));
    let tail: Vec<Event> = events(&engine, run)
        .into_iter()
        .rev()
        .take(2)
        .map(|e| e.event)
        .collect();
    assert_eq!(
        tail[1],
        Event::ValuesUpdated {
            values,
            as_node: None,
            by: Actor::user("alice"),
        }
    );
    assert!(
        matches!(&tail[0], Event::CheckpointSaved { checkpoint_id, node, .. } if *checkpoint_id == first && node == "update")
    );
    assert_eq!(
        values_of(&engine, run),
        json!({"note": "call back", "budget": 5})
    );

    let second = engine
        .update_values(
            run,
            map(json!({"budget": 7, "note": null, "tags": ["a"]})),
            Some("approval".into()),
            &alice(),
        )
        .await
        .unwrap();
    let state = engine.state(run, None).unwrap();
    assert_eq!(
        Value::Object(state.supervisor.values.clone()),
        json!({"budget": 7, "tags": ["a"]})
    );
    assert_eq!(state.supervisor.run_status, RunStatus::Completed);
    assert_eq!(state.supervisor.last_checkpoint_id.as_ref(), Some(&second));
    let made: Vec<(&str, bool)> = state.checkpoints.checkpoints[before..]
        .iter()
        .map(|c| (c.node.as_str(), c.update))
        .collect();
    assert_eq!(made, [("update", true), ("approval", true)]);
    assert_eq!(state.checkpoints.head.as_ref(), Some(&second));
    assert!(
        engine.store().run_head(run).unwrap().unwrap().terminal,
        "the run stays ended"
    );
    // The state at the first update's checkpoint has its values only.
    let at_first = state.checkpoints.get(&first).unwrap().seq;
    assert_eq!(
        Value::Object(engine.state(run, Some(at_first)).unwrap().supervisor.values),
        json!({"note": "call back", "budget": 5})
    );

    engine.shutdown().await;
    drop(engine);
    let engine = engine_in(dir.path(), registry(&[a])).await;
    assert_eq!(engine.state(run, None).unwrap(), state);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_value_updates_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(tokio::sync::Barrier::new(2));
    let a = Scripted::with("a", "general", vec![], Some(gate.clone()));
    let engine = engine_in(dir.path(), registry(&[a])).await;
    let run = start(&engine, HitlMode::None).await;
    // The agent waits at the gate: the run is working.
    engine
        .wait_until(run, WAIT, |s| {
            s.supervisor
                .planning_state
                .as_ref()
                .and_then(|p| p.todo(&"todo_001".into()))
                .is_some_and(|t| t.status == TodoStatus::InProgress)
        })
        .await
        .unwrap();
    let head = last_seq(&engine, run);
    let update = |values: Value, who: Principal| {
        let engine = engine.clone();
        async move {
            engine
                .update_values(run, map(values), None, &who)
                .await
                .unwrap_err()
        }
    };
    let busy = update(json!({"note": 1}), alice()).await;
    assert!(matches!(busy, Error::RunBusy(r) if r == run), "{busy}");
    gate.wait().await;
    completed(&engine, run).await;
    let head_done = last_seq(&engine, run);
    assert!(head_done > head);

    let refused = [
        (update(json!({}), alice()).await, "no values"),
        (
            update(json!({"note": 1, "query": "x"}), alice()).await,
            "query",
        ),
        (update(json!({"messages": []}), alice()).await, "messages"),
        (
            update(json!({"__interrupt__": 1}), alice()).await,
            "interrupt",
        ),
        (
            update(json!({"note": 1}), Principal::user("bob")).await,
            "bob",
        ),
    ];
    assert!(matches!(refused[0].0, Error::NoValues));
    assert!(matches!(&refused[1].0, Error::OwnStateKey(k) if k == "query"));
    assert!(refused[1].0.to_string().contains("\"query\""));
    assert!(refused[1].0.to_string().contains("commands"));
    assert!(matches!(&refused[2].0, Error::OwnStateKey(k) if k == "messages"));
    assert!(matches!(&refused[3].0, Error::OwnStateKey(k) if k == "__interrupt__"));
    assert!(matches!(refused[4].0, Error::RunNotFound(r) if r == run));
    let huge = update(json!({"note": "x".repeat(70_000)}), alice()).await;
    assert!(
        matches!(&huge, Error::Store(e) if e.event_too_large().is_some()),
        "{huge}"
    );
    let unknown = RunId(uuid::Uuid::now_v7());
    let e = engine
        .update_values(unknown, map(json!({"note": 1})), None, &alice())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::RunNotFound(r) if r == unknown));
    assert_eq!(last_seq(&engine, run), head_done, "nothing was written");
    assert!(values_of(&engine, run).as_object().unwrap().is_empty());
    // A deleted session's run is gone for this as for every request.
    let session = engine.state(run, None).unwrap().supervisor.session_id;
    engine.delete_session(&alice(), &session).await.unwrap();
    let gone = update(json!({"note": 1}), alice()).await;
    assert!(matches!(gone, Error::RunNotFound(r) if r == run), "{gone}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_takes_values_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let a = Scripted::new("a");
    let engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
    let run = start(&engine, HitlMode::EveryTodo).await;
    let waiting = engine
        .wait_until(run, WAIT, |s| s.approvals.pending().next().is_some())
        .await
        .unwrap();
    let approval = first_pending(&waiting);
    engine
        .update_values(run, map(json!({"note": "careful"})), None, &alice())
        .await
        .unwrap();
    let state = engine.state(run, None).unwrap();
    assert_eq!(state.supervisor.run_status, RunStatus::WaitingForApproval);
    assert!(a.calls().is_empty(), "a value update starts nothing");
    engine
        .decide(run, approval, Decision::Approve, None, &alice(), None)
        .await
        .unwrap();
    let done = completed(&engine, run).await;
    assert_eq!(a.calls().len(), 1);
    assert_eq!(
        Value::Object(done.supervisor.values),
        json!({"note": "careful"})
    );
    engine.shutdown().await;
}

/// A value update's checkpoint is not a step of the run: a run whose `max_steps` it would
/// exceed still finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_updates_do_not_count_as_steps() {
    let dir = tempfile::tempdir().unwrap();
    let a = Scripted::new("a");
    let engine = engine_in(dir.path(), registry(std::slice::from_ref(&a))).await;
    // Run once without updates to learn how many steps it takes.
    let probe = start(&engine, HitlMode::EveryTodo).await;
    let approval = |s: &chronicle_projections::RunState| {
        s.approvals.pending().next().map(|a| a.approval_id.clone())
    };
    let waiting = engine
        .wait_until(probe, WAIT, |s| approval(s).is_some())
        .await
        .unwrap();
    let id = approval(&waiting).unwrap();
    engine
        .decide(probe, id, Decision::Approve, None, &alice(), None)
        .await
        .unwrap();
    let steps = completed(&engine, probe)
        .await
        .checkpoints
        .checkpoints
        .len() as u32;

    let mut config: RunConfig = plan_config(
        vec![step("a", &[], false, 0)],
        HitlMode::EveryTodo,
        Strategy::Sequential,
    );
    config.limits.max_steps = steps;
    let req = StartRun {
        by: alice(),
        query: "테스트 요청".into(),
        config: Some(config),
        ..StartRun::default()
    };
    let run = engine.start_run(req).await.unwrap().run_id;
    let waiting = engine
        .wait_until(run, WAIT, |s| approval(s).is_some())
        .await
        .unwrap();
    for n in 0..3 {
        engine
            .update_values(run, map(json!({ "n": n })), None, &alice())
            .await
            .unwrap();
    }
    engine
        .decide(
            run,
            approval(&waiting).unwrap(),
            Decision::Approve,
            None,
            &alice(),
            None,
        )
        .await
        .unwrap();
    let done = completed(&engine, run).await;
    assert_eq!(done.checkpoints.steps() as u32, steps);
    assert_eq!(done.checkpoints.checkpoints.len() as u32, steps + 3);
    engine.shutdown().await;
}
