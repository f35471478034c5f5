//! `log`, `runs`, `checkpoints`, `restore`, `verify` and `replay`, black-box: the real binary on a
//! fixture data directory holding the deposit-increase question under `every_todo`, completed, then
//! restored to its second approval checkpoint and completed again (so one branch is abandoned).
//! Each test builds its own fixture (a second or less), so tests run in parallel and leave nothing
//! behind (sled locks a directory per process, so they could not share one anyway).

use chronicle_engine::Principal;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{HitlMode, RunId, RunStatus};
use serde_json::Value;

const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
const WAIT: Duration = Duration::from_secs(30);

/// The fixture run and the seqs the tests point at.
pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) data: PathBuf,
    pub(crate) run: RunId,
    /// The checkpoint saved when the run waited for the second approval (todo_002).
    second_approval: String,
    pub(crate) second_approval_seq: u64,
    /// The `RunRestored` event back to `second_approval`.
    pub(crate) restore_seq: u64,
    pub(crate) last_seq: u64,
}

pub(crate) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (run, second_approval, second_approval_seq, restore_seq, last_seq) = rt.block_on(async {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let engine = Engine::open(store, chronicle_realestate::settings())
            .await
            .unwrap();
        let req = StartRun {
            query: SCENARIO_1.into(),
            hitl: Some(HitlMode::EveryTodo),
            ..StartRun::default()
        };
        let run = engine.start_run(req).await.unwrap().run_id;
        let waiting_for = |todo: &'static str| {
            move |s: &RunState| {
                s.approvals.pending().any(|a| {
                    a.subject
                        .as_ref()
                        .is_some_and(|x| x.todo_id().as_str() == todo)
                })
            }
        };
        engine
            .wait_until(run, WAIT, waiting_for("todo_001"))
            .await
            .unwrap();
        engine
            .command(run, "/todo approve", &Principal::local())
            .await
            .unwrap();
        let s = engine
            .wait_until(run, WAIT, waiting_for("todo_002"))
            .await
            .unwrap();
        let cp = s
            .checkpoints
            .checkpoints
            .iter()
            .rev()
            .find(|c| c.node == "approval")
            .unwrap()
            .clone();
        engine
            .command(run, "/todo approve", &Principal::local())
            .await
            .unwrap();
        let done = |s: &RunState| s.supervisor.run_status.is_terminal();
        let s = engine.wait_until(run, WAIT, done).await.unwrap();
        assert_eq!(s.supervisor.run_status, RunStatus::Completed);

        let restored = engine
            .command(
                run,
                &format!("/checkpoint restore {}", cp.checkpoint_id),
                &Principal::local(),
            )
            .await
            .unwrap();
        assert!(
            matches!(restored, chronicle_wire::CommandOutcome::Restored(_)),
            "{restored:?}"
        );
        engine
            .wait_until(run, WAIT, waiting_for("todo_002"))
            .await
            .unwrap();
        engine
            .command(run, "/todo approve", &Principal::local())
            .await
            .unwrap();
        let s = engine.wait_until(run, WAIT, done).await.unwrap();
        assert_eq!(s.supervisor.run_status, RunStatus::Completed);
        let last_seq = s.last_seq.unwrap();
        // Read from the log: the actor may have appended more by the time `command` returned.
        let restore_seq = engine
            .store()
            .read_run(run, 0, last_seq)
            .map(|e| e.unwrap())
            .find(|e| matches!(e.event, chronicle_schemas::Event::RunRestored { .. }))
            .unwrap()
            .seq;
        engine.shutdown().await;
        (
            run,
            cp.checkpoint_id.to_string(),
            cp.seq,
            restore_seq,
            last_seq,
        )
    });
    drop(rt);
    // Reopening proves every handle is gone (and the lock free) before the binary runs.
    drop(Store::open(dir.path(), Options::default()).unwrap());
    Fixture {
        data: dir.path().to_owned(),
        _dir: dir,
        run,
        second_approval,
        second_approval_seq,
        restore_seq,
        last_seq,
    }
}

pub(crate) fn chronicle(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    cmd.args(args)
        .arg("--data")
        .arg(data)
        .env("NO_COLOR", "1")
        .env_remove("CHRONICLE_DATA")
        .env_remove("CHRONICLE_API_TOKEN")
        .env_remove("CHRONICLE_SERVER")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null());
    cmd
}

pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn output(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

fn run(data: &Path, args: &[&str]) -> Run {
    output(chronicle(data, args).output().unwrap())
}

/// Runs a command that must succeed and returns its stdout.
pub(crate) fn ok(data: &Path, args: &[&str]) -> String {
    let r = run(data, args);
    assert_eq!(r.code, 0, "{args:?} failed: {}", r.stderr);
    r.stdout
}

/// Ids, times, hashes and durations vary between fixture builds; the rest must not.
fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[uuid]",
        ),
        (r"[0-9a-f]{64}", "[hash]"),
        (r"req_[0-9a-f]{12}", "req_[id]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[time]"),
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?", "[datetime]"),
        (r"\b\d{2}:\d{2}:\d{2}\.\d{3}\b", "[clock]"),
        (r"\d+ ms\b", "[n] ms"),
        (
            r#""(duration_ms|total_execution_time_ms)":\d+"#,
            r#""$1":[n]"#,
        ),
        (
            r#""(duration|total_execution_time|search_time|analysis_time|generation_time)":[0-9.e-]+"#,
            r#""$1":[secs]"#,
        ),
    ]
}

macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => filters(), prepend_module_to_snapshot => true}, {
            insta::assert_snapshot!($name, $value);
        })
    };
}

// ------------------------------------------------------------------------------------- replay

#[test]
fn replay_to_prints_the_state_at_a_seq() {
    let f = fixture();
    let data = f.data.clone();
    let run = f.run.to_string();
    // Waiting for the second approval, on the effective history.
    let waiting = ok(
        &data,
        &["replay", &run, "--to", &f.second_approval_seq.to_string()],
    );
    // The last event of the abandoned branch: completed there, but no longer effective.
    let abandoned = ok(
        &data,
        &["replay", &run, "--to", &(f.restore_seq - 1).to_string()],
    );
    assert!(abandoned.contains("abandoned branch"), "{abandoned}");
    snapshot!(
        "replay_to",
        format!(
            "$ replay --to {}\n{waiting}\n$ replay --to {}\n{abandoned}",
            f.second_approval_seq,
            f.restore_seq - 1
        )
    );
    // Without a mode: the state at the last seq; --json: the RunState itself.
    let last = ok(&data, &["replay", &run]);
    assert!(
        last.contains(&format!("at seq {} of {}", f.last_seq, f.last_seq)),
        "{last}"
    );
    let json = ok(&data, &["replay", &run, "--to", "3", "--json"]);
    let line: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(line["type"], "state");
    assert_eq!(line["data"]["last_seq"], 3);
    assert_eq!(line["data"]["run_id"], run.as_str());
}

/// Two completed runs of `local`: one states a preference, the next loads it. The second run
/// and the seq of its `MemoryLoaded`.
fn memory_fixture(dir: &Path) -> (RunId, u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let found = rt.block_on(async {
        let store = Store::open(dir, Options::default()).unwrap();
        let settings = chronicle_realestate::settings();
        let engine = Engine::open(store, settings).await.unwrap();
        let done = |s: &RunState| s.supervisor.run_status.is_terminal();
        let mut last = None;
        for query in ["강남구 전세만 보여줘", "강남구 아파트 시세 알려줘"] {
            let req = StartRun {
                query: query.into(),
                ..StartRun::default()
            };
            let run = engine.start_run(req).await.unwrap().run_id;
            engine.wait_until(run, WAIT, done).await.unwrap();
            last = Some(run);
        }
        let run = last.unwrap();
        let loaded = engine
            .store()
            .read_run(run, 0, u64::MAX)
            .map(|e| e.unwrap())
            .find(|e| matches!(e.event, chronicle_schemas::Event::MemoryLoaded { .. }))
            .unwrap()
            .seq;
        engine.shutdown().await;
        (run, loaded)
    });
    drop(rt);
    drop(Store::open(dir, Options::default()).unwrap());
    found
}

