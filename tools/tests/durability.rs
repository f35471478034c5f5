//! Durability of the real `chronicle serve`, black-box: power loss on a file system that drops
//! every byte not fsynced (LazyFS on FUSE), an fsync that fails, and a full disk (a small tmpfs).
//! Every acknowledged (2xx) run and decision must survive; `chronicle verify` must pass. Also
//! the data directory's permissions, a file system that cannot say its size, health near the
//! disk reserve, and reads while the device fails.
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

pub(crate) fn free_port() -> u16 {
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
        Serve::start_env(data, args, log, token, &[])
    }

    /// [`Serve::start_with`] with more environment variables.
    pub(crate) fn start_env(
        data: &Path,
        args: &[&OsStr],
        log: &Path,
        token: Option<&str>,
        env: &[(&str, &str)],
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
        cmd.envs(env.iter().copied());
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

    pub(crate) fn kill(&mut self) {
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

/// A run of session `docs` whose document_team saves a document with `write_file`.
fn document_run() -> RunRequest {
    RunRequest {
        session_id: Some("docs".into()),
        hitl: Some(HitlMode::None),
        ..RunRequest::new(
            "Draft a lease contract: landlord Kim Minsu, tenant John Smith, deposit 500 million won",
        )
    }
}

/// Waits for `run`'s document_team to have its `write_file` call recorded as done; the saved
/// document's fields (`file_path`, `bytes`).
fn saved_document(rt: &tokio::runtime::Runtime, api: &Client, run: RunId) -> Value {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let state: Value = rt.block_on(api.state(run, None)).unwrap();
        let saved = &state["supervisor"]["team_results"]["document_team"]["saved_document"];
        if saved["bytes"].is_u64() {
            return saved.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no document was saved: {saved} (tool calls: {})",
            state["supervisor"]["tool_calls"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_recorded_workspace_write_survives_a_power_loss() {
    let rt = rt();
    let mut on = OnLazyFs::mount();
    let (data, log) = (on.data.clone(), on.log.clone());
    let mut serve = Serve::start(&data, None, &log);
    let run = rt
        .block_on(serve.api.start_run(&document_run()))
        .unwrap()
        .run_id;
    let saved = saved_document(&rt, &serve.api, run);
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

// ------------------------------------------------------------------------- the data directory

/// Every directory and file under `dir`, `dir` included, with its permission bits.
fn modes(dir: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        out.push((path, meta.permissions().mode() & 0o777));
    }
    out
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Other local users read nothing of what the server keeps: its new data directory is 0700 and
/// every file in it 0600 — sled's, the body file, blobs and the session workspaces included.
#[test]
fn serve_keeps_its_data_directory_private() {
    let rt = rt();
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let serve = Serve::start(&data, None, &scratch.path().join("serve.log"));
    let run = rt
        .block_on(serve.api.start_run(&document_run()))
        .unwrap()
        .run_id;
    let saved = saved_document(&rt, &serve.api, run);
    drop(serve);
    let all = modes(&data);
    let doc = saved["file_path"]
        .as_str()
        .unwrap()
        .strip_prefix("/workspace/")
        .unwrap();
    assert!(
        all.iter().any(|(p, _)| p.ends_with(doc)),
        "the document is in the data directory: {all:?}"
    );
    for (path, mode) in &all {
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} is {mode:o}", path.display());
    }
}

/// An existing data directory others may enter, and a tokens file others may read, are kept as
/// they are, with one warning line each saying how to close them.
#[test]
fn serve_warns_about_a_data_directory_or_tokens_file_open_to_others() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    std::fs::create_dir(&data).unwrap();
    chmod(&data, 0o755);
    let tokens = scratch.path().join("tokens.txt");
    std::fs::write(&tokens, "ops tok-ops-5b3e90a4f1 admin\n").unwrap();
    chmod(&tokens, 0o644);
    let log = scratch.path().join("serve.log");
    let args = [OsStr::new("--tokens"), tokens.as_os_str()];
    let serve = Serve::start_with(&data, &args, &log, None);
    let text = serve.log_text();
    let about = |path: &Path, fix: &str| {
        text.lines()
            .filter(|l| {
                l.contains("WARN") && l.contains(&path.display().to_string()) && l.contains(fix)
            })
            .count()
    };
    assert_eq!(about(&data, "chmod 700"), 1, "{text}");
    assert_eq!(about(&tokens, "chmod 600"), 1, "{text}");
    drop(serve);
    assert_eq!(modes(&data)[0].1, 0o755, "the directory is left as it was");
}

/// `--insecure` on every interface without `--allowed-host` would answer any `Host` without
/// tokens, so any web page could reach it by DNS rebinding: refused. With a name it starts.
#[test]
fn insecure_on_every_interface_needs_an_allowed_host() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let start = |extra: &[&str]| {
        let log = scratch.path().join(format!("serve{}.log", extra.len()));
        let child = Command::new(env!("CARGO_BIN_EXE_chronicle"))
            .args(["serve", "--addr", "0.0.0.0:0", "--insecure", "--data"])
            .arg(&data)
            .args(extra)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .env_remove("CHRONICLE_API_TOKEN")
            .env_remove("CHRONICLE_DATA")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (child, log)
    };
    // Until it exits or says it listens.
    let outcome = |child: &mut Child, log: &Path| {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(status) = child.try_wait().unwrap() {
                return (status.code(), text);
            }
            if text.contains("chronicle is listening") {
                let _ = child.kill();
                let _ = child.wait();
                return (None, text);
            }
            assert!(
                Instant::now() < deadline,
                "serve neither exited nor listened:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let (mut child, log) = start(&[]);
    let (code, text) = outcome(&mut child, &log);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--allowed-host"), "{text}");
    let (mut child, log) = start(&["--allowed-host", "chronicle.internal"]);
    let (code, text) = outcome(&mut child, &log);
    assert_eq!(code, None, "started: {text}");
}

// ------------------------------------------------------------------ odd file systems and damage

/// Some FUSE and network file systems report no size (`statfs`: 0 blocks). Free space that
/// cannot be known is not "none": writes go on (a full disk still shows as a failed write) and
/// health is not "full"; the server says so once.
#[test]
fn a_file_system_that_reports_no_size_takes_writes_and_is_not_full() {
    let rt = rt();
    let on = OnLazyFs::mount();
    on.fs.report_no_size(true);
    let serve = Serve::start(&on.data, None, &on.log);
    let started = rt
        .block_on(serve.api.start_run(&gated("강남구 아파트 시세 조회")))
        .unwrap_or_else(|e| panic!("{e}: {}", serve.log_text()));
    let status = wait_for_approval(&rt, &serve.api, started.run_id);
    assert!(status.last_seq.is_some_and(|s| s > 0), "{status:?}");
    let health = rt.block_on(serve.api.health()).unwrap();
    assert_eq!(health.storage, StorageState::Ok, "{health:?}");
    let text = serve.log_text();
    assert_eq!(text.matches("cannot be known").count(), 1, "{text}");
}

/// The status of `run` once it waits for an approval.
fn wait_for_approval(
    rt: &tokio::runtime::Runtime,
    api: &Client,
    run: RunId,
) -> chronicle_wire::Status {
    poll_status(rt, api, run, "no approval", |s| {
        s.pending_approval_id.is_some()
    })
}

/// The status of `run` once `done` holds, polled until [`START_TIMEOUT`]; past it the test fails
/// with `missing` and the last status.
fn poll_status(
    rt: &tokio::runtime::Runtime,
    api: &Client,
    run: RunId,
    missing: &str,
    done: impl Fn(&chronicle_wire::Status) -> bool,
) -> chronicle_wire::Status {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let status = rt.block_on(api.status(run)).unwrap();
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "{missing}: {status:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Free bytes of the file system holding `path`, for this process.
fn available_bytes(path: &Path) -> u64 {
    let st = rustix::fs::statvfs(path).unwrap();
    st.f_bavail * st.f_frsize
}

/// Near the reserve a small append may still fit while one of the largest events does not:
/// health must already say full then, or a client trusting it is refused with 507 for minutes.
/// `--disk-reserve-mib` sets the reserve.
#[test]
fn health_is_full_whenever_the_largest_event_would_be_refused() {
    const RESERVE_MIB: u64 = 8;
    let rt = rt();
    let scratch = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(scratch.path(), "48m");
    let data = tmpfs.0.join("data");
    let log = scratch.path().join("serve.log");
    let reserve = RESERVE_MIB.to_string();
    let args = [OsStr::new("--disk-reserve-mib"), OsStr::new(&reserve)];
    let serve = Serve::start_with(&data, &args, &log, None);
    let api = &serve.api;
    let run = rt
        .block_on(api.start_run(&gated("강남구 아파트 시세 조회")))
        .unwrap_or_else(|e| panic!("{e}: {}", serve.log_text()))
        .run_id;
    let approval = wait_for_approval(&rt, api, run)
        .pending_approval_id
        .unwrap();
    // The run waits: nothing more is being written.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(rt.block_on(api.health()).unwrap().storage, StorageState::Ok);

    // Leave 64 KiB above the reserve: less than an event of the largest size takes.
    let filler = tmpfs.0.join("filler");
    let fill = available_bytes(&tmpfs.0) - (RESERVE_MIB << 20) - (64 << 10);
    let f = std::fs::File::create(&filler).unwrap();
    std::io::Write::write_all(&mut &f, &vec![0u8; fill as usize]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let health = rt.block_on(api.health()).unwrap();
    assert_eq!(health.storage, StorageState::Full, "{health:?}");
    assert_eq!(health.reserve_bytes, Some(RESERVE_MIB << 20), "{health:?}");
    let comment = chronicle_testkit::incompressible_text(60_000, 7);
    let decision = DecisionRequest::approve().with_comment(comment);
    let e = rt
        .block_on(api.decide(run, &approval, &decision))
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(507), Some("insufficient_storage")),
        "{e}"
    );

    // Space freed: health and writes agree again.
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(rt.block_on(api.health()).unwrap().storage, StorageState::Ok);
    rt.block_on(api.decide(run, &approval, &decision))
        .unwrap_or_else(|e| panic!("{e}: {}", serve.log_text()));
}

/// While the device under the data directory fails, a read of a record whose body is in the
/// body file is an I/O error — 503 `storage_unavailable`, not 500 `corrupt_log`: nothing is
/// damaged, and the same read answers once the device is back.
#[test]
fn reads_while_the_body_files_device_fails_are_unavailable_not_corrupt() {
    let rt = rt();
    let on = OnLazyFs::mount();
    on.fs.bypass_page_cache();
    let serve = Serve::start(&on.data, None, &on.log);
    let api = &serve.api;
    let run = rt
        .block_on(api.start_run(&gated("강남구 아파트 시세 조회")))
        .unwrap()
        .run_id;
    // The first decision carries a comment too large for sled: its body is in the body file.
    let mut comment = Some(chronicle_testkit::incompressible_text(50_000, 3));
    loop {
        let status = wait_for_approval_or_end(&rt, api, run);
        let Some(approval) = status.pending_approval_id else {
            break;
        };
        let decision = match comment.take() {
            Some(c) => DecisionRequest::approve().with_comment(c),
            None => DecisionRequest::approve(),
        };
        // An approval the status still showed after it was decided answers 409.
        if let Err(e) = rt.block_on(api.decide(run, &approval, &decision)) {
            assert_eq!(e.status(), Some(409), "{e}");
        }
    }
    assert!(std::fs::metadata(on.data.join("bodies")).unwrap().len() > 50_000);
    let before = rt.block_on(api.log(run, 0)).unwrap();

    on.fs.fail_reads(true);
    let failed = rt.block_on(api.log(run, 0));
    on.fs.fail_reads(false);
    let e = failed.unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(503), Some("storage_unavailable")),
        "{e}"
    );
    assert_eq!(rt.block_on(api.log(run, 0)).unwrap(), before);
}

/// The status of `run` once it waits for an approval or has ended.
fn wait_for_approval_or_end(
    rt: &tokio::runtime::Runtime,
    api: &Client,
    run: RunId,
) -> chronicle_wire::Status {
    poll_status(rt, api, run, "the run neither waits nor ends", |s| {
        s.pending_approval_id.is_some() || s.state.is_terminal()
    })
}
