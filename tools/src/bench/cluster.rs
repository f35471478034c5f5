//! Several nodes on one PostgreSQL store: `chronicle serve --node-name` processes of this
//! executable on loopback, over the benchmark domain, each measurement in a schema of its own
//! (dropped afterwards unless `--keep`):
//!
//! - takeover: a node killed with SIGKILL (or stopped with SIGSTOP) while its run waits for a
//!   person; the time from the kill to the first event the new owner records (the decision
//!   posted to another node, retried until it is accepted);
//! - commit to SSE: an event committed by one node, as the all-runs stream of another reads it
//!   (the event's own time against the reader's clock: one machine, one clock);
//! - a decision forwarded to the session's node, beside the same decision made on that node;
//! - runs per second with one node and with three, the engine's own work (the benchmark agents
//!   answer at once), and work bound by waiting (each agent waits 50 ms, as a model call would);
//! - what a node holds for runs parked at an approval once their sessions are released.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use chronicle_client::{Client, EventsFrom};
use chronicle_engine::store::{PgLog, Target};
use chronicle_schemas::{ApprovalId, HitlMode, RunId};
use chronicle_wire::{ChatRequest, DecisionRequest, RunRequest};
use tokio::runtime::Runtime;

use super::api::rss_kib;
use super::report::Row;
use super::{Plan, percentile, progress};

/// The agents' wait in the waiting-bound runs, as a model call's.
pub(super) const AGENT_DELAY_MS: u64 = 50;
/// Nodes that keep their sessions (never release them idle): the run stays where it started.
const KEEPS: &[&str] = &["--release-idle-ms", "600000"];
/// Clients sending chat turns at once in the runs-per-second rows.
const CLIENTS: usize = 32;

/// Sizes of the section.
struct Sizes {
    kills: usize,
    stops: usize,
    latency_runs: usize,
    forwarded_runs: usize,
    window: Duration,
    parked_runs: usize,
}

impl Sizes {
    fn of(plan: &Plan) -> Sizes {
        if plan.quick {
            Sizes {
                kills: 3,
                stops: 0,
                latency_runs: 10,
                forwarded_runs: 5,
                window: Duration::from_secs(2),
                parked_runs: 30,
            }
        } else {
            Sizes {
                kills: 20,
                stops: 2,
                latency_runs: 40,
                forwarded_runs: 30,
                window: Duration::from_secs(8),
                parked_runs: 300,
            }
        }
    }
}

/// A node: a `chronicle serve` child, started again on the same port after a kill.
struct Node {
    args: Vec<String>,
    env: Vec<(String, String)>,
    child: Option<Child>,
    client: Client,
}

