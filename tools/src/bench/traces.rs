//! What the live trace export costs a server: `chronicle serve` processes over the benchmark
//! domain, each under the same load (64 chat clients at once, each agent waiting as a model call
//! would), with tracing off, exporting to an OTLP receiver that is up, to a loopback port where
//! nothing listens, and to one that accepts and never answers. For each: runs/s, the server's CPU
//! per run, and the spans its `/metrics` counts as exported, dropped and failed.
//!
//! The receiver that is up is a Phoenix when one is given (`--phoenix`) or
//! `tests/phoenix/server.sh` can start one (not with `--quick`); else a minimal OTLP/HTTP sink in
//! this process that answers every request at once. Either way the receiver's own work is not the
//! server's, though on one machine it takes the same cores.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_client::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::api;
use super::cluster::{AGENT_DELAY_MS, gauge};
use super::engine::process_cpu_secs;
use super::report::{Row, num};
use super::{Plan, progress};

/// Chat clients at once, each a run at a time.
const CLIENTS: usize = 64;
/// The slow receiver's configuration: how long one export may wait for an answer.
const SLOW_EXPORT_TIMEOUT_MS: u64 = 2000;
/// How long spans wait for a batch to fill, in every traced configuration: shorter than the
/// SDK's 5 s, so that what the last runs ended is exported within the section's drain.
const SCHEDULE_DELAY_MS: u64 = 1000;
/// The OTLP queue and batch (the SDK's defaults, as the server runs without them set).
const QUEUE_SPANS: u64 = 2048;
const BATCH_SPANS: u64 = 512;
/// The Phoenix project the spans go to (`x-project-name`), apart from the tests' projects.
const PHOENIX_PROJECT: &str = "chronicle-bench";
/// A request the sink takes at most: its head, and its body.
const SINK_HEAD_BYTES_MAX: usize = 64 * 1024;
const SINK_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Connections the silent receiver holds at most; the exporter opens a few.
const SILENT_CONNECTIONS_MAX: usize = 1024;

/// The configurations in the order the table shows them.
const SHOWN: [&str; 4] = ["off", "up", "down", "slow"];

/// Sizes of the section.
struct Sizes {
    /// Load before the measured window, not counted: a new server's first runs.
    warmup: Duration,
    window: Duration,
    /// How long the export may take to settle after the window, at most.
    drain_max: Duration,
}

impl Sizes {
    fn of(plan: &Plan) -> Sizes {
        if plan.quick {
            Sizes {
                warmup: Duration::from_millis(300),
                window: Duration::from_millis(1500),
                drain_max: Duration::from_secs(5),
            }
        } else {
            Sizes {
                warmup: Duration::from_secs(1),
                window: Duration::from_secs(8),
                drain_max: Duration::from_secs(15),
            }
        }
    }
}

/// A server configuration the section measures.
struct Config {
    id: &'static str,
    what: String,
    /// The server's `OTEL_*` variables (none: tracing off).
    otel: Vec<(String, String)>,
    /// Counters unchanged this long (and nothing queued) mean the export has settled: longer
    /// than one export may take.
    settle: Duration,
    /// The receiver's process, whose CPU is measured beside the server's.
    receiver_pid: Option<String>,
}

/// The spans' counters on the server's `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Spans {
    exported: f64,
    dropped: f64,
    failed: f64,
    queued: f64,
}

impl Spans {
    async fn read(client: &Client) -> Result<Spans> {
        let text = client.metrics().await?;
        let outcome = |o: &str| {
            gauge(
                &text,
                &format!("chronicle_trace_spans_total{{outcome=\"{o}\"}}"),
            )
            .unwrap_or(0.0)
        };
        Ok(Spans {
            exported: outcome("exported"),
            dropped: outcome("dropped"),
            failed: outcome("failed"),
            queued: gauge(&text, "chronicle_trace_spans_queued").unwrap_or(0.0),
        })
    }

