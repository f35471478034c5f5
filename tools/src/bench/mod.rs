//! `chronicle bench`: durable appends (single and group-committed, against the machine's own fsync
//! rate), replay speed, restore latency with and without snapshots, and the peak memory of a long
//! replay, measured in a child process; and the engine end to end (full runs, bytes per run, HITL
//! resume, a long run's checkpoint list and restore), tool calls, an llm agent's loop (events and
//! bytes per model turn, recovery from the log), MCP call overhead (stdio and HTTP beside a
//! built-in tool), the API (SSE fan-out, `/chat` load, server memory, live chunk fan-out), and the
//! console's run page of a long run; and the store on sled beside the store on PostgreSQL, the
//! same work on each (given a PostgreSQL: `--postgres`); and what the live trace export costs a
//! server with its receiver up, down or slow.
//! Prints one table; then the PostgreSQL section's, one column per store, and the scale
//! section's, one column per store size.
//!
//! Every store lives in a temporary directory under `--dir` (the system temp dir by default),
//! and the fsync ceiling is measured in that same directory, so the two share a filesystem. The
//! scale section's generated stores stay in `--dir` for the next bench (see [`scale`]).

mod api;
mod append;
mod chunks;
mod cluster;
mod console;
mod engine;
mod llm;
mod mcp;
mod memory;
mod postgres;
mod replay;
mod report;
mod scale;
mod tools;
mod traces;
mod workload;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chronicle_engine::store::{Durability, Options, Store};
use chronicle_schemas::RunId;

pub use memory::{MemoryArgs, replay_memory_child};
use report::Row;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Small sizes and short windows: a smoke test in a few seconds, not a measurement.
    #[arg(long)]
    pub quick: bool,
    /// Print the rows as JSON Lines (`{"type":"bench","data":{...}}`) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Where the temporary stores go (and where fsync is measured); the system temp dir by default.
    /// The scale section's generated stores stay in DIR/chronicle-bench-stores/runs-N/ for the
    /// next bench at the same N (delete that directory to free the space).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Keep the temporary stores (the path is printed on stderr) instead of deleting them.
    #[arg(long)]
    pub keep: bool,
    /// Run only these sections (repeatable); all of them by default.
    #[arg(long, value_enum, value_name = "SECTION")]
    pub only: Vec<Section>,
    /// The sizes of the scale section's stores, in runs, comma-separated: 10000,100000 by
    /// default (2000,5000 with --quick); a million takes minutes to generate and GBs of disk, so
    /// ask for it (`--store-runs 10000,100000,1000000`).
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pub store_runs: Vec<u64>,
    /// Make (or reuse) the scale section's stores and stop: print where they are and how they
    /// were made, measure nothing (implies `--only scale`).
    #[arg(long)]
    pub store_generate_only: bool,
    /// sled page cache of the child that measures replay memory, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub memory_cache_mib: u64,
    /// The PostgreSQL the `postgres` section measures beside sled (`postgres://user@host/db`):
    /// each of its stores lives in a new schema there, dropped afterwards. Without it the section
    /// is skipped (`make bench` starts a throwaway server and passes its URL).
    #[arg(long, env = "CHRONICLE_BENCH_PG", value_name = "URL")]
    pub postgres: Option<String>,
    /// The Arize Phoenix (its base URL, `http://127.0.0.1:6006`) the `traces` section exports to
    /// as the receiver that is up. Without it the section starts one with
    /// `tests/phoenix/server.sh` when `make phoenix-venv` was done (not with `--quick`), else uses
    /// a built-in OTLP/HTTP sink.
    #[arg(long, env = "CHRONICLE_BENCH_PHOENIX", value_name = "URL")]
    pub phoenix: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    /// Durable appends, the fsync ceiling and the barrier.
    Append,
    /// Replay from memory and from sled, and restore latency.
    Replay,
    /// Peak memory of replays, in a child process.
    Memory,
    /// Full engine runs with the built-in agents, HITL resume, a long run's list and restore.
    Engine,
    /// A real `chronicle serve` process: SSE fan-out, `/chat` throughput, server memory; and
    /// live chunk fan-out from a streaming model to 100 SSE subscribers.
    Api,
    /// Tool calls through the tool host, and recovery answering them from the log.
    Tools,
    /// An llm agent's loop: events and bytes per model turn, recovery answering turns from the log.
    Llm,
    /// MCP call overhead: a no-op tool over stdio and over HTTP beside a built-in tool, through
    /// the tool host (needs `make data-venv`).
    Mcp,
    /// The console's run page of a long run: its weight, the server's time to the page and to
    /// one scrub step.
    Console,
    /// The store on sled beside the store on PostgreSQL (`--postgres`), the same work on each:
    /// durable appends, commits and the log head's lock, equal-work runs, replay, disk per run.
    Postgres,
    /// Several nodes on one PostgreSQL store (`--postgres`): takeover after SIGKILL and SIGSTOP,
    /// commit-to-SSE latency across nodes, forwarded decisions, runs/s with 1 and 3 nodes, what
    /// parked runs hold once released.
    Cluster,
    /// Stores of N runs (`--store-runs`) generated straight through the store, and what
    /// `chronicle serve` on each costs: start, RSS, every list's p50/p99, time travel and
    /// restore in old runs, RSS and runs/s under load, beside an empty store.
    Scale,
    /// The live OTLP trace export: runs/s, server CPU per run and spans exported, dropped and
    /// failed, with tracing off and with the receiver up (`--phoenix`), down and slow.
    Traces,
}

