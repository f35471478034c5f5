//! `chronicle chat` for people, through the real binary with piped stdin, embedded (a temp
//! `--data`) and against the real `chronicle serve` on loopback (`--server`): every line goes
//! through the engine's chat-turn policy; `/todos` and `/checkpoint list` print tables, a refused
//! command one `error:` line; `clear` and `exit` are the chat's and start nothing; `/new` starts a
//! second run while the first waits; a plain line while the run waits starts nothing and the chat
//! shows what the run waits for; `--json` prints JSON lines. `chronicle runs` then lists exactly
//! the runs the script started.

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};

use chronicle_testkit::model::Gate;
use serde_json::Value;

use crate::cli_run::{
    CHILD_TIMEOUT, GANGNAM_STATION_QUERY, MODEL_KEY, SCENARIO_2_QUERY, STREAMED_ANSWER,
    STREAMED_SENTENCE, assert_exit, gated_model, output, path_str, rt, run_cli, stderr, stdout,
};
use crate::durability::Serve;

const TOKEN: &str = "tok-chat-cli-12345678";
/// Words that are neither a command nor an answer the engine takes: said to a waiting run,
/// they start nothing.
const SMALL_TALK: &str = "hello there";

/// Where the chat's runs live.
enum Place {
    Data(tempfile::TempDir),
    Server {
        serve: Serve,
        _data: tempfile::TempDir,
    },
}

impl Place {
    fn embedded() -> Place {
        Place::Data(tempfile::tempdir().unwrap())
    }

    /// The real `chronicle serve` on a loopback port, with a token.
    fn server() -> Place {
        let data = tempfile::tempdir().unwrap();
        let log = data.path().join("serve.log");
        let store = data.path().join("store");
        let serve = Serve::start_with(&store, &[], &log, Some(TOKEN));
        Place::Server { serve, _data: data }
    }

    /// `chronicle <args>` against this place, with `stdin` piped in.
    fn cli(&self, args: &[&str], stdin: &str) -> Output {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        match self {
            Place::Data(dir) => {
                all.extend(["--data".into(), path_str(dir.path()).into()]);
                let args: Vec<&str> = all.iter().map(String::as_str).collect();
                run_cli(&args, stdin)
            }
            Place::Server { serve, .. } => {
                all.extend(["--server".into(), serve.api.base().to_owned()]);
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
                cmd.args(&all)
                    .env("NO_COLOR", "1")
                    .env("CHRONICLE_API_TOKEN", TOKEN)
                    .env_remove("CLICOLOR_FORCE")
                    .env_remove("CHRONICLE_DATA")
                    .env_remove("CHRONICLE_SERVER")
                    .env_remove("CHRONICLE_LLM_BASE_URL")
                    .env_remove("OPENAI_API_KEY");
                output(cmd, stdin)
            }
        }
    }

    /// `chronicle runs --json`: the id of every run, oldest first.
    fn run_ids(&self) -> Vec<String> {
        let o = self.cli(&["runs", "--json"], "");
        assert_exit(&o, 0);
        stdout(&o)
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                v["data"]["run_id"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    }

    /// `chronicle log <run> --json`: the run's events, as stored.
    fn events(&self, run: &str) -> Vec<Value> {
        let o = self.cli(&["log", run, "--json"], "");
        assert_exit(&o, 0);
        stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// `chronicle runs --json`: (query, status) of every run, oldest first.
    fn runs(&self) -> Vec<(String, String)> {
        let o = self.cli(&["runs", "--json"], "");
        assert_exit(&o, 0);
        stdout(&o)
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                let d = &v["data"];
                let field = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
                (field("query"), field("status"))
            })
            .collect()
    }
}

/// What the chat printed after echoing `line`, up to the next prompt.
fn reply_to<'a>(out: &'a str, line: &str) -> &'a str {
    let echo = format!("chronicle> {line}\n");
    let at = out
        .find(&echo)
        .unwrap_or_else(|| panic!("no `{echo}` in\n{out}"));
    let rest = &out[at + echo.len()..];
    &rest[..rest.find("chronicle> ").unwrap_or(rest.len())]
}

