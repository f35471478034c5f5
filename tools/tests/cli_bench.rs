//! `--domain bench` through the real binary: a `chronicle serve` on loopback answers `POST /chat`
//! with the benchmark workflow's answer, and `CHRONICLE_DOMAIN=bench` picks the same domain for
//! the embedded `run`.

use std::ffi::OsStr;

use chronicle_client::ChatReply;
use chronicle_schemas::HitlMode;
use chronicle_wire::ChatRequest;

use chronicle_bench::BENCH_QUERY;

use crate::cli_run::{assert_exit, chronicle, output, path_str, rt, stdout};
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
