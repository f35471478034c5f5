//! `--domain bench` through the real binary: a `chronicle serve` on loopback answers `POST /chat`
//! with the benchmark workflow's answer, and `CHRONICLE_DOMAIN=bench` picks the same domain for
//! the embedded `run`; `chronicle bench`'s generated stores of N runs, its section that puts the
//! sled store beside the PostgreSQL store, and its section on the live trace export.

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
use serde_json::Value;

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

/// The JSON Lines of `chronicle bench --json` of one type (`bench` rows, `bench_grid` grids).
fn bench_lines(out: &str, kind: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v| v["type"] == kind)
        .map(|v| v["data"].clone())
        .collect()
}

/// `chronicle bench --only postgres` against the test PostgreSQL: one grid with a column per
/// store and every row measured on both, each number above zero (the log head's lock hold is
/// PostgreSQL's alone: sled has none).
#[test]
fn bench_postgres_puts_every_measurement_of_sled_beside_postgres() {
    let scratch = tempfile::tempdir().unwrap();
    let url = chronicle_testkit::postgres::url();
    let o = run_cli(
        &[
            "bench",
            "--quick",
            "--only",
            "postgres",
            "--postgres",
            &url,
            "--json",
            "--dir",
            path_str(scratch.path()),
        ],
        "",
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    let grids = bench_lines(&out, "bench_grid");
    assert_eq!(grids.len(), 1, "{out}");
    let grid = &grids[0];
    assert_eq!(grid["id"], "postgres", "{grid}");
    assert_eq!(grid["columns"], serde_json::json!(["sled", "postgres"]));
    let rows: BTreeMap<&str, &Value> = grid["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r))
        .collect();
    let both = [
        ("append_1", 1),
        ("append_n", 1),
        ("append_n_latency", 2),
        ("commits_n", 1),
        ("events_per_commit_n", 1),
        ("equal_runs_n", 1),
        ("equal_run_latency", 2),
        ("equal_commits_per_run", 1),
        ("disk_per_run", 1),
        ("replay", 1),
    ];
    let numbers = |cell: &Value| -> Vec<f64> {
        cell.as_array()
            .unwrap_or_else(|| panic!("numbers, not {cell}"))
            .iter()
            .map(|n| n.as_f64().unwrap_or_else(|| panic!("a number, not {n}")))
            .collect()
    };
    for (id, per_cell) in both {
        let row = rows
            .get(id)
            .unwrap_or_else(|| panic!("no row {id}: {grid}"));
        let cells = row["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "{row}");
        for cell in cells {
            let n = numbers(cell);
            assert_eq!(n.len(), per_cell, "{row}");
            assert!(n.iter().all(|v| *v > 0.0), "{row}");
        }
    }
    let hold = rows.get("lock_hold_n").unwrap_or_else(|| panic!("{grid}"));
    assert_eq!(numbers(&hold["cells"][0]), Vec::<f64>::new(), "{hold}");
    let pg = numbers(&hold["cells"][1]);
    assert_eq!(pg.len(), 2, "{hold}");
    assert!(pg.iter().all(|v| *v > 0.0) && pg[0] <= pg[1], "{hold}");
    assert_eq!(rows.len(), both.len() + 1, "{grid}");
}

/// Without a PostgreSQL the section says it was skipped, and the bench succeeds.
#[test]
fn bench_postgres_without_a_url_says_it_was_skipped() {
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = chronicle();
    cmd.env_remove("CHRONICLE_BENCH_PG").args([
        "bench",
        "--quick",
        "--only",
        "postgres",
        "--json",
        "--dir",
        path_str(scratch.path()),
    ]);
    let o = output(cmd, "");
    assert_exit(&o, 0);
    let out = stdout(&o);
    assert!(bench_lines(&out, "bench_grid").is_empty(), "{out}");
    let rows = bench_lines(&out, "bench");
    let skipped = rows
        .iter()
        .find(|r| r["id"] == "postgres_skipped")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        skipped["note"]
            .as_str()
            .unwrap()
            .contains("--postgres URL or set CHRONICLE_BENCH_PG"),
        "{skipped}"
    );
}

/// `chronicle bench --only cluster` against the test PostgreSQL: nodes started, killed and
/// started again; every row measured, and no session held for the parked runs once released.
#[test]
fn bench_cluster_measures_takeover_latency_throughput_and_parked_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let url = chronicle_testkit::postgres::url();
    let o = run_cli(
        &[
            "bench",
            "--quick",
            "--only",
            "cluster",
            "--postgres",
            &url,
            "--json",
            "--dir",
            path_str(scratch.path()),
        ],
        "",
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    let rows: BTreeMap<String, Value> = bench_lines(&out, "bench")
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r.clone()))
        .collect();
    let value = |id: &str| -> f64 {
        rows.get(id).unwrap_or_else(|| panic!("no row {id}: {out}"))["value"]
            .as_f64()
            .unwrap()
    };
    for id in [
        "cluster_takeover_kill_p50_ms",
        "cluster_takeover_kill_p99_ms",
        "cluster_commit_to_sse_p50_ms",
        "cluster_commit_to_sse_p99_ms",
        "cluster_decision_local_p50_ms",
        "cluster_decision_forwarded_p50_ms",
        "cluster_engine_runs_per_s_1_node",
        "cluster_engine_runs_per_s_3_nodes",
        "cluster_waiting_runs_per_s_1_node",
        "cluster_waiting_runs_per_s_3_nodes",
    ] {
        let v = value(id);
        assert!(v.is_finite() && v > 0.0, "{id}: {v}");
    }
    assert!(value("cluster_takeover_kill_p50_ms") <= value("cluster_takeover_kill_p99_ms"));
    assert_eq!(value("cluster_parked_sessions_after_release"), 0.0, "{out}");
}

