//! MCP servers' tools as the engine's tools, against real servers (`tests/mcp/server.py` on the
//! official Python SDK) over stdio and over streamable HTTP, driven by an `llm` agent over the
//! scripted model: tools listed and called, every call recorded (with its server), gated calls
//! approved, rejected and edited, args that fail the schema refused before anything is sent, a
//! slow tool timed out, a server killed mid-call restarted, a changed tool list offered at the
//! next turn, a SIGKILL of the engine answered from the log (the server counts no repeat), a
//! session-scoped server per workspace, and bad entries refused at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chronicle_engine::tools::{ToolContext, ToolRegistry, ToolSource, Workspace};
use chronicle_engine::{Engine, Principal, StartRun};
use chronicle_schemas::{Decision, Envelope, Event, HitlMode, RunId};
use chronicle_testkit::model::{Reply, TestServer};
use serde_json::{Value, json};

use crate::llm_support::{KEY, agent_of, calls, last_results, turn_of};
use crate::mcp_support::{self, HttpServer, Via, count, logged};
use crate::support::{announced_run, completed, engine_child, events, open_engine};

const WAIT: Duration = Duration::from_secs(30);

/// A test's scratch directory, the server's call log, and the HTTP server when over HTTP.
struct Setup {
    dir: tempfile::TempDir,
    log: PathBuf,
    http: Option<HttpServer>,
}

impl Setup {
    fn new(over_http: bool) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let http = over_http.then(|| HttpServer::start(&log, 0, None));
        Setup { dir, log, http }
    }

    fn via(&self) -> Via {
        match &self.http {
            Some(h) => Via::Http(h.url()),
            None => Via::Stdio,
        }
    }

    fn entry(&self, extra: &str) -> String {
        self.via().entry(&self.log, extra)
    }

    async fn engine(
        &self,
        model: &TestServer,
        extra: &str,
    ) -> (Engine, Vec<chronicle_mcp::McpServer>) {
        let (settings, servers) = mcp_support::settings(&model.base_url, &self.entry(extra)).await;
        let engine = open_engine(&self.dir.path().join("data"), settings).await;
        (engine, servers)
    }
}

async fn start(engine: &Engine, hitl: HitlMode) -> RunId {
    engine
        .start_run(StartRun {
            query: "Use the tools.".into(),
            session_id: Some("mcp-session".into()),
            hitl: Some(hitl),
            agent: Some("operator".into()),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .run_id
}

/// The run's tool calls as recorded: (tool, args, server).
fn requested(evs: &[Envelope]) -> Vec<(String, Value, Option<String>)> {
    evs.iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallRequested {
                tool, args, server, ..
            } => Some((tool.clone(), args.clone(), server.clone())),
            _ => None,
        })
        .collect()
}