/// The person's conversation: a query that waits for approval (`every_todo`), its TODOs and
/// checkpoints, a refused command, small talk to the waiting run, `clear`, a second run with
/// `/new`, then `exit` (the query after it is never read).
fn people_script() -> String {
    format!(
        "{SCENARIO_2_QUERY}\n/todos\n/todo bogus\n/checkpoint list\n{SMALL_TALK}\nclear\n\
         /new {GANGNAM_STATION_QUERY}\nexit\n{SCENARIO_2_QUERY}\n"
    )
}

fn chat_reads_as_a_conversation(place: &Place, where_flag: &str) {
    let o = place.cli(&["chat", "--hitl", "every_todo"], &people_script());
    assert_exit(&o, 0);
    let out = stdout(&o);
    // A banner says what the chat talks to and how to get help and leave.
    let banner = out.lines().next().unwrap_or_default();
    assert!(
        banner.starts_with(&format!("chronicle chat ({where_flag}")),
        "{out}"
    );
    assert!(
        banner.contains("type /help for commands, /quit to leave"),
        "{out}"
    );
    // No JSON for a person, and no escaped newlines.
    assert!(!out.lines().any(|l| l.starts_with('{')), "{out}");
    assert!(!out.contains("\\n") && !out.contains("\"status\""), "{out}");

    let todos = reply_to(&out, "/todos");
    let mut lines = todos.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["TODO", "STATUS", "AGENT", "TITLE"], "{todos}");
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..3],
        ["todo_001*", "waiting_approval", "search_team"],
        "{todos}"
    );

    let refused = reply_to(&out, "/todo bogus");
    assert_eq!(refused.lines().count(), 1, "{refused}");
    assert!(
        refused.starts_with("error: ") && refused.contains("type /help for the commands"),
        "{refused}"
    );

    let checkpoints = reply_to(&out, "/checkpoint list");
    assert!(
        checkpoints.starts_with("CHECKPOINT  NODE") && checkpoints.contains("\ncp_001 "),
        "{checkpoints}"
    );

    // Small talk to the waiting run starts nothing; the chat shows what the run waits for.
    let waiting = reply_to(&out, SMALL_TALK);
    assert!(waiting.contains("waits for a human"), "{waiting}");
    assert!(
        waiting.contains("todo_001: search_team을(를) 실행할까요?"),
        "{waiting}"
    );

    assert_eq!(reply_to(&out, "clear"), "", "{out}");
    let second = reply_to(&out, &format!("/new {GANGNAM_STATION_QUERY}"));
    assert!(second.contains("is left waiting"), "{second}");
    assert!(second.contains("property_search"), "{second}");
    assert!(
        !out.contains(&format!("chronicle> {SCENARIO_2_QUERY}\n/")),
        "{out}"
    );
    // The run left waiting is named on the way out.
    assert!(
        stderr(&o).contains("still waits for approval"),
        "{}",
        stderr(&o)
    );

    // Exactly the two runs the script started, both waiting: `clear`, `exit` and the small
    // talk started none, and nothing after `exit` was read.
    let waiting = "waiting_for_approval".to_owned();
    assert_eq!(
        place.runs(),
        [
            (SCENARIO_2_QUERY.to_owned(), waiting.clone()),
            (GANGNAM_STATION_QUERY.to_owned(), waiting)
        ]
    );
}

/// With `--json`, every line is a `{type, data}` object: what a script reads.
fn chat_prints_json_lines(place: &Place) {
    let script = format!("{SCENARIO_2_QUERY}\n/todos\n/todo bogus\n{SMALL_TALK}\n/help\n");
    let o = place.cli(&["chat", "--json", "--hitl", "every_todo"], &script);
    assert_exit(&o, 0);
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "started", "approval", "command", "command", "waiting", "help"
        ],
        "{lines:?}"
    );
    let run = &lines[0]["data"]["run_id"];
    assert_eq!(lines[1]["data"]["todo_id"], "todo_001");
    assert_eq!(lines[2]["data"]["run_id"], *run);
    assert_eq!(lines[2]["data"]["result"]["todos"][0]["id"], "todo_001");
    assert!(lines[3]["data"]["result"]["error"].is_string(), "{lines:?}");
    assert_eq!(lines[4]["data"]["run_id"], *run);
    assert_eq!(lines[4]["data"]["approvals"][0]["todo_id"], "todo_001");
    assert!(
        lines[5]["data"]["help"]
            .as_str()
            .is_some_and(|h| h.contains("/checkpoint restore")),
        "{lines:?}"
    );
    assert_eq!(place.runs().len(), 1);
}

