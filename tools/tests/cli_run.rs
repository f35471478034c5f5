//! `run`, `chat` and `audit` through the real binary: a user adding a TODO in the REPL, the
//! Gangnam-station price query, approvals that wait for a human, the audit export and its
//! verification (and tampering), bad arguments, the same against a real server on loopback, and a
//! model's answer printed as it streams (a scripted model on loopback).

use chronicle_engine::Principal;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{HitlMode, RunId, RunStatus, TodoStatus};
use chronicle_testkit::model::{Gate, Piece, Reply, TestServer};
use serde_json::Value;

/// The Gangnam-station price query: a sale-price search with a region, a size and a deal type.
pub(crate) const GANGNAM_STATION_QUERY: &str = "강남역 근처 30평대 아파트 매매 시세 알려줘";
/// The query of the scenario where a user adds a TODO while the run waits.
pub(crate) const SCENARIO_2_QUERY: &str = "강남구 아파트 시세 조회";
/// Longest a child may take before the test fails (instead of hanging).
pub(crate) const CHILD_TIMEOUT: Duration = Duration::from_secs(120);
const WAIT: Duration = Duration::from_secs(30);

/// The binary with a clean, colourless environment (no LLM, no inherited data dir or token).
pub(crate) fn chronicle() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    c.env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CHRONICLE_DATA")
        .env_remove("CHRONICLE_API_TOKEN")
        .env_remove("CHRONICLE_SERVER")
        .env_remove("CHRONICLE_LLM_BASE_URL")
        .env_remove("CHRONICLE_LLM_API_KEY")
        .env_remove("OPENAI_API_KEY");
    c
}

