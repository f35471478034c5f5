//! Every shell example of README.md and of the guides in `docs/`, run as written and checked
//! against what its comment says: the README's five-minute tour, the API's curl tour, the
//! conversations, memory, the tools example, the CLI (on a data directory of its own, and against
//! the server), the data analyst (against a server of its domain) and the LangGraph Python snippet
//! (with the venv that `make test` makes first, `target/langgraph-venv`).
//!
//! The documents are read in [`DOCUMENTS`]' order, then `docs/decisions/` (which holds no
//! examples), so that the runs one block leaves are there for the next, as for a reader who
//! follows the links. The examples talk to `localhost:8080` (`make run`). Here a real `chronicle serve` — the built
//! binary, over a fresh data directory, with no model — listens on a free loopback port, and
//! that port is substituted for `8080` in the examples' text: the only change made to them.
//! Each block runs in a bash of its own, in a scratch directory, with the built `chronicle` first
//! on PATH; its variables carry from one command to the next, as in a terminal. Before each
//! command the test waits until no run of the server is still running, as a person reads an
//! answer before typing on; a command a document says to stop with Ctrl-C gets SIGINT after a
//! few seconds.
//!
//! Blocks this test does not run are named in [`SKIPPED`] with why. A new block, a new guide in
//! `docs/`, or a command of a run block without its check, fails the test: the documents and this
//! file change together.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::durability::Serve;