    /// Spans the server counted: ended, or still waiting.
    fn counted(&self) -> f64 {
        self.exported + self.dropped + self.failed + self.queued
    }
}

/// What one configuration did.
struct Measured {
    runs: usize,
    /// Runs the server made, the warm-up's too: the spans counted are theirs.
    runs_all: usize,
    rate: f64,
    cpu_ms_per_run: f64,
    /// The receiver's CPU per run, when it is a process of its own that this section started.
    receiver_cpu_ms_per_run: Option<f64>,
    spans: Spans,
}

/// Polls `/metrics` until nothing is queued and the counters stayed unchanged for `settle`, or
/// `max` passed.
async fn drain(client: &Client, settle: Duration, max: Duration) -> Result<Spans> {
    let deadline = Instant::now() + max;
    let mut last = Spans::read(client).await?;
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Spans::read(client).await?;
        if now != last {
            (last, since) = (now, Instant::now());
        } else if now.queued == 0.0 && since.elapsed() >= settle {
            return Ok(now);
        }
        if Instant::now() >= deadline {
            return Ok(now);
        }
    }
}

fn measure(rt: &Runtime, root: &Path, config: &Config, s: &Sizes) -> Result<Measured> {
    progress(&format!("traces: {}", config.what));
    let data = root.join(format!("traces-{}", config.id));
    let log = root.join(format!("traces-{}.log", config.id));
    let mut env = config.otel.clone();
    env.push((
        chronicle_bench::AGENT_DELAY_ENV.to_owned(),
        AGENT_DELAY_MS.to_string(),
    ));
    let args = ["--domain".to_owned(), "bench".to_owned()];
    let mut server = api::spawn_server_with(&data, &args, Some(&env), Some(&log))?;
    rt.block_on(server.wait_healthy(Duration::from_secs(30)))
        .with_context(|| format!("starting the server (its log: {})", log.display()))?;
    let query = chronicle_bench::BENCH_QUERY;
    let warmup = rt.block_on(api::chat_turns(&server, query, CLIENTS, s.warmup))?;
    let pid = server.pid().to_string();
    let cpu = || process_cpu_secs(&pid).context("reading the server's /proc/<pid>/stat");
    let before = cpu()?;
    let receiver_cpu = || config.receiver_pid.as_deref().and_then(process_cpu_secs);
    let receiver_before = receiver_cpu();
    let load = rt.block_on(api::chat_turns(&server, query, CLIENTS, s.window))?;
    if load.failed + warmup.failed > 0 {
        let failed = load.failed + warmup.failed;
        bail!("{failed} of the chat turns failed (log: {})", log.display());
    }
    let spans = match config.otel.is_empty() {
        true => Spans::default(),
        false => rt.block_on(drain(&server.client, config.settle, s.drain_max))?,
    };
    let cpu_secs = cpu()? - before;
    let per_run = |secs: f64| secs * 1000.0 / load.done.max(1) as f64;
    let receiver_cpu_ms_per_run = receiver_cpu()
        .zip(receiver_before)
        .map(|(after, before)| per_run(after - before));
    drop(server);
    Ok(Measured {
        runs: load.done,
        runs_all: warmup.done + load.done,
        rate: load.rate(),
        cpu_ms_per_run: per_run(cpu_secs),
        receiver_cpu_ms_per_run,
        spans,
    })
}

/// A minimal OTLP/HTTP receiver: every request is answered 200 with an empty
/// `ExportTraceServiceResponse` at once; it counts requests and body bytes. It runs on the
/// bench's runtime, so its work is not the server's.
struct Sink {
    url: String,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sink {
    fn start(rt: &Runtime) -> Result<Sink> {
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let url = format!("http://{}", listener.local_addr()?);
        let (requests, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let counts = (requests.clone(), bytes.clone());
        let task = rt.spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (requests, bytes) = (counts.0.clone(), counts.1.clone());
                tokio::spawn(async move {
                    let _ = sink_connection(conn, &requests, &bytes).await;
                });
            }
        });
        Ok(Sink {
            url,
            requests,
            bytes,
            task,
        })
    }
}

