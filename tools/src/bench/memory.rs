//! Peak memory of a long replay. The replay runs in a child process (this binary, re-executed
//! with the hidden `bench-replay-memory` subcommand), so the peak (`VmHWM`) is the replay's own
//! and not the parent's, which has held encoded runs and many stores by then. The child streams
//! the events through `replay_from_zero` with a bounded sled cache: its peak should follow the
//! projected state and the cache, not the number of events.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use chronicle_engine::store::{Options, Store};
use chronicle_projections::{replay_from_zero, snapshot};
use chronicle_schemas::RunId;
use serde::{Deserialize, Serialize};

use super::report::{Row, num};
use super::{Plan, build_long_store, progress};

#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    /// The store directory.
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long)]
    pub run: RunId,
    /// Replay up to and including this seq.
    #[arg(long)]
    pub to: u64,
    /// sled page cache, in MiB.
    #[arg(long, default_value_t = 64)]
    pub cache_mib: u64,
}

/// The sled cache of the runs that show the fold's own memory.
const FOLD_ONLY_CACHE_MIB: u64 = 1;

/// What the child prints on stdout, as one JSON line.
#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    events: u64,
    secs: f64,
    vm_hwm_kib: u64,
    vm_rss_after_open_kib: u64,
    state_bytes: usize,
}

/// A `kB` field of `/proc/self/status`.
fn proc_status_kib(field: &str) -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/self/status"))
}

/// The hidden subcommand: open the store, replay, print a [`ChildReport`].
pub fn replay_memory_child(args: &MemoryArgs, out: &mut impl Write) -> Result<()> {
    let store = Store::open(
        &args.dir,
        Options {
            cache_capacity_bytes: args.cache_mib * 1024 * 1024,
            ..Options::default()
        },
    )
    .with_context(|| format!("opening {}", args.dir.display()))?;
    let rss_open = proc_status_kib("VmRSS")?;
    let t = Instant::now();
    let state = replay_from_zero(&store.source(args.run), args.to)?;
    let secs = t.elapsed().as_secs_f64();
    if state.last_seq != Some(args.to) {
        bail!("replay ended at {:?}, expected {}", state.last_seq, args.to);
    }
    let report = ChildReport {
        events: args.to + 1,
        secs,
        vm_hwm_kib: proc_status_kib("VmHWM")?,
        vm_rss_after_open_kib: rss_open,
        state_bytes: snapshot::encode(&state).len(),
    };
    writeln!(out, "{}", serde_json::to_string(&report)?)?;
    Ok(())
}

fn run_child(dir: &Path, run: RunId, events: u64, cache_mib: u64) -> Result<ChildReport> {
    let exe = std::env::current_exe().context("locating the chronicle binary")?;
    let out = Command::new(exe)
        .arg("bench-replay-memory")
        .arg("--dir")
        .arg(dir)
        .args(["--run", &run.to_string(), "--to", &(events - 1).to_string()])
        .args(["--cache-mib", &cache_mib.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("starting the replay-memory child")?;
    if !out.status.success() {
        bail!("the replay-memory child failed ({})", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .last()
        .context("the replay-memory child printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("the replay-memory child printed {line:?}"))
}

pub(super) fn section(root: &Path, plan: &Plan, cache_mib: u64) -> Result<Vec<Row>> {
    let run = RunId::from_u128(0xC0);
    let [small, big] = plan.memory_events;
    let dir = root.join("memory");
    progress(&format!("memory: loading {} events", num(big as f64)));
    let (store, load_rate) = build_long_store(&dir, run, big, plan.bulk_batch_events)?;
    // The child opens the same directory: sled holds a lock on it while this handle lives.
    drop(store);
    let mut rows = Vec::new();
    // The small cache isolates the fold: what remains is sled's per-store overhead at open and
    // the projected state. The configured cache shows a realistic server-like setting.
    for cache in [FOLD_ONLY_CACHE_MIB, cache_mib] {
        for n in [small, big] {
            progress(&format!(
                "memory: child replays {} events, sled cache {cache} MiB",
                num(n as f64)
            ));
            let r = run_child(&dir, run, n, cache)?;
            let label = num(n as f64);
            rows.push(
                Row::new(
                    format!("replay_peak_rss_{n}_cache_{cache}"),
                    format!("peak RSS, {label}-event replay, sled cache {cache} MiB (child)"),
                    r.vm_hwm_kib as f64 / 1024.0,
                    "MiB",
                )
                .note(format!(
                    "VmHWM; {} MiB right after open (sled, store of {} events); final state {} KiB encoded; {} events/s",
                    num(r.vm_rss_after_open_kib as f64 / 1024.0),
                    num(big as f64),
                    num(r.state_bytes as f64 / 1024.0),
                    num(r.events as f64 / r.secs)
                )),
            );
            if n == big && cache == cache_mib {
                rows.push(
                    Row::new(
                        format!("replay_sled_{n}"),
                        format!("replay from sled, replay_from_zero ({label} events, child)"),
                        r.events as f64 / r.secs,
                        "events/s",
                    )
                    .note(format!("store bulk-loaded at {} events/s", num(load_rate))),
                );
            }
        }
    }
    plan.discard(&dir);
    Ok(rows)
}