/// Sizes and time windows of one bench run.
#[derive(Clone, Debug)]
struct Plan {
    /// `--quick`: small sizes, short windows.
    quick: bool,
    /// Each append configuration runs for this long.
    append_window: Duration,
    fsync_window: Duration,
    barrier_window: Duration,
    writers_many: usize,
    /// Events of the run used for replay and restore.
    long_run_events: u64,
    restore_depths: [u64; 2],
    restore_reps_snapshot: usize,
    restore_reps_scratch: usize,
    /// Replay lengths whose peak memory the child measures (small, large).
    memory_events: [u64; 2],
    /// Events per append call when building the long stores.
    bulk_batch_events: usize,
    /// Full engine runs back to back, one at a time, for this long.
    engine_window_1: Duration,
    /// Full engine runs, `engine_runs_many` at a time, for this long.
    engine_window_n: Duration,
    engine_runs_many: usize,
    /// Approvals decided (and timed) one at a time.
    hitl_decisions: usize,
    /// TODOs of the long run whose storage, checkpoint list and restore are measured.
    long_todos: usize,
    engine_list_reps: usize,
    engine_restore_reps: usize,
    /// The fsync and barrier probes the engine section reports next to its latencies.
    engine_fsync_window: Duration,
    /// Tool calls one agent makes in the tools section.
    tool_calls: usize,
    /// Model turns (each with one tool call) of the llm section's agent loop.
    llm_turns: usize,
    /// Calls of each series of the mcp section.
    mcp_calls: usize,
    /// The postgres section: each append configuration, on each store, runs for this long.
    pg_append_window: Duration,
    /// The postgres section: equal-work runs, `engine_runs_many` at a time, on each store.
    pg_engine_window: Duration,
    /// The postgres section: events of the run replayed from each store.
    pg_replay_events: u64,
    /// Keep every store after its section instead of deleting it.
    keep: bool,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                quick,
                append_window: Duration::from_millis(500),
                fsync_window: Duration::from_millis(500),
                barrier_window: Duration::from_millis(300),
                writers_many: 64,
                long_run_events: 20_000,
                restore_depths: [1_000, 10_000],
                restore_reps_snapshot: 3,
                restore_reps_scratch: 1,
                memory_events: [10_000, 100_000],
                bulk_batch_events: 1000,
                engine_window_1: Duration::from_millis(300),
                engine_window_n: Duration::from_millis(800),
                engine_runs_many: 64,
                hitl_decisions: 30,
                long_todos: 40,
                engine_list_reps: 3,
                engine_restore_reps: 2,
                engine_fsync_window: Duration::from_millis(200),
                tool_calls: 200,
                llm_turns: 30,
                mcp_calls: 100,
                pg_append_window: Duration::from_millis(300),
                pg_engine_window: Duration::from_millis(400),
                pg_replay_events: 3_000,
                keep: false,
            }
        } else {
            Plan {
                quick,
                append_window: Duration::from_secs(3),
                fsync_window: Duration::from_secs(2),
                barrier_window: Duration::from_millis(1500),
                writers_many: 64,
                long_run_events: 200_000,
                restore_depths: [10_000, 100_000],
                restore_reps_snapshot: 15,
                restore_reps_scratch: 3,
                memory_events: [100_000, 1_000_000],
                bulk_batch_events: 1000,
                engine_window_1: Duration::from_secs(4),
                engine_window_n: Duration::from_secs(6),
                engine_runs_many: 64,
                hitl_decisions: 200,
                long_todos: 200,
                engine_list_reps: 20,
                engine_restore_reps: 5,
                engine_fsync_window: Duration::from_millis(500),
                tool_calls: 2000,
                llm_turns: 150,
                mcp_calls: 1000,
                // The same windows and run as the append, engine and replay sections.
                pg_append_window: Duration::from_secs(3),
                pg_engine_window: Duration::from_secs(6),
                pg_replay_events: 200_000,
                keep: false,
            }
        }
    }

    /// Deletes a section's store, unless `--keep`.
    fn discard(&self, dir: &Path) {
        if !self.keep {
            std::fs::remove_dir_all(dir).ok();
        }
    }
}