/// Runs `cmd` with `stdin` piped in (then closed), within [`CHILD_TIMEOUT`]. Its output is read
/// while it runs: a child whose output fills the pipe would otherwise never exit.
pub(crate) fn output(mut cmd: Command, stdin: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_owned();
    std::thread::spawn(move || {
        let _ = pipe.write_all(input.as_bytes());
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(CHILD_TIMEOUT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let out = rx.recv().unwrap().unwrap();
            panic!(
                "timed out; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

pub(crate) fn run_cli(args: &[&str], stdin: &str) -> Output {
    let mut c = chronicle();
    c.args(args);
    output(c, stdin)
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[track_caller]
pub(crate) fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
}

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every run of a data dir and its state (the store must not be in use).
pub(crate) fn runs_of(dir: &Path) -> Vec<(RunId, RunState)> {
    let store = Store::open(dir, Options::default()).unwrap();
    let heads: Vec<_> = store.runs().collect::<Result<_, _>>().unwrap();
    heads
        .into_iter()
        .map(|h| (h.run_id, store.state_at(h.run_id, h.last_seq).unwrap()))
        .collect()
}

// ------------------------------------------------------------------ chat

#[test]
fn chat_walks_a_user_added_todo_to_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{SCENARIO_2_QUERY}\n/todos\n/todo add analysis_team\n/todo approve\n/todo approve\n"
    );
    let o = run_cli(
        &[
            "chat",
            "--hitl",
            "every_todo",
            "--data",
            path_str(dir.path()),
        ],
        &script,
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    // The plan, then the approval for todo_001: what runs with what, and the chat's commands.
    let plan = out.find("📝 TODO 1개").expect(&out);
    let ask_1 = out
        .find("todo_001: search_team을(를) 실행할까요?")
        .expect(&out);
    assert!(plan < ask_1, "{out}");
    assert!(
        out.contains("/todo approve · /todo reject [reason] · /todo skip todo_001 · /todos"),
        "{out}"
    );
    // `/todo add analysis_team` says what it added, in one line.
    let added = out.find("added todo_002 analysis_team").expect(&out);
    // After the first approval, the run asks for todo_002; after the second, it answers.
    let ask_2 = out
        .find("todo_002: analysis_team을(를) 실행할까요?")
        .expect(&out);
    let done = out.find("✅ completed").expect(&out);
    assert!(added < ask_2 && ask_2 < done, "{out}");
    let answer = out[done..].lines().nth(1).unwrap_or("");
    assert!(!answer.trim().is_empty(), "{out}");

    let runs = runs_of(dir.path());
    assert_eq!(runs.len(), 1);
    let s = &runs[0].1;
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    let todos = &s.supervisor.planning_state.as_ref().unwrap().todos;
    assert_eq!(todos.len(), 2);
    assert!(todos.iter().all(|t| t.status == TodoStatus::Completed));
    assert_eq!(todos[1].name, "analysis_team 추가 실행");
    assert!(
        s.approvals
            .list
            .iter()
            .all(|a| a.decided_by.as_deref() == Some("local"))
    );
}

#[test]
fn chat_without_a_run_explains_and_ends_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_cli(
        &["chat", "--data", path_str(dir.path())],
        "/todos\n/help\n/quit\n강남구 아파트 시세 조회\n",
    );
    assert_exit(&o, 0);
    assert!(
        stdout(&o).contains("error: no run yet: type a query first"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("/checkpoint restore"), "{}", stdout(&o));
    // `/quit` left before the query: no run was started.
    assert!(runs_of(dir.path()).is_empty());
}

// ------------------------------------------------------------------ run

#[test]
fn run_without_hitl_completes_and_prints_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_cli(
        &[
            "run",
            "--hitl",
            "none",
            "--data",
            path_str(dir.path()),
            GANGNAM_STATION_QUERY,
        ],
        "",
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    // `seq  time  name  summary`, the line `log` prints too.
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.next()?.parse::<u64>().ok()?;
            w.nth(1)
        })
        .collect();
    assert_eq!(names.first(), Some(&"run.started"), "{out}");
    for name in [
        "plan.created",
        "todo.added",
        "agent.completed",
        "message.final",
        "run.end",
    ] {
        assert!(names.contains(&name), "{name} missing in\n{out}");
    }
    assert_eq!(names.last(), Some(&"run.end"), "{out}");
    // The answer follows the events.
    let answer = out.lines().last().unwrap();
    assert!(
        !answer.trim().is_empty() && !answer.contains("run.end"),
        "{out}"
    );
    let runs = runs_of(dir.path());
    assert_eq!(runs[0].1.supervisor.run_status, RunStatus::Completed);
    // One line per event, in seq order.
    assert_eq!(names.len() as u64, runs[0].1.last_seq.unwrap() + 1, "{out}");
}

#[test]
fn run_json_prints_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_cli(
        &[
            "run",
            "--json",
            "--hitl",
            "none",
            "--data",
            path_str(dir.path()),
            GANGNAM_STATION_QUERY,
        ],
        "",
    );
    assert_exit(&o, 0);
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.iter().all(|l| l["type"].is_string()), "{lines:?}");
    let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["data"]["seq"], i as u64);
        assert!(e["data"]["kind"].is_string() && e["data"]["content"].is_object());
    }
    assert!(events.iter().any(|e| e["data"]["event"] == "message.final"));
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["data"]["status"], "completed");
    assert!(
        result["data"]["answer"]
            .as_str()
            .is_some_and(|a| !a.is_empty())
    );
}

#[test]
fn run_that_waits_for_approval_without_a_terminal_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_cli(
        &[
            "run",
            "--hitl",
            "every_todo",
            "--data",
            path_str(dir.path()),
            SCENARIO_2_QUERY,
        ],
        "",
    );
    assert_exit(&o, 1);
    let runs = runs_of(dir.path());
    let (run, s) = &runs[0];
    assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);
    let pending: Vec<_> = s.approvals.pending().collect();
    assert_eq!(pending.len(), 1);
    let err = stderr(&o);
    assert!(err.contains("waits for approval"), "{err}");
    assert!(err.contains(pending[0].approval_id.as_str()), "{err}");
    assert!(
        err.contains(&format!("chronicle chat --run {run}")),
        "{err}"
    );
    assert!(stdout(&o).contains("approval.requested"), "{}", stdout(&o));

    // The hint works: the chat attaches to the run and approves it.
    let o = run_cli(
        &[
            "chat",
            "--run",
            &run.to_string(),
            "--data",
            path_str(dir.path()),
        ],
        "/todo approve\n",
    );
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("✅ completed"), "{}", stdout(&o));
    assert_eq!(
        runs_of(dir.path())[0].1.supervisor.run_status,
        RunStatus::Completed
    );
}

// ------------------------------------------------------------------ audit