/// Answers the requests of one keep-alive connection until the client closes it.
async fn sink_connection(
    mut conn: TcpStream,
    requests: &AtomicU64,
    bytes: &AtomicU64,
) -> Result<()> {
    const ANSWER: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        let head = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > SINK_HEAD_BYTES_MAX || conn.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        let length = String::from_utf8_lossy(&buf[..head])
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        if length > SINK_BODY_BYTES_MAX {
            bail!("a request of {length} bytes exceeds {SINK_BODY_BYTES_MAX}");
        }
        while buf.len() < head + length {
            if conn.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        buf.drain(..head + length);
        requests.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(length as u64, Ordering::Relaxed);
        conn.write_all(ANSWER).await?;
    }
}

/// A receiver that accepts connections and never answers: every export waits for its timeout.
struct Silent {
    url: String,
    task: JoinHandle<()>,
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Silent {
    fn start(rt: &Runtime) -> Result<Silent> {
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = rt.spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                if held.len() < SILENT_CONNECTIONS_MAX {
                    held.push(conn);
                }
            }
        });
        Ok(Silent { url, task })
    }
}

/// A loopback URL where nothing listens: a port bound, then let go.
fn closed_url() -> Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok(format!("http://127.0.0.1:{port}"))
}

/// A Phoenix this section started with `tests/phoenix/server.sh`, on ports and in a directory of
/// its own (a shared one is left alone); stopped when dropped.
struct OwnPhoenix {
    script: PathBuf,
    env: Vec<(String, String)>,
    dir: PathBuf,
}

impl OwnPhoenix {
    /// Its process, from the script's pid file.
    fn pid(&self) -> Option<String> {
        let pid = std::fs::read_to_string(self.dir.join("server.pid")).ok()?;
        Some(pid.trim().to_owned())
    }
}

impl Drop for OwnPhoenix {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .status();
    }
}

/// `tests/phoenix/server.sh` and its venv, when this is a checkout with `make phoenix-venv` done
/// (the script would otherwise make the venv, a download).
fn phoenix_files() -> Option<(PathBuf, PathBuf)> {
    let roots = [
        PathBuf::from("."),
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    ];
    roots.iter().find_map(|root| {
        let script = root.join("tests/phoenix/server.sh");
        let venv = std::env::var_os("PHOENIX_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target/phoenix-venv"));
        (script.exists() && venv.join("bin/phoenix").exists()).then_some((script, venv))
    })
}

fn free_port() -> Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port()
        .to_string())
}

/// Starts a Phoenix of this section's own; its URL.
fn start_phoenix(root: &Path, script: PathBuf, venv: PathBuf) -> Result<(String, OwnPhoenix)> {
    progress("traces: starting a Phoenix (tests/phoenix/server.sh)");
    let dir = root.join("phoenix");
    let env = vec![
        ("CHRONICLE_PHOENIX_PORT".to_owned(), free_port()?),
        ("CHRONICLE_PHOENIX_GRPC_PORT".to_owned(), free_port()?),
        (
            "CHRONICLE_PHOENIX_DIR".to_owned(),
            dir.to_string_lossy().into_owned(),
        ),
        (
            "PHOENIX_VENV".to_owned(),
            venv.to_string_lossy().into_owned(),
        ),
    ];
    let own = OwnPhoenix { script, env, dir };
    let out = Command::new("bash")
        .arg(&own.script)
        .arg("start")
        .envs(own.env.iter().map(|(k, v)| (k, v)))
        .stderr(Stdio::inherit())
        .output()
        .context("running tests/phoenix/server.sh")?;
    let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || !url.starts_with("http") {
        bail!("tests/phoenix/server.sh start: {}", out.status);
    }
    Ok((url, own))
}