/// A conversation that remembers: the follow-up "서초구는?" keeps the first turn's property and
/// deal type and changes the district, and its run names the first as what it was given; then,
/// while a run waits, "분석도 추가해줘" is read as `/todo add analysis_team` and starts nothing.
fn chat_remembers_the_conversation(place: &Place) {
    let o = place.cli(&["chat"], "강남구 아파트 전세 시세 알려줘\n서초구는?\n");
    assert_exit(&o, 0);
    let out = stdout(&o);
    let follow_up = reply_to(&out, "서초구는?");
    assert!(
        follow_up.contains("서초구 아파트 전세") && !follow_up.contains("강남구"),
        "{follow_up}"
    );
    let runs = place.run_ids();
    assert_eq!(runs.len(), 2, "{out}");
    let given: Vec<Value> = place
        .events(&runs[1])
        .into_iter()
        .filter_map(|e| {
            let turns = &e["data"]["event"]["SessionContextLoaded"]["turns"];
            (!turns.is_null()).then(|| turns[0]["run_id"].clone())
        })
        .collect();
    assert_eq!(given, [Value::String(runs[0].clone())]);

    let script = format!("{SCENARIO_2_QUERY}\n분석도 추가해줘\n/todos\n");
    let o = place.cli(&["chat", "--hitl", "every_todo"], &script);
    assert_exit(&o, 0);
    let out = stdout(&o);
    let added = reply_to(&out, "분석도 추가해줘");
    assert!(
        added.contains("interpreted as /todo add analysis_team") && added.contains("todo_002"),
        "{added}"
    );
    assert!(reply_to(&out, "/todos").contains("analysis_team"), "{out}");
    assert_eq!(place.run_ids().len(), 3, "{out}");
}

#[test]
fn chat_embedded_remembers_the_conversation() {
    chat_remembers_the_conversation(&Place::embedded());
}

#[test]
fn chat_against_a_server_remembers_the_conversation() {
    chat_remembers_the_conversation(&Place::server());
}

#[test]
fn chat_embedded_reads_as_a_conversation() {
    let place = Place::embedded();
    let Place::Data(dir) = &place else {
        unreachable!()
    };
    let flag = format!("--data {}", path_str(dir.path()));
    chat_reads_as_a_conversation(&place, &flag);
}

#[test]
fn chat_against_a_server_reads_as_a_conversation() {
    let place = Place::server();
    let Place::Server { serve, .. } = &place else {
        unreachable!()
    };
    let flag = format!("--server {}", serve.api.base());
    chat_reads_as_a_conversation(&place, &flag);
}

#[test]
fn chat_embedded_json_prints_json_lines() {
    chat_prints_json_lines(&Place::embedded());
}

#[test]
fn chat_against_a_server_json_prints_json_lines() {
    chat_prints_json_lines(&Place::server());
}