/// A data dir with decisions: one run approved by alice (then completed), one rejected by bob.
fn audit_fixture(dir: &Path) {
    rt().block_on(async {
        let engine = Engine::open(
            Store::open(dir, Options::default()).unwrap(),
            chronicle_realestate::settings(),
        )
        .await
        .unwrap();
        for (by, command) in [
            ("alice", "/todo approve"),
            ("bob", "/todo reject 너무 비쌈"),
        ] {
            let run = engine
                .start_run(StartRun {
                    query: SCENARIO_2_QUERY.into(),
                    hitl: Some(HitlMode::EveryTodo),
                    ..StartRun::default()
                })
                .await
                .unwrap()
                .run_id;
            let s = engine.wait_settled(run, WAIT).await.unwrap();
            assert_eq!(s.approvals.pending().count(), 1);
            engine
                .command(run, command, &Principal::admin(by))
                .await
                .unwrap();
            let s = engine.wait_settled(run, WAIT).await.unwrap();
            assert!(
                s.supervisor.run_status.is_terminal(),
                "{:?}",
                s.supervisor.run_status
            );
        }
        engine.shutdown().await;
    });
}

fn export(dir: &Path, format: &str) -> String {
    let o = run_cli(
        &[
            "audit",
            "export",
            "--format",
            format,
            "--data",
            path_str(dir),
        ],
        "",
    );
    assert_exit(&o, 0);
    assert!(stderr(&o).contains("log head: offset"), "{}", stderr(&o));
    stdout(&o)
}

fn verify(dir: &Path, file: &Path) -> Output {
    run_cli(
        &["audit", "verify", path_str(file), "--data", path_str(dir)],
        "",
    )
}

#[test]
fn audit_verify_passes_on_a_fresh_export_and_names_a_tampered_row() {
    let dir = tempfile::tempdir().unwrap();
    audit_fixture(dir.path());
    let files = tempfile::tempdir().unwrap();
    for format in ["jsonl", "csv"] {
        // --out writes the same bytes as stdout.
        let file = files.path().join(format!("approvals.{format}"));
        let o = run_cli(
            &[
                "audit",
                "export",
                "--format",
                format,
                "--out",
                path_str(&file),
                "--data",
                path_str(dir.path()),
            ],
            "",
        );
        assert_exit(&o, 0);
        assert!(stdout(&o).is_empty());
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, export(dir.path(), format));
        let rows = text.lines().count() - usize::from(format == "csv");
        assert_eq!(rows, 2, "{text}");

        let o = verify(dir.path(), &file);
        assert_exit(&o, 0);
        assert_eq!(stdout(&o), "ok 2 rows\n");

        // Without the extension, the content tells the format.
        let bare = files.path().join(format!("bare-{format}"));
        std::fs::write(&bare, &text).unwrap();
        assert_exit(&verify(dir.path(), &bare), 0);

        // One field altered: the row is named, with its line and the field.
        assert_eq!(text.matches("alice").count(), 1, "{text}");
        let tampered = files.path().join(format!("tampered.{format}"));
        std::fs::write(&tampered, text.replace("alice", "mallory")).unwrap();
        let o = verify(dir.path(), &tampered);
        assert_exit(&o, 1);
        let out = stdout(&o);
        let line = text.lines().position(|l| l.contains("alice")).unwrap() + 1;
        let approval = alice_approval(dir.path());
        assert_eq!(
            out,
            format!(
                "mismatch at line {line} (approval {approval}): decided_by: \"mallory\" in the file, \"alice\" in the log\n"
            )
        );

        // A row moved to another offset is named by that field.
        let last: Value =
            serde_json::from_str(export(dir.path(), "jsonl").lines().last().unwrap()).unwrap();
        let (seq, off) = (
            last["seq"].as_u64().unwrap(),
            last["offset"].as_u64().unwrap(),
        );
        let moved = match format {
            "csv" => text.replace(&format!(",{seq},{off},"), &format!(",{seq},{},", off + 1)),
            _ => text.replace(
                &format!("\"offset\":{off},"),
                &format!("\"offset\":{},", off + 1),
            ),
        };
        assert_ne!(moved, text);
        let moved_file = files.path().join(format!("moved.{format}"));
        std::fs::write(&moved_file, moved).unwrap();
        let o = verify(dir.path(), &moved_file);
        assert_exit(&o, 1);
        assert!(
            stdout(&o).ends_with(&format!(
                ": offset: {} in the file, {off} in the log\n",
                off + 1
            )),
            "{}",
            stdout(&o)
        );

        // A broken hash is caught too (the field the row vouches with).
        let rows: Vec<&str> = text.lines().collect();
        let last = rows.last().unwrap();
        let hash = last
            .split(|c: char| !c.is_ascii_hexdigit())
            .find(|w| w.len() == 64)
            .unwrap();
        let flipped = format!(
            "{}{}",
            if hash.starts_with('0') { "1" } else { "0" },
            &hash[1..]
        );
        let hashed = files.path().join(format!("hash.{format}"));
        std::fs::write(&hashed, text.replace(hash, &flipped)).unwrap();
        let o = verify(dir.path(), &hashed);
        assert_exit(&o, 1);
        assert!(
            stdout(&o).contains(&format!("mismatch at line {}", rows.len())),
            "{}",
            stdout(&o)
        );
    }
}