/// The receiver of the configuration whose exporter is up.
enum Receiver {
    /// A Phoenix at this base URL: given, or started here.
    Phoenix {
        url: String,
        _own: Option<OwnPhoenix>,
    },
    Sink(Sink),
}

impl Receiver {
    fn pick(rt: &Runtime, root: &Path, plan: &Plan, phoenix: Option<&str>) -> Result<Receiver> {
        if let Some(url) = phoenix {
            return Ok(Receiver::Phoenix {
                url: url.trim_end_matches('/').to_owned(),
                _own: None,
            });
        }
        if !plan.quick
            && let Some((script, venv)) = phoenix_files()
        {
            match start_phoenix(root, script, venv) {
                Ok((url, own)) => {
                    return Ok(Receiver::Phoenix {
                        url,
                        _own: Some(own),
                    });
                }
                Err(e) => progress(&format!("traces: no Phoenix ({e:#}); the built-in sink")),
            }
        }
        Ok(Receiver::Sink(Sink::start(rt)?))
    }

    fn url(&self) -> &str {
        match self {
            Receiver::Phoenix { url, .. } => url,
            Receiver::Sink(s) => &s.url,
        }
    }

    /// The receiver's process, when this section started it.
    fn pid(&self) -> Option<String> {
        match self {
            Receiver::Phoenix {
                _own: Some(own), ..
            } => own.pid(),
            _ => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Receiver::Phoenix { .. } => "Phoenix",
            Receiver::Sink(_) => "built-in sink",
        }
    }

    /// What the receiver was, for the exported row's note.
    fn described(&self) -> String {
        match self {
            Receiver::Phoenix { url, .. } => format!(
                "receiver: Arize Phoenix at {url} (OTLP/HTTP protobuf, project {PHOENIX_PROJECT}), on the same cores"
            ),
            Receiver::Sink(s) => format!(
                "receiver: the bench's built-in OTLP/HTTP sink (answers 200 at once; {} requests, {} bytes received); pass --phoenix URL for a real one",
                num(s.requests.load(Ordering::Relaxed) as f64),
                num(s.bytes.load(Ordering::Relaxed) as f64)
            ),
        }
    }
}

/// A traced configuration's `OTEL_*` variables, exporting to `url`.
fn otel(url: &str, extra: &[(&str, String)]) -> Vec<(String, String)> {
    let mut env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.to_owned()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", SCHEDULE_DELAY_MS.to_string()),
        ("OTEL_BSP_MAX_QUEUE_SIZE", QUEUE_SPANS.to_string()),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", BATCH_SPANS.to_string()),
    ];
    env.extend(extra.iter().cloned());
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn rows(config: &Config, m: &Measured, off: &Measured, receiver: &Receiver) -> Vec<Row> {
    let (id, what) = (config.id, &config.what);
    let vs_off =
        |v: f64, base: f64| format!("{:+.0}% against tracing off", (v / base - 1.0) * 100.0);
    let mut rows = vec![
        Row::new(
            format!("traces_{id}_runs_per_s"),
            format!("runs/s, {what}"),
            m.rate,
            "runs/s",
        )
        .note(match config.otel.is_empty() {
            true => format!(
                "{CLIENTS} chat clients at once, {} runs; each run 3 agents, each waiting {AGENT_DELAY_MS} ms as a model call would",
                m.runs
            ),
            false => format!("{} runs; {}", m.runs, vs_off(m.rate, off.rate)),
        }),
        Row::new(
            format!("traces_{id}_cpu_ms_per_run"),
            format!("server CPU per run, {what}"),
            m.cpu_ms_per_run,
            "ms",
        )
        .note(match (config.otel.is_empty(), m.receiver_cpu_ms_per_run) {
            (true, _) => "user + system time of the server process over the window (and the export's drain after it), per run".to_owned(),
            (false, None) => vs_off(m.cpu_ms_per_run, off.cpu_ms_per_run),
            (false, Some(r)) => format!(
                "{}; the receiver's process took {r:.2} ms per run more",
                vs_off(m.cpu_ms_per_run, off.cpu_ms_per_run)
            ),
        }),
    ];
    if config.otel.is_empty() {
        return rows;
    }
    let s = &m.spans;
    let per_run = s.counted() / m.runs_all.max(1) as f64;
    let left = match s.queued {
        0.0 => String::new(),
        q => format!("; {} still queued", num(q)),
    };
    let exported_note = match id {
        "up" => format!(
            "{} runs, the warm-up's too: {per_run:.1} spans each{left}; {}",
            m.runs_all,
            receiver.described()
        ),
        _ => format!(
            "{} runs, the warm-up's too: {per_run:.1} spans each{left}",
            m.runs_all
        ),
    };
    rows.push(
        Row::new(
            format!("traces_{id}_spans_exported"),
            format!("spans exported, {what}"),
            s.exported,
            "spans",
        )
        .note(exported_note),
    );
    rows.push(
        Row::new(
            format!("traces_{id}_spans_dropped"),
            format!("spans dropped (queue full), {what}"),
            s.dropped,
            "spans",
        )
        .note(format!(
            "queue {QUEUE_SPANS} spans, batches of {BATCH_SPANS}, schedule delay {SCHEDULE_DELAY_MS} ms"
        )),
    );
    rows.push(Row::new(
        format!("traces_{id}_spans_failed"),
        format!("spans failed (refused, unreachable, timed out), {what}"),
        s.failed,
        "spans",
    ));
    rows
}