/// The port the examples use.
const README_PORT: &str = "8080";
/// How long a command a document says to stop with Ctrl-C runs before it gets SIGINT.
const CTRL_C_AFTER_S: u32 = 3;
/// A guard against a hang: one command's longest run (a build is not part of any example).
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server may take to settle (no run running) before a command.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The documents with examples, in the order their blocks run (a reader's order: the README,
/// then the guides as it links them). Every `docs/*.md` must be here; `docs/decisions/*.md`
/// follow, in name order.
const DOCUMENTS: &[&str] = &[
    "README.md",
    "docs/console.md",
    "docs/api.md",
    "docs/conversations.md",
    "docs/cli.md",
    "docs/agents.md",
    "docs/mcp.md",
    "docs/domains.md",
    "docs/data-analyst.md",
    "docs/llm.md",
    "docs/langgraph.md",
    "docs/operations.md",
    "docs/postgres.md",
    "docs/cluster.md",
    "docs/development.md",
];

/// Blocks not run here, by `(document, heading, index among the heading's shell and Python
/// blocks)`, with why.
const SKIPPED: &[(&str, &str, usize, &str)] = &[
    (
        "docs/operations.md",
        "Traces",
        0,
        "a server exporting to an OTLP receiver on 4318: tools/tests/otel.rs runs one against Arize Phoenix",
    ),
    (
        "README.md",
        "The two commands",
        0,
        "`make run` and `make test`: this test runs inside `make test`, and `make run` is the server it starts",
    ),
    (
        "docs/domains.md",
        "The domains",
        0,
        "starts a server of the bench domain on 8080; the bench answer is checked by domains/bench's tests",
    ),
    (
        "docs/agents.md",
        "HTTP agents",
        0,
        "starts servers of its own with the agents file above (alternatives, not a script); loading agents files is checked by cli_agents",
    ),
    (
        "docs/agents.md",
        "The reply it sends",
        0,
        "an HTTP agent that serves until stopped; the agent contract is checked by domains/generic's tests",
    ),
    (
        "docs/data-analyst.md",
        "Try it",
        0,
        "`make run ARGS=\"--domain data\"` is the server: this test starts `chronicle serve --domain data` itself for the next block",
    ),
    (
        "docs/postgres.md",
        "Running it",
        0,
        "needs a PostgreSQL server at db.internal; `--store`, `store migrate` and the read commands on PostgreSQL are checked by tools/tests/postgres.rs on the tests' own server",
    ),
    (
        "docs/postgres.md",
        "Moving a data directory onto PostgreSQL",
        0,
        "needs a PostgreSQL server at db.internal; `store copy` is checked by tools/tests/postgres.rs on the tests' own server",
    ),
    (
        "docs/cluster.md",
        "Three nodes behind a load balancer",
        0,
        "needs a PostgreSQL server at db.internal, three machines and shared storage; nodes on one store are checked by tools/tests/cluster.rs, three of them on loopback",
    ),
    (
        "README.md",
        "Several nodes",
        0,
        "needs a PostgreSQL server at db.internal and a load balancer; nodes on one store are checked by tools/tests/cluster.rs, three of them on loopback",
    ),
    (
        "docs/agents.md",
        "Agent mode",
        0,
        "needs an OpenAI-compatible model at CHRONICLE_LLM_BASE_URL; agent mode is checked with a scripted model by tests/llm_agents.rs",
    ),
];

/// The Python block run with the LangGraph SDK.
const LANGGRAPH_SNIPPET: (&str, &str, usize) = ("docs/langgraph.md", "LangGraph clients", 0);

/// One command of a block, with the comment lines before it (and the one after it on its line).
#[derive(Debug)]
struct Step {
    comment: String,
    command: String,
}

/// What one command printed (stdout and stderr, in order) and its exit status.
#[derive(Debug)]
struct Ran {
    out: String,
    status: i32,
}

/// A fenced block of a document.
#[derive(Debug)]
struct Block {
    /// The document, relative to the repository (`docs/api.md`).
    doc: String,
    heading: String,
    index: usize,
    lang: String,
    text: String,
}

/// A document's shell and Python blocks, each under its heading (headings inside code blocks,
/// such as shell comments, do not count); an indented fence (in a list) loses its indent.
fn blocks(doc: &str, readme: &str) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut heading = String::new();
    let mut open: Option<(String, usize, Vec<String>)> = None;
    for line in readme.lines() {
        let trimmed = line.trim_start();
        if let Some(fence) = trimmed.strip_prefix("```") {
            match open.take() {
                Some((lang, indent, lines)) => {
                    if ["sh", "bash", "python"].contains(&lang.as_str()) {
                        let index = out.iter().filter(|b| b.heading == heading).count();
                        out.push(Block {
                            doc: doc.to_owned(),
                            heading: heading.clone(),
                            index,
                            lang,
                            text: lines
                                .iter()
                                .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
                                .collect::<Vec<_>>()
                                .join("\n"),
                        });
                    }
                }
                None => open = Some((fence.trim().to_owned(), line.len() - trimmed.len(), vec![])),
            }
            continue;
        }
        match &mut open {
            Some((_, _, lines)) => lines.push(line.to_owned()),
            None if line.starts_with('#') => heading = line.trim_start_matches('#').trim().into(),
            None => {}
        }
    }
    out
}

/// A shell block's commands: comment lines gather until a command, whose lines ending in `\`
/// continue it.
fn steps(text: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut comment = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('#') {
            comment.push_str(t);
            comment.push('\n');
            continue;
        }
        let mut command = line.to_owned();
        while command.trim_end().ends_with('\\') {
            command.push('\n');
            command.push_str(lines.next().unwrap_or_default());
        }
        // A comment on the command's own line is part of what it says.
        if let Some((_, after)) = command.rsplit_once("  # ") {
            comment.push_str(after);
        }
        out.push(Step {
            comment: std::mem::take(&mut comment),
            command,
        });
    }
    out
}

