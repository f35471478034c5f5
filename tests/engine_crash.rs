//! Engine crash recovery with a real process: 20 concurrent runs, SIGKILL in the middle, a fresh
//! engine on the same data: every run completes, no TODO runs again after it completed, and every
//! chain verifies.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Settings};
use chronicle_schemas::{Event, RunId, RunStatus, TodoStatus};

use crate::slow_agent;

const RUNS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_flight_then_every_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_engine-child"))
        .args(["many", dir.path().to_str().unwrap(), &RUNS.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut runs = Vec::new();
    while runs.len() < RUNS {
        let line = lines.next().expect("child output").unwrap();
        runs.push(
            line.strip_prefix("STARTED ")
                .unwrap()
                .parse::<RunId>()
                .unwrap(),
        );
    }
    // Let the runs get going (each takes ~120 ms of agent time), then kill mid-flight.
    tokio::time::sleep(Duration::from_millis(60 + rand::random::<u64>() % 60)).await;
    child.kill().unwrap();
    child.wait().unwrap();

    let store = Store::open(dir.path(), Options::default()).unwrap();
    let unfinished = runs
        .iter()
        .filter(|r| !store.run_head(**r).unwrap().unwrap().terminal)
        .count();
    assert!(unfinished > 0, "the kill came too late to test recovery");
    let engine = Engine::open(
        store,
        Settings {
            registry: slow_agent::slow_registry(),
            ..chronicle_realestate::settings()
        },
    )
    .await
    .unwrap();
    let mut reruns = 0;
    for run in &runs {
        let state = engine
            .wait_until(*run, Duration::from_secs(30), |s| {
                s.supervisor.run_status.is_terminal()
            })
            .await
            .unwrap();
        assert_eq!(
            state.supervisor.run_status,
            RunStatus::Completed,
            "{run}: {:?}",
            state.supervisor.error_log
        );
        let p = state.supervisor.planning_state.as_ref().unwrap();
        assert!(p.todos.iter().all(|t| t.status == TodoStatus::Completed));
        // No agent started for a TODO after that TODO completed.
        let mut completed = HashSet::new();
        let mut started = HashSet::new();
        for env in engine.store().read_run(*run, 0, u64::MAX) {
            match env.unwrap().event {
                Event::TodoStatusChanged {
                    todo_id,
                    to: TodoStatus::Completed,
                    ..
                } => {
                    completed.insert(todo_id);
                }
                Event::AgentStarted {
                    todo_id, attempt, ..
                } => {
                    assert!(
                        !completed.contains(&todo_id),
                        "{run}: {todo_id} ran after completing"
                    );
                    // Recovery re-runs the interrupted attempt under its own number.
                    reruns += usize::from(!started.insert((todo_id, attempt)));
                }
                _ => {}
            }
        }
    }
    eprintln!(
        "unfinished at the kill: {unfinished}/{RUNS}; agents re-run after recovery: {reruns}"
    );
    assert!(reruns > 0, "no agent was interrupted by the kill");
    let report = engine.store().verify().unwrap();
    assert!(report.ok(), "{:?}", report.problem);
    assert_eq!(report.heads.len(), RUNS);
    engine.shutdown().await;
}