/// The section's rows; `phoenix`, a Phoenix's base URL to export to.
pub(super) fn section(
    rt: &Runtime,
    root: &Path,
    plan: &Plan,
    phoenix: Option<&str>,
) -> Result<Vec<Row>> {
    let s = Sizes::of(plan);
    let receiver = Receiver::pick(rt, root, plan, phoenix)?;
    let silent = Silent::start(rt)?;
    let mut up = vec![];
    if let Receiver::Phoenix { .. } = receiver {
        up.push((
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("x-project-name={PHOENIX_PROJECT}"),
        ));
    }
    let settle = Duration::from_millis(500);
    // Measured in this order, the receiver that is up last: a Phoenix goes on storing what it
    // was sent after it answered, on the same cores as the next server.
    let configs = [
        Config {
            id: "off",
            what: "tracing off".to_owned(),
            otel: vec![],
            settle,
            receiver_pid: None,
        },
        Config {
            id: "down",
            what: "exporter down (closed port)".to_owned(),
            otel: otel(&closed_url()?, &[]),
            settle,
            receiver_pid: None,
        },
        Config {
            id: "slow",
            what: format!(
                "exporter slow (never answers, timeout {} s)",
                SLOW_EXPORT_TIMEOUT_MS / 1000
            ),
            otel: otel(
                &silent.url,
                &[(
                    "OTEL_BSP_EXPORT_TIMEOUT",
                    SLOW_EXPORT_TIMEOUT_MS.to_string(),
                )],
            ),
            settle: Duration::from_millis(SLOW_EXPORT_TIMEOUT_MS) + settle,
            receiver_pid: None,
        },
        Config {
            id: "up",
            what: format!("exporter up ({})", receiver.name()),
            otel: otel(receiver.url(), &up),
            settle,
            receiver_pid: receiver.pid(),
        },
    ];
    let measured = configs
        .iter()
        .map(|c| measure(rt, root, c, &s))
        .collect::<Result<Vec<_>>>()?;
    let off = &measured[0];
    let mut shown: Vec<_> = configs.iter().zip(&measured).collect();
    shown.sort_by_key(|(c, _)| SHOWN.iter().position(|id| *id == c.id));
    Ok(shown
        .into_iter()
        .flat_map(|(c, m)| rows(c, m, off, &receiver))
        .collect())
}