/// The model's request for the operator's turn `turn`.
fn request(model: &TestServer, turn: usize) -> Value {
    model
        .requests()
        .into_iter()
        .rev()
        .find(|r| agent_of(&r.body) == "operator" && turn_of(&r.body) == turn)
        .unwrap_or_else(|| panic!("no request for turn {turn}"))
        .body
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn answer(s: &chronicle_engine::RunState) -> Value {
    s.supervisor.final_response.as_ref().unwrap()["answer"].clone()
}

// ---- tools listed, called and recorded ----

async fn listed_called_and_recorded(over_http: bool) {
    let setup = Setup::new(over_http);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[
            ("t_echo", json!({"text": "hi"})),
            ("t_add", json!({"a": 2, "b": 3})),
        ]),
        2 => calls(&[("t_big", json!({"n": 40_000}))]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, servers) = setup.engine(&model, "").await;
    let pids = servers[0].pids().await;
    assert_eq!(
        pids.len(),
        usize::from(!over_http),
        "a stdio server is our child"
    );
    let run = start(&engine, HitlMode::None).await;
    let s = completed(&engine, run).await;
    assert_eq!(answer(&s), "done");

    // The model was shown the server's tools, prefixed, with their descriptions and schemas.
    let first = request(&model, 1);
    let names = tool_names(&first);
    for t in ["t_echo", "t_add", "t_slow", "t_drop_table", "write_todos"] {
        assert!(names.contains(&t.to_owned()), "{t} in {names:?}");
    }
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "t_echo")
        .unwrap();
    assert_eq!(echo["function"]["description"], "Echoes the text back.");
    assert_eq!(
        echo["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(
        last_results(&request(&model, 2)),
        [r#"{"result":"hi"}"#, r#"{"result":5}"#]
    );
    // The large result went to the workspace, as built-in tools' do.
    let big: Value = serde_json::from_str(&last_results(&request(&model, 3))[0]).unwrap();
    assert_eq!(big["offloaded"], true, "{big}");
    let path = big["path"].as_str().unwrap();
    let on_disk = setup
        .dir
        .path()
        .join("data/workspaces/mcp-session")
        .join(path.strip_prefix("/workspace/").unwrap());
    assert!(
        std::fs::read_to_string(&on_disk)
            .unwrap()
            .contains(&"x".repeat(40_000)),
        "{}",
        on_disk.display()
    );

    // Every call is recorded with its args and server, and completed with its outcome.
    let evs = events(&engine, run);
    let t = Some("t".to_owned());
    assert_eq!(
        requested(&evs),
        [
            ("t_echo".to_owned(), json!({"text": "hi"}), t.clone()),
            ("t_add".to_owned(), json!({"a": 2, "b": 3}), t.clone()),
            ("t_big".to_owned(), json!({"n": 40_000}), t.clone()),
        ]
    );
    let outcomes: Vec<(bool, bool)> = evs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallCompleted { output, error, .. } => {
                Some((output.is_some(), error.is_some()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, [(true, false); 3]);
    // The server got each call once, with the call's idempotency key.
    let got = logged(&setup.log);
    assert_eq!(got.len(), 3, "{got:?}");
    let todo = &s.supervisor.planning_state.as_ref().unwrap().todos[0].id;
    for (i, call) in got.iter().enumerate() {
        let index = [1, 2, 4][i]; // after the model's turns 1 (index 0) and 2 (index 3)
        assert_eq!(
            call["key"],
            json!(format!("{run}/{todo}/1/{index}")),
            "{call}"
        );
    }

    engine.shutdown().await;
    for pid in pids {
        mcp_support::wait_gone(pid).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_called_and_recorded_over_stdio() {
    listed_called_and_recorded(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_called_and_recorded_over_http() {
    listed_called_and_recorded(true).await;
}

// ---- gated calls ----

async fn gated_calls(over_http: bool) {
    let setup = Setup::new(over_http);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[("t_drop_table", json!({"table": "sales"}))]),
        2 => calls(&[("t_echo", json!({"text": "secret"}))]),
        3 => calls(&[("t_echo", json!({"text": "draft"}))]),
        4 => calls(&[("t_add", json!({"a": 1, "b": 1}))]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, _servers) = setup.engine(&model, "gated = [\"echo\"]").await;
    let run = start(&engine, HitlMode::Tools).await;
    let alice = Principal::admin("alice");
    let decisions = [
        ("t_drop_table", Decision::Approve, None, None),
        (
            "t_echo",
            Decision::Reject,
            None,
            Some("no secrets".to_owned()),
        ),
        (
            "t_echo",
            Decision::Edit,
            Some(json!({"text": "final"})),
            None,
        ),
    ];
    for (tool, decision, edited, comment) in decisions {
        let s = engine.wait_settled(run, WAIT).await.unwrap();
        let pending: Vec<_> = s.approvals.pending().cloned().collect();
        assert_eq!(pending.len(), 1, "{tool}");
        assert_eq!(pending[0].tool_name, tool);
        assert_eq!(pending[0].request_preview["server"], "t");
        engine
            .decide(
                run,
                pending[0].approval_id.clone(),
                decision,
                edited,
                &alice,
                comment,
            )
            .await
            .unwrap();
    }
    let s = completed(&engine, run).await;
    assert_eq!(answer(&s), "done");
    let rejected = &last_results(&request(&model, 3))[0];
    assert!(
        rejected.starts_with("rejected: ") && rejected.contains("no secrets"),
        "{rejected}"
    );
    assert_eq!(last_results(&request(&model, 4)), [r#"{"result":"final"}"#]);
    // The server got the approved call, the edited one with the edit, and the ungated one;
    // never the rejected or the unedited args.
    let got: Vec<(Value, Value)> = logged(&setup.log)
        .into_iter()
        .map(|c| (c["tool"].clone(), c["args"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!("drop_table"), json!({"table": "sales"})),
            (json!("echo"), json!({"text": "final"})),
            (json!("add"), json!({"a": 1, "b": 1})),
        ]
    );
    let asked = events(&engine, run)
        .iter()
        .filter(|e| e.event.kind() == "ApprovalRequested")
        .count();
    assert_eq!(
        asked, 3,
        "destructiveHint and `gated` are gated; add is not"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_calls_are_approved_rejected_and_edited_over_stdio() {
    gated_calls(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_calls_are_approved_rejected_and_edited_over_http() {
    gated_calls(true).await;
}

// ---- args checked against the schema ----

async fn bad_args(over_http: bool) {
    let setup = Setup::new(over_http);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[
            ("t_add", json!({"a": "two", "b": 3})),
            ("t_echo", json!({})),
        ]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, _servers) = setup.engine(&model, "").await;
    let run = start(&engine, HitlMode::None).await;
    completed(&engine, run).await;
    assert_eq!(
        last_results(&request(&model, 2)),
        [
            r#"refused: t_add was not called: the arguments do not match the tool's input schema: `/a`: "two" is not of type "integer""#,
            r#"refused: t_echo was not called: the arguments do not match the tool's input schema: "text" is a required property"#,
        ]
    );
    assert!(logged(&setup.log).is_empty(), "nothing reached the server");
    assert_eq!(requested(&events(&engine, run)).len(), 2, "both recorded");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn args_that_fail_the_schema_are_refused_unsent_over_stdio() {
    bad_args(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn args_that_fail_the_schema_are_refused_unsent_over_http() {
    bad_args(true).await;
}

// ---- a slow tool ----

async fn slow_tool(over_http: bool) {
    let setup = Setup::new(over_http);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[("t_slow", json!({"seconds": 30}))]),
        2 => calls(&[("t_echo", json!({"text": "after"}))]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, _servers) = setup.engine(&model, "timeout_ms = 700").await;
    let run = start(&engine, HitlMode::None).await;
    completed(&engine, run).await;
    assert_eq!(
        last_results(&request(&model, 2)),
        ["failed: timed out after 700 ms; the call was cancelled"]
    );
    assert_eq!(last_results(&request(&model, 3)), [r#"{"result":"after"}"#]);
    let got = logged(&setup.log);
    assert_eq!(
        got[0]["pid"], got[1]["pid"],
        "a slow tool is no reason to restart"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_times_out_over_stdio() {
    slow_tool(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_times_out_over_http() {
    slow_tool(true).await;
}

// ---- a server killed mid-call ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_killed_mid_call_fails_the_call_and_is_restarted() {
    let setup = Setup::new(false);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[("t_die", json!({}))]),
        2 => calls(&[("t_echo", json!({"text": "again"}))]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, servers) = setup.engine(&model, "").await;
    let first = servers[0].pids().await;
    let run = start(&engine, HitlMode::None).await;
    completed(&engine, run).await;
    assert_eq!(
        last_results(&request(&model, 2)),
        [
            "failed: MCP server `t` was killed by signal 9 during the call; the call's outcome is unknown, and the server is restarted for the next call"
        ]
    );
    assert_eq!(last_results(&request(&model, 3)), [r#"{"result":"again"}"#]);
    let got = logged(&setup.log);
    assert_ne!(got[0]["pid"], got[1]["pid"], "a new process answered");
    mcp_support::wait_gone(first[0]).await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_stdio_server_times_out_and_is_restarted() {
    let setup = Setup::new(false);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[("t_hang", json!({}))]),
        2 => calls(&[("t_echo", json!({"text": "alive"}))]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, servers) = setup.engine(&model, "timeout_ms = 700").await;
    let hung = servers[0].pids().await;
    let run = start(&engine, HitlMode::None).await;
    completed(&engine, run).await;
    assert_eq!(
        last_results(&request(&model, 2)),
        [
            "failed: timed out after 700 ms; the call was cancelled, and MCP server `t` does not answer a ping either: it is restarted for the next call"
        ]
    );
    assert_eq!(last_results(&request(&model, 3)), [r#"{"result":"alive"}"#]);
    mcp_support::wait_gone(hung[0]).await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_killed_mid_call_fails_the_call_and_is_reconnected() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let mut http = HttpServer::start(&log, 0, None);
    let mut registry = ToolRegistry::builtin();
    let entry = mcp_support::http("t", &http.url());
    let _server = chronicle_mcp::connect(&entry, &mut registry).await.unwrap();
    let ctx = ToolContext::detached(Workspace::at(dir.path().join("ws")));
    let err = registry
        .get("t_die")
        .unwrap()
        .call(&ctx, json!({}))
        .await
        .unwrap_err();
    assert!(
        err.starts_with("MCP server `t` lost its connection (")
            && err.ends_with(
                "during the call; the call's outcome is unknown, and the server is restarted for the next call"
            ),
        "{err}"
    );
    http.wait_dead();
    let echo = registry.get("t_echo").unwrap();
    let down = echo.call(&ctx, json!({"text": "down"})).await.unwrap_err();
    assert!(
        down.starts_with("MCP server `t` is not available: the MCP handshake failed: ")
            && down.contains("error sending request"),
        "{down}"
    );
    http.restart();
    let out = echo.call(&ctx, json!({"text": "back"})).await.unwrap();
    assert_eq!(out, json!({"result": "back"}));
    assert_eq!(count(&log, "echo"), 1);
}

// ---- a changed tool list ----

async fn list_changed(over_http: bool) {
    let setup = Setup::new(over_http);
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[("t_grow", json!({}))]),
        2 => calls(&[("t_extra", json!({}))]),
        _ => Reply::Content("done".into()),
    })
    .await;
    let (engine, _servers) = setup.engine(&model, "").await;
    let run = start(&engine, HitlMode::None).await;
    completed(&engine, run).await;
    assert!(!tool_names(&request(&model, 1)).contains(&"t_extra".to_owned()));
    assert!(
        tool_names(&request(&model, 2)).contains(&"t_extra".to_owned()),
        "offered at the turn after the list changed"
    );
    assert_eq!(
        last_results(&request(&model, 3)),
        [r#"{"result":"extra here"}"#]
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_offered_at_the_next_turn_over_stdio() {
    list_changed(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_offered_at_the_next_turn_over_http() {
    list_changed(true).await;
}

// ---- SIGKILL of the engine ----

async fn sigkill(over_http: bool) {
    let setup = Setup::new(over_http);
    // Turn 3 hangs while the child lives: the kill comes after turns 1–2 and their calls were
    // recorded, while the model works on turn 3.
    let hang = Arc::new(AtomicBool::new(true));
    let hang_now = hang.clone();
    let model = TestServer::start(Some(KEY), move |body| {
        let reply = match turn_of(body) {
            1 => calls(&[("t_echo", json!({"text": "one"}))]),
            2 => calls(&[("t_add", json!({"a": 1, "b": 2}))]),
            _ => Reply::Content("done".into()),
        };
        if turn_of(body) == 3 && hang_now.load(Ordering::SeqCst) {
            Reply::Delay(Duration::from_secs(3600), Box::new(reply))
        } else {
            reply
        }
    })
    .await;
    let entry_file = setup.dir.path().join("entry.toml");
    std::fs::write(&entry_file, setup.entry("")).unwrap();
    let data = setup.dir.path().join("data");
    let mut child = engine_child(&[
        Path::new("mcp"),
        data.as_path(),
        Path::new(&model.base_url),
        entry_file.as_path(),
    ]);
    let run = announced_run(&mut child);
    let asked = |turn| {
        model
            .requests()
            .iter()
            .filter(|r| turn_of(&r.body) == turn)
            .count()
    };
    for _ in 0..1500 {
        if asked(3) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(asked(3), 1, "turn 3 was asked");
    child.kill().unwrap();
    child.wait().unwrap();
    hang.store(false, Ordering::SeqCst);
    assert_eq!(
        (count(&setup.log, "echo"), count(&setup.log, "add")),
        (1, 1)
    );

    let (engine, _servers) = setup.engine(&model, "").await;
    let s = completed(&engine, run).await;
    assert_eq!(answer(&s), "done");
    assert_eq!(
        (count(&setup.log, "echo"), count(&setup.log, "add")),
        (1, 1),
        "the recorded calls were answered from the log, not sent again"
    );
    assert_eq!((asked(1), asked(2), asked(3), asked(4)), (1, 1, 2, 0));
    assert_eq!(requested(&events(&engine, run)).len(), 2);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_recorded_calls_are_not_sent_again_over_stdio() {
    sigkill(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_recorded_calls_are_not_sent_again_over_http() {
    sigkill(true).await;
}

// ---- session scope ----

/// The data domain's shape: a session-scoped server with no prefix. Each conversation gets its
/// own process, in its own workspace; an idle one is stopped (and reaped), and the next call
/// starts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_scoped_server_runs_per_workspace_and_stops_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let config = chronicle_mcp::McpServerConfig {
        prefix: Some(String::new()),
        scope: chronicle_mcp::Scope::Session,
        idle_ms: Some(1500),
        ..mcp_support::stdio("data", &log)
    };
    let mut registry = ToolRegistry::builtin();
    let server = chronicle_mcp::connect(&config, &mut registry)
        .await
        .unwrap();
    assert!(server.tool_names().contains(&"write_note".to_owned()));
    assert!(registry.get("where").is_some() && registry.get("data_where").is_none());
    assert!(
        server.pids().await.is_empty(),
        "the listing process was stopped"
    );

    let ws = |name: &str| Workspace::at(dir.path().join("workspaces").join(name));
    let where_ = registry.get("where").unwrap();
    let mut pids = Vec::new();
    for name in ["a", "b"] {
        let ctx = ToolContext::detached(ws(name));
        let at = where_.call(&ctx, json!({})).await.unwrap();
        let cwd = std::path::absolute(ws(name).root()).unwrap();
        assert_eq!(
            at["cwd"],
            json!(cwd.to_string_lossy()),
            "{name} runs in its workspace"
        );
        pids.push(at["pid"].as_u64().unwrap() as u32);
    }
    assert_ne!(pids[0], pids[1], "one process per conversation");
    let note = registry.get("write_note").unwrap();
    note.call(
        &ToolContext::detached(ws("a")),
        json!({"name": "n.txt", "text": "hello"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws("a").root().join("n.txt")).unwrap(),
        "hello"
    );
    for _ in 0..400 {
        if server.pids().await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(server.pids().await.is_empty(), "idle processes are stopped");
    for pid in &pids {
        mcp_support::wait_gone(*pid).await;
    }
    let again = where_
        .call(&ToolContext::detached(ws("a")), json!({}))
        .await
        .unwrap();
    let pid = again["pid"].as_u64().unwrap() as u32;
    assert!(!pids.contains(&pid), "a new process");
    server.stop().await;
    mcp_support::wait_gone(pid).await;
}

// ---- bad entries ----

/// What loading `toml` (MCP servers and the operator) says, and that it changed nothing.
async fn refused(toml: &str) -> String {
    let mut s = chronicle_generic::settings();
    let before = s.tools.names();
    let err = chronicle_generic::load_config_in(
        &mut s.registry,
        &mut s.tools,
        &format!("{toml}\n{}", mcp_support::AGENT),
        Path::new("."),
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(s.tools.names(), before, "no tool registered");
    assert!(s.registry.is_empty(), "no agent registered");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_entries_are_refused_at_start_with_the_server_and_reason_named() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let py = mcp_support::python();
    let server = mcp_support::server_py();
    let good = Via::Stdio.entry(&log, "");
    assert_eq!(
        refused("[[mcp_server]]\nname = \"t\"\ncommand = \"/no/such/mcp-server\"").await,
        "mcp_server `t`: cannot start: command \"/no/such/mcp-server\" not found"
    );
    let not_mcp = format!(
        "[[mcp_server]]\nname = \"t\"\ncommand = {py:?}\nargs = [\"-c\", \"print('hello')\"]"
    );
    let err = refused(&not_mcp).await;
    assert!(
        err.starts_with("mcp_server `t`: cannot start: the MCP handshake failed: ")
            && err.ends_with("the process exited with exit status: 0 (its stderr is in the log)"),
        "{err}"
    );
    let dup =
        format!("[[mcp_server]]\nname = \"t\"\ncommand = {py:?}\nargs = [{server:?}, \"dup\"]");
    assert_eq!(
        refused(&dup).await,
        "mcp_server `t` lists two tools named \"same\""
    );
    let builtin = format!(
        "[[mcp_server]]\nname = \"t\"\nprefix = \"\"\ncommand = {py:?}\nargs = [{server:?}, \"stdio\"]\nenv = {{ MCP_TEST_EXTRA_TOOL = \"read_file\" }}"
    );
    assert_eq!(
        refused(&builtin).await,
        "mcp_server `t`: tool \"read_file\" is a built-in tool already"
    );
    let twice = format!(
        "{good}\n{}",
        good.replace("name = \"t\"", "name = \"u\"\nprefix = \"t\"")
    );
    assert_eq!(
        refused(&twice).await,
        "mcp_server `u`: tool \"t_add\" is a tool of t already"
    );
    let err = refused(&Via::Stdio.entry(&log, "gated = [\"nope\"]")).await;
    assert!(
        err.starts_with(
            "mcp_server `t`: `gated` names \"nope\", which the server does not list; it lists: "
        ),
        "{err}"
    );
    // An agent naming a tool no server has: the servers started for the config are stopped.
    let err = refused(&format!(
        "{good}\n[[agent]]\nname = \"x\"\nkind = \"llm\"\nsystem_prompt = \"p\"\ntools = [\"u_*\"]"
    ))
    .await;
    assert!(
        err.starts_with("agent `x`: `tools`: pattern \"u_*\" matches no tool; known: "),
        "{err}"
    );
    assert!(logged(&log).is_empty());
}
