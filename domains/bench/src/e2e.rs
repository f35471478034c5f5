//! The benchmark workflow through a real engine on a sled store in a temporary directory: the
//! plans, a full run's results and answer, and runs that wait for a human.

use std::time::Duration;

use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Principal, RunState, StartRun};
use chronicle_schemas::{Decision, HitlMode, RunId, RunStatus, SupervisorTodo, TodoStatus};
use serde_json::{Value, json};

use crate::BENCH_QUERY;

/// How long a run of the mock agents may take in a test; they answer at once.
const RUN_WAIT: Duration = Duration::from_secs(20);

/// An engine of the benchmark domain over a sled store in `dir`.
async fn engine_in(dir: &std::path::Path) -> Engine {
    let store = Store::open(dir, Options::default()).expect("a store");
    Engine::open(store, crate::settings())
        .await
        .expect("an engine")
}

async fn start(engine: &Engine, query: &str, hitl: HitlMode) -> RunId {
    let req = StartRun {
        query: query.into(),
        hitl: Some(hitl),
        ..StartRun::default()
    };
    engine.start_run(req).await.expect("a run").run_id
}

async fn finished(engine: &Engine, run: RunId) -> RunState {
    engine
        .wait_until(run, RUN_WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .expect("a finished run")
}

fn todos(s: &RunState) -> &[SupervisorTodo] {
    &s.supervisor.planning_state.as_ref().expect("a plan").todos
}

/// Each TODO as `(id, agent, dependencies)`.
fn chain(s: &RunState) -> Vec<(String, String, Vec<String>)> {
    todos(s)
        .iter()
        .map(|t| {
            let deps = t.dependencies.iter().map(|d| d.as_str().to_owned());
            (
                t.id.as_str().to_owned(),
                t.agent_name.clone(),
                deps.collect(),
            )
        })
        .collect()
}

fn owned(chain: &[(&str, &str, &[&str])]) -> Vec<(String, String, Vec<String>)> {
    chain
        .iter()
        .map(|(id, agent, deps)| {
            let deps = deps.iter().map(|d| (*d).to_owned()).collect();
            ((*id).to_owned(), (*agent).to_owned(), deps)
        })
        .collect()
}

fn response(s: &RunState) -> &Value {
    s.supervisor.final_response.as_ref().expect("an answer")
}

/// The benchmark query plans search → analysis → document, each TODO after the one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_query_plans_three_chained_todos() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let run = start(&engine, BENCH_QUERY, HitlMode::None).await;
    let s = finished(&engine, run).await;
    assert_eq!(
        chain(&s),
        owned(&[
            ("todo_001", "search_team", &[]),
            ("todo_002", "analysis_team", &["todo_001"]),
            ("todo_003", "document_team", &["todo_002"]),
        ])
    );
    let intent = &s
        .supervisor
        .planning_state
        .as_ref()
        .unwrap()
        .analyzed_intent;
    assert_eq!(intent["intent_type"], "research_and_report", "{intent}");
    engine.shutdown().await;
}

/// A query naming one agent's keyword gets the default plan: search, then analysis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_keyword_gives_the_default_two_todos() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let run = start(&engine, "Write about Gangnam apartments", HitlMode::None).await;
    let s = finished(&engine, run).await;
    assert_eq!(
        chain(&s),
        owned(&[
            ("todo_001", "search_team", &[]),
            ("todo_002", "analysis_team", &["todo_001"]),
        ])
    );
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    assert_eq!(
        response(&s)["answer"],
        "[research_and_analysis] 'Write about Gangnam apartments': 2/2 todos completed \
         (analysis_team=1, search_team=1)."
    );
    engine.shutdown().await;
}