#[test]
fn replay_shows_the_memory_a_run_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let (run, seq) = memory_fixture(dir.path());
    let run = run.to_string();
    let at = ok(dir.path(), &["replay", &run, "--to", &seq.to_string()]);
    assert!(
        at.contains("memory            only jeonse deals (전세)"),
        "{at}"
    );
    let before = ok(
        dir.path(),
        &["replay", &run, "--to", &(seq - 1).to_string()],
    );
    assert!(!before.contains("jeonse"), "{before}");
    let json = ok(
        dir.path(),
        &["replay", &run, "--to", &seq.to_string(), "--json"],
    );
    let line: Value = serde_json::from_str(json.trim()).unwrap();
    let state = &line["data"]["supervisor"];
    assert_eq!(state["loaded_memories"][0]["key"], "deal_type");
    assert_eq!(
        state["user_preferences"],
        serde_json::json!({"deal_type": "jeonse"})
    );
}

#[test]
fn replay_diff_prints_what_changed() {
    let f = fixture();
    let data = f.data.clone();
    let run = f.run.to_string();
    let (a, b, r) = (f.second_approval_seq, f.restore_seq - 1, f.restore_seq);
    // What the abandoned branch did, then what the restore undid.
    let forward = ok(
        &data,
        &["replay", &run, "--diff", &a.to_string(), &b.to_string()],
    );
    let restore = ok(
        &data,
        &["replay", &run, "--diff", &b.to_string(), &r.to_string()],
    );
    let whole = ok(
        &data,
        &["replay", &run, "--diff", "0", &f.last_seq.to_string()],
    );
    assert!(
        forward.contains("todo_002: waiting_approval → in_progress")
            || forward.contains("todo_002: waiting_approval → completed"),
        "{forward}"
    );
    assert!(restore.contains("restored from: - → "), "{restore}");
    snapshot!(
        "replay_diff",
        format!(
            "$ replay --diff {a} {b}\n{forward}\n$ replay --diff {b} {r}\n{restore}\n$ replay --diff 0 {}\n{whole}",
            f.last_seq
        )
    );
    let json = ok(
        &data,
        &[
            "replay",
            &run,
            "--diff",
            &b.to_string(),
            &r.to_string(),
            "--json",
        ],
    );
    let line: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(line["type"], "diff");
    snapshot!(
        "replay_diff_json",
        serde_json::to_string_pretty(&line).unwrap()
    );
}

fn step(data: &Path, run: &str, script: &str) -> Run {
    output(crate::cli_run::output(
        chronicle(data, &["replay", run, "--step"]),
        script,
    ))
}

/// The seq of each event line (`  12  10:00:00.000  ...` / `~ 12 ...`) of a step session.
fn positions(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut words = l.trim_start_matches('~').split_whitespace();
            let seq = words.next()?.parse().ok()?;
            let clock = words.next()?;
            (clock.len() == 12 && clock.as_bytes()[2] == b':').then_some(seq)
        })
        .collect()
}

#[test]
fn replay_step_goes_next_previous_to_a_checkpoint_and_quits() {
    let f = fixture();
    let data = f.data.clone();
    let script = format!(
        "n\nnext\np\nc {}\nt\ng {}\nq\nn\n",
        f.second_approval,
        f.restore_seq - 1
    );
    let r = step(&data, &f.run.to_string(), &script);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Start at 0, next, next, previous, the checkpoint, goto; nothing after quit.
    assert_eq!(
        positions(&r.stdout),
        [0, 1, 2, 1, f.second_approval_seq, f.restore_seq - 1],
        "{}",
        r.stdout
    );
    let out = &r.stdout;
    assert!(out.contains("run.started"), "{out}");
    // Each position shows the change its event caused: seq 0 starts the run.
    assert!(out.contains("status: - → initialized"), "{out}");
    assert!(
        out.contains(&format!(
            "checkpoint.saved     {} after approval",
            f.second_approval
        )),
        "{out}"
    );
    // `t` prints the TODO table at the checkpoint: todo_002 waits for its approval.
    let table = out
        .lines()
        .skip_while(|l| !l.starts_with("TODO"))
        .take(3)
        .collect::<Vec<_>>();
    assert!(
        table[1].starts_with("todo_001") && table[1].contains("completed"),
        "{out}"
    );
    assert!(
        table[2].starts_with("todo_002") && table[2].contains("waiting_approval"),
        "{out}"
    );
    // The last event of the abandoned branch is marked.
    assert!(out.contains("[abandoned branch]"), "{out}");
    assert!(r.stderr.contains("h for help"), "{}", r.stderr);
}