/// `chronicle bench --only traces`: every server configuration measured; the receiver that is up
/// took spans, and the one down and the one that never answers dropped or failed every span.
/// The bench's built-in OTLP sink is the receiver, or the Phoenix at `CHRONICLE_TEST_PHOENIX`
/// (its base URL) when that is set.
#[test]
fn bench_traces_measures_the_export_with_its_receiver_up_down_and_slow() {
    let _machine = crate::heavy();
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = chronicle();
    cmd.env_remove("CHRONICLE_BENCH_PHOENIX").args([
        "bench",
        "--quick",
        "--only",
        "traces",
        "--json",
        "--dir",
        path_str(scratch.path()),
    ]);
    if let Ok(url) = std::env::var("CHRONICLE_TEST_PHOENIX") {
        cmd.args(["--phoenix", &url]);
    }
    let o = output(cmd, "");
    assert_exit(&o, 0);
    let out = stdout(&o);
    let rows: BTreeMap<String, Value> = bench_lines(&out, "bench")
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r))
        .collect();
    let value = |id: &str| -> f64 {
        rows.get(id).unwrap_or_else(|| panic!("no row {id}: {out}"))["value"]
            .as_f64()
            .unwrap()
    };
    for config in ["off", "up", "down", "slow"] {
        for what in ["runs_per_s", "cpu_ms_per_run"] {
            let v = value(&format!("traces_{config}_{what}"));
            assert!(v.is_finite() && v > 0.0, "{config} {what}: {v}");
        }
    }
    assert!(!rows.contains_key("traces_off_spans_exported"), "{out}");
    assert!(value("traces_up_spans_exported") > 0.0, "{out}");
    for config in ["down", "slow"] {
        let lost = value(&format!("traces_{config}_spans_dropped"))
            + value(&format!("traces_{config}_spans_failed"));
        assert!(lost > 0.0, "{config}: {out}");
        assert_eq!(
            value(&format!("traces_{config}_spans_exported")),
            0.0,
            "{out}"
        );
    }
    // Two rows with tracing off, five for each exporter, and the bench's wall clock.
    assert_eq!(rows.len(), 2 + 3 * 5 + 1, "{out}");
}