/// A full run completes; every result is 100–250 bytes of JSON, the same as the other
/// implementations return for the query; the answer is under 1 KiB and counts all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_run_completes_with_small_results_and_a_short_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let run = start(&engine, BENCH_QUERY, HitlMode::None).await;
    let s = finished(&engine, run).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    let results = &s.supervisor.team_results;
    assert_eq!(results.len(), 3, "{results:?}");
    for (agent, result) in results {
        let bytes = result.to_string().len();
        assert!((100..=250).contains(&bytes), "{agent}: {bytes} B: {result}");
    }
    assert_eq!(
        results["search_team"],
        json!({
            "agent": "search_team",
            "sources": [
                "https://example.org/5e37c78d/0",
                "https://example.org/5e37c78d/1",
                "https://example.org/5e37c78d/2",
            ],
            "summary": "found 3 sources for: Research the latest listings in Gangnam, analyze the trends ",
        })
    );
    assert_eq!(
        results["analysis_team"],
        json!({
            "agent": "analysis_team",
            "insights": [
                "insight 0 on Research the latest listings i",
                "insight 1 on Research the latest listings i",
            ],
            "inputs": ["todo_001"],
            "confidence": 0.87,
        })
    );
    assert_eq!(
        results["document_team"]["document"],
        "# Report\n\nResearch the latest listings in Gangnam, analyze the trends and write a short re\
         \n\nBased on 2 prior results."
    );
    let r = response(&s);
    assert!(r.to_string().len() < 1024, "{r}");
    assert_eq!(
        r["answer"],
        "[research_and_report] 'Research the latest listings in Gangnam, analyze the trends ': \
         3/3 todos completed (analysis_team=1, document_team=1, search_team=1)."
    );
    assert_eq!(
        r["aggregated_results"],
        json!({"todo_count": 3, "completed": 3, "rejected": 0,
               "by_agent": {"search_team": 1, "analysis_team": 1, "document_team": 1}})
    );
    assert_eq!(
        r["completed_todo_ids"],
        json!(["todo_001", "todo_002", "todo_003"])
    );
    engine.shutdown().await;
}

/// Waits until the run asks for a TODO's approval or ends; the TODO waiting, if any.
async fn next_waiting(engine: &Engine, run: RunId) -> (RunState, Option<SupervisorTodo>) {
    let s = engine
        .wait_until(run, RUN_WAIT, |s| {
            s.supervisor.run_status.is_terminal() || s.approvals.pending().next().is_some()
        })
        .await
        .expect("a run that waits or ends");
    let waiting = todos(&s)
        .iter()
        .find(|t| t.status == TodoStatus::WaitingApproval)
        .cloned();
    (s, waiting)
}

/// Decides every approval the run asks for, in order (`reject_todo` is rejected, the others
/// approved), checking that nothing ran before its approval; the finished run.
async fn decide_all(engine: &Engine, run: RunId, reject_todo: Option<&str>) -> RunState {
    let mut asked = Vec::new();
    loop {
        let (s, waiting) = next_waiting(engine, run).await;
        let Some(todo) = waiting else {
            assert!(s.supervisor.run_status.is_terminal());
            return s;
        };
        assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);
        assert!(
            !s.supervisor.team_results.contains_key(&todo.agent_name),
            "{} ran before its approval",
            todo.id
        );
        asked.push(todo.id.as_str().to_owned());
        let approval = todo.approval_id.clone().expect("the TODO's approval");
        let decision = if reject_todo == Some(todo.id.as_str()) {
            Decision::Reject
        } else {
            Decision::Approve
        };
        engine
            .decide(run, approval, decision, None, &Principal::local(), None)
            .await
            .expect("a decision");
        assert!(asked.len() <= 3, "asked again: {asked:?}");
    }
}

/// With a human in the loop, the run waits before each TODO and finishes once all are approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hitl_run_waits_for_each_approval_and_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let run = start(&engine, BENCH_QUERY, HitlMode::EveryTodo).await;
    let s = decide_all(&engine, run, None).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    assert_eq!(s.approvals.list.len(), 3);
    assert!(
        response(&s)["answer"]
            .as_str()
            .unwrap_or_default()
            .ends_with("3/3 todos completed (analysis_team=1, document_team=1, search_team=1).")
    );
    engine.shutdown().await;
}

/// Rejecting the second TODO skips it and the one after it never runs: one of three completed,
/// one rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_todo_stops_the_chain_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let run = start(&engine, BENCH_QUERY, HitlMode::EveryTodo).await;
    let s = decide_all(&engine, run, Some("todo_002")).await;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    assert_eq!(
        todos(&s).iter().map(|t| t.status).collect::<Vec<_>>(),
        [
            TodoStatus::Completed,
            TodoStatus::Skipped,
            TodoStatus::Blocked
        ]
    );
    let r = response(&s);
    assert_eq!(
        r["aggregated_results"],
        json!({"todo_count": 3, "completed": 1, "rejected": 1, "by_agent": {"search_team": 1}})
    );
    assert_eq!(r["completed_todo_ids"], json!(["todo_001"]));
    engine.shutdown().await;
}