#[test]
fn replay_step_reports_bad_commands_and_goes_on() {
    let f = fixture();
    let data = f.data.clone();
    let r = step(&data, &f.run.to_string(), "p\ng 99999\nc cp_999\nfly\nn\n");
    // End of input ends the session like `q`.
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(positions(&r.stdout), [0, 1], "{}", r.stdout);
    let errors: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 4, "{}", r.stderr);
    assert!(errors[0].contains("already at seq 0"), "{}", r.stderr);
    assert!(errors[1].contains("seq 99999 is beyond"), "{}", r.stderr);
    assert!(
        errors[2].contains("checkpoint cp_999 not found"),
        "{}",
        r.stderr
    );
    assert!(
        errors[3].contains("unknown command \"fly\""),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------------------- log, checkpoints

#[test]
fn checkpoints_show_the_tree_with_the_abandoned_branch() {
    let f = fixture();
    let data = f.data.clone();
    let run = f.run.to_string();
    let table = ok(&data, &["checkpoints", &run]);
    assert!(table.contains("abandoned"), "{table}");
    let json = ok(&data, &["checkpoints", &run, "--json"]);
    for line in json.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["type"], "checkpoint");
    }
    snapshot!(
        "checkpoints",
        format!("{table}\n$ checkpoints --json\n{json}")
    );
}

#[test]
fn log_shows_the_effective_history_or_every_branch() {
    let f = fixture();
    let data = f.data.clone();
    let run = f.run.to_string();
    let json = ok(&data, &["log", &run, "--json"]);
    let seqs: Vec<u64> = json
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["type"], "event");
            assert_eq!(v["data"]["abandoned"], false);
            v["data"]["seq"].as_u64().unwrap()
        })
        .collect();
    // The effective history skips what the restore abandoned.
    let expected: Vec<u64> = (0..=f.second_approval_seq)
        .chain(f.restore_seq..=f.last_seq)
        .collect();
    assert_eq!(seqs, expected);
    snapshot!("log_json", json);

    let all = ok(&data, &["log", &run, "--all-branches"]);
    assert_eq!(all.lines().count() as u64, f.last_seq + 1);
    let marked = all.lines().filter(|l| l.starts_with("~ ")).count() as u64;
    assert_eq!(marked, f.restore_seq - f.second_approval_seq - 1, "{all}");
    snapshot!("log_all_branches", all);

    let plain = ok(&data, &["log", &run]);
    assert_eq!(plain.lines().count(), expected.len());
    assert!(
        plain.contains(&format!(
            "[abandons seq {}..={}]",
            f.second_approval_seq + 1,
            f.restore_seq - 1
        )),
        "{plain}"
    );
}

#[test]
fn runs_lists_the_run() {
    let f = fixture();
    let data = f.data.clone();
    let table = ok(&data, &["runs"]);
    assert!(table.starts_with("RUN"), "{table}");
    assert!(
        table.contains(&f.run.to_string()) && table.contains("completed"),
        "{table}"
    );
    let json = ok(&data, &["runs", "--status", "completed", "--json"]);
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["data"]["run_id"], f.run.to_string().as_str());
    assert_eq!(v["data"]["status"], "completed");
    assert_eq!(v["data"]["last_seq"], f.last_seq);
    assert_eq!(ok(&data, &["runs", "--status", "running"]), "no runs\n");
    let session = v["data"]["session_id"].as_str().unwrap();
    assert!(ok(&data, &["runs", "--session", session]).contains(&f.run.to_string()));
    assert_eq!(ok(&data, &["runs", "--session", "nobody"]), "no runs\n");
    // Newest first, of one owner.
    let owner = v["data"]["owner"].as_str().unwrap();
    let newest = ok(&data, &["runs", "--newest-first", "--owner", owner]);
    assert!(newest.contains(&f.run.to_string()), "{newest}");
    assert_eq!(ok(&data, &["runs", "--owner", "nobody"]), "no runs\n");
    assert_eq!(
        ok(&data, &["sessions", "--owner", "nobody"]),
        "no sessions\n"
    );
}

// -------------------------------------------------------------------------------------- restore