fn alice_approval(dir: &Path) -> String {
    runs_of(dir)
        .iter()
        .flat_map(|(_, s)| s.approvals.list.clone())
        .find(|a| a.decided_by.as_deref() == Some("alice"))
        .unwrap()
        .approval_id
        .to_string()
}

#[test]
fn audit_export_csv_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    audit_fixture(dir.path());
    let csv = export(dir.path(), "csv");
    insta::with_settings!({
        filters => vec![
            (r"[0-9a-f]{64}", "[hash]"),
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[uuid]"),
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[time]"),
        ]
    }, {
        insta::assert_snapshot!("audit_export_csv", csv);
    });
}

// ------------------------------------------------------------------ bad arguments

#[test]
fn bad_arguments_get_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    audit_fixture(dir.path());
    let data = path_str(dir.path());
    let missing = dir.path().join("no-such-export.csv");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["audit", "export", "--format", "xml", "--data", data],
            "--format",
        ),
        (
            vec!["audit", "export", "--since", "yesterday", "--data", data],
            "--since",
        ),
        (
            vec!["audit", "export", "--until", "2025-13-01", "--data", data],
            "--until",
        ),
        (
            vec!["audit", "export", "--run", "not-a-uuid", "--data", data],
            "invalid run id",
        ),
        (
            vec![
                "audit",
                "export",
                "--run",
                "00000000-0000-0000-0000-000000000001",
                "--data",
                data,
            ],
            "not found",
        ),
        (
            vec!["audit", "export", "--data", "/nonexistent/chronicle"],
            "no Chronicle data",
        ),
        (
            vec!["audit", "export", "--server", "localhost:8080"],
            "--server",
        ),
        (
            vec!["audit", "verify", path_str(&missing), "--data", data],
            "cannot read",
        ),
        (
            vec!["run", "--hitl", "bogus", "--data", data, "q"],
            "--hitl",
        ),
        (
            vec!["run", "--strategy", "zigzag", "--data", data, "q"],
            "--strategy",
        ),
        (
            vec!["run", "--data", data, "   "],
            "query must not be empty",
        ),
        (vec!["run", "--server", "ftp://x", "q"], "--server"),
        (
            vec!["chat", "--hitl", "sometimes", "--data", data],
            "--hitl",
        ),
        (
            vec!["chat", "--run", "12", "--data", data],
            "invalid run id",
        ),
    ];
    for (args, needle) in cases {
        let o = run_cli(&args, "");
        assert_exit(&o, 2);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
    // A file that is not an export at all is an operational error too.
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello\n").unwrap();
    let o = verify(dir.path(), &junk);
    assert_exit(&o, 2);
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn help_has_examples_and_exit_codes() {
    for cmd in [
        vec!["run", "--help"],
        vec!["chat", "--help"],
        vec!["audit", "--help"],
        vec!["audit", "export", "--help"],
        vec!["audit", "verify", "--help"],
    ] {
        let o = run_cli(&cmd, "");
        assert_exit(&o, 0);
        let out = stdout(&o);
        assert!(
            out.contains("Examples:") && out.contains("Exit codes:"),
            "{cmd:?}: {out}"
        );
    }
}

// ------------------------------------------------------------------ remote

/// The real server on 127.0.0.1:0 over `dir`, on its own runtime.
struct Server {
    rt: tokio::runtime::Runtime,
    base: String,
    engine: Engine,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let rt = rt();
        let (base, engine, stop, task) = rt.block_on(async {
            let store = Store::open(dir, Options::default()).unwrap();
            let engine = Engine::open(store, chronicle_realestate::settings())
                .await
                .unwrap();
            let state = AppState::new(engine.clone(), Tokens::none(), ApiConfig::default());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                chronicle_api::serve(listener, state, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
            (base, engine, stop, task)
        });
        Server {
            rt,
            base,
            engine,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Graceful shutdown; afterwards the data dir is free again.
    fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let task = self.task.take().unwrap();
        let engine = self.engine.clone();
        self.rt.block_on(async move {
            tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
            engine.shutdown().await;
        });
    }
}

#[test]
fn remote_run_chat_and_audit_export() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let url = server.base.clone();

    let o = run_cli(
        &[
            "run",
            "--server",
            &url,
            "--hitl",
            "none",
            GANGNAM_STATION_QUERY,
        ],
        "",
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(" message.final ") && out.contains(" run.end "),
        "{out}"
    );

    // A run that waits, then decided through the server by the chat.
    let o = run_cli(
        &[
            "run",
            "--server",
            &url,
            "--hitl",
            "every_todo",
            SCENARIO_2_QUERY,
        ],
        "",
    );
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("waits for approval"), "{}", stderr(&o));
    let run: RunId = stderr(&o)
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .expect("stderr starts with `run <id> started`");
    let o = run_cli(
        &["chat", "--server", &url, "--run", &run.to_string()],
        "/todos\n/todo approve\n",
    );
    assert_exit(&o, 0);
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("todo_001*") && l.contains("waiting_approval")),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("✅ completed"), "{}", stdout(&o));

    // The server's export, for the run and in both formats.
    let o = run_cli(
        &["audit", "export", "--server", &url, "--format", "csv"],
        "",
    );
    assert_exit(&o, 0);
    let csv = stdout(&o);
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(csv.contains(",local,"), "{csv}");
    assert!(stderr(&o).contains("log head: offset"), "{}", stderr(&o));
    let o = run_cli(
        &[
            "audit",
            "export",
            "--server",
            &url,
            "--run",
            &run.to_string(),
        ],
        "",
    );
    assert_exit(&o, 0);
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stdout(&o));
    assert!(
        stderr(&o).contains(&format!("run {run} head: seq")),
        "{}",
        stderr(&o)
    );
    let o = run_cli(
        &["audit", "export", "--server", &url, "--since", "soon"],
        "",
    );
    assert_exit(&o, 2);

    // While the server holds the data dir, embedded commands say so.
    let o = run_cli(&["run", "--data", path_str(dir.path()), "q"], "");
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("in use by a running server"),
        "{}",
        stderr(&o)
    );

    server.stop();
    // The remote export verifies against the log once the server is gone.
    let file = dir.path().join("remote.csv");
    std::fs::write(&file, &csv).unwrap();
    let o = verify(dir.path(), &file);
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "ok 1 rows\n");
}

