//! Several `chronicle serve` nodes on one PostgreSQL store (the tests' throwaway server): any
//! node answers, a change reaches the node that drives its session, a killed node's runs go on
//! elsewhere, a stopped-and-resumed node is fenced, a graceful stop hands its sessions over, and
//! a retried start with the same `Idempotency-Key` gives one run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronicle_client::{Client, EventsFrom, StreamItem};
use chronicle_engine::store::{Create, Options, PgLog, Store};
use chronicle_schemas::{ApprovalId, ApprovalStatus, HitlMode, RunId};
use chronicle_testkit::model::Gate;
use chronicle_wire::{DecisionRequest, RunRequest, Status};

use crate::cli_run::{GANGNAM_STATION_QUERY, MODEL_KEY, STREAMED_ANSWER, gated_model, rt};
use crate::durability::free_port;

const ALICE: &str = "alice-token-0123456789abcdef";
const OPS: &str = "ops-token-0123456789abcdef01";
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Fast timing, so that the tests see deaths and releases in a second or two.
const FAST: &[&str] = &[
    "--heartbeat-ms",
    "200",
    "--crash-grace-ms",
    "400",
    "--lease-ms",
    "2000",
];

/// A store several nodes share, with the files every node is given.
struct Cluster {
    url: String,
    scratch: tempfile::TempDir,
    /// The store, opened as a reader: who owns which session.
    store: Store,
}

impl Cluster {
    fn new() -> Cluster {
        let url = chronicle_testkit::postgres::url_with_schema(
            &chronicle_testkit::postgres::fresh_schema(),
        );
        let store =
            Store::from_log(PgLog::open(&url, Options::default(), Create::IfAbsent).unwrap());
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(
            scratch.path().join("cluster.token"),
            "cluster-secret-0123456789abcdef\n",
        )
        .unwrap();
        std::fs::write(
            scratch.path().join("tokens.txt"),
            format!("alice {ALICE}\nops {OPS} admin\n"),
        )
        .unwrap();
        std::fs::create_dir(scratch.path().join("workspaces")).unwrap();
        Cluster {
            url,
            scratch,
            store,
        }
    }

    /// A node named `name`, started, with `extra` flags.
    fn node(&self, name: &str, extra: &[&str]) -> Node {
        self.node_with_env(name, extra, &[])
    }

