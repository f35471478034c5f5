//! The API section: a real `chronicle serve` child process, measured from this process over
//! loopback — SSE fan-out delay (append to delivery) with many subscribers on one run, `POST
//! /chat` completions per second with 64 concurrent clients (HITL none), and the server's RSS idle
//! and under that load. Client and server share the machine's two cores; the figures say so.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_client::{ChatReply, Client, EventsFrom};
use chronicle_schemas::{HitlMode, RunStatus};
use chronicle_wire::{ChatRequest, EventData, RunRequest};

use super::report::Row;

const CHAT_QUERY: &str = "강남역 근처 30평대 아파트 매매 시세 알려줘";
const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

pub struct ApiPlan {
    pub subscribers: usize,
    pub fanout_events: usize,
    pub chat_clients: usize,
    pub chat_window: Duration,
}

impl ApiPlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            ApiPlan {
                subscribers: 100,
                fanout_events: 20,
                chat_clients: 16,
                chat_window: Duration::from_secs(1),
            }
        } else {
            ApiPlan {
                subscribers: 1000,
                fanout_events: 100,
                chat_clients: 64,
                chat_window: Duration::from_secs(8),
            }
        }
    }
}

pub(super) struct Server {
    child: Child,
    pub(super) client: Client,
    pub(super) port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM for a graceful stop (it flushes); then make sure it is gone.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Starts `chronicle serve`, its stream caps raised to fit `streams` (every subscriber of the
/// bench is the one principal `local`, whose default cap is 256 streams).
async fn start_server(dir: &Path, streams: usize) -> Result<Server> {
    let caps = [
        "--streams-max".to_owned(),
        streams.to_string(),
        "--streams-per-principal-max".to_owned(),
        streams.to_string(),
    ];
    let mut server = spawn_server(&dir.join("api-store"), &caps, None)?;
    server.wait_healthy(Duration::from_secs(15)).await?;
    Ok(server)
}

/// Spawns `chronicle serve` (this executable) on a free loopback port with its data in `data`,
/// without waiting for it; its stderr goes to `log` when given.
pub(super) fn spawn_server(data: &Path, args: &[String], log: Option<&Path>) -> Result<Server> {
    spawn_server_with(data, args, None, log)
}

/// [`spawn_server`] with the server's OpenTelemetry settings given: `otel` (with any other
/// variables it needs) replaces every `OTEL_*` variable of this process's environment, so what
/// is measured is what was asked for, not a collector the caller happens to point at.
pub(super) fn spawn_server_with(
    data: &Path,
    args: &[String],
    otel: Option<&[(String, String)]>,
    log: Option<&Path>,
) -> Result<Server> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let stderr = match log {
        Some(path) => Stdio::from(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        ),
        None => Stdio::null(),
    };
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data"])
        .arg(data)
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("CHRONICLE_API_TOKEN")
        .stdout(Stdio::null())
        .stderr(stderr);
    if let Some(env) = otel {
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("OTEL_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
    }
    let child = cmd.spawn().context("starting `chronicle serve`")?;
    Ok(Server {
        child,
        client: Client::new(&format!("http://127.0.0.1:{port}"))?,
        port,
    })
}

impl Server {
    /// Waits until `/healthz` answers, polling every 10 ms, for at most `wait`.
    pub(super) async fn wait_healthy(&mut self, wait: Duration) -> Result<()> {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if self.client.health().await.is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("the server exited before it answered: {status}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!(
            "the server did not answer /healthz within {} s",
            wait.as_secs()
        )
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Micros between an event's `at` and now.
fn delay_us(data: &EventData) -> f64 {
    (chrono::Utc::now().timestamp_micros() - data.at.as_micros()) as f64
}

async fn fanout(server: &Server, plan: &ApiPlan, rows: &mut Vec<Row>) -> Result<u64> {
    let client = &server.client;
    let run = client
        .start_run(&RunRequest {
            hitl: Some(HitlMode::EveryTodo),
            ..RunRequest::new(SCENARIO_1)
        })
        .await?
        .run_id;
    // Wait until the run waits for its first approval: its history is then fixed.
    let history = loop {
        let st = client.status(run).await?;
        if st.state == RunStatus::WaitingForApproval {
            break st.last_seq.unwrap_or(0) + 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let caught_up = Arc::new(AtomicUsize::new(0));
    let delays = Arc::new(Mutex::new(Vec::with_capacity(
        plan.subscribers * plan.fanout_events,
    )));
    let mut tasks = Vec::new();
    for _ in 0..plan.subscribers {
        let client = client.clone();
        let (caught_up, delays, total) = (
            caught_up.clone(),
            delays.clone(),
            history + plan.fanout_events as u64,
        );
        tasks.push(tokio::spawn(async move {
            let from = EventsFrom {
                follow: true,
                ..EventsFrom::default()
            };
            let mut events = client.run_events(run, from).await?;
            let mut seen = 0u64;
            let mut mine = Vec::new();
            while seen < total {
                let Some(ev) = events.next().await else {
                    break;
                };
                let ev = ev?;
                seen += 1;
                if seen == history {
                    caught_up.fetch_add(1, Ordering::SeqCst);
                } else if seen > history {
                    mine.push(delay_us(&ev.data));
                }
            }
            delays
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .extend(mine);
            Ok::<_, anyhow::Error>(())
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while caught_up.load(Ordering::SeqCst) < plan.subscribers {
        if Instant::now() > deadline {
            bail!(
                "only {} of {} subscribers caught up",
                caught_up.load(Ordering::SeqCst),
                plan.subscribers
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Live events: one `CommandReceived` per command, spaced so each is its own append.
    let peak_during = rss_kib(server.child.id(), "VmRSS:").unwrap_or(0);
    for _ in 0..plan.fanout_events {
        client.command(run, "/todos").await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .context("a subscriber stalled")???;
    }
    let mut d = delays
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    d.sort_by(f64::total_cmp);
    let n = plan.subscribers;
    rows.push(
        Row::new(
            "sse_fanout_p50",
            format!("SSE fan-out delay p50, {n} subscribers"),
            percentile(&d, 0.5) / 1000.0,
            "ms",
        )
        .note(format!(
            "append → delivery over loopback; {} deliveries",
            d.len()
        )),
    );
    rows.push(
        Row::new(
            "sse_fanout_p99",
            format!("SSE fan-out delay p99, {n} subscribers"),
            percentile(&d, 0.99) / 1000.0,
            "ms",
        )
        .note("target ≤ 20 ms at 1,000 subscribers; client and server share 2 cores"),
    );
    Ok(peak_during)
}

/// What a window of `/chat` load did.
pub(super) struct Load {
    pub(super) done: usize,
    pub(super) failed: usize,
    pub(super) secs: f64,
    /// The server's peak RSS, sampled every 50 ms.
    pub(super) peak_kib: u64,
}

impl Load {
    pub(super) fn rate(&self) -> f64 {
        self.done as f64 / self.secs
    }
}

/// `clients` concurrent clients sending `POST /chat` with `message` (a new session each) back to
/// back for `window`.
pub(super) async fn chat_turns(
    server: &Server,
    message: &str,
    clients: usize,
    window: Duration,
) -> Result<Load> {
    let client = &server.client;
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Instant::now() + window;
    let pid = server.child.id();
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while Instant::now() < stop {
            peak = peak.max(rss_kib(pid, "VmRSS:").unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        peak
    });
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, done, failed) = (client.clone(), done.clone(), failed.clone());
        let turn = ChatRequest {
            message: message.into(),
            ..ChatRequest::default()
        };
        tasks.push(tokio::spawn(async move {
            while Instant::now() < stop {
                match client.chat(&turn).await {
                    Ok(ChatReply::Done(_) | ChatReply::Working(_)) => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(Load {
        done: done.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        secs,
        peak_kib: sampler.await?,
    })
}

async fn chat_load(server: &Server, plan: &ApiPlan, rows: &mut Vec<Row>) -> Result<u64> {
    let load = chat_turns(server, CHAT_QUERY, plan.chat_clients, plan.chat_window).await?;
    rows.push(
        Row::new("chat_completions_per_s", format!("POST /chat completions/s, {} clients, HITL none", plan.chat_clients), load.rate(), "req/s")
            .note(format!("{} completed, {} failed; each a full run (intent, plan, 2 agents, answer), durable; target ≥ 800", load.done, load.failed)),
    );
    Ok(load.peak_kib)
}

pub async fn run(dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let plan = ApiPlan::new(quick);
    let server = start_server(dir, plan.subscribers + 16).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rows = Vec::new();
    let idle = rss_kib(server.child.id(), "VmRSS:").unwrap_or(0);
    rows.push(
        Row::new(
            "server_rss_idle",
            "server RSS, idle",
            idle as f64 / 1024.0,
            "MiB",
        )
        .note("target ≤ 30 MiB"),
    );
    let sse_peak = fanout(&server, &plan, &mut rows).await?;
    let chat_peak = chat_load(&server, &plan, &mut rows).await?;
    let hwm = rss_kib(server.child.id(), "VmHWM:").unwrap_or(0);
    rows.push(
        Row::new(
            "server_rss_load",
            "server RSS under /chat load (peak sampled)",
            chat_peak as f64 / 1024.0,
            "MiB",
        )
        .note(format!(
            "with {} SSE subscribers open: {:.1} MiB; high-water mark {:.1} MiB",
            plan.subscribers,
            sse_peak as f64 / 1024.0,
            hwm as f64 / 1024.0
        )),
    );
    drop(server);
    Ok(rows)
}
