//! `chronicle serve --store postgres://…` against a real PostgreSQL that crashes under load
//! (`pg_ctl stop -m immediate`, then started again), and `chronicle store copy` of a sled store
//! onto PostgreSQL. The server gets its own throwaway cluster (not the one the other tests
//! share), started by `tests/postgres/server.sh`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronicle_client::Client;
use chronicle_schemas::{ApprovalId, ApprovalStatus, HitlMode, RunId};
use chronicle_wire::{DecisionRequest, RunRequest};

use crate::cli_run::rt;
use crate::durability::{Serve, free_port};

/// A PostgreSQL cluster of this test's own, on a free port in a temporary directory.
struct OwnPostgres {
    port: u16,
    dir: PathBuf,
    _scratch: tempfile::TempDir,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/postgres/server.sh")
}

impl OwnPostgres {
    fn start() -> OwnPostgres {
        let scratch = tempfile::tempdir().unwrap();
        let pg = OwnPostgres {
            port: free_port(),
            dir: scratch.path().join("pg"),
            _scratch: scratch,
        };
        pg.script("start");
        pg
    }

    fn script(&self, what: &str) {
        let out = Command::new("bash")
            .arg(script())
            .arg(what)
            .env("CHRONICLE_PG_PORT", self.port.to_string())
            .env("CHRONICLE_PG_DIR", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "server.sh {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn url(&self, schema: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?schema={schema}",
            self.port
        )
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        self.script("stop");
    }
}

fn gated(query: &str) -> RunRequest {
    RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        ..RunRequest::new(query)
    }
}

/// What the server acknowledged, and how it refused.
#[derive(Default)]
struct Seen {
    runs: Vec<RunId>,
    decisions: Vec<(RunId, ApprovalId)>,
    unavailable: usize,
    other_errors: Vec<String>,
}

impl Seen {
    /// Counts a refusal: 503 is what an outage may answer; anything else is a finding (a
    /// connection refused would mean the server died, a 500 that it failed).
    fn refused(&mut self, what: &str, e: &chronicle_client::Error) {
        if e.status() == Some(503) {
            self.unavailable += 1;
        } else {
            self.other_errors.push(format!("{what}: {e}"));
        }
    }
}

/// One client: start a gated run, decide its first approval, again, until `stop`; refusals are
/// counted and the loop goes on.
async fn client(api: Client, seen: Arc<Mutex<Seen>>, stop: Arc<Mutex<bool>>) {
    let pause = || tokio::time::sleep(Duration::from_millis(50));
    'runs: while !*stop.lock().unwrap() {
        let run = match api.start_run(&gated("강남구 아파트 시세 조회")).await {
            Ok(started) => started.run_id,
            Err(e) => {
                seen.lock().unwrap().refused("start a run", &e);
                pause().await;
                continue;
            }
        };
        seen.lock().unwrap().runs.push(run);
        let approval = loop {
            if *stop.lock().unwrap() {
                return;
            }
            match api.approvals(run).await {
                Ok(list) => {
                    if let Some(a) = list
                        .iter()
                        .find(|a| a.approval.status == ApprovalStatus::Pending)
                    {
                        break a.id.clone();
                    }
                }
                Err(e) => seen.lock().unwrap().refused("list approvals", &e),
            }
            pause().await;
        };
        loop {
            match api
                .decide(run, &approval, &DecisionRequest::approve())
                .await
            {
                Ok(_) => {
                    seen.lock().unwrap().decisions.push((run, approval));
                    continue 'runs;
                }
                // Decided already: an earlier answer was lost with the connection.
                Err(e) if e.status() == Some(409) => continue 'runs,
                Err(e) => seen.lock().unwrap().refused("decide", &e),
            }
            if *stop.lock().unwrap() {
                return;
            }
            pause().await;
        }
    }
}

const CRASHES: usize = 10;