#[test]
fn restore_appends_a_restore_and_the_log_shows_the_new_branch() {
    let f = fixture();
    let data = f.data.clone();
    let run = f.run.to_string();
    let out = ok(&data, &["restore", &run, "cp_004", "--by", "tester"]);
    assert!(
        out.starts_with(&format!("restored run {run} to cp_004 (seq ")),
        "{out}"
    );
    let log = ok(&data, &["log", &run, "--all-branches"]);
    let restores: Vec<&str> = log.lines().filter(|l| l.contains("run.restored")).collect();
    assert_eq!(restores.len(), 2, "{log}");
    assert!(
        restores[1].contains("to cp_004") && restores[1].contains("by user:tester"),
        "{log}"
    );
    // Everything of the fixture after cp_004 is now abandoned, the old restore included.
    let restore_line = log
        .lines()
        .find(|l| l.contains(&format!(" {}  ", f.restore_seq)) && l.contains("run.restored"))
        .unwrap();
    assert!(restore_line.starts_with("~ "), "{log}");
    // By seq, with JSON output.
    let json = ok(&data, &["restore", &run, "--seq", "5", "--json"]);
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        (v["type"].as_str(), v["data"]["to_seq"].as_u64()),
        (Some("restore"), Some(5))
    );
    assert!(ok(&data, &["verify"]).contains("OK"));
}

// --------------------------------------------------------------------------------------- verify

#[test]
fn verify_passes_then_names_the_offset_of_a_corrupted_event() {
    let f = fixture();
    let data = f.data.clone();
    let good = run(&data, &["verify"]);
    assert_eq!(good.code, 0, "{}", good.stderr);
    assert!(
        good.stdout.starts_with(&format!(
            "checked {} events; next offset {}; 1 run(s)",
            f.last_seq + 1,
            f.last_seq + 1
        )),
        "{}",
        good.stdout
    );
    assert!(
        good.stdout
            .contains(&format!("run {}  head seq {}  hash ", f.run, f.last_seq)),
        "{}",
        good.stdout
    );
    assert!(good.stdout.ends_with("OK\n"), "{}", good.stdout);
    let json = ok(&data, &["verify", "--run", &f.run.to_string(), "--json"]);
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        (v["type"].as_str(), v["data"]["ok"].as_bool()),
        (Some("verify"), Some(true))
    );

    // Flip one byte near the end of the sled value holding offset 7, with sled opened directly.
    // A value holds one append's records, so the byte belongs to the last record of it.
    let target = {
        let db = sled::Config::new()
            .path(data.join("sled"))
            .flush_every_ms(None)
            .open()
            .unwrap();
        let events = db.open_tree("events").unwrap();
        let (key, value) = events
            .range(..=7u64.to_be_bytes())
            .next_back()
            .unwrap()
            .unwrap();
        let (next, _) = events.range(key.as_ref()..).nth(1).unwrap().unwrap();
        let mut value = chronicle_engine::store::plain_events_value(&value).unwrap();
        let i = value.len() - 3;
        value[i] ^= 0x20;
        events.insert(key, value).unwrap();
        db.flush().unwrap();
        u64::from_be_bytes(next.as_ref().try_into().unwrap()) - 1
    };
    let bad = run(&data, &["verify"]);
    assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
    let last = bad.stdout.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "FAILED at offset {target} (run {} seq {target}): ",
            f.run
        )),
        "{}",
        bad.stdout
    );
    let json = run(&data, &["verify", "--json"]);
    assert_eq!(json.code, 1);
    let v: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["data"]["problem"]["offset"], target);
    assert_eq!(v["data"]["ok"], false);
    // Reading the damaged run stops at the damage with a one-line error.
    let log = run(&data, &["log", &f.run.to_string()]);
    assert_eq!(log.code, 2);
    assert!(
        log.stderr
            .contains(&format!("corrupt log at offset {target}")),
        "{}",
        log.stderr
    );
}

// ------------------------------------------------------------------------------- bad arguments

