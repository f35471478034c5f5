//! `--domain bench` through the real binary: a `chronicle serve` on loopback answers `POST /chat`
//! with the benchmark workflow's answer, and `CHRONICLE_DOMAIN=bench` picks the same domain for
//! the embedded `run`; and `chronicle bench`'s generated stores of N runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;

use chronicle_client::ChatReply;
use chronicle_schemas::{HitlMode, RunStatus};
use chronicle_wire::{ChatRequest, InboxQuery, RunsQuery, SessionsQuery};

use chronicle_bench::BENCH_QUERY;

use crate::cli_run::{
    assert_exit, chronicle, output, path_str, rt, run_cli, runs_of, stderr, stdout,
};
use crate::durability::Serve;

/// The answer the benchmark workflow gives its query.
const BENCH_ANSWER: &str = "[research_and_report] 'Research the latest listings in Gangnam, \
     analyze the trends ': 3/3 todos completed (analysis_team=1, document_team=1, search_team=1).";

#[test]
fn serve_domain_bench_answers_a_chat_with_the_bench_answer() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let log = scratch.path().join("serve.log");
    let args = [OsStr::new("--domain"), OsStr::new("bench")];
    let serve = Serve::start_with(&data, &args, &log, None);
    let request = ChatRequest {
        message: BENCH_QUERY.into(),
        hitl: Some(HitlMode::None),
        ..ChatRequest::default()
    };
    let reply = rt().block_on(serve.api.chat(&request)).unwrap();
    let ChatReply::Done(turn) = reply else {
        panic!("{reply:?}\n{}", serve.log_text());
    };
    let response = turn.response.expect("an answer");
    assert_eq!(response["answer"], BENCH_ANSWER, "{response}");
    assert_eq!(
        response["completed_todo_ids"],
        serde_json::json!(["todo_001", "todo_002", "todo_003"])
    );
}

#[test]
fn chronicle_domain_bench_in_the_environment_picks_the_bench_domain() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = chronicle();
    cmd.env("CHRONICLE_DOMAIN", "bench")
        .env_remove("CHRONICLE_AGENTS")
        .args(["run", "--hitl", "none", "--data", path_str(dir.path())])
        .arg(BENCH_QUERY);
    let o = output(cmd, "");
    assert_exit(&o, 0);
    let out = stdout(&o);
    assert_eq!(out.lines().last(), Some(BENCH_ANSWER), "{out}");
}

/// `chronicle bench --store-generate-only` on a tiny N: the store verifies, holds N runs with
/// every ending (completed, failed, cancelled, waiting for an approval, cut mid-run), sessions
/// of several turns, four owners and saved memory; a second bench reuses it; and `chronicle
/// serve --domain bench` opens it and lists it.
#[test]
fn bench_generates_a_valid_store_of_mixed_runs_that_a_server_lists() {
    const RUNS: usize = 200;
    let scratch = tempfile::tempdir().unwrap();
    let bench = [
        "bench",
        "--store-generate-only",
        "--store-runs",
        "200",
        "--dir",
        path_str(scratch.path()),
    ];
    let o = run_cli(&bench, "");
    assert_exit(&o, 0);
    assert!(
        stderr(&o).contains("generating a store of 200 runs"),
        "{}",
        stderr(&o)
    );
    let data = scratch.path().join("chronicle-bench-stores/runs-200/store");
    assert!(stdout(&o).contains(path_str(&data)), "{}", stdout(&o));
    assert_exit(&run_cli(&["verify", "--data", path_str(&data)], ""), 0);

    let runs = runs_of(&data);
    assert_eq!(runs.len(), RUNS);
    let mut statuses: HashMap<RunStatus, usize> = HashMap::new();
    let mut sessions: BTreeMap<String, usize> = BTreeMap::new();
    let mut owners = BTreeSet::new();
    let mut saved = 0;
    for (_, state) in &runs {
        let s = &state.supervisor;
        *statuses.entry(s.run_status).or_default() += 1;
        *sessions.entry(s.session_id.0.clone()).or_default() += 1;
        owners.insert(s.owner.clone());
        saved += state.supervisor.saved_memories.len();
    }
    let count = |s: RunStatus| statuses.get(&s).copied().unwrap_or(0);
    assert!(count(RunStatus::Completed) > RUNS * 3 / 4, "{statuses:?}");
    for s in [
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::WaitingForApproval,
    ] {
        assert!(count(s) >= 1, "no {s:?} run: {statuses:?}");
    }
    // A run cut mid-way is neither finished nor waiting.
    let unfinished = RUNS
        - count(RunStatus::Completed)
        - count(RunStatus::Failed)
        - count(RunStatus::Cancelled)
        - count(RunStatus::WaitingForApproval);
    assert!(unfinished >= 1, "{statuses:?}");
    assert!(
        sessions.values().all(|n| (1..=6).contains(n)),
        "{sessions:?}"
    );
    assert!(
        sessions.values().filter(|n| **n >= 3).count() >= 10,
        "{sessions:?}"
    );
    assert_eq!(owners.len(), 4, "{owners:?}");
    assert!(saved >= RUNS / 8, "{saved} memory items saved");

    let o = run_cli(&bench, "");
    assert_exit(&o, 0);
    assert!(
        stderr(&o).contains("reusing the store of 200 runs"),
        "{}",
        stderr(&o)
    );

    let log = scratch.path().join("serve.log");
    let args = [OsStr::new("--domain"), OsStr::new("bench")];
    let serve = Serve::start_with(&data, &args, &log, None);
    let rt = rt();
    let listed = rt.block_on(serve.api.runs(&RunsQuery::default())).unwrap();
    assert_eq!(listed.len(), RUNS, "{}", serve.log_text());
    let inbox = rt
        .block_on(serve.api.inbox(&InboxQuery::default()))
        .unwrap();
    assert_eq!(
        inbox.count,
        count(RunStatus::WaitingForApproval),
        "{}",
        serve.log_text()
    );
    let page = rt
        .block_on(serve.api.sessions_page(&SessionsQuery::default()))
        .unwrap();
    assert!(!page.sessions.is_empty(), "{}", serve.log_text());
}
