//! What an operator sees of one store: a real `chronicle serve --domain bench` started on it (in
//! place, no copy), timed until `/healthz` answers, its RSS, each list's latency over HTTP,
//! time travel and a restore in old runs, and its RSS and runs/s after a window of `/chat` load.
//!
//! Requests are plain HTTP/1.1 over a new loopback connection each (`Connection: close`), read
//! to the end: the time is the whole answer's, and no client type stands between the bench and
//! the routes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::generate::Probe;
use crate::bench::api::{self, Server, rss_kib};
use crate::bench::{ms, percentile};

/// Requests of each list at least, however long they take.
const REQUESTS_MIN: usize = 5;
/// The longest answer the bench reads, in bytes (an inbox of 1,000 approvals fits).
const ANSWER_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Sizes and windows of the measurements.
#[derive(Clone, Debug)]
pub struct MeasurePlan {
    /// Requests of each list, unless [`MeasurePlan::list_budget`] runs out first.
    pub list_requests: usize,
    pub list_budget: Duration,
    pub restores: usize,
    pub load_clients: usize,
    pub load_window: Duration,
    /// How long the server may take to answer `/healthz`.
    pub start_wait: Duration,
}

/// The lists timed, as (label, path); `{user}` is a user with memory items.
pub const LISTS: [(&str, &str); 5] = [
    ("runs", "/api/v1/runs?limit=20"),
    ("runs_failed", "/api/v1/runs?status=failed&limit=20"),
    ("sessions", "/api/v1/sessions?limit=20"),
    ("approvals_pending", "/api/v1/approvals?status=pending"),
    ("memories", "/api/v1/users/{user}/memories"),
];

/// p50, p99 and how many requests, in ms.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub n: usize,
}

fn latency(mut xs: Vec<f64>) -> Latency {
    Latency {
        p50: percentile(&mut xs, 0.5),
        p99: percentile(&mut xs, 0.99),
        n: xs.len(),
    }
}

/// One store's measurements.
#[derive(Clone, Debug)]
pub struct Measured {
    pub start_ms: f64,
    pub rss_start_kib: u64,
    /// In [`LISTS`] order.
    pub lists: Vec<Latency>,
    pub state_at: Option<Latency>,
    pub restore: Option<Latency>,
    pub runs_per_s: f64,
    pub load_done: usize,
    pub load_failed: usize,
    pub rss_load_kib: u64,
    pub rss_load_peak_kib: u64,
}

/// Starts a server on the store in `data` and measures it; the server's stderr goes to `log`.
pub async fn measure(
    data: &Path,
    log: &Path,
    probes: &[Probe],
    memory_user: &str,
    plan: &MeasurePlan,
) -> Result<Measured> {
    let t = Instant::now();
    let args = ["--domain".to_owned(), "bench".to_owned()];
    let mut server = api::spawn_server(data, &args, Some(log))?;
    server
        .wait_healthy(plan.start_wait)
        .await
        .with_context(|| format!("starting the server (its log: {})", log.display()))?;
    let start_ms = ms(t.elapsed());
    // Whatever the server does right after it answers (recovered runs going on) settles first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_start_kib = rss_kib(server.pid(), "VmRSS:").unwrap_or(0);
    let mut lists = Vec::new();
    for (_, path) in LISTS {
        let path = path.replace("{user}", memory_user);
        lists.push(repeat(&server, plan, |_| ("GET", path.clone(), String::new())).await?);
    }
    let state_at = if probes.is_empty() {
        None
    } else {
        Some(
            repeat(&server, plan, |i| {
                let p = &probes[i % probes.len()];
                let path = format!("/api/v1/agent/{}/state?at={}", p.run_id, p.seq);
                ("GET", path, String::new())
            })
            .await?,
        )
    };
    let restore = restores(&server, probes, plan.restores).await?;
    let load = api::chat_turns(
        &server,
        chronicle_bench::BENCH_QUERY,
        plan.load_clients,
        plan.load_window,
    )
    .await?;
    let rss_load_kib = rss_kib(server.pid(), "VmRSS:").unwrap_or(0);
    drop(server);
    Ok(Measured {
        start_ms,
        rss_start_kib,
        lists,
        state_at,
        restore,
        runs_per_s: load.rate(),
        load_done: load.done,
        load_failed: load.failed,
        rss_load_kib,
        rss_load_peak_kib: load.peak_kib,
    })
}

/// Times the request `nth` makes, [`MeasurePlan::list_requests`] times or until the budget runs
/// out (but [`REQUESTS_MIN`] times at least). Any answer but 200 is an error.
async fn repeat(
    server: &Server,
    plan: &MeasurePlan,
    nth: impl Fn(usize) -> (&'static str, String, String),
) -> Result<Latency> {
    let t0 = Instant::now();
    let mut xs = Vec::new();
    while xs.len() < plan.list_requests
        && (xs.len() < REQUESTS_MIN || t0.elapsed() < plan.list_budget)
    {
        let (method, path, body) = nth(xs.len());
        let t = Instant::now();
        let (status, answer) = http(server.port, method, &path, &body).await?;
        if status != 200 {
            bail!("{method} {path} answered {status}: {answer}");
        }
        xs.push(ms(t.elapsed()));
    }
    Ok(latency(xs))
}

/// Restores `count` old runs (each probe once) to a checkpoint in their middle: the run goes
/// back there and on, as a person who restores it asks.
async fn restores(server: &Server, probes: &[Probe], count: usize) -> Result<Option<Latency>> {
    let mut xs = Vec::new();
    for p in probes
        .iter()
        .filter(|p| !p.checkpoint.is_empty())
        .take(count)
    {
        let path = format!(
            "/api/v1/agent/{}/checkpoints/{}/restore",
            p.run_id, p.checkpoint
        );
        let t = Instant::now();
        let (status, answer) = http(server.port, "POST", &path, "{}").await?;
        if status != 200 {
            bail!("POST {path} answered {status}: {answer}");
        }
        xs.push(ms(t.elapsed()));
    }
    Ok((!xs.is_empty()).then(|| latency(xs)))
}

/// One request over a new connection; the status and, for an error, the start of the answer.
async fn http(port: u16, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .with_context(|| format!("connecting to 127.0.0.1:{port}"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    (&mut conn)
        .take(ANSWER_BYTES_MAX as u64)
        .read_to_end(&mut answer)
        .await
        .with_context(|| format!("reading the answer to {method} {path}"))?;
    let head = String::from_utf8_lossy(&answer[..answer.len().min(512)]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{method} {path}: not an HTTP answer: {head:?}"))?;
    Ok((status, head))
}