#[test]
fn bad_arguments_exit_non_zero_with_one_line_on_stderr() {
    let f = fixture();
    let data = f.data.clone();
    let run = f.run.to_string();
    let unknown = "0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192";
    let missing = data.join("nowhere");
    let missing = missing.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["log", unknown], "not found"),
        (vec!["log", "not-a-uuid"], "invalid run id"),
        (vec!["log", &run, "--follow"], "--follow needs --server"),
        (
            vec!["log", &run, "--server", "http://127.0.0.1:9"],
            "cannot reach",
        ),
        (vec!["log", &run, "--server", "ftp://x"], "--server must be"),
        (vec!["runs", "--data", missing], "no Chronicle data"),
        (vec!["checkpoints", unknown], "not found"),
        (vec!["checkpoints", "12345"], "invalid run id"),
        (
            vec!["restore", &run, "cp_999"],
            "checkpoint cp_999 not found",
        ),
        (
            vec!["restore", &run, "--seq", "99999"],
            "seq 99999 is beyond",
        ),
        (vec!["restore", unknown, "cp_001"], "not found"),
        (vec!["restore", "x", "cp_001"], "invalid run id"),
        (vec!["verify", "--run", unknown], "not found"),
        (vec!["verify", "--run", "zz"], "invalid run id"),
        (vec!["verify", "--data", missing], "no Chronicle data"),
        (vec!["replay", &run, "--to", "99999"], "seq 99999 is beyond"),
        (
            vec!["replay", &run, "--diff", "0", "99999"],
            "seq 99999 is beyond",
        ),
        (vec!["replay", unknown], "not found"),
        (vec!["replay", "nope", "--to", "1"], "invalid run id"),
        (vec!["replay", &run, "--data", missing], "no Chronicle data"),
    ];
    for (args, expected) in cases {
        let r = run_args(&data, &args);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert_eq!(r.stdout, "", "{args:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with("error: ") && r.stderr.contains(expected),
            "{args:?}: {}",
            r.stderr
        );
    }
    // Usage errors are clap's: exit 2, the first line names the problem.
    for args in [
        vec!["replay", &run, "--to", "x"],
        vec!["replay", &run, "--to", "1", "--diff", "1", "2"],
        vec!["restore", &run, "cp_001", "--seq", "3"],
        vec!["restore", &run],
        vec!["runs", "--status", "sleeping"],
    ] {
        let r = run_args(&data, &args);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(r.stderr.starts_with("error: "), "{args:?}: {}", r.stderr);
    }
    // Nothing above changed the store.
    let v = ok(&data, &["verify"]);
    assert!(
        v.starts_with(&format!("checked {} events", f.last_seq + 1)),
        "{v}"
    );
}