pub fn run(args: &BenchArgs, out: &mut impl Write) -> Result<()> {
    let plan = Plan {
        keep: args.keep,
        ..Plan::new(args.quick)
    };
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let root = tempfile::Builder::new()
        .prefix("chronicle-bench-")
        .tempdir_in(&base)
        .with_context(|| format!("creating a temporary directory in {}", base.display()))?;
    let started = Instant::now();
    let load_at_start = load_average();
    progress(&format!(
        "chronicle bench{}: stores in {}",
        if args.quick { " --quick" } else { "" },
        root.path().display()
    ));

    let mut rows = Vec::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let wanted = |s: Section| {
        if args.store_generate_only {
            return s == Section::Scale;
        }
        args.only.is_empty() || args.only.contains(&s)
    };
    if wanted(Section::Append) {
        rows.extend(append::section(&rt, root.path(), &plan)?);
    }
    if wanted(Section::Replay) {
        rows.extend(replay::section(root.path(), &plan)?);
    }
    if wanted(Section::Memory) {
        rows.extend(memory::section(root.path(), &plan, args.memory_cache_mib)?);
    }
    if wanted(Section::Engine) {
        rows.extend(engine::section(&rt, root.path(), &plan)?);
    }
    if wanted(Section::Tools) {
        rows.extend(tools::section(&rt, root.path(), &plan)?);
    }
    if wanted(Section::Llm) {
        rows.extend(llm::section(&rt, root.path(), &plan)?);
    }
    if wanted(Section::Mcp) {
        rows.extend(mcp::section(&rt, root.path(), &plan)?);
    }
    if wanted(Section::Api) {
        progress("api: SSE fan-out, /chat load and server memory against `chronicle serve`");
        rows.extend(rt.block_on(api::run(root.path(), args.quick))?);
        rows.extend(chunks::section(&rt, root.path(), args.quick)?);
    }
    if wanted(Section::Console) {
        rows.extend(console::section(&rt, root.path(), &plan)?);
    }
    if wanted(Section::Traces) {
        rows.extend(traces::section(
            &rt,
            root.path(),
            &plan,
            args.phoenix.as_deref(),
        )?);
    }
    let mut grids = Vec::new();
    if wanted(Section::Postgres) {
        match &args.postgres {
            Some(url) => grids.push(postgres::section(&rt, root.path(), url, &plan)?),
            None => rows.push(postgres::skipped()),
        }
    }
    if wanted(Section::Cluster) {
        match &args.postgres {
            Some(url) => rows.extend(cluster::section(&rt, root.path(), url, &plan)?),
            None => rows.push(cluster::skipped()),
        }
    }
    if wanted(Section::Scale) {
        let sizes = match (&args.store_runs[..], args.quick) {
            ([], false) => scale::RUNS_DEFAULT.to_vec(),
            ([], true) => scale::RUNS_QUICK.to_vec(),
            (sizes, _) => sizes.to_vec(),
        };
        let stores = base.join(scale::STORES_DIR);
        grids.push(scale::section(
            &rt,
            root.path(),
            &stores,
            &plan,
            &sizes,
            args.store_generate_only,
        )?);
    }
    rows.push(
        Row::new(
            "bench_wall_s",
            "whole bench, wall clock",
            started.elapsed().as_secs_f64(),
            "s",
        )
        .note(format!(
            "{} cores; load average {} at the start (other work on the machine skews every row)",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            load_at_start
        )),
    );
    drop(rt);
    if args.keep {
        progress(&format!("kept {}", root.keep().display()));
    }

    if args.json {
        report::print_json(out, &rows)?;
        for grid in &grids {
            report::print_grid_json(out, grid)?;
        }
    } else {
        report::print_table(out, &rows)?;
        for grid in &grids {
            writeln!(out)?;
            report::print_grid(out, grid)?;
        }
    }
    Ok(())
}