impl Node {
    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn start(&mut self, rt: &Runtime) -> Result<()> {
        let child = Command::new(std::env::current_exe()?)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "error")
            .env_remove("CHRONICLE_API_TOKEN")
            .env_remove("CHRONICLE_LLM_BASE_URL")
            .env_remove("CHRONICLE_LLM_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting a node")?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if rt.block_on(self.client.health()).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                bail!("a node exited while starting: {status}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("a node did not answer within 30 s")
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Nodes on one store of their own.
struct Cluster {
    nodes: Vec<Node>,
    target: Target,
    keep: bool,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.nodes.clear();
        if !self.keep {
            let _ = PgLog::drop_schema(&self.target);
        }
    }
}

static SCHEMAS: AtomicU64 = AtomicU64::new(0);

/// `count` nodes on a new schema of the server at `url`, each with `extra` flags and `env`.
fn cluster(
    rt: &Runtime,
    root: &Path,
    url: &str,
    plan: &Plan,
    count: usize,
    extra: &[&str],
    env: &[(&str, String)],
) -> Result<Cluster> {
    let n = SCHEMAS.fetch_add(1, Ordering::Relaxed);
    let schema = format!("bench_cluster_{}_{n}", std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = format!("{url}{sep}schema={schema}");
    let target = Target::parse(&store).context("--postgres")?;
    let dir = root.join(&schema);
    std::fs::create_dir_all(dir.join("workspaces"))?;
    let secret = dir.join("cluster.token");
    std::fs::write(&secret, "bench-cluster-secret-0123456789")?;
    let mut c = Cluster {
        nodes: Vec::new(),
        target,
        keep: plan.keep,
    };
    for i in 0..count {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let data: PathBuf = dir.join(format!("n{i}"));
        let mut args: Vec<String> = [
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--data",
            &data.to_string_lossy(),
            "--store",
            &store,
            "--domain",
            "bench",
            "--node-name",
            &format!("n{i}"),
            "--cluster-token-file",
            &secret.to_string_lossy(),
            "--workspace-root",
            &dir.join("workspaces").to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut node = Node {
            args,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            child: None,
            client: Client::new(&format!("http://127.0.0.1:{port}"))?
                .with_request_timeout(Duration::from_secs(30)),
        };
        node.start(rt)?;
        c.nodes.push(node);
    }
    Ok(c)
}

fn gated() -> RunRequest {
    RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        ..RunRequest::new(chronicle_bench::BENCH_QUERY)
    }
}

async fn pending(api: &Client, run: RunId) -> Result<ApprovalId> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(s) = api.status(run).await
            && let Some(a) = s.pending_approval_id
        {
            return Ok(a);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bail!("run {run} did not wait for a person")
}

/// Decides through `api` until it is accepted; the time it took.
async fn decide_until_accepted(api: &Client, run: RunId, a: &ApprovalId) -> Result<Duration> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        match api.decide(run, a, &DecisionRequest::approve()).await {
            Ok(_) => return Ok(t.elapsed()),
            Err(e) if matches!(e.status(), Some(503) | None) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => bail!("deciding {a}: {e}"),
        }
    }
    bail!("the decision was not accepted within 60 s")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Kill or stop the node that drives a waiting run; decide on the other one.
fn takeover(rt: &Runtime, root: &Path, url: &str, plan: &Plan, s: &Sizes) -> Result<Vec<Row>> {
    progress("cluster: takeover after SIGKILL and after SIGSTOP");
    let mut c = cluster(rt, root, url, plan, 2, KEEPS, &[])?;
    let mut killed = Vec::new();
    for _ in 0..s.kills {
        let run = rt.block_on(c.nodes[0].client.start_run(&gated()))?.run_id;
        let a = rt.block_on(pending(&c.nodes[0].client, run))?;
        c.nodes[0].kill9();
        killed.push(ms(rt.block_on(decide_until_accepted(
            &c.nodes[1].client,
            run,
            &a,
        ))?));
        c.nodes[0].start(rt)?;
    }
    let mut stopped = Vec::new();
    for _ in 0..s.stops {
        let run = rt.block_on(c.nodes[0].client.start_run(&gated()))?.run_id;
        let a = rt.block_on(pending(&c.nodes[0].client, run))?;
        c.nodes[0].signal("-STOP");
        stopped.push(ms(rt.block_on(decide_until_accepted(
            &c.nodes[1].client,
            run,
            &a,
        ))?));
        c.nodes[0].signal("-CONT");
        // Fenced once it runs again: it exits; then it starts as a new incarnation.
        c.nodes[0].kill9();
        c.nodes[0].start(rt)?;
    }
    let (mut killed, mut stopped) = (killed, stopped);
    stopped.sort_by(f64::total_cmp);
    let timing = "heartbeat 500 ms, crash grace 1 s, lease 10 s (the defaults)";
    Ok(vec![
        Row::new(
            "cluster_takeover_kill_p50_ms",
            "takeover after SIGKILL, p50",
            percentile(&mut killed, 0.50),
            "ms",
        )
        .note(format!(
            "{} kills of the node driving a run that waits for a person: from the kill to the decision, sent to the other node and retried every 10 ms, accepted (the new owner's first event); {timing}",
            killed.len()
        )),
        Row::new(
            "cluster_takeover_kill_p99_ms",
            "takeover after SIGKILL, p99",
            percentile(&mut killed, 0.99),
            "ms",
        ),
        Row::new(
            "cluster_takeover_stop_ms",
            "takeover after SIGSTOP, worst",
            stopped.last().copied().unwrap_or(f64::NAN),
            "ms",
        )
        .note(format!(
            "{} stops: a stopped process holds its liveness lock, so only its lease tells",
            stopped.len()
        )),
    ])
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Events committed by one node, read from the all-runs stream of another; and decisions made on
/// the session's node beside the same sent to another node.
fn latencies(rt: &Runtime, root: &Path, url: &str, plan: &Plan, s: &Sizes) -> Result<Vec<Row>> {
    progress("cluster: commit to SSE across nodes, forwarded decisions");
    let c = cluster(rt, root, url, plan, 2, KEEPS, &[])?;
    let (a, b) = (&c.nodes[0].client, &c.nodes[1].client);
    let delays = rt.block_on(async {
        let mut stream = b.all_events(EventsFrom::default()).await?;
        let mut delays = Vec::new();
        // One run at a time: the delay of an event, not of a queue of them.
        for _ in 0..s.latency_runs {
            let run = a
                .start_run(&RunRequest::new(chronicle_bench::BENCH_QUERY))
                .await?
                .run_id;
            loop {
                let Some(ev) = tokio::time::timeout(Duration::from_secs(30), stream.next())
                    .await
                    .context("the all-runs stream went quiet")?
                else {
                    bail!("the all-runs stream ended");
                };
                let ev = ev?;
                if ev.data.run_id != run {
                    continue;
                }
                delays.push((now_us() - ev.data.at.0) as f64 / 1000.0);
                if ev.name == "run.end" || ev.name == "run.error" {
                    break;
                }
            }
        }
        Ok::<_, anyhow::Error>(delays)
    })?;
    let mut delays = delays;
    let (mut local, mut forwarded) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..s.forwarded_runs {
            let run = a.start_run(&gated()).await?.run_id;
            for i in 0.. {
                let Ok(approval) = pending(a, run).await else {
                    break;
                };
                let via = if i % 2 == 0 { b } else { a };
                let t = Instant::now();
                via.decide(run, &approval, &DecisionRequest::approve())
                    .await?;
                let d = ms(t.elapsed());
                if i % 2 == 0 {
                    &mut forwarded
                } else {
                    &mut local
                }
                .push(d);
                if i >= 2 {
                    break;
                }
            }
        }
        Ok::<_, anyhow::Error>(())
    })?;
    let (l50, f50) = (percentile(&mut local, 0.5), percentile(&mut forwarded, 0.5));
    Ok(vec![
        Row::new(
            "cluster_commit_to_sse_p50_ms",
            "commit on one node to SSE on another, p50",
            percentile(&mut delays, 0.50),
            "ms",
        )
        .note(format!(
            "{} events of {} runs on node A, one run at a time, read from node B's all-runs stream: B's clock at the read minus the event's time (taken just before its commit)",
            delays.len(),
            s.latency_runs
        )),
        Row::new(
            "cluster_commit_to_sse_p99_ms",
            "commit on one node to SSE on another, p99",
            percentile(&mut delays, 0.99),
            "ms",
        ),
        Row::new(
            "cluster_decision_local_p50_ms",
            "a decision on the session's node, p50",
            l50,
            "ms",
        )
        .note(format!("{} decisions", local.len())),
        Row::new(
            "cluster_decision_forwarded_p50_ms",
            "the same sent to another node (forwarded), p50",
            f50,
            "ms",
        )
        .note(format!(
            "{} decisions; the forwarding costs {:.2} ms at the median",
            forwarded.len(),
            f50 - l50
        )),
    ])
}