/// `run` with the last `--data` winning over the default copy (clap takes the last one).
fn run_args(data: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env("CHRONICLE_DATA", data)
        .env_remove("CHRONICLE_API_TOKEN")
        .env_remove("CHRONICLE_SERVER")
        .stdin(Stdio::null());
    output(cmd.output().unwrap())
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let f = fixture();
    let data = f.data.clone();
    let mut child = chronicle(
        &data,
        &["log", &f.run.to_string(), "--all-branches", "--json"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    drop(child.stdout.take());
    let r = output(child.wait_with_output().unwrap());
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
}

#[test]
fn every_command_documents_examples_and_exit_codes() {
    let f = fixture();
    let data = f.data.clone();
    for cmd in ["log", "runs", "checkpoints", "restore", "verify", "replay"] {
        let help = ok(&data, &[cmd, "--help"]);
        assert!(
            help.contains("Examples:") && help.contains("Exit codes:"),
            "{cmd}: {help}"
        );
    }
}

// --------------------------------------------------------------------------------------- remote

/// A server on the fixture's directory, on a loopback port, with one token for `alice`.
struct Server {
    rt: tokio::runtime::Runtime,
    engine: Engine,
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

const TOKEN: &str = "s3cret-s3cret-s3cret";

impl Server {
    fn start(data: &Path) -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (engine, url, stop, done) = rt.block_on(async {
            let store = Store::open(data, Options::default()).unwrap();
            let engine = Engine::open(store, chronicle_realestate::settings())
                .await
                .unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let state = chronicle_api::AppState::new(
                engine.clone(),
                chronicle_api::Tokens::single("alice", TOKEN).unwrap(),
                chronicle_api::ApiConfig::default(),
            );
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let done = tokio::spawn(chronicle_api::serve(listener, state, async move {
                let _ = stopped.await;
            }));
            (engine, url, stop, done)
        });
        Server {
            rt,
            engine,
            url,
            stop: Some(stop),
            done: Some(done),
        }
    }

    /// Runs the binary against the server (no data directory involved).
    fn run(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
        cmd.args(args)
            .args(["--server", &self.url])
            .env("NO_COLOR", "1")
            .env("CHRONICLE_API_TOKEN", TOKEN)
            .env("CHRONICLE_DATA", "/nonexistent")
            .stdin(Stdio::null());
        output(cmd.output().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let (Some(stop), Some(done)) = (self.stop.take(), self.done.take()) {
            let _ = stop.send(());
            let _ = self.rt.block_on(done);
        }
    }
}

#[test]
fn log_checkpoints_and_restore_work_against_a_server() {
    let f = fixture();
    let run = f.run.to_string();
    let local_log = ok(&f.data, &["log", &run, "--all-branches", "--json"]);
    let local_checkpoints = ok(&f.data, &["checkpoints", &run]);
    let server = Server::start(&f.data);

    let remote = server.run(&["log", &run, "--all-branches", "--json"]);
    assert_eq!(remote.code, 0, "{}", remote.stderr);
    assert_eq!(remote.stdout, local_log);
    let remote = server.run(&["checkpoints", &run]);
    assert_eq!((remote.code, remote.stdout), (0, local_checkpoints));

    let bad = server.run(&["restore", &run, "cp_999"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.starts_with("error: checkpoint cp_999 not found"),
        "{}",
        bad.stderr
    );
    assert_eq!(bad.stderr.lines().count(), 1, "{}", bad.stderr);
    let bad = server.run(&["restore", &run, "--seq", "3"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("--seq works on a data directory only"),
        "{}",
        bad.stderr
    );
    let bad = server.run(&["log", "0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("not found (HTTP 404)"),
        "{}",
        bad.stderr
    );

    // The server records its token's principal, and continues the run at once: the restored
    // point was waiting for todo_001's approval, which is asked again.
    let restored = server.run(&["restore", &run, "cp_004", "--json"]);
    assert_eq!(restored.code, 0, "{}", restored.stderr);
    let v: Value = serde_json::from_str(restored.stdout.trim()).unwrap();
    assert_eq!(v["data"]["status"], "restored");
    let log = server.run(&["log", &run]);
    let last_restore = log
        .stdout
        .lines()
        .rfind(|l| l.contains("run.restored"))
        .unwrap();
    assert!(
        last_restore.contains("to cp_004") && last_restore.contains("by user:alice"),
        "{}",
        log.stdout
    );
}

#[test]
fn log_follow_prints_new_events_from_a_server() {
    use std::io::BufRead;
    let f = fixture();
    let run = f.run.to_string();
    let server = Server::start(&f.data);
    let mut child = Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args([
            "log",
            &run,
            "--follow",
            "--server",
            &server.url,
            "--token",
            TOKEN,
        ])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = |what: &str| {
        rx.recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no line for {what}"))
    };
    // The effective history first...
    let history = (f.second_approval_seq + 1) + (f.last_seq - f.restore_seq + 1);
    let seen: Vec<String> = (0..history).map(|_| next("the history")).collect();
    assert!(seen.last().unwrap().contains("run.end"), "{seen:#?}");
    // ...then what the server appends from now on.
    let engine = server.engine.clone();
    server
        .rt
        .block_on(engine.command(f.run, "/todos", &Principal::local()))
        .unwrap();
    let line = next("the new event");
    assert!(
        line.contains(&format!("{}", f.last_seq + 1))
            && line.contains("command.received")
            && line.contains("\"/todos\""),
        "{line}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A store with one run: RunStarted, then three 30 KB events (their bodies live in the body file).
fn large_event_store() -> (tempfile::TempDir, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::from_u128(0xB16);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let started = chronicle_schemas::Event::RunStarted {
        session_id: "s".into(),
        user_id: None,
        request_id: "req".into(),
        query: "q".into(),
        config: Default::default(),
        parent: None,
        owner: None,
        traceparent: None,
    };
    store.append_blocking(run, 0, vec![started]).unwrap();
    for seq in 1..=3 {
        let big = chronicle_schemas::Event::Reasoning {
            message: chronicle_testkit::incompressible_text(30_000, seq),
        };
        store.append_blocking(run, seq, vec![big]).unwrap();
    }
    (dir, run)
}

#[test]
fn verify_names_the_event_of_a_byte_flipped_on_disk() {
    let (dir, run_id) = large_event_store();
    let path = dir.path().join("bodies");
    let mut bytes = std::fs::read(&path).unwrap();
    // The middle of the second body: the event at offset 2 (run seq 2).
    let i = bytes.len() / 2;
    bytes[i] ^= 0x04;
    std::fs::write(&path, bytes).unwrap();
    let bad = run(dir.path(), &["verify"]);
    assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
    let last = bad.stdout.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("FAILED at offset 2 (run {run_id} seq 2): ")),
        "{}",
        bad.stdout
    );
    let json = run(dir.path(), &["verify", "--json"]);
    let v: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    let p = &v["data"]["problem"];
    assert_eq!(
        (p["offset"].as_u64(), p["seq"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(p["run_id"], run_id.to_string());
    // Reading the run stops at the damage with a one-line error naming the offset.
    let log = run(dir.path(), &["log", &run_id.to_string()]);
    assert_eq!(log.code, 2);
    assert!(
        log.stderr.contains("corrupt log at offset 2"),
        "{}",
        log.stderr
    );
}

#[test]
fn verify_does_not_panic_on_a_torn_or_emptied_sled_file() {
    for keep in [0.0, 0.5, 0.9] {
        let (dir, _) = large_event_store();
        let db = dir.path().join("sled/db");
        let len = std::fs::metadata(&db).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
        f.set_len((len as f64 * keep) as u64).unwrap();
        drop(f);
        let r = run(dir.path(), &["verify"]);
        let what = format!(
            "kept {keep} of sled's file: exit {}\n{}{}",
            r.code, r.stdout, r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{what}");
        assert!(matches!(r.code, 0..=2), "{what}");
        if r.code == 2 {
            assert_eq!(r.stderr.trim_end().lines().count(), 1, "{what}");
        }
        if keep == 0.0 {
            // Nothing of the log is left in sled, but the body file holds records: refused.
            assert_eq!(r.code, 2, "{what}");
            assert!(r.stderr.contains("lost or emptied"), "{what}");
            // The server refuses to start on it, in one line, instead of serving an empty log.
            let mut child = chronicle(dir.path(), &["serve", "--addr", "127.0.0.1:0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + WAIT;
            while child.try_wait().unwrap().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("serve started on a store whose sled files were emptied");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let s = output(child.wait_with_output().unwrap());
            assert_eq!(s.code, 2, "{}", s.stderr);
            let last = s.stderr.trim_end().lines().last().unwrap_or_default();
            assert!(
                last.starts_with("error: ") && last.contains("lost or emptied"),
                "{}",
                s.stderr
            );
        }
    }
}

/// sled's snapshot file (`sled/snap.*`) is a cache of its page table that sled rebuilds from its
/// log: a damaged one is set aside at open, so `verify` checks the whole log and `runs` lists it.
#[test]
fn verify_and_runs_read_a_store_whose_sled_snapshot_is_damaged() {
    let (dir, run_id) = large_event_store();
    // A second open writes sled's snapshot.
    drop(Store::open(dir.path(), Options::default()).unwrap());
    let snap = std::fs::read_dir(dir.path().join("sled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("snap.")
        })
        .expect("sled wrote a snapshot");
    let mut bytes = std::fs::read(&snap).unwrap();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x40;
    std::fs::write(&snap, bytes).unwrap();
    let r = run(dir.path(), &["verify"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("checked 4 events"), "{}", r.stdout);
    assert!(ok(dir.path(), &["runs"]).contains(&run_id.to_string()));
}

/// A body damaged on disk before the log's last record: the server starts, says which record
/// is damaged and what to do, and serves the rest; `chronicle verify` names the same record.
#[test]
fn serve_starts_on_a_store_with_a_damaged_body_and_names_the_record() {
    let (dir, run_id) = large_event_store();
    let path = dir.path().join("bodies");
    let mut bytes = std::fs::read(&path).unwrap();
    // The middle of the second body: the event at offset 2 (run seq 2), not the last.
    let i = bytes.len() / 2;
    bytes[i] ^= 0x04;
    std::fs::write(&path, bytes).unwrap();
    let log = dir.path().join("serve.log");
    let mut child = chronicle(dir.path(), &["serve", "--addr", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(status) = child.try_wait().unwrap() {
            panic!("serve exited with {status}:\n{text}");
        }
        if text.contains("chronicle is listening") {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not listen:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let named = text
        .lines()
        .find(|l| l.contains("damaged") && l.contains("offset 2"))
        .unwrap_or_else(|| panic!("the damaged record is named:\n{text}"));
    assert!(named.contains(&run_id.to_string()), "{named}");
    assert!(named.contains("chronicle verify"), "{named}");
    let bad = run(dir.path(), &["verify"]);
    assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
    assert!(
        bad.stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("FAILED at offset 2 "),
        "{}",
        bad.stdout
    );
}
