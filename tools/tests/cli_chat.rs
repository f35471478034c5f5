//! `chronicle chat` for people, through the real binary with piped stdin, embedded (a temp
//! `--data`) and against the real `chronicle serve` on loopback (`--server`): every line goes
//! through the engine's chat-turn policy; `/todos` and `/checkpoint list` print tables, a refused
//! command one `error:` line; `clear` and `exit` are the chat's and start nothing; `/new` starts a
//! second run while the first waits; a plain line while the run waits starts nothing and the chat
//! shows what the run waits for; `--json` prints JSON lines. `chronicle runs` then lists exactly
//! the runs the script started.

use std::process::{Command, Output};

use serde_json::Value;

use crate::cli_run::{
    SCENARIO_2_QUERY, SEED_002_QUERY, assert_exit, output, path_str, run_cli, stderr, stdout,
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
         /new {SEED_002_QUERY}\nexit\n{SCENARIO_2_QUERY}\n"
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
    assert!(waiting.contains("- TODO ID: todo_001"), "{waiting}");

    assert_eq!(reply_to(&out, "clear"), "", "{out}");
    let second = reply_to(&out, &format!("/new {SEED_002_QUERY}"));
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
            (SEED_002_QUERY.to_owned(), waiting)
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