/// Chat turns, `CLIENTS` at once spread over the nodes, for the window: runs/s.
fn runs_per_s(rt: &Runtime, c: &Cluster, window: Duration) -> Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + window;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let api = c.nodes[i % c.nodes.len()].client.clone();
            let (done, failed) = (done.clone(), failed.clone());
            rt.spawn(async move {
                while Instant::now() < deadline {
                    let req = ChatRequest {
                        message: chronicle_bench::BENCH_QUERY.to_owned(),
                        ..ChatRequest::default()
                    };
                    match api.chat(&req).await {
                        Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    let started = Instant::now();
    for client in clients {
        rt.block_on(client)?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    if failed.load(Ordering::Relaxed) > 0 {
        bail!("{} chat turns failed", failed.load(Ordering::Relaxed));
    }
    Ok(done.load(Ordering::Relaxed) as f64 / elapsed)
}

fn throughput(rt: &Runtime, root: &Path, url: &str, plan: &Plan, s: &Sizes) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (what, delay) in [("engine", 0), ("waiting", AGENT_DELAY_MS)] {
        let mut per = Vec::new();
        for nodes in [1, 3] {
            progress(&format!(
                "cluster: runs/s, {nodes} node(s), agents waiting {delay} ms"
            ));
            let env = [(chronicle_bench::AGENT_DELAY_ENV, delay.to_string())];
            let c = cluster(rt, root, url, plan, nodes, &[], &env)?;
            per.push(runs_per_s(rt, &c, s.window)?);
        }
        let note = match delay {
            0 => "the engine's own work (the benchmark agents answer at once)".to_owned(),
            d => format!("each agent waits {d} ms, as a model call would"),
        };
        rows.push(
            Row::new(
                format!("cluster_{what}_runs_per_s_1_node"),
                format!("runs/s, 1 node, {what}-bound"),
                per[0],
                "runs/s",
            )
            .note(format!(
                "{CLIENTS} chat clients at once for {} s; {note}",
                s.window.as_secs()
            )),
        );
        rows.push(
            Row::new(
                format!("cluster_{what}_runs_per_s_3_nodes"),
                format!("runs/s, 3 nodes, {what}-bound"),
                per[1],
                "runs/s",
            )
            .note(format!(
                "{:.2}× one node; the clients spread over the nodes; every node on this machine's {} cores",
                per[1] / per[0],
                std::thread::available_parallelism().map_or(0, |n| n.get())
            )),
        );
    }
    Ok(rows)
}

/// The value of a gauge in a Prometheus text (`name` with its labels, if any).
pub(super) fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn parked(rt: &Runtime, root: &Path, url: &str, plan: &Plan, s: &Sizes) -> Result<Vec<Row>> {
    progress("cluster: what parked runs hold once released");
    let c = cluster(rt, root, url, plan, 1, &["--release-idle-ms", "1000"], &[])?;
    let node = &c.nodes[0];
    let base = rss_kib(node.pid(), "VmRSS:").unwrap_or(0);
    let held = rt.block_on(async {
        let mut runs = Vec::new();
        for _ in 0..s.parked_runs {
            runs.push(node.client.start_run(&gated()).await?.run_id);
        }
        for run in &runs {
            pending(&node.client, *run).await?;
        }
        let m = node.client.metrics().await?;
        Ok::<_, anyhow::Error>(gauge(&m, "chronicle_node_sessions").unwrap_or(f64::NAN))
    })?;
    let rss_held = rss_kib(node.pid(), "VmRSS:").unwrap_or(0);
    let (sessions, actors) = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = node.client.metrics().await?;
            let sessions = gauge(&m, "chronicle_node_sessions").unwrap_or(f64::NAN);
            let actors = gauge(&m, "chronicle_run_actors").unwrap_or(f64::NAN);
            if sessions == 0.0 || Instant::now() > deadline {
                return Ok::<_, anyhow::Error>((sessions, actors));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })?;
    let rss_released = rss_kib(node.pid(), "VmRSS:").unwrap_or(0);
    Ok(vec![
        Row::new(
            "cluster_parked_sessions_after_release",
            "sessions a node holds for runs parked at an approval, once released",
            sessions,
            "sessions",
        )
        .note(format!(
            "{} runs waiting for a person; {held} sessions held before the release, {actors} run actors after",
            s.parked_runs
        )),
        Row::new(
            "cluster_parked_rss_kib",
            "the node's RSS: started, runs held, runs released",
            rss_released as f64,
            "KiB",
        )
        .note(format!(
            "{base} KiB at the start, {rss_held} KiB while it held them, {rss_released} after (the allocator keeps what it freed)"
        )),
    ])
}

/// The section's rows (a PostgreSQL is needed: `--postgres`).
pub(super) fn section(rt: &Runtime, root: &Path, url: &str, plan: &Plan) -> Result<Vec<Row>> {
    let s = Sizes::of(plan);
    let mut rows = takeover(rt, root, url, plan, &s)?;
    rows.extend(latencies(rt, root, url, plan, &s)?);
    rows.extend(throughput(rt, root, url, plan, &s)?);
    rows.extend(parked(rt, root, url, plan, &s)?);
    Ok(rows)
}

/// The row that stands for the section when no PostgreSQL was given.
pub(super) fn skipped() -> Row {
    Row::new(
        "cluster_skipped",
        "several nodes on one store",
        0.0,
        "skipped",
    )
    .note("no PostgreSQL given: pass --postgres URL or set CHRONICLE_BENCH_PG")
}