    /// [`Cluster::node`] with these environment variables.
    fn node_with_env(&self, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Node {
        let dir = self.scratch.path();
        let port = free_port();
        let mut args: Vec<String> = [
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data",
            &dir.join(name).to_string_lossy(),
            "--store",
            &self.url,
            "--node-name",
            name,
            "--cluster-token-file",
            &dir.join("cluster.token").to_string_lossy(),
            "--workspace-root",
            &dir.join("workspaces").to_string_lossy(),
            "--tokens",
            &dir.join("tokens.txt").to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let base = format!("http://127.0.0.1:{port}");
        let client = |token: &str| {
            Client::new(&base)
                .unwrap()
                .with_request_timeout(Duration::from_secs(20))
                .with_token(Some(token.to_owned()))
        };
        let mut node = Node {
            name: name.to_owned(),
            args,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            log: dir.join(format!("{name}.log")),
            child: None,
            alice: client(ALICE),
            ops: client(OPS),
        };
        node.start();
        node
    }

    /// The node that owns `session` now.
    fn owner(&self, session: &str) -> Option<String> {
        let m = self.store.membership().expect("a shared store");
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(m.owner(session))
            .unwrap()
            .map(|n| n.name)
    }

    /// Waits until `done(owner)` holds for `session`'s owner.
    fn wait_owner(&self, session: &str, within: Duration, done: impl Fn(Option<&str>) -> bool) {
        let deadline = Instant::now() + within;
        loop {
            let owner = self.owner(session);
            if done(owner.as_deref()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "session {session} is still owned by {owner:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn verify(&self) {
        let out = Command::new(env!("CARGO_BIN_EXE_chronicle"))
            .args(["verify", "--store", &self.url])
            .env_remove("CHRONICLE_DATA")
            .env_remove("CHRONICLE_STORE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A `chronicle serve` node (killed when dropped).
struct Node {
    name: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    /// Clients as `alice` (an ordinary principal) and as `ops` (an admin).
    alice: Client,
    ops: Client,
}

impl Node {
    /// Starts the process (again, on the same port) and waits until it answers.
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_chronicle"))
            .args(&self.args)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn,chronicle_store::pg_log::nodes=info")
            .env_remove("CHRONICLE_DATA")
            .env_remove("CHRONICLE_STORE")
            .env_remove("CHRONICLE_API_TOKEN")
            .env_remove("CHRONICLE_LLM_BASE_URL")
            .env_remove("CHRONICLE_LLM_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("CHRONICLE_DOMAIN")
            .env_remove("CHRONICLE_AGENTS")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("chronicle serve starts");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "{} exited with {status} while starting:\n{}",
                    self.name,
                    self.log_text()
                );
            }
            if self.healthy() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not start:\n{}",
                self.name,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The status of `GET path` with `headers` (lines, each ending in CRLF), asked without a
    /// runtime (the clients' connections belong to the test's); 0 when nothing answers.
    fn status_of(&self, path: &str, headers: &str) -> u16 {
        use std::io::{Read, Write};
        let addr = self.ops.base().trim_start_matches("http://").to_owned();
        let Ok(mut conn) = std::net::TcpStream::connect(&addr) else {
            return 0;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let asked = write!(conn, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{headers}\r\n");
        let mut head = [0u8; 12];
        if asked.is_err() || conn.read_exact(&mut head).is_err() {
            return 0;
        }
        std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn healthy(&self) -> bool {
        self.status_of("/healthz", "") == 200
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {}", self.name);
    }

    /// SIGKILL, and the process reaped.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits (up to `within`) for the process to exit by itself; its exit code.
    fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.as_mut().expect("running").try_wait().unwrap() {
                self.child = None;
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit:\n{}",
                self.name,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A node that keeps its sessions (never releases them idle).
const KEEPS: &[&str] = &["--release-idle-ms", "600000"];

/// A gated run started on `node`, waiting for its first approval, in a session `node` owns: the
/// run, its session and the approval.
fn waiting_on(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    node: &Node,
    query: &str,
) -> (RunId, String, ApprovalId) {
    let started = rt.block_on(node.alice.start_run(&gated(query))).unwrap();
    let approval = rt.block_on(pending(
        &node.alice,
        started.run_id,
        Duration::from_secs(30),
    ));
    let session = started.session_id.to_string();
    assert_eq!(cluster.owner(&session).as_deref(), Some(node.name.as_str()));
    (started.run_id, session, approval)
}

fn gated(query: &str) -> RunRequest {
    RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        ..RunRequest::new(query)
    }
}

/// Polls `api` until the run waits for a person (its pending approval) or `within` passes.
async fn pending(api: &Client, run: RunId, within: Duration) -> ApprovalId {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Status {
            pending_approval_id: Some(a),
            ..
        }) = api.status(run).await
        {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} did not wait for a person"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `api` until the run ended.
async fn ended(api: &Client, run: RunId, within: Duration) -> Status {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(s) = api.status(run).await
            && s.state.is_terminal()
        {
            return s;
        }
        assert!(Instant::now() < deadline, "run {run} did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Decides `approval` through `api`, again while the answer is a retryable 503 (the session's
/// node is being replaced).
async fn decide_retrying(
    api: &Client,
    run: RunId,
    approval: &ApprovalId,
) -> chronicle_wire::DecisionAccepted {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.decide(run, approval, &DecisionRequest::approve()).await {
            Ok(d) => return d,
            Err(e) if e.status() == Some(503) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("deciding {approval} of {run}: {e}"),
        }
    }
}

#[test]
fn a_decision_sent_to_any_node_is_the_owners_decision_forwarded_claimed_or_taken_over() {
    let rt = rt();
    let cluster = Cluster::new();
    // A keeps its sessions (it never releases them idle); C releases them at once.
    let a = cluster.node("a", &[FAST, KEEPS].concat());
    let b = cluster.node("b", FAST);
    let c = cluster.node("c", &[FAST, &["--release-idle-ms", "100"]].concat());
    let within = Duration::from_secs(30);

    // A alive and driving the session: B forwards the decision to A.
    let (run, session, first) = waiting_on(&rt, &cluster, &a, "강남구 아파트 시세");
    let forwarded = rt
        .block_on(b.alice.decide(run, &first, &DecisionRequest::approve()))
        .unwrap();
    assert_eq!(forwarded.approval.approval.status, ApprovalStatus::Approved);
    assert_eq!(
        forwarded.approval.approval.decided_by.as_deref(),
        Some("alice")
    );
    assert_eq!(
        cluster.owner(&session).as_deref(),
        Some("a"),
        "forwarded, not taken"
    );
    // The same decision made on A itself answers the same.
    let second = rt.block_on(pending(&a.alice, run, within));
    assert_ne!(second, first);
    let local = rt
        .block_on(a.alice.decide(run, &second, &DecisionRequest::approve()))
        .unwrap();
    assert_eq!(
        local.approval.approval.status,
        forwarded.approval.approval.status
    );
    assert_eq!(
        local.approval.approval.decided_by,
        forwarded.approval.approval.decided_by
    );
    // Someone else's run is not found through the forwarding node either.
    let theirs = rt
        .block_on(b.ops.start_run(&gated("서초구 아파트")))
        .unwrap();
    let err = rt.block_on(a.alice.status(theirs.run_id)).unwrap_err();
    assert_eq!(err.status(), Some(404));
    // A forged cluster request is refused.
    let forged = b.status_of(
        &format!("/api/v1/agent/{}/status", run),
        "x-chronicle-cluster-token: not-the-cluster-secret-at-all\r\n\
         x-chronicle-principal: admin:6f7073\r\n",
    );
    assert_eq!(forged, 401);

    // Released while it waits (C lets its sessions go at once): B claims it and decides.
    let parked = rt
        .block_on(c.alice.start_run(&gated("송파구 아파트 시세")))
        .unwrap();
    let approval = rt.block_on(pending(&c.alice, parked.run_id, within));
    cluster.wait_owner(parked.session_id.as_str(), within, |o| o.is_none());
    let claimed = rt
        .block_on(
            b.alice
                .decide(parked.run_id, &approval, &DecisionRequest::approve()),
        )
        .unwrap();
    assert_eq!(
        claimed.approval.approval.decided_by.as_deref(),
        Some("alice")
    );
    assert!(matches!(
        cluster.owner(parked.session_id.as_str()).as_deref(),
        Some("b") | None
    ));

    // A killed while its run waits: B takes the session over, then decides.
    let (orphan, session, approval) = waiting_on(&rt, &cluster, &a, "마포구 아파트 시세");
    let mut a = a;
    a.kill9();
    let taken = rt.block_on(decide_retrying(&b.alice, orphan, &approval));
    assert_eq!(taken.approval.approval.decided_by.as_deref(), Some("alice"));
    assert_ne!(cluster.owner(&session).as_deref(), Some("a"));
    // And the run goes on to its next approval on a live node.
    let next = rt.block_on(pending(&c.alice, orphan, within));
    assert_ne!(next, approval);
    cluster.verify();
}

#[test]
fn a_stopped_node_that_comes_back_after_its_lease_is_fenced_and_exits() {
    let rt = rt();
    let cluster = Cluster::new();
    // A lease long enough to ask B something while A is stopped and not yet declared dead.
    let timing = [
        "--heartbeat-ms",
        "200",
        "--crash-grace-ms",
        "400",
        "--lease-ms",
        "4000",
    ];
    let mut a = cluster.node("a", &[&timing[..], KEEPS].concat());
    let b = cluster.node("b", &timing);
    let within = Duration::from_secs(30);
    let (run, session, approval) = waiting_on(&rt, &cluster, &a, "강남구 아파트 시세");
    let head_before = rt.block_on(b.alice.status(run)).unwrap().last_seq;

    a.signal("-STOP");
    // A decision sent to B now is not kept waiting on A past A's lease (4 s): B answers 503 (try
    // again), having written nothing.
    let asked = Instant::now();
    let early = rt.block_on(b.alice.decide(run, &approval, &DecisionRequest::approve()));
    assert_eq!(
        early.as_ref().err().and_then(|e| e.status()),
        Some(503),
        "{early:?}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    // Past A's lease, B declares it dead and claims its session.
    cluster.wait_owner(&session, within, |o| o == Some("b"));
    a.signal("-CONT");
    // A still believes it drives the session: the decision it takes now is refused as fenced,
    // or its first heartbeat learns it was declared dead. Either way it stops.
    let zombie = rt.block_on(async {
        let api = a.alice.clone().with_request_timeout(Duration::from_secs(5));
        api.decide(run, &approval, &DecisionRequest::approve())
            .await
    });
    assert!(
        zombie.is_err(),
        "a fenced node acknowledged a decision: {zombie:?}"
    );
    let code = a.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(3), "{}", a.log_text());
    assert!(
        ["declared dead", "no longer alive", "no longer owns"]
            .iter()
            .any(|why| a.log_text().contains(why)),
        "{}",
        a.log_text()
    );
    // Nothing of A landed: the run is where it was, and its approval waits for B.
    let now = rt.block_on(b.alice.status(run)).unwrap();
    assert_eq!(now.last_seq, head_before);
    assert_eq!(now.pending_approval_id.as_ref(), Some(&approval));
    let decided = rt
        .block_on(b.alice.decide(run, &approval, &DecisionRequest::approve()))
        .unwrap();
    assert_eq!(decided.approval.approval.status, ApprovalStatus::Approved);
    // A restarts as a new incarnation and serves again.
    a.start();
    rt.block_on(a.alice.status(run)).unwrap();
    cluster.verify();
}

#[test]
fn a_retried_start_with_the_same_idempotency_key_after_its_node_died_gives_one_run() {
    let rt = rt();
    let cluster = Cluster::new();
    let mut a = cluster.node("a", FAST);
    let b = cluster.node("b", FAST);
    let req = RunRequest::new("강남구 아파트 시세");
    let first = rt
        .block_on(a.alice.start_run_once(&req, "order-42"))
        .unwrap();
    a.kill9();
    let again = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match b.alice.start_run_once(&req, "order-42").await {
                Ok(s) => return s,
                Err(e) if e.status() == Some(503) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("{e}"),
            }
        }
    });
    assert_eq!(again, first, "the same key gives the same run");
    // Another principal's same key is another run; a bad key is refused.
    let ops = rt.block_on(b.ops.start_run_once(&req, "order-42")).unwrap();
    assert_ne!(ops.run_id, first.run_id);
    let bad = rt
        .block_on(b.alice.start_run_once(&req, "two words"))
        .unwrap_err();
    assert_eq!(bad.status(), Some(400));
    // The key sent with another request is refused; nothing is started.
    let other = RunRequest::new("서초구 아파트 시세");
    let reused = rt
        .block_on(b.alice.start_run_once(&other, "order-42"))
        .unwrap_err();
    assert_eq!(reused.status(), Some(409), "{reused}");
    let s = rt.block_on(ended(&b.alice, first.run_id, Duration::from_secs(30)));
    assert!(s.state.is_terminal());
    let runs: Vec<_> = cluster.store.runs().map(|h| h.unwrap().run_id).collect();
    assert_eq!(runs.iter().filter(|r| **r == first.run_id).count(), 1);
    assert_eq!(runs.len(), 2, "{runs:?}");
}

#[test]
fn a_stream_on_any_node_is_the_runs_events_exactly() {
    let rt = rt();
    let cluster = Cluster::new();
    let a = cluster.node("a", FAST);
    let c = cluster.node("c", FAST);
    rt.block_on(async {
        let started = a
            .alice
            .start_run(&RunRequest::new("강남구 아파트 시세"))
            .await
            .unwrap();
        let mut stream = c
            .alice
            .run_events(started.run_id, EventsFrom::seq(0))
            .await
            .unwrap();
        let mut seen = Vec::new();
        while let Some(ev) = stream.next().await {
            let ev = ev.unwrap();
            seen.push((ev.data.seq, ev.data.offset, ev.data.kind.clone()));
        }
        let log: Vec<_> = a
            .alice
            .log(started.run_id, 0)
            .await
            .unwrap()
            .iter()
            .map(|e| (e.seq, e.offset, e.event.kind().to_owned()))
            .collect();
        assert_eq!(seen, log);
        assert!(
            log.last()
                .is_some_and(|(_, _, k)| k == "RunCompleted" || k == "RunFailed")
        );
        // A session deleted through one node is gone on the others too (C had the run's facts
        // cached from the reads above).
        c.alice.status(started.run_id).await.unwrap();
        a.alice
            .delete_session(started.session_id.as_str())
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match c.alice.status(started.run_id).await {
                Err(e) if e.status() == Some(404) => break,
                other => assert!(Instant::now() < deadline, "still served on C: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn a_graceful_stop_under_load_answers_every_request_and_hands_its_sessions_over() {
    let _machine = crate::heavy();
    let rt = rt();
    let cluster = Cluster::new();
    let mut a = cluster.node("a", &[FAST, KEEPS].concat());
    let b = cluster.node("b", FAST);
    let within = Duration::from_secs(30);
    // Runs that wait on A, and clients starting more on A while it stops.
    let mut waiting = Vec::new();
    for i in 0..4 {
        let s = rt
            .block_on(a.alice.start_run(&gated(&format!("강남구 아파트 {i}"))))
            .unwrap();
        rt.block_on(pending(&a.alice, s.run_id, within));
        waiting.push(s);
    }
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(Mutex::new(false));
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let (api, failures, stop) = (a.alice.clone(), failures.clone(), stop.clone());
            rt.spawn(async move {
                let mut n = 0;
                while !*stop.lock().unwrap() {
                    n += 1;
                    match api
                        .start_run(&RunRequest::new(format!("서초구 {i} {n}")))
                        .await
                    {
                        Ok(_) => {}
                        Err(e) if e.status() == Some(503) => {}
                        // Refused once the node no longer listens: nothing was in flight.
                        Err(chronicle_client::Error::Connection { .. }) => {}
                        Err(e) => failures.lock().unwrap().push(e.to_string()),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    a.signal("-TERM");
    let code = a.wait_exit(within);
    let stopped = Instant::now();
    assert_eq!(code, Some(0), "{}", a.log_text());
    *stop.lock().unwrap() = true;
    for c in clients {
        rt.block_on(c).unwrap();
    }
    assert!(
        failures.lock().unwrap().is_empty(),
        "{:?}",
        failures.lock().unwrap()
    );
    // Its waiting sessions were released at once and the other node claimed them.
    for s in &waiting {
        cluster.wait_owner(s.session_id.as_str(), within, |o| o == Some("b"));
    }
    let moved = stopped.elapsed();
    assert!(
        moved < Duration::from_secs(5),
        "handed over after {moved:?}"
    );
    for s in &waiting {
        let approval = rt.block_on(pending(&b.alice, s.run_id, within));
        rt.block_on(
            b.alice
                .decide(s.run_id, &approval, &DecisionRequest::approve()),
        )
        .unwrap();
    }
    eprintln!(
        "a graceful stop: sessions handed over {} ms after the node exited",
        moved.as_millis()
    );
    cluster.verify();
}

/// What the load's clients were answered.
#[derive(Default)]
struct Load {
    started: Vec<RunId>,
    decisions: Vec<(RunId, ApprovalId)>,
    errors: Vec<String>,
    unavailable: usize,
}

impl Load {
    /// Counts a refusal: a 503 or no answer is what a dying node gives (retried); anything else
    /// is a finding.
    fn refused(&mut self, what: String, e: &chronicle_client::Error) {
        match e.status() {
            Some(503) | None => self.unavailable += 1,
            _ => self.errors.push(format!("{what}: {e}")),
        }
    }
}

const RUNS: usize = 300;
const AT_ONCE: usize = 20;
const KILLS: usize = 5;

#[test]
fn three_nodes_killed_in_turn_under_load_lose_nothing_and_every_run_finishes() {
    let _machine = crate::heavy();
    let rt = rt();
    let cluster = Cluster::new();
    let nodes: Vec<Arc<Mutex<Node>>> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| {
            Arc::new(Mutex::new(
                cluster.node(n, &[FAST, &["--release-idle-ms", "500"]].concat()),
            ))
        })
        .collect();
    let apis: Vec<Client> = nodes
        .iter()
        .map(|n| n.lock().unwrap().ops.clone())
        .collect();
    let load = Arc::new(Mutex::new(Load::default()));
    let workers: Vec<_> = (0..AT_ONCE)
        .map(|w| {
            let (apis, load) = (apis.clone(), load.clone());
            rt.spawn(async move {
                let mut pick = w;
                let mut next_api = || {
                    pick = pick.wrapping_mul(31).wrapping_add(17);
                    apis[pick % apis.len()].clone()
                };
                for i in (w..RUNS).step_by(AT_ONCE) {
                    let req = match i % 3 {
                        0 => gated(&format!("강남구 아파트 시세 {i}")),
                        _ => RunRequest::new(format!("강남구 아파트 시세 {i}")),
                    };
                    let deadline = Instant::now() + Duration::from_secs(120);
                    let run = loop {
                        match next_api().start_run_once(&req, &format!("load-{i}")).await {
                            Ok(s) => break s.run_id,
                            Err(e) => load.lock().unwrap().refused(format!("start {i}"), &e),
                        }
                        if Instant::now() > deadline {
                            load.lock()
                                .unwrap()
                                .errors
                                .push(format!("start {i}: gave up"));
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    };
                    load.lock().unwrap().started.push(run);
                    loop {
                        match next_api().status(run).await {
                            Ok(s) if s.state.is_terminal() => break,
                            Ok(Status {
                                pending_approval_id: Some(a),
                                ..
                            }) => match next_api()
                                .decide(run, &a, &DecisionRequest::approve())
                                .await
                            {
                                Ok(_) => load.lock().unwrap().decisions.push((run, a)),
                                // Decided already (an earlier answer was lost with its node).
                                Err(e) if e.status() == Some(409) => {}
                                Err(e) => load.lock().unwrap().refused(format!("decide {run}"), &e),
                            },
                            Ok(_) => {}
                            Err(e) => load.lock().unwrap().refused(format!("status {run}"), &e),
                        }
                        if Instant::now() > deadline {
                            load.lock()
                                .unwrap()
                                .errors
                                .push(format!("run {run} did not end"));
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                }
            })
        })
        .collect();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |lo: u64, hi: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        lo + rng % (hi - lo)
    };
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(next(500, 2500)));
        let victim = nodes[next(0, 3) as usize].clone();
        let mut node = victim.lock().unwrap();
        node.kill9();
        std::thread::sleep(Duration::from_millis(next(200, 1500)));
        node.start();
    }
    for w in workers {
        rt.block_on(w).unwrap();
    }
    let load = load.lock().unwrap();
    assert!(load.errors.is_empty(), "{:?}", load.errors);
    assert_eq!(load.started.len(), RUNS);
    // Every acknowledged run exists once (the retries with its key found it), and ended.
    let heads: Vec<_> = cluster.store.runs().map(|h| h.unwrap()).collect();
    assert_eq!(heads.len(), RUNS, "one run per key");
    assert!(heads.iter().all(|h| h.terminal), "every run ended");
    // Every acknowledged decision is there.
    rt.block_on(async {
        for (run, approval) in &load.decisions {
            let a = apis[0].approval(*run, approval).await.unwrap().approval;
            assert_eq!(a.status, ApprovalStatus::Approved, "decision lost: {a:?}");
        }
    });
    cluster.verify();
    eprintln!(
        "3 nodes, {KILLS} kill -9s under load: {} runs and {} decisions acknowledged, 0 lost; {} requests met a dying node (503 or refused), retried",
        load.started.len(),
        load.decisions.len(),
        load.unavailable
    );
}

#[test]
fn a_node_stalled_while_it_holds_the_log_head_holds_up_the_others_no_longer_than_the_timeout() {
    let rt = rt();
    let cluster = Cluster::new();
    const TIMEOUT_MS: u64 = 1000;
    // A stalls inside every append, holding the log head, three times the timeout.
    let timeout = TIMEOUT_MS.to_string();
    let a = cluster.node(
        "a",
        &[
            FAST,
            &[
                "--pg-drill-hold-lock-ms",
                "3000",
                "--pg-idle-in-transaction-ms",
                &timeout,
            ],
        ]
        .concat(),
    );
    let b = cluster.node(
        "b",
        &[FAST, &["--pg-idle-in-transaction-ms", &timeout]].concat(),
    );
    rt.block_on(async {
        // A's start takes the head and stalls; PostgreSQL ends its transaction after the
        // timeout, and once A goes on, its start is refused (nothing was written).
        let stalled = {
            let api = a.alice.clone();
            tokio::spawn(async move { api.start_run(&RunRequest::new("강남구 아파트")).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut worst = Duration::ZERO;
        for i in 0..5 {
            let t = Instant::now();
            let s = b
                .alice
                .start_run(&RunRequest::new(format!("서초구 아파트 {i}")))
                .await
                .unwrap();
            worst = worst.max(t.elapsed());
            ended(&b.alice, s.run_id, Duration::from_secs(30)).await;
        }
        assert!(
            worst <= Duration::from_millis(TIMEOUT_MS + 1000),
            "B waited {worst:?} for the log head"
        );
        let refused = stalled.await.unwrap();
        assert!(
            refused.as_ref().is_err_and(|e| e.status() == Some(503)),
            "{refused:?}"
        );
        eprintln!(
            "a stalled holder of the log head held the others up at most {} ms",
            worst.as_millis()
        );
    });
    cluster.verify();
}

#[test]
fn a_released_run_is_woken_at_its_approvals_expiry_by_some_node() {
    let rt = rt();
    let cluster = Cluster::new();
    let a = cluster.node("a", &[FAST, &["--release-idle-ms", "100"]].concat());
    let _b = cluster.node("b", &[FAST, &["--release-idle-ms", "100"]].concat());
    let within = Duration::from_secs(30);
    let req = RunRequest {
        approval_timeout_ms: Some(2000),
        ..gated("강남구 아파트 시세")
    };
    let started = rt.block_on(a.alice.start_run(&req)).unwrap();
    let approval = rt.block_on(pending(&a.alice, started.run_id, within));
    // Parked and released: no node holds it.
    cluster.wait_owner(started.session_id.as_str(), within, |o| o.is_none());
    let metrics = rt.block_on(a.ops.metrics()).unwrap();
    assert!(metrics.contains("chronicle_node_sessions 0"), "{metrics}");
    // Nobody sends anything; at its expiry a node claims the session and expires the approval.
    let deadline = Instant::now() + within;
    loop {
        let view = rt
            .block_on(a.alice.approval(started.run_id, &approval))
            .unwrap();
        if view.approval.status == ApprovalStatus::Expired {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the approval never expired: {view:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stream_on_another_node_gets_the_live_chunks_the_owners_model_writes() {
    let rt = rt();
    let (first, rest) = (Gate::new(), Gate::new());
    rest.open();
    let model = gated_model(&rt, Some(first.clone()), rest);
    let cluster = Cluster::new();
    let env = [
        ("CHRONICLE_LLM_BASE_URL", model.base_url.as_str()),
        ("CHRONICLE_LLM_API_KEY", MODEL_KEY),
    ];
    let a = cluster.node_with_env("a", FAST, &env);
    let c = cluster.node_with_env("c", FAST, &env);
    let started = rt
        .block_on(a.alice.start_run(&RunRequest::new(GANGNAM_STATION_QUERY)))
        .unwrap();
    assert_eq!(
        cluster.owner(started.session_id.as_str()).as_deref(),
        Some("a")
    );
    rt.block_on(async {
        let mut stream = c
            .alice
            .run_events(started.run_id, EventsFrom::seq(0))
            .await
            .unwrap();
        // The model holds its answer back until C's relay from A is in place.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        first.open();
        let (mut text, mut events_after) = (String::new(), Vec::new());
        while let Some(item) = stream.next_item().await {
            match item.unwrap() {
                StreamItem::Chunk(chunk) => {
                    assert!(events_after.is_empty(), "a chunk after {events_after:?}");
                    text.push_str(&chunk.content.text);
                }
                StreamItem::Event(ev) if !text.is_empty() => events_after.push(ev.name),
                StreamItem::Event(_) => {}
            }
        }
        assert_eq!(text, STREAMED_ANSWER);
        assert!(
            events_after.iter().any(|n| n == "message.final"),
            "{events_after:?}"
        );
    });
}