/// The 1-minute load average (`/proc/loadavg`), or `?`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// A progress line on stderr (stdout carries only the table).
fn progress(msg: &str) {
    eprintln!("[bench] {msg}");
}

/// A new store in `dir` for a bulk load: `async` durability (flushed by the caller at the end).
pub(crate) fn bulk_store(dir: &Path) -> Result<Store> {
    let opts = Options {
        durability: Durability::Async,
        ..Options::default()
    };
    Store::open(dir, opts).with_context(|| format!("opening a store in {}", dir.display()))
}

/// Builds a store holding one run of `events` events of the long workload, appended in
/// `batch`-event calls in `async` durability (a bulk load, not the durable-append measurement),
/// then flushed. Returns the store and the load rate in events/s.
fn build_long_store(dir: &Path, run: RunId, events: u64, batch: usize) -> Result<(Store, f64)> {
    let store = bulk_store(dir)?;
    let rate = load_long_run(&store, run, events, batch)?;
    Ok((store, rate))
}

/// Appends one run of `events` events of the long workload to `store` in `batch`-event calls,
/// then flushes it. Returns the load rate in events/s.
fn load_long_run(store: &Store, run: RunId, events: u64, batch: usize) -> Result<f64> {
    let t = Instant::now();
    let mut events_iter = workload::LongRun::new();
    let mut seq = 0u64;
    let mut next_report = 0u64;
    while seq < events {
        let n = (events - seq).min(batch as u64) as usize;
        let chunk: Vec<_> = events_iter.by_ref().take(n).collect();
        store
            .append_blocking(run, seq, chunk)
            .with_context(|| format!("bulk append at seq {seq}"))?;
        seq += n as u64;
        if seq >= next_report && events >= 500_000 {
            progress(&format!(
                "  loaded {} / {} events",
                report::num(seq as f64),
                report::num(events as f64)
            ));
            next_report = seq + 250_000;
        }
    }
    store.flush().context("flushing the bulk-loaded store")?;
    Ok(events as f64 / t.elapsed().as_secs_f64())
}

/// The median of a non-empty sample (sorts it).
fn median(xs: &mut [f64]) -> f64 {
    percentile(xs, 0.5)
}

/// Nearest-rank percentile `p` in 0..=1 of a non-empty sample (sorts it).
fn percentile(xs: &mut [f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let rank = ((p * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    xs[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
