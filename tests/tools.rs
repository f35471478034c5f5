//! Tool calls as events: gated calls (approve, edit, reject and the host's refusal of a rejected
//! call), traversal through the host, durable re-execution across a real SIGKILL, `task`
//! sub-agent runs (also across a SIGKILL), offloading, and the `document_team` demo.

use chronicle_engine::Principal;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use chronicle_engine::{Engine, RestoreTarget, Settings, StartRun, child_run_id};
use chronicle_projections::RunState;
use chronicle_schemas::{ApprovalStatus, Event, HitlMode, RunConfig, RunId, RunStatus, Subject};
use serde_json::{Value, json};

use crate::support::{self, approve, completed, edit, open_engine, reject};
use crate::tool_agents::{self, runner_plan, write};

const WAIT: Duration = Duration::from_secs(30);

fn settings() -> Settings {
    Settings {
        registry: tool_agents::registry(None, false),
        ..chronicle_realestate::settings()
    }
}

async fn start(engine: &Engine, hitl: HitlMode, session: &str, calls: Value) -> RunId {
    engine
        .start_run(StartRun {
            query: "tool test".into(),
            session_id: Some(session.into()),
            config: Some(RunConfig {
                hitl,
                plan: Some(runner_plan(calls)),
                ..RunConfig::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .run_id
}

/// The `tool_runner` answers of a finished run.
fn answers(s: &RunState) -> Vec<Value> {
    s.supervisor.team_results["tool_runner"]["answers"]
        .as_array()
        .unwrap()
        .clone()
}

fn events(engine: &Engine, run: RunId) -> Vec<Event> {
    support::events(engine, run)
        .into_iter()
        .map(|e| e.event)
        .collect()
}

fn kinds(engine: &Engine, run: RunId, of: &[&str]) -> Vec<&'static str> {
    events(engine, run)
        .iter()
        .map(|e| e.kind())
        .filter(|k| of.contains(k))
        .collect()
}

/// The one pending approval, once the agent waits on it.
async fn pending_tool_approval(engine: &Engine, run: RunId) -> chronicle_schemas::Approval {
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let pending: Vec<_> = s.approvals.pending().cloned().collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(matches!(pending[0].subject, Some(Subject::ToolCall { .. })));
    pending[0].clone()
}

#[tokio::test]
async fn gated_calls_run_as_approved_edited_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), settings()).await;
    let ws = dir.path().join("workspaces/gated");

    // approve: runs with the original args.
    let run = start(
        &engine,
        HitlMode::Tools,
        "gated",
        json!([write("/workspace/a.txt", "one\ntwo\n")]),
    )
    .await;
    let a = pending_tool_approval(&engine, run).await;
    assert_eq!(a.tool_name, "write_file");
    assert_eq!(a.request_preview["file_path"], "/workspace/a.txt");
    assert_eq!(a.request_preview["line_count"], 2);
    assert!(
        !ws.join("a.txt").exists(),
        "nothing runs before the human says so"
    );
    approve(&engine, run, a.approval_id, "alice").await;
    let s = completed(&engine, run).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(answers(&s)[0]["ok"]["file_path"], "/workspace/a.txt");
    assert_eq!(
        kinds(
            &engine,
            run,
            &[
                "ToolCallRequested",
                "ApprovalRequested",
                "ApprovalDecided",
                "ToolCallCompleted"
            ]
        ),
        [
            "ToolCallRequested",
            "ApprovalRequested",
            "ApprovalDecided",
            "ToolCallCompleted"
        ]
    );

    // edit: runs with the edited args, recorded as the effective args.
    let run = start(
        &engine,
        HitlMode::Tools,
        "gated",
        json!([write("/workspace/b.txt", "draft")]),
    )
    .await;
    let a = pending_tool_approval(&engine, run).await;
    let edited = json!({"file_path": "/workspace/b.txt", "content": "edited by bob"});
    let decided = edit(&engine, run, a.approval_id, "bob", edited.clone()).await;
    assert_eq!(decided.status, ApprovalStatus::Edited);
    let s = completed(&engine, run).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("b.txt")).unwrap(),
        "edited by bob"
    );
    let call = &s.supervisor.tool_calls[0];
    assert_eq!(call.effective_args.as_ref(), Some(&edited));
    assert_eq!(
        call.args["content"], "draft",
        "the request keeps what the agent asked"
    );

    // reject: the file is never written, and the agent's repeat is refused by the host.
    let c = write("/workspace/c.txt", "nope");
    let run = start(&engine, HitlMode::Tools, "gated", json!([c.clone(), c])).await;
    let a = pending_tool_approval(&engine, run).await;
    reject(&engine, run, a.approval_id, "carol", Some("not now")).await;
    let s = completed(&engine, run).await;
    assert!(!ws.join("c.txt").exists());
    let got = answers(&s);
    assert_eq!(got[0]["error"], "rejected: rejected by carol: not now");
    assert_eq!(
        got[1]["error"],
        "refused: a human rejected write_file with these args in this attempt; it is not called again"
    );
    // One request for a human; the repeat is recorded as a call refused without asking.
    assert_eq!(
        kinds(
            &engine,
            run,
            &[
                "ToolCallRequested",
                "ApprovalRequested",
                "ToolCallCompleted"
            ]
        ),
        [
            "ToolCallRequested",
            "ApprovalRequested",
            "ToolCallCompleted",
            "ToolCallRequested",
            "ToolCallCompleted"
        ]
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn the_host_refuses_paths_out_of_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), settings()).await;
    let before: Vec<_> = walk(dir.path());
    let long = format!("/workspace/{}", "a".repeat(10_000));
    let calls = json!([
        write("../x", "x"),
        {"tool": "read_file", "args": {"file_path": "/etc/passwd"}},
        write("/workspace/../../x", "x"),
        write("/workspace/a\u{0}b", "x"),
        write(&long, "x"),
        {"tool": "shell", "args": {"command": "rm -rf /"}},
    ]);
    let run = start(&engine, HitlMode::None, "escape", calls).await;
    let s = completed(&engine, run).await;
    let got = answers(&s);
    assert_eq!(got.len(), 6);
    for (i, a) in got.iter().enumerate() {
        let e = a["error"]
            .as_str()
            .unwrap_or_else(|| panic!("call {i} was not refused: {a}"));
        assert!(
            e.starts_with("failed: ") || e.starts_with("refused: "),
            "{e}"
        );
    }
    assert!(
        got[1]["error"].as_str().unwrap().contains("/etc/passwd"),
        "{}",
        got[1]
    );
    assert!(
        got[5]["error"]
            .as_str()
            .unwrap()
            .starts_with("refused: unknown tool \"shell\"")
    );
    // Nothing was written outside the store's own files.
    let after: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| !before.contains(p))
        .filter(|p| !p.starts_with(dir.path().join("sled")))
        .collect();
    assert!(
        after
            .iter()
            .all(|p| p.starts_with(dir.path().join("workspaces/escape"))
                || p.starts_with(dir.path().join("blobs"))),
        "{after:?}"
    );
    assert!(!dir.path().join("x").exists() && !dir.path().parent().unwrap().join("x").exists());
    engine.shutdown().await;
}

fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

#[tokio::test]
async fn large_outputs_are_offloaded_to_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        tool_output_offload_bytes: 1024,
        ..settings()
    };
    let engine = open_engine(dir.path(), settings).await;
    let big = "line of text\n".repeat(500);
    let run = start(
        &engine,
        HitlMode::None,
        "offload",
        json!([write("/workspace/big.txt", &big), {"tool": "read_file", "args": {"file_path": "/workspace/big.txt"}}, write("/workspace/huge.txt", &"y".repeat(30_000))]),
    )
    .await;
    let s = completed(&engine, run).await;
    let read = &answers(&s)[1]["ok"];
    let too_big = &answers(&s)[2]["error"];
    assert!(
        too_big
            .as_str()
            .unwrap()
            .starts_with("refused: the call's args are 30"),
        "{too_big}"
    );
    assert!(!dir.path().join("workspaces/offload/huge.txt").exists());
    assert_eq!(read["offloaded"], true, "{read}");
    let path = read["path"].as_str().unwrap();
    assert!(path.starts_with("/workspace/large_tool_results/"), "{path}");
    let on_disk = dir
        .path()
        .join("workspaces/offload")
        .join(path.strip_prefix("/workspace/").unwrap());
    let saved: Value = serde_json::from_slice(&std::fs::read(on_disk).unwrap()).unwrap();
    assert_eq!(
        saved["content"].as_str().unwrap(),
        big.trim_end_matches('\n')
    );
    engine.shutdown().await;
}

/// Reads the child's stdout until a line starting with `marker`; returns the `RUN` id.
fn read_until(child: &mut std::process::Child, marker: &str) -> RunId {
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut run = None;
    loop {
        let line = lines.next().expect("child output").unwrap();
        if let Some(r) = line.strip_prefix("RUN ") {
            run = Some(r.parse().unwrap());
        }
        if line.starts_with(marker) {
            return run.expect("RUN before the marker");
        }
    }
}