// ------------------------------------------------------------------ streamed answers

/// The key of the scripted model.
pub(crate) const MODEL_KEY: &str = "sk-cli-stream-8Hk3Lm5N";
/// The answer the scripted model writes, and a sentence of it found nowhere else.
pub(crate) const STREAMED_ANSWER: &str = "강남역 근처 30평대 아파트 매매 시세는 13억에서 15억 사이입니다. \
    역에서 가까울수록 비싸고, 최근 석 달 동안 거래가 조금 늘었습니다.";
pub(crate) const STREAMED_SENTENCE: &str = "최근 석 달 동안 거래가 조금 늘었습니다.";

/// A model that streams [`STREAMED_ANSWER`] (as the JSON the planner asks for, a few characters
/// a chunk, waiting at `gate` before its last sentence) to the answer-formatting request, and
/// refuses every other request (the rules plan).
pub(crate) fn streaming_model(rt: &tokio::runtime::Runtime, gate: Gate) -> TestServer {
    gated_model(rt, None, gate)
}

/// [`streaming_model`] that also waits at `first` before it writes anything.
pub(crate) fn gated_model(
    rt: &tokio::runtime::Runtime,
    first: Option<Gate>,
    gate: Gate,
) -> TestServer {
    let (before, after) = STREAMED_ANSWER.split_at(STREAMED_ANSWER.find("최근").unwrap());
    let piece = |text: &str| -> Vec<Piece> {
        let chars: Vec<char> = text.chars().collect();
        chars
            .chunks(3)
            .map(|c| Piece::Content(c.iter().collect()))
            .collect()
    };
    let mut pieces: Vec<Piece> = first.into_iter().map(Piece::Wait).collect();
    pieces.push(Piece::Content("{\"answer\": \"".into()));
    pieces.extend(piece(before));
    pieces.push(Piece::Wait(gate));
    pieces.extend(piece(after));
    pieces.push(Piece::Content("\"}".into()));
    rt.block_on(TestServer::start(Some(MODEL_KEY), move |body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.contains("formatting real estate information") {
            Reply::Stream(pieces.clone())
        } else {
            Reply::Status(500)
        }
    }))
}