#[test]
fn postgres_crashing_under_load_loses_nothing_acknowledged_and_the_server_recovers() {
    let _machine = crate::heavy();
    let rt = rt();
    let pg = OwnPostgres::start();
    let url = pg.url("crash");
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("serve.log");
    let serve = Serve::start_with(
        &scratch.path().join("data"),
        &[OsStr::new("--store"), OsStr::new(&url)],
        &log,
        None,
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(Mutex::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| rt.spawn(client(serve.api.clone(), seen.clone(), stop.clone())))
        .collect();
    let mut rng_state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |lo: u64, hi: u64| {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        lo + rng_state % (hi - lo)
    };
    for _ in 0..CRASHES {
        std::thread::sleep(Duration::from_millis(next(300, 1200)));
        pg.script("crash");
        std::thread::sleep(Duration::from_millis(next(200, 800)));
        pg.script("start");
    }
    // Back up: a while for the runs caught by the last crash to go on.
    std::thread::sleep(Duration::from_secs(2));
    *stop.lock().unwrap() = true;
    for c in clients {
        rt.block_on(c).unwrap();
    }
    let seen = seen.lock().unwrap();
    assert!(
        seen.other_errors.is_empty(),
        "refusals other than 503: {:?}\n{}",
        seen.other_errors,
        serve.log_text()
    );
    assert!(seen.unavailable > 0, "no request met the outages");
    assert!(
        seen.decisions.len() >= CRASHES,
        "too little work to mean anything: {} decisions",
        seen.decisions.len()
    );
    // Every acknowledged run and decision is there.
    rt.block_on(async {
        for run in &seen.runs {
            serve
                .api
                .status(*run)
                .await
                .unwrap_or_else(|e| panic!("acknowledged run {run} is lost: {e}"));
        }
        for (run, approval) in &seen.decisions {
            let a = serve.api.approval(*run, approval).await.unwrap().approval;
            assert_eq!(a.status, ApprovalStatus::Approved, "decision lost: {a:?}");
        }
    });
    // The server recovered: a new run goes as far as its first approval, and the runs the
    // outages caught go on by themselves.
    rt.block_on(async {
        let run = serve
            .api
            .start_run(&gated("서초구 아파트 시세"))
            .await
            .expect("a run starts after the outages")
            .run_id;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = serve.api.status(run).await.unwrap();
            if s.pending_approval_id.is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new run did not progress: {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    // And none of the runs the outages caught is left stuck: each waits for a person again, or
    // ended.
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        for run in &seen.runs {
            loop {
                let s = serve.api.status(*run).await.unwrap();
                if s.pending_approval_id.is_some() || s.state.is_terminal() {
                    break;
                }
                assert!(Instant::now() < deadline, "run {run} is stuck: {s:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    // The log: dense offsets, every chain intact, read while the server runs.
    let verify = Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(["verify", "--store", &url])
        .env_remove("CHRONICLE_DATA")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    eprintln!(
        "PostgreSQL crashed {CRASHES} times under load: {} runs and {} decisions acknowledged, 0 lost; {} requests answered 503 during the outages",
        seen.runs.len(),
        seen.decisions.len(),
        seen.unavailable
    );
}

/// Runs of a sled store: most answered without a person, every fourth with each TODO approved
/// and every eighth with its first TODO rejected.
async fn fill(dir: &Path, runs: usize) {
    use chronicle_engine::store::{Options, Store};
    use chronicle_engine::{Engine, Principal, StartRun};
    let engine = Engine::open(
        Store::open(dir, Options::default()).unwrap(),
        chronicle_realestate::settings(),
    )
    .await
    .unwrap();
    let wait = Duration::from_secs(60);
    for batch in (0..runs).collect::<Vec<_>>().chunks(50) {
        let mut started = Vec::new();
        for &i in batch {
            let hitl = if i % 4 == 0 {
                HitlMode::EveryTodo
            } else {
                HitlMode::None
            };
            let req = StartRun {
                query: format!("강남구 아파트 시세 {i}"),
                hitl: Some(hitl),
                ..Default::default()
            };
            started.push((i, engine.start_run(req).await.unwrap().run_id));
        }
        for (i, run) in started {
            let state = engine.wait_settled(run, wait).await.unwrap();
            if !state.supervisor.pending_approval_ids.is_empty() {
                let command = if i % 8 == 0 {
                    "/todo reject"
                } else {
                    "/todo approve"
                };
                engine
                    .command(run, command, &Principal::local())
                    .await
                    .unwrap();
                engine.wait_settled(run, wait).await.unwrap();
            }
        }
    }
    engine.shutdown().await;
}

fn chronicle(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(args)
        .env_remove("CHRONICLE_DATA")
        .env_remove("CHRONICLE_STORE")
        .output()
        .unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = chronicle(args);
    assert!(
        out.status.success(),
        "chronicle {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `chronicle store copy` of a sled store of a few thousand runs: the copy verifies to the same
/// heads, every run's state and the audit export are the same from either store, and a second
/// copy into the same schema is refused.
#[test]
fn a_sled_store_copied_onto_postgres_reads_the_same() {
    use chronicle_engine::store::{Create, Options, Store};
    const RUNS: usize = 2000;
    let rt = rt();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("data");
    rt.block_on(fill(&dir, RUNS));
    let url =
        chronicle_testkit::postgres::url_with_schema(&chronicle_testkit::postgres::fresh_schema());
    let from = format!("sled:{}", dir.display());
    let report = stdout_of(&["store", "copy", "--from", &from, "--to", &url, "--json"]);
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    assert_eq!(report["data"]["runs"], RUNS, "{report}");
    let data = dir.to_str().unwrap();
    assert_eq!(
        stdout_of(&["verify", "--data", data]),
        stdout_of(&["verify", "--store", &url])
    );
    let sled_audit = stdout_of(&["audit", "export", "--data", data]);
    assert!(sled_audit.lines().count() >= RUNS / 4, "{sled_audit}");
    assert_eq!(sled_audit, stdout_of(&["audit", "export", "--store", &url]));
    assert_eq!(
        stdout_of(&["runs", "--data", data, "--json"]),
        stdout_of(&["runs", "--store", &url, "--json"])
    );
    // Every run's state, folded from each store.
    let sled = Store::open(&dir, Options::default()).unwrap();
    let pg = Store::open_postgres(&url, Options::default(), Create::No).unwrap();
    let mut runs = 0;
    for head in sled.runs() {
        let head = head.unwrap();
        assert_eq!(pg.run_head(head.run_id).unwrap().as_ref(), Some(&head));
        assert_eq!(
            sled.state_at(head.run_id, head.last_seq).unwrap(),
            pg.state_at(head.run_id, head.last_seq).unwrap()
        );
        runs += 1;
    }
    assert_eq!(runs, RUNS);
    drop((sled, pg));
    // The target is not empty any more: a second copy is refused and changes nothing.
    let again = chronicle(&["store", "copy", "--from", &from, "--to", &url]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let target = chronicle_engine::store::Target::parse(&url).unwrap();
    chronicle_engine::store::PgLog::drop_schema(&target).unwrap();
}

/// A `chronicle serve` on `url` that is expected to exit while starting: its exit code and log.
fn serve_exits(url: &str, scratch: &Path) -> (Option<i32>, String) {
    let log = scratch.join("refused.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(["serve", "--addr", "127.0.0.1:0", "--store", url, "--data"])
        .arg(scratch.join("data-refused"))
        .env_remove("CHRONICLE_DATA")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), std::fs::read_to_string(&log).unwrap());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the second server did not exit: {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `store migrate` makes a store's schema once. One server per store: a second `chronicle serve`
/// on the same schema is refused (exit 2, saying why), a read command works beside the first, and
/// once the first is gone a server starts.
#[test]
fn a_second_server_on_one_store_is_refused_and_a_reader_is_not() {
    let url =
        chronicle_testkit::postgres::url_with_schema(&chronicle_testkit::postgres::fresh_schema());
    // `store migrate` makes the schema once; again, it has nothing to do.
    let made = stdout_of(&["store", "migrate", "--store", &url]);
    assert!(made.starts_with("created the store at "), "{made}");
    let again = stdout_of(&["store", "migrate", "--store", &url]);
    assert!(again.contains("nothing to do"), "{again}");
    let scratch = tempfile::tempdir().unwrap();
    let mut first = Serve::start_with(
        &scratch.path().join("data"),
        &[OsStr::new("--store"), OsStr::new(&url)],
        &scratch.path().join("first.log"),
        None,
    );
    let (code, log) = serve_exits(&url, scratch.path());
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("another server holds the store"), "{log}");
    stdout_of(&["runs", "--store", &url]);
    first.kill();
    let again = Serve::start_with(
        &scratch.path().join("data"),
        &[OsStr::new("--store"), OsStr::new(&url)],
        &scratch.path().join("again.log"),
        None,
    );
    rt().block_on(again.api.health()).unwrap();
    drop(again);
    let target = chronicle_engine::store::Target::parse(&url).unwrap();
    chronicle_engine::store::PgLog::drop_schema(&target).unwrap();
}

/// A server whose database runs with `fsync=off` says at start that acknowledged commits could
/// be lost.
#[test]
fn serve_warns_when_the_database_runs_without_fsync() {
    let pg = OwnPostgres::start();
    let psql = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &pg.port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
        ])
        .args([
            "-c",
            "ALTER SYSTEM SET fsync = off",
            "-c",
            "SELECT pg_reload_conf()",
        ])
        .output()
        .unwrap();
    assert!(
        psql.status.success(),
        "{}",
        String::from_utf8_lossy(&psql.stderr)
    );
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("serve.log");
    let url = pg.url("fsync");
    let serve = Serve::start_with(
        &scratch.path().join("data"),
        &[OsStr::new("--store"), OsStr::new(&url)],
        &log,
        None,
    );
    rt().block_on(serve.api.health()).unwrap();
    let text = serve.log_text();
    assert!(text.contains("fsync=off"), "{text}");
}