/// A bash of one block: commands in, what each printed and its status out.
struct Shell {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Shell {
    fn start(dir: &Path, bin_dir: &Path) -> Shell {
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = Command::new("bash")
            .args(["--noprofile", "--norc"])
            .current_dir(dir)
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .env_remove("CHRONICLE_SERVER")
            .env_remove("CHRONICLE_DATA")
            .env_remove("CHRONICLE_DOMAIN")
            .env_remove("CHRONICLE_AGENTS")
            .env_remove("CHRONICLE_API_TOKEN")
            .env_remove("CHRONICLE_LLM_BASE_URL")
            .env_remove("CHRONICLE_LLM_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("bash starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Shell {
            child,
            stdin,
            lines,
        }
    }

    /// Runs one command (stdin closed, stderr with stdout) and waits for what it printed.
    fn run(&mut self, command: &str) -> Ran {
        const MARK: &str = "@@readme-step-status ";
        let script = format!("{{ {command}\n}} </dev/null 2>&1; printf '\\n{MARK}%s\\n' \"$?\"\n");
        self.stdin.write_all(script.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut out = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("`{command}` did not finish: {out}"));
            if let Some(status) = line.strip_prefix(MARK) {
                return Ran {
                    out: out.trim_end().to_owned(),
                    status: status.trim().parse().unwrap(),
                };
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server the examples talk to.
struct Ctx {
    port: u16,
}

impl Ctx {
    /// `GET path` on the server, as JSON.
    fn get(&self, path: &str) -> Value {
        let out = Command::new("curl")
            .args(["-s", &format!("http://127.0.0.1:{}{path}", self.port)])
            .output()
            .expect("curl runs");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("GET {path}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// Waits until no run of the server is running (each waits for a human or has ended).
    fn settle(&self) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        while !self.get("/api/v1/runs?status=running")["runs"]
            .as_array()
            .is_some_and(Vec::is_empty)
        {
            assert!(
                Instant::now() < deadline,
                "runs still running after {SETTLE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A check of one command: a piece of the command it belongs to, and what its output must show.
type Check = (&'static str, fn(&Ran, &Ctx));

fn has(ran: &Ran, words: &[&str]) {
    for w in words {
        assert!(ran.out.contains(w), "{w:?} missing from:\n{}", ran.out);
    }
}

fn ok(ran: &Ran, words: &[&str]) {
    assert_eq!(ran.status, 0, "{}", ran.out);
    has(ran, words);
}

/// Set a variable, printing nothing.
fn quiet(ran: &Ran, _: &Ctx) {
    ok(ran, &[]);
    assert!(ran.out.is_empty(), "{}", ran.out);
}

/// Still open when stopped: `timeout` says 124.
fn stopped(ran: &Ran, words: &[&str]) {
    assert_eq!(ran.status, 124, "the stream ended by itself:\n{}", ran.out);
    has(ran, words);
}

fn json(ran: &Ran) -> Value {
    serde_json::from_str(&ran.out).unwrap_or_else(|e| panic!("{e}: {}", ran.out))
}

const FIVE_MINUTES: &[Check] = &[
    ("export PATH=", quiet),
    ("RUN=$(curl", quiet),
    (".[0].message", |r, _| {
        ok(
            r,
            &[
                "Run search_team for todo_001?",
                "With: in Gangnam-gu, Seoul; apartments",
            ],
        )
    }),
    ("/todo approve", |r, _| ok(r, &["\"status\":\"resumed\""])),
    ("final_response.answer", |r, _| {
        ok(r, &["Found", "apartments in Gangnam-gu"])
    }),
    ("chronicle log $RUN", |r, _| {
        ok(r, &["run.started", "run.end"])
    }),
    ("/restore", |r, _| {
        ok(
            r,
            &["\"status\":\"restored\"", "\"checkpoint_id\":\"cp_004\""],
        )
    }),
    ("--all-branches", |r, _| {
        // The branch the restore left, marked, then the restore and the new request.
        ok(r, &["run.restored", "approval.requested"]);
        assert!(r.out.lines().any(|l| l.starts_with('~')), "{}", r.out);
    }),
    ("audit/approvals?format=csv", |r, _| {
        ok(r, &["run_id,session_id,approval_id", ",approve,"])
    }),
];

const TOUR: &[Check] = &[
    ("RUN=$(curl", quiet),
    ("curl -N", |r, _| {
        stopped(r, &["event: run.started", "event: approval.requested"])
    }),
    ("/todos", |r, _| ok(r, &["\"todos\"", "todo_001"])),
    ("/todo approve", |r, _| ok(r, &["\"status\":\"resumed\""])),
    ("api/v1/approvals?status=pending", |r, _| {
        ok(r, &["\"status\":\"pending\"", "todo_002"])
    }),
    ("APPROVAL=$(curl", quiet),
    ("/decision", |r, _| ok(r, &["\"status\":\"accepted\""])),
    ("api/v1/runs", |r, _| ok(r, &["\"runs\"", "\"completed\""])),
    ("runs?order=desc", |r, _| {
        ok(r, &["\"runs\"", "\"completed\""])
    }),
    ("/checkpoints", |r, _| {
        ok(r, &["\"cp_004\"", "\"node\":\"approval\""])
    }),
    ("state?at=10", |r, _| {
        assert_eq!(json(r)["supervisor"]["run_status"], "running", "{}", r.out)
    }),
    ("/restore", |r, _| {
        ok(
            r,
            &["\"status\":\"restored\"", "\"checkpoint_id\":\"cp_004\""],
        )
    }),
    ("curl -N", |r, _| {
        // The old branch marked, its run.end passed, then the restore and the new request.
        stopped(r, &["\"abandoned\":true", "event: run.end"]);
        let restored = r.out.find("event: run.restored").expect(&r.out);
        let asked = r.out.rfind("event: approval.requested").expect(&r.out);
        assert!(restored < asked, "{}", r.out);
    }),
    ("audit/approvals?format=csv", |r, _| {
        ok(r, &["run_id,session_id,approval_id", ",approve,"])
    }),
    ("localhost:8080/chat", |r, _| {
        let b = json(r);
        assert_eq!(b["error"]["code"], "waiting_for_human", "{b}");
        assert!(
            b["approval"]["request_args"]["region"] == "서울특별시 강남구",
            "{b}"
        );
    }),
    ("서초구로 해줘", |r, _| {
        // The next TODO waits, on the district the words chose.
        let b = json(r);
        assert_eq!(b["error"]["code"], "waiting_for_human", "{b}");
        assert_eq!(
            b["approval"]["request_args"]["region"], "서울특별시 서초구",
            "{b}"
        );
    }),
    ("\"approve\": true", |r, _| {
        let b = json(r);
        assert_eq!(b["status"], "completed", "{b}");
        let answer = b["response"]["answer"].as_str().unwrap();
        assert!(
            answer.contains("서초구") && !answer.contains("강남"),
            "{answer}"
        );
    }),
];

const TALK: &[Check] = &[
    ("강남구 아파트 전세 시세", |r, _| {
        let b = json(r);
        assert_eq!(b["status"], "completed", "{b}");
        assert!(
            b["response"]["answer"].as_str().unwrap().contains("강남구"),
            "{b}"
        );
    }),
    ("서초구는?", |r, _| {
        // Same property and deal type, another district.
        let answer = json(r)["response"]["answer"].as_str().unwrap().to_owned();
        assert!(
            answer.contains("서초구") && answer.contains("전세"),
            "{answer}"
        );
        assert!(!answer.contains("강남"), "{answer}");
    }),
];

const WORDS: &[Check] = &[
    ("강남구 아파트 시세 조회", |r, _| {
        assert_eq!(json(r)["error"]["code"], "waiting_for_human", "{}", r.out)
    }),
    ("분석도 추가해줘", |r, _| {
        let b = json(r);
        assert_eq!(b["command"], "/todo add analysis_team", "{b}");
        assert_eq!(b["interpreted_from"], "분석도 추가해줘", "{b}");
    }),
];

const CLI: &[Check] = &[
    ("chronicle run", |r, _| {
        ok(r, &["run.end", "강남구 아파트 매물"])
    }),
    ("chronicle chat", |r, _| {
        ok(r, &["chronicle chat (--data ./.chronicle)"])
    }),
    ("runs --status completed", |r, _| ok(r, &["completed"])),
    ("--newest-first --owner local", |r, _| ok(r, &["completed"])),
    ("RUN=$(chronicle runs", quiet),
    ("--all-branches", |r, _| ok(r, &["run.started", "run.end"])),
    ("--to 12", |r, _| ok(r, &["at seq 12 of"])),
    ("--diff 12 30", |r, _| ok(r, &["seq 12 → seq 30"])),
    ("--step", |r, _| ok(r, &["q to quit"])),
    ("chronicle checkpoints", |r, _| ok(r, &["cp_004"])),
    ("trace export", |r, _| {
        ok(
            r,
            &[
                " run\n",
                " todo property_search",
                " invoke_agent property_search",
            ],
        )
    }),
    ("chronicle restore", |r, _| {
        ok(r, &["restored run", "to cp_004"])
    }),
    ("audit export", |r, _| {
        ok(r, &["wrote audit.csv", "ok 0 rows"])
    }),
    ("chronicle verify", |r, _| ok(r, &["OK"])),
    ("chronicle sessions", |r, _| {
        ok(r, &["SESSION", "강남역 근처"])
    }),
    ("SESSION=$(", quiet),
    ("sessions show", |r, _| ok(r, &["session ", "ANSWER"])),
    ("sessions delete", |r, _| ok(r, &["deleted session"])),
];

const MEMORY: &[Check] = &[
    ("강남구 전세만 보여줘", |r, _| {
        assert_eq!(json(r)["status"], "completed", "{}", r.out)
    }),
    ("| jq '.memories[]", |r, _| {
        ok(r, &["\"key\": \"deal_type\""])
    }),
    ("MEMORY=$(", quiet),
    ("-X DELETE", |r, ctx| {
        ok(r, &[]);
        let left = ctx.get("/api/v1/users/local/memories");
        assert_eq!(left["memories"], serde_json::json!([]), "{left}");
    }),
];

const AGAINST_SERVER: &[Check] = &[
    ("export CHRONICLE_SERVER", quiet),
    ("chronicle runs", |r, _| ok(r, &["RUN", "STATUS"])),
    ("RUN=$(chronicle runs", quiet),
    ("--to 12", |r, _| ok(r, &["at seq 12 of"])),
    ("--follow", |r, _| stopped(r, &["run.started"])),
];

const TOOLS: &[Check] = &[("Draft a lease contract", |r, ctx| {
    let run = json(r)["run_id"].as_str().expect(&r.out).to_owned();
    ctx.settle();
    // The document_team's write_file waits for a person.
    let asked = ctx.get(&format!("/api/v1/agent/{run}/approvals?status=pending"));
    assert_eq!(asked[0]["tool_name"], "write_file", "{asked}");
})];

/// The checks of each block this test runs.
/// The data analyst without a model, against a server of the data domain (its MCP server on the
/// venv `make test` makes, `target/data-venv`).
const DATA: &[Check] = &[
    ("what tables are there?", |r, _| {
        ok(
            r,
            &[
                "The database has 1 table:",
                "- sales (2924 rows, 7 columns)",
            ],
        )
    }),
    ("describe sales", |r, _| {
        ok(
            r,
            &[
                "sales has 2924 rows and 7 columns:",
                "- order_id BIGINT",
                "- order_date DATE",
            ],
        )
    }),
    ("show 5 rows of sales", |r, _| {
        ok(
            r,
            &[
                "The first 5 rows of sales:",
                "| order_id | order_date | region |",
                "| 5 | 2024-01-02 | North |",
            ],
        )
    }),
    ("how many rows in sales?", |r, _| {
        ok(
            r,
            &["sales has 2924 rows (run_sql run_1, kept as results.run_1)."],
        )
    }),
    ("run dbt", |r, _| {
        assert_eq!(
            json(r),
            serde_json::json!({"code": "waiting_for_human", "tool": "dbt_run"}),
            "{}",
            r.out
        )
    }),
    ("\"approve\": true", |r, _| {
        ok(
            r,
            &[
                "dbt run on /workspace/dbt: success",
                "- stg_sales: success",
                "- monthly_revenue: success",
            ],
        )
    }),
];

const RUN: &[(&str, &str, usize, &[Check])] = &[
    ("README.md", "A five-minute tour", 0, FIVE_MINUTES),
    ("docs/api.md", "A tour with curl", 0, TOUR),
    ("docs/conversations.md", "Conversations", 0, TALK),
    ("docs/conversations.md", "Conversations", 1, WORDS),
    ("docs/conversations.md", "Memory", 0, MEMORY),
    ("docs/cli.md", "On a data directory", 0, CLI),
    ("docs/cli.md", "Against a server", 0, AGAINST_SERVER),
    (
        "docs/agents.md",
        "Tools, the workspace and sub-agents",
        0,
        TOOLS,
    ),
    ("docs/data-analyst.md", "Try it", 1, DATA),
];

/// Every document with examples, in the order they run: [`DOCUMENTS`], then `docs/decisions/`.
/// A guide in `docs/` that [`DOCUMENTS`] does not list fails: its place in the order is a choice.
fn documents(root: &Path) -> Vec<(String, String)> {
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).unwrap();
    let md_in = |dir: &str| {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("{dir}/{n}"))
            .collect();
        names.sort();
        names
    };
    for guide in md_in("docs") {
        assert!(
            DOCUMENTS.contains(&guide.as_str()),
            "{guide} is not in tools/tests/readme.rs's DOCUMENTS: add it where its examples run"
        );
    }
    DOCUMENTS
        .iter()
        .map(|d| d.to_string())
        .chain(md_in("docs/decisions"))
        .map(|d| {
            let text = read(&d);
            (d, text)
        })
        .collect()
}

fn run_block(block: &Block, checks: &[Check], ctx: &Ctx, bin_dir: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let mut shell = Shell::start(dir.path(), bin_dir);
    let steps = steps(&block.text);
    assert_eq!(
        steps.len(),
        checks.len(),
        "{}: the block has {} commands, this test checks {}: {steps:#?}",
        block.heading,
        steps.len(),
        checks.len()
    );
    for (step, (piece, check)) in steps.iter().zip(checks) {
        assert!(
            step.command.contains(piece),
            "{}: the check for a command with {piece:?} met `{}`",
            block.heading,
            step.command
        );
        let mut command = step.command.replace(README_PORT, &ctx.port.to_string());
        if step.comment.contains("Ctrl-C to stop") {
            command = format!("timeout -s INT {CTRL_C_AFTER_S} {command}");
        }
        ctx.settle();
        let ran = shell.run(&command);
        eprintln!(
            "readme: {} › {} $ {}\n{}",
            block.doc, block.heading, step.command, ran.out
        );
        check(&ran, ctx);
    }
}

/// The LangGraph snippet with its SDK, when the venv `make test` makes is there.
fn run_python(block: &Block, ctx: &Ctx, target: &Path) {
    let python = target.join("langgraph-venv/bin/python");
    let has_sdk = Command::new(&python)
        .args(["-c", "import langgraph_sdk"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_sdk {
        eprintln!(
            "readme: {}: no langgraph-sdk in {} (`make test-deps` makes it): not run",
            block.heading,
            python.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("snippet.py");
    std::fs::write(
        &script,
        block.text.replace(README_PORT, &ctx.port.to_string()),
    )
    .unwrap();
    let out = Command::new(&python)
        .arg(&script)
        .env_remove("LANGGRAPH_API_KEY")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGCHAIN_API_KEY")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("readme: {}\n{text}", block.heading);
    assert!(out.status.success(), "{text}");
    // The events it streamed, then the pending approval.
    for said in ["metadata", "values", "['approval']"] {
        assert!(text.contains(said), "{said:?} missing from:\n{text}");
    }
}

#[test]
fn every_documented_example_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_chronicle"));
    let bin_dir = bin.parent().unwrap().to_owned();
    let target = bin_dir.parent().unwrap().to_owned();
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let log = scratch.path().join("serve.log");
    let serve = Serve::start_with(&data, &[], &log, None);
    let ctx = Ctx { port: serve.port };
    // The data analyst's examples talk to a server of the data domain, started for them.
    let mut data_serve: Option<Serve> = None;
    let started = Instant::now();
    let all: Vec<Block> = documents(&root)
        .iter()
        .flat_map(|(doc, text)| blocks(doc, text))
        .collect();
    // Every block is accounted for, and every name names a block, before anything runs.
    let key_of = |b: &Block| (b.doc.clone(), b.heading.clone(), b.index);
    let named = SKIPPED
        .iter()
        .map(|(d, h, i, _)| (*d, *h, *i))
        .chain(RUN.iter().map(|(d, h, i, _)| (*d, *h, *i)))
        .chain([LANGGRAPH_SNIPPET]);
    for (doc, heading, index) in named {
        assert!(
            all.iter()
                .any(|b| key_of(b) == (doc.to_owned(), heading.to_owned(), index)),
            "tools/tests/readme.rs names {doc} › {heading} #{index}, which is no block"
        );
    }
    for block in &all {
        let key = (block.doc.as_str(), block.heading.as_str(), block.index);
        let known = SKIPPED.iter().any(|(d, h, i, _)| (*d, *h, *i) == key)
            || RUN.iter().any(|(d, h, i, _)| (*d, *h, *i) == key)
            || key == LANGGRAPH_SNIPPET;
        assert!(
            known,
            "{} block {} #{} ({}) is neither run nor skipped here: add its checks to \
             tools/tests/readme.rs\n{}",
            block.doc, block.heading, block.index, block.lang, block.text
        );
    }
    for block in &all {
        let key = (block.doc.as_str(), block.heading.as_str(), block.index);
        if SKIPPED.iter().any(|(d, h, i, _)| (*d, *h, *i) == key) {
            continue;
        }
        if block.lang == "python" && key == LANGGRAPH_SNIPPET {
            run_python(block, &ctx, &target);
            continue;
        }
        let checks = RUN
            .iter()
            .find(|(d, h, i, _)| (*d, *h, *i) == key)
            .map(|(_, _, _, c)| *c)
            .expect("every block was accounted for above");
        if block.doc == "docs/data-analyst.md" {
            let data = data_serve.get_or_insert_with(|| {
                let args = [
                    std::ffi::OsStr::new("--domain"),
                    std::ffi::OsStr::new("data"),
                ];
                Serve::start_with(
                    &scratch.path().join("data-domain"),
                    &args,
                    &scratch.path().join("serve-data.log"),
                    None,
                )
            });
            run_block(block, checks, &Ctx { port: data.port }, &bin_dir);
            continue;
        }
        run_block(block, checks, &ctx, &bin_dir);
    }
    eprintln!("readme: every example ran in {:?}", started.elapsed());
    drop(data_serve);
    drop(serve);
}

#[test]
fn blocks_and_steps_are_read_as_a_person_reads_them() {
    let text = "# Top\n\n```sh\n# say\nA=1 \\\n  && echo $A   # Ctrl-C to stop\necho b\n```\n\n## Sub\n\n  ```bash\n  # in a list\n  echo c\n  ```\n```text\nnot shell\n```\n";
    let b = blocks("doc.md", text);
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].heading.as_str(), b[0].index), ("Top", 0));
    assert_eq!((b[1].heading.as_str(), b[1].index), ("Sub", 0));
    assert_eq!(b[1].text, "# in a list\necho c");
    let s = steps(&b[0].text);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].command, "A=1 \\\n  && echo $A   # Ctrl-C to stop");
    assert!(s[0].comment.starts_with("# say\n") && s[0].comment.contains("Ctrl-C to stop"));
    assert_eq!(
        (s[1].command.as_str(), s[1].comment.as_str()),
        ("echo b", "")
    );
}