/// `chronicle` asking the scripted model.
fn with_model(model: &TestServer) -> Command {
    let mut c = chronicle();
    c.env("CHRONICLE_LLM_BASE_URL", &model.base_url)
        .env("CHRONICLE_LLM_API_KEY", MODEL_KEY);
    c
}

#[test]
fn run_prints_the_answer_while_the_model_writes_it_and_only_once() {
    let _machine = crate::heavy();
    let rt = rt();
    let gate = Gate::new();
    let model = streaming_model(&rt, gate.clone());
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = with_model(&model);
    cmd.args(["run", "--hitl", "none", "--data", path_str(dir.path())])
        .arg(GANGNAM_STATION_QUERY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout_pipe = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut stdout_pipe, &mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // The beginning of the answer is on stdout while the model still holds its end back.
    let mut out = Vec::new();
    // At the start of a line (the query, in the first event's line, is not).
    let beginning = "\n강남역 근처 30평대 아파트";
    while !String::from_utf8_lossy(&out).contains(beginning) {
        match rx.recv_timeout(CHILD_TIMEOUT) {
            Ok(bytes) => out.extend(bytes),
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no streamed answer; stdout:\n{}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
    }
    let so_far = String::from_utf8_lossy(&out).into_owned();
    assert!(!so_far.contains("message.final"), "{so_far}");
    assert!(!so_far.contains(STREAMED_SENTENCE), "{so_far}");
    gate.open();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    out.extend(rx.try_iter().flatten());
    let out = String::from_utf8(out).unwrap();
    assert!(status.success(), "{out}");
    // The answer, streamed, on a line of its own between the event lines; not printed again.
    assert_eq!(out.matches(STREAMED_SENTENCE).count(), 1, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with(&beginning[1..]))
        .unwrap();
    assert_eq!(line, STREAMED_ANSWER, "{out}");
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {out}"))
    };
    assert!(at("phase.changed") < at(beginning) && at(beginning) < at("message.final"));
    assert!(
        out.contains("message.final        (the answer above)"),
        "{out}"
    );
    assert!(out.lines().last().unwrap().contains(" run.end "), "{out}");

    // In JSON Lines, each chunk is a line of its own, and the result still has the answer.
    let gate = Gate::new();
    gate.open();
    let model = streaming_model(&rt, gate);
    let mut cmd = with_model(&model);
    cmd.args([
        "run",
        "--json",
        "--hitl",
        "none",
        "--data",
        path_str(dir.path()),
    ])
    .arg(GANGNAM_STATION_QUERY);
    let o = output(cmd, "");
    assert_exit(&o, 0);
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let streamed: String = lines
        .iter()
        .filter(|l| l["type"] == "chunk")
        .map(|l| {
            assert_eq!(l["data"]["event"], "message.chunk", "{l}");
            l["data"]["content"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(streamed, STREAMED_ANSWER);
    assert_eq!(lines.last().unwrap()["data"]["answer"], STREAMED_ANSWER);
}

#[test]
fn chat_prints_the_plan_then_the_answer_as_it_streams_and_only_once() {
    let _machine = crate::heavy();
    let rt = rt();
    let gate = Gate::new();
    gate.open();
    let model = streaming_model(&rt, gate);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = with_model(&model);
    cmd.args(["chat", "--hitl", "none", "--data", path_str(dir.path())]);
    let o = output(cmd, &format!("{GANGNAM_STATION_QUERY}\n"));
    assert_exit(&o, 0);
    let out = stdout(&o);
    assert_eq!(out.matches(STREAMED_SENTENCE).count(), 1, "{out}");
    let at = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {out}"))
    };
    assert!(at("📝 TODO") < at(STREAMED_SENTENCE), "{out}");
    assert!(at(STREAMED_SENTENCE) < at("✅ completed"), "{out}");
    assert!(out.lines().any(|l| l == STREAMED_ANSWER), "{out}");
}
