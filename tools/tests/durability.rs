//! Durability of the real `chronicle serve`, black-box: power loss on a file system that drops
//! every byte not fsynced (LazyFS on FUSE), an fsync that fails, and a full disk (a small tmpfs).
//! Every acknowledged (2xx) run and decision must survive; `chronicle verify` must pass.
//!
//! These tests mount file systems and need root and `/dev/fuse` (CI has both). When a mount
//! fails the test fails, loudly: it never skips.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronicle_client::{Client, Error};
use chronicle_schemas::{ApprovalId, ApprovalStatus, HitlMode, RunId};
use chronicle_wire::{DecisionRequest, InboxQuery, RunRequest, StorageState};
use serde_json::{Value, json};

use crate::cli_run::rt;
use crate::lazyfs::LazyFs;
use chronicle_testkit::tmpfs::Tmpfs;

const START_TIMEOUT: Duration = Duration::from_secs(60);
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Comments and agent results of this range of sizes: big enough that sled would have written
/// its pages to unsynced files of their own.
const LARGE_MIN: usize = 40_000;
const LARGE_MAX: usize = 60_000;

/// A `chronicle serve` child on a loopback port over `data` (killed when dropped).
pub(crate) struct Serve {
    child: Child,
    /// The client of the server (with the server's token, if it has one).
    pub(crate) api: Client,
    /// The loopback port it listens on.
    pub(crate) port: u16,
    log: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Serve {
    fn start(data: &Path, agents: Option<&Path>, log: &Path) -> Serve {
        let mut args: Vec<&OsStr> = Vec::new();
        if let Some(a) = agents {
            args.extend([OsStr::new("--agents"), a.as_os_str()]);
        }
        Serve::start_with(data, &args, log, None)
    }

    /// The server with more arguments (`--agents FILE`, `--domain generic`) and no model; its
    /// stderr goes to `log`. With `token`, the server requires it (`CHRONICLE_API_TOKEN`,
    /// principal `admin`).
    pub(crate) fn start_with(
        data: &Path,
        args: &[&OsStr],
        log: &Path,
        token: Option<&str>,
    ) -> Serve {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
        cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data"])
            .arg(data)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .env_remove("CHRONICLE_DATA")
            .env_remove("CHRONICLE_API_TOKEN")
            .env_remove("CHRONICLE_LLM_BASE_URL")
            .env_remove("CHRONICLE_LLM_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .env_remove("CHRONICLE_DOMAIN")
            .env_remove("CHRONICLE_AGENTS")
            .args(args);
        if let Some(t) = token {
            cmd.env("CHRONICLE_API_TOKEN", t);
        }
        let child = cmd.spawn().expect("chronicle serve starts");
        let mut s = Serve {
            child,
            api: Client::new(&format!("http://127.0.0.1:{port}"))
                .unwrap()
                .with_request_timeout(Duration::from_secs(20))
                .with_token(token.map(str::to_owned)),
            port,
            log: log.to_owned(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = s.child.try_wait().unwrap() {
                panic!(
                    "serve exited with {status} while starting:\n{}",
                    s.log_text()
                );
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "serve did not listen:\n{}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself; its exit code.
    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "serve did not exit:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A LazyFS mount in a scratch directory, with the data directory and server log paths.
/// (`fs` is dropped, and unmounted, before `scratch` is deleted.)
struct OnLazyFs {
    fs: LazyFs,
    /// `<mount>/data`: the server's data directory, on LazyFS.
    data: PathBuf,
    /// The server's stderr, outside the mount.
    log: PathBuf,
    scratch: tempfile::TempDir,
}

impl OnLazyFs {
    fn mount() -> OnLazyFs {
        let scratch = tempfile::tempdir().unwrap();
        let mnt = scratch.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let fs = LazyFs::mount(&mnt).expect("FUSE mounts (needs /dev/fuse, root and fuse3)");
        OnLazyFs {
            fs,
            data: mnt.join("data"),
            log: scratch.path().join("serve.log"),
            scratch,
        }
    }
}

fn verify(data: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(["verify", "--data"])
        .arg(data)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[track_caller]
fn assert_verifies(data: &Path) {
    let out = verify(data);
    assert_eq!(
        out.status.code(),
        Some(0),
        "chronicle verify:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An `http` agent on loopback whose every reply is 40-60 KB of JSON; returns the agents TOML.
fn large_result_agent(rt: &tokio::runtime::Runtime, dir: &Path) -> PathBuf {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let n = Arc::new(Mutex::new(0usize));
    let app = axum::Router::new().route(
        "/run",
        axum::routing::post(move || {
            let n = n.clone();
            async move {
                let mut k = n.lock().unwrap();
                *k += 1;
                let size = LARGE_MIN + (*k * 7919) % (LARGE_MAX - LARGE_MIN);
                // Reports that do not compress, so that their events' bodies go to the body file.
                let report = chronicle_testkit::incompressible_text(size, *k as u64);
                axum::Json(json!({"report": report, "n": *k}))
            }
        }),
    );
    rt.spawn(async move { axum::serve(listener, app).await });
    let path = dir.join("agents.toml");
    std::fs::write(
        &path,
        format!(
            "[[agent]]\nname = \"bulk\"\nurl = \"http://{addr}/run\"\ntimeout_ms = 10000\npurpose = \"returns a large report\"\n"
        ),
    )
    .unwrap();
    path
}

fn bulk_run() -> RunRequest {
    let plan = json!([{
        "agent_name": "bulk", "team": "bulk", "task": "bulk report", "description": "large",
        "priority": 0, "dependencies": [], "input_mapping": {}, "timeout": 30,
        "retry_count": 0, "optional": false,
    }]);
    RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        plan: Some(serde_json::from_value(plan).unwrap()),
        ..RunRequest::new("bulk report")
    }
}

fn gated(query: &str) -> RunRequest {
    RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        ..RunRequest::new(query)
    }
}

/// What the server acknowledged: run ids, and decided approvals with their comment's size; and
/// any 500 it answered (a power loss explains refused and failed requests, never a 500).
#[derive(Default)]
struct Acked {
    runs: Vec<RunId>,
    /// In the order they were acknowledged.
    decisions: Vec<((RunId, ApprovalId), usize)>,
    internal_errors: Vec<String>,
}

impl Acked {
    /// How many runs and decisions so far (where the next check starts).
    fn mark(&self) -> (usize, usize) {
        (self.runs.len(), self.decisions.len())
    }
}

/// Whether to go on after an answer: a 2xx. A 500 is recorded as a finding.
fn accepted<T>(answer: Result<T, Error>, what: &str, acked: &Mutex<Acked>) -> Option<T> {
    match answer {
        Ok(v) => Some(v),
        Err(e) => {
            if e.status() == Some(500) {
                acked
                    .lock()
                    .unwrap()
                    .internal_errors
                    .push(format!("{what}: {e}"));
            }
            None
        }
    }
}

/// One client: start a run, decide its approval with a large comment, repeat until `stop`.
async fn client_loop(api: Client, seed: usize, acked: Arc<Mutex<Acked>>, stop: Arc<Mutex<bool>>) {
    let mut k = seed;
    while !*stop.lock().unwrap() {
        k += 1;
        let Some(started) = accepted(api.start_run(&bulk_run()).await, "start a run", &acked)
        else {
            return;
        };
        let run = started.run_id;
        acked.lock().unwrap().runs.push(run);
        // Wait for the approval, then decide it with a 40-60 KB comment.
        let approval = loop {
            if *stop.lock().unwrap() {
                return;
            }
            let Some(list) = accepted(api.approvals(run).await, "list approvals", &acked) else {
                return;
            };
            if let Some(a) = list
                .iter()
                .find(|a| a.approval.status == ApprovalStatus::Pending)
            {
                break a.id.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let size = LARGE_MIN + (k * 104_729) % (LARGE_MAX - LARGE_MIN);
        let comment = chronicle_testkit::incompressible_text(size, k as u64);
        let decision = DecisionRequest::approve().with_comment(comment);
        if accepted(
            api.decide(run, &approval, &decision).await,
            "decide",
            &acked,
        )
        .is_some()
        {
            acked
                .lock()
                .unwrap()
                .decisions
                .push(((run, approval), size));
        }
    }
}

/// Every acknowledged run from the `from_run`-th on exists, and every acknowledged decision from
/// the `from_decision`-th on is recorded, whole.
async fn check_acked(api: &Client, acked: &Acked, (from_run, from_decision): (usize, usize)) {
    for run in &acked.runs[from_run..] {
        if let Err(e) = api.status(*run).await {
            panic!("acknowledged run {run} is lost: {e}");
        }
    }
    for ((run, approval), size) in acked.decisions.iter().skip(from_decision) {
        let a = api.approval(*run, approval).await.unwrap().approval;
        assert_eq!(
            a.status,
            ApprovalStatus::Approved,
            "acknowledged decision lost: {a:?}"
        );
        assert_eq!(a.comment.as_deref().map(str::len), Some(*size));
    }
}

fn cycles() -> usize {
    if std::env::var_os("CHRONICLE_LONG").is_some_and(|v| v == "1") {
        200
    } else {
        20
    }
}

#[test]
fn power_loss_never_loses_an_acknowledged_run_or_decision() {
    let rt = rt();
    let mut on = OnLazyFs::mount();
    let (data, log) = (on.data.clone(), on.log.clone());
    let agents = large_result_agent(&rt, on.scratch.path());
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut before_fsync = 0;
    // After each power loss: what the cycle before acknowledged (`chronicle verify` checks the
    // whole log every cycle; the end checks every acknowledgement again).
    let mut checked = (0, 0);
    for cycle in 0..cycles() {
        let mut serve = Serve::start(&data, Some(&agents), &log);
        let mark = acked.lock().unwrap().mark();
        rt.block_on(check_acked(&serve.api, &acked.lock().unwrap(), checked));
        checked = mark;
        // Every third cycle the power goes right before one of the next fsyncs; the others
        // lose it at an arbitrary moment.
        let at_fsync = cycle % 3 == 1;
        if at_fsync {
            on.fs.crash_at_fsync(5 + (cycle as u64 * 37) % 60);
        }
        let stop = Arc::new(Mutex::new(false));
        let clients: Vec<_> = (0..4)
            .map(|i| {
                rt.spawn(client_loop(
                    serve.api.clone(),
                    cycle * 100 + i * 10,
                    acked.clone(),
                    stop.clone(),
                ))
            })
            .collect();
        let deadline = Instant::now() + Duration::from_millis(400 + (cycle as u64 * 131) % 900);
        while Instant::now() < deadline && !on.fs.crashed() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if at_fsync && on.fs.crashed() {
            before_fsync += 1;
        }
        serve.kill();
        *stop.lock().unwrap() = true;
        for c in clients {
            let _ = rt.block_on(c);
        }
        // Every third cycle the kernel had also written back part of what was never synced.
        if cycle % 3 == 2 {
            on.fs.power_loss_with_writeback(cycle as u64);
        } else {
            on.fs.power_loss();
        }
        on.fs.remount().expect("FUSE remounts");
        assert_verifies(&data);
    }
    let serve = Serve::start(&data, Some(&agents), &log);
    let acked = acked.lock().unwrap();
    rt.block_on(check_acked(&serve.api, &acked, (0, 0)));
    assert!(
        acked.internal_errors.is_empty(),
        "{:?}",
        acked.internal_errors
    );
    eprintln!(
        "power loss: {} cycles ({before_fsync} right before an fsync, {} with partial writeback), {} runs and {} decisions acknowledged, 0 lost",
        cycles(),
        cycles() / 3,
        acked.runs.len(),
        acked.decisions.len()
    );
    assert!(
        acked.decisions.len() >= cycles(),
        "the workload made too little progress to mean anything: {} decisions",
        acked.decisions.len()
    );
    assert!(
        before_fsync > 0,
        "no cycle lost power right before an fsync"
    );
    let bodies = std::fs::metadata(data.join("bodies")).map_or(0, |m| m.len());
    assert!(
        bodies > LARGE_MIN as u64,
        "the large records went to the body file: {bodies} bytes"
    );
}

#[test]
fn a_failed_fsync_stops_the_server_and_a_restart_recovers_what_was_acknowledged() {
    let rt = rt();
    let mut on = OnLazyFs::mount();
    let (data, log) = (on.data.clone(), on.log.clone());
    let mut serve = Serve::start(&data, None, &log);
    let start = |api: &Client| rt.block_on(api.start_run(&gated("강남구 아파트 시세 조회")));
    let mut acked = Vec::new();
    for _ in 0..3 {
        acked.push(start(&serve.api).unwrap().run_id);
    }
    // Let the runs reach their approvals: nothing is being written when the fsync fails.
    std::thread::sleep(Duration::from_millis(500));
    on.fs.fail_next_fsync();
    // The server may also be gone before it answers: then nothing was acknowledged either.
    if let Ok(started) = start(&serve.api) {
        panic!("acknowledged after a failed fsync: {started:?}");
    }
    assert_eq!(serve.wait_exit(), Some(3), "{}", serve.log_text());
    assert!(
        serve.log_text().contains("storage failed"),
        "{}",
        serve.log_text()
    );
    drop(serve);
    on.fs.power_loss();
    on.fs.remount().unwrap();
    assert_verifies(&data);
    let serve = Serve::start(&data, None, &log);
    for run in &acked {
        if let Err(e) = rt.block_on(serve.api.status(*run)) {
            panic!("acknowledged run {run} lost: {e}");
        }
    }
}

#[test]
fn a_full_disk_is_507_reads_keep_working_and_appends_resume_when_space_frees() {
    let rt = rt();
    let scratch = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(scratch.path(), "160m");
    let data = tmpfs.0.join("data");
    let log = scratch.path().join("serve.log");
    let serve = Serve::start(&data, None, &log);
    let api = &serve.api;
    let post_run = || rt.block_on(api.start_run(&gated("강남구 아파트 시세 조회")));
    let first = post_run().unwrap().run_id;
    std::thread::sleep(Duration::from_millis(300));
    let health = rt.block_on(api.health()).unwrap();
    assert_eq!(health.storage, StorageState::Ok);
    let filler = tmpfs.fill();

    // Full: appends are 507 and change nothing; reads and the inbox answer; health says so (503,
    // which the client reads as the health it is).
    let before = rt.block_on(api.health()).unwrap().durable_next_offset;
    let e = post_run().unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(507), Some("insufficient_storage")),
        "{e}"
    );
    let health = rt.block_on(api.health()).unwrap();
    assert_eq!(health.storage, StorageState::Full, "{health:?}");
    assert_eq!(
        health.durable_next_offset, before,
        "a refused append wrote nothing"
    );
    rt.block_on(api.status(first)).unwrap();
    rt.block_on(api.inbox(&InboxQuery::default())).unwrap();
    rt.block_on(api.log(first, 0)).unwrap();

    // Space freed: appends succeed again without a restart.
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(rt.block_on(api.health()).unwrap().storage, StorageState::Ok);
    let second = post_run()
        .unwrap_or_else(|e| panic!("{e}: {}", serve.log_text()))
        .run_id;
    for run in [first, second] {
        rt.block_on(api.status(run)).unwrap();
    }
    drop(serve);
    assert_verifies(&data);
}

#[test]
fn a_recorded_workspace_write_survives_a_power_loss() {
    let rt = rt();
    let mut on = OnLazyFs::mount();
    let (data, log) = (on.data.clone(), on.log.clone());
    let mut serve = Serve::start(&data, None, &log);
    let req = RunRequest {
        session_id: Some("docs".into()),
        hitl: Some(HitlMode::None),
        ..RunRequest::new(
            "Draft a lease contract: landlord Kim Minsu, tenant John Smith, deposit 500 million won",
        )
    };
    let run = rt.block_on(serve.api.start_run(&req)).unwrap().run_id;
    // Wait for document_team's write_file call to be recorded as done.
    let deadline = Instant::now() + START_TIMEOUT;
    let saved = loop {
        let state: Value = rt.block_on(serve.api.state(run, None)).unwrap();
        let saved = &state["supervisor"]["team_results"]["document_team"]["saved_document"];
        if saved["bytes"].is_u64() {
            break saved.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no document was saved: {saved} (tool calls: {})",
            state["supervisor"]["tool_calls"]
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    serve.kill();
    on.fs.power_loss();
    on.fs.remount().unwrap();
    let path = saved["file_path"].as_str().unwrap();
    let file = data
        .join("workspaces/docs")
        .join(path.strip_prefix("/workspace/").unwrap());
    let content = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        content.len() as u64,
        saved["bytes"].as_u64().unwrap(),
        "{path}"
    );
    assert!(content.contains("John Smith"));
}