#[test]
fn chat_help_names_the_commands_and_the_chats_own_words() {
    let place = Place::embedded();
    let o = place.cli(&["chat"], "/help\n/new\n");
    assert_exit(&o, 0);
    let out = stdout(&o);
    let help = reply_to(&out, "/help");
    for needle in [
        "/todo approve",
        "/checkpoint restore",
        "/new <query>",
        "/quit",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    let refused = reply_to(&out, "/new");
    assert_eq!(refused, "error: /new takes a query: /new <query>\n");
    assert!(place.runs().is_empty());
}

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server answers `POST /chat` only once the run settles (or after a minute); the chat
/// follows the new run meanwhile and streams its answer: the model writes nothing until the
/// chat's stream of the run is open, and the answer's beginning is on stdout while the model
/// still holds its end back (a chat that waited for the server's answer would see the model
/// call time out first, after 30 s, and no stream at all).
#[test]
fn chat_against_a_server_streams_the_answer_while_the_model_writes_it() {
    let _machine = crate::heavy();
    let rt = rt();
    let (first, gate) = (Gate::new(), Gate::new());
    let model = gated_model(&rt, Some(first.clone()), gate.clone());
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let server = Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data"])
        .arg(dir.path().join("store"))
        .env("CHRONICLE_LLM_BASE_URL", &model.base_url)
        .env("CHRONICLE_LLM_API_KEY", MODEL_KEY)
        .env("CHRONICLE_API_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .env_remove("CHRONICLE_DATA")
        .env_remove("CHRONICLE_DOMAIN")
        .env_remove("CHRONICLE_AGENTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Killed(server);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut chat = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    chat.args(["chat", "--hitl", "none", "--server", &base])
        .env("NO_COLOR", "1")
        .env("CHRONICLE_API_TOKEN", TOKEN)
        .env_remove("CHRONICLE_SERVER")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Killed(chat.spawn().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    writeln!(stdin, "{GANGNAM_STATION_QUERY}").unwrap();
    // The chat's stream of the new run is open (the only stream on the server).
    let api = chronicle_client::Client::new(&base)
        .unwrap()
        .with_token(Some(TOKEN.to_owned()));
    let streaming = |m: &str| m.lines().any(|l| l.trim() == "chronicle_open_streams 1");
    let deadline = std::time::Instant::now() + CHILD_TIMEOUT;
    while !streaming(&rt.block_on(api.metrics()).unwrap()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the chat never followed the run while the server held its answer"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    first.open();
    let mut pipe = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // At the start of a line: the echoed query follows `chronicle> `.
    let beginning = "\n강남역 근처 30평대 아파트";
    let mut out = Vec::new();
    while !String::from_utf8_lossy(&out).contains(beginning) {
        match rx.recv_timeout(CHILD_TIMEOUT) {
            Ok(bytes) => out.extend(bytes),
            Err(_) => panic!("no streamed answer:\n{}", String::from_utf8_lossy(&out)),
        }
    }
    let so_far = String::from_utf8_lossy(&out).into_owned();
    assert!(!so_far.contains(STREAMED_SENTENCE), "{so_far}");
    assert!(so_far.contains("📝 TODO"), "{so_far}");
    gate.open();
    drop(stdin);
    let status = child.0.wait().unwrap();
    reader.join().unwrap();
    out.extend(rx.try_iter().flatten());
    let out = String::from_utf8(out).unwrap();
    assert!(status.success(), "{out}");
    assert_eq!(out.matches(STREAMED_SENTENCE).count(), 1, "{out}");
    assert!(out.lines().any(|l| l == STREAMED_ANSWER), "{out}");
    assert!(out.contains("✅ completed"), "{out}");
}

/// `--on-reject end_turn`: "거절" said to the waiting run rejects it, and the turn ends with an
/// answer saying what was rejected; a value that is neither is refused before anything starts.
#[test]
fn chat_on_reject_end_turn_ends_the_turn_on_a_rejection() {
    let place = Place::embedded();
    let script = format!("{SCENARIO_2_QUERY}\n거절\n");
    let o = place.cli(
        &["chat", "--hitl", "every_todo", "--on-reject", "end_turn"],
        &script,
    );
    assert_exit(&o, 0);
    let out = stdout(&o);
    let rejected = reply_to(&out, "거절");
    assert!(
        rejected.contains("interpreted as /todo reject"),
        "{rejected}"
    );
    assert_eq!(
        place.runs(),
        [(SCENARIO_2_QUERY.to_owned(), "completed".to_owned())]
    );
    let o = place.cli(&["chat", "--on-reject", "maybe"], "");
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("skip or end_turn"), "{}", stderr(&o));
}