fn spawn_child(mode: &str, dir: &Path) -> std::process::Child {
    support::engine_child(&[mode, dir.to_str().unwrap()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_calls_then_only_the_unrecorded_call_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("tools", dir.path());
    let run = read_until(&mut child, "HANGING");
    child.kill().unwrap();
    child.wait().unwrap();
    let log = dir.path().join("executions.log");
    let executed = || std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(executed().lines().count(), 2, "two writes before the kill");

    let settings = Settings {
        registry: tool_agents::registry(None, false),
        tools: tool_agents::counting_tools(log.clone()),
        ..chronicle_realestate::settings()
    };
    let engine = open_engine(dir.path(), settings).await;
    let s = completed(&engine, run).await;
    let keys: Vec<String> = executed().lines().map(str::to_owned).collect();
    assert_eq!(
        keys,
        (0..3)
            .map(|i| format!("{run}/todo_001/1/{i}"))
            .collect::<Vec<_>>(),
        "the first two ran once, the third once"
    );
    let ws = dir.path().join("workspaces/tool-session");
    for (f, c) in [("one.txt", "1"), ("two.txt", "2"), ("three.txt", "3")] {
        assert_eq!(std::fs::read_to_string(ws.join(f)).unwrap(), c);
    }
    assert!(answers(&s).iter().all(|a| a["ok"]["file_path"].is_string()));
    // The same attempt ran twice; each call was requested once.
    let ev = events(&engine, run);
    let started: Vec<u32> = ev
        .iter()
        .filter_map(|e| match e {
            Event::AgentStarted { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(started, [1, 1]);
    assert_eq!(
        ev.iter()
            .filter(|e| e.kind() == "ToolCallRequested")
            .count(),
        3
    );
    assert_eq!(
        ev.iter()
            .filter(|e| e.kind() == "ToolCallCompleted")
            .count(),
        3
    );
    engine.shutdown().await;
}

fn task_call() -> Value {
    json!([{"tool": "task", "args": {"description": "look it up", "subagent_type": "sub_worker", "input": {"k": 1}}}])
}

/// The child of the run's one `task` call, checked against the parent's answer and `/todos`.
async fn check_task(engine: &Engine, run: RunId) {
    let s = completed(engine, run).await;
    let call = &s.supervisor.tool_calls[0];
    let child = child_run_id(run, &call.tool_call_id);
    let out = &answers(&s)[0]["ok"];
    assert_eq!(out["run_id"], json!(child), "{out}");
    assert_eq!(out["status"], "completed");
    let cs = engine.state(child, None).unwrap();
    assert_eq!(out["final_response"], json!(cs.supervisor.final_response));
    assert_eq!(
        cs.supervisor.team_results["sub_worker"]["answer"],
        "sub-task done: look it up"
    );
    // The child has its own stream, linked to the parent's call.
    match &events(engine, child)[0] {
        Event::RunStarted {
            parent: Some(p),
            query,
            traceparent,
            ..
        } => {
            assert_eq!((p.run_id, &p.tool_call_id), (run, &call.tool_call_id));
            assert_eq!(query, "look it up");
            // Its trace continues the parent's, under the `task` call's span.
            let key = chronicle_projections::trace::SpanKey::Tool {
                tool_call_id: call.tool_call_id.0.clone(),
            };
            let expected = chronicle_projections::trace::traceparent_of(run, None, &key);
            assert_eq!(traceparent.clone(), Some(expected.to_string()));
        }
        other => panic!("{other:?}"),
    }
    let todos = serde_json::to_value(
        engine
            .command(run, "/todos", &Principal::admin("alice"))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(todos["sub_runs"][0]["run_id"], json!(child), "{todos}");
    assert_eq!(todos["sub_runs"][0]["status"], "completed");
}

#[tokio::test]
async fn task_returns_the_child_runs_final_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), settings()).await;
    let run = start(&engine, HitlMode::None, "task", task_call()).await;
    check_task(&engine, run).await;
    // An unknown sub-agent is the call's error, not a crash.
    let bad = json!([{"tool": "task", "args": {"description": "x", "subagent_type": "nobody"}}]);
    let run = start(&engine, HitlMode::None, "task", bad).await;
    let s = completed(&engine, run).await;
    let e = answers(&s)[0]["error"].as_str().unwrap().to_owned();
    assert!(
        e.starts_with("failed: unknown subagent_type \"nobody\""),
        "{e}"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_the_child_runs_then_both_complete() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("task", dir.path());
    let run = read_until(&mut child, "CHILD_STARTED");
    child.kill().unwrap();
    child.wait().unwrap();

    let engine = open_engine(dir.path(), settings()).await;
    check_task(&engine, run).await;
    let runs = engine.store().runs().count();
    assert_eq!(
        runs, 2,
        "the call found its child again instead of starting another"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn document_team_saves_its_draft_through_the_tool_host() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), chronicle_realestate::settings()).await;
    let query =
        "Draft a lease contract: landlord Kim Minsu, tenant John Smith, deposit 500 million won";
    let run = engine
        .start_run(StartRun {
            query: query.into(),
            session_id: Some("docs".into()),
            hitl: Some(HitlMode::Tools),
            ..Default::default()
        })
        .await
        .unwrap()
        .run_id;
    let a = pending_tool_approval(&engine, run).await;
    assert_eq!(a.tool_name, "write_file");
    let path = a.request_preview["file_path"].as_str().unwrap().to_owned();
    assert!(path.starts_with("/workspace/documents/"), "{path}");
    let out = serde_json::to_value(
        engine
            .command(run, "/todo approve", &Principal::admin("alice"))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .ends_with("의 write_file 도구 호출이 승인되었습니다."),
        "{out}"
    );
    let s = completed(&engine, run).await;
    let saved = &s.supervisor.team_results["document_team"]["saved_document"];
    assert_eq!(saved["file_path"], json!(path));
    let file = dir
        .path()
        .join("workspaces/docs")
        .join(path.strip_prefix("/workspace/").unwrap());
    assert!(
        std::fs::read_to_string(file)
            .unwrap()
            .contains("John Smith")
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_restore_asks_again_and_a_skip_answers_the_waiting_call() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), settings()).await;
    let ws = dir.path().join("workspaces/again");

    // Restore to the request itself: the agent re-runs the same attempt, finds its recorded
    // call, and the call is asked again under a new id (the old one was cancelled).
    let run = start(
        &engine,
        HitlMode::Tools,
        "again",
        json!([write("/workspace/r.txt", "r")]),
    )
    .await;
    let first = pending_tool_approval(&engine, run).await;
    engine
        .restore(
            run,
            RestoreTarget::Seq(first.requested_seq),
            &Principal::admin("alice"),
        )
        .await
        .unwrap();
    let second = pending_tool_approval(&engine, run).await;
    assert_ne!(second.approval_id, first.approval_id);
    assert_eq!(second.subject, first.subject, "the same recorded call");
    let s = engine.state(run, None).unwrap();
    assert_eq!(
        s.approvals.get(&first.approval_id).unwrap().status,
        ApprovalStatus::Cancelled
    );
    approve(&engine, run, second.approval_id, "alice").await;
    completed(&engine, run).await;
    assert_eq!(std::fs::read_to_string(ws.join("r.txt")).unwrap(), "r");
    assert_eq!(kinds(&engine, run, &["ToolCallRequested"]).len(), 1);

    // Skipping the TODO whose agent waits answers the call's approval: nothing stays pending.
    let run = start(
        &engine,
        HitlMode::Tools,
        "again",
        json!([write("/workspace/s.txt", "s")]),
    )
    .await;
    let a = pending_tool_approval(&engine, run).await;
    let out = engine
        .command(
            run,
            "/todo skip todo_001 not needed",
            &Principal::admin("bob"),
        )
        .await
        .unwrap();
    assert!(
        matches!(out, chronicle_wire::CommandOutcome::Skipped(_)),
        "{out:?}"
    );
    let s = engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    let decided = s.approvals.get(&a.approval_id).unwrap();
    assert_eq!(decided.status, ApprovalStatus::Rejected);
    assert_eq!(decided.comment.as_deref(), Some("not needed"));
    assert_eq!(s.approvals.pending().count(), 0);
    assert!(!ws.join("s.txt").exists());
    engine.shutdown().await;
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_running_child() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        registry: tool_agents::registry(None, true),
        ..chronicle_realestate::settings()
    };
    let engine = open_engine(dir.path(), settings).await;
    let run = start(&engine, HitlMode::None, "cancel", task_call()).await;
    let s = engine
        .wait_until(run, WAIT, |s| !s.supervisor.tool_calls.is_empty())
        .await
        .unwrap();
    let child = child_run_id(run, &s.supervisor.tool_calls[0].tool_call_id);
    // The child's agent is running (and never finishes on its own).
    let running = async {
        loop {
            if let Ok(cs) = engine.state(child, None)
                && cs.supervisor.active_teams.iter().any(|t| t == "sub_worker")
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(WAIT, running)
        .await
        .expect("the child never started its agent");
    engine
        .cancel(run, &Principal::admin("alice"), None)
        .await
        .unwrap();
    let cs = engine
        .wait_until(child, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    assert_eq!(cs.supervisor.run_status, RunStatus::Cancelled);
    engine.shutdown().await;
}
