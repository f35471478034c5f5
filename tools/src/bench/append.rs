//! Durable appends: 1 and many concurrent writers in `sync` and `async` durability, against the
//! ceiling the disk allows: the machine's own fsync rate (4 KiB write + `fdatasync` in a loop, in
//! the same directory as the stores) and the store's own barrier (sled `flush` + `fdatasync`).
//!
//! Each writer appends one event per call to its own run and awaits every append, so in `sync`
//! mode a writer can never do better than one append per barrier; only group commit (one
//! barrier covering the appends of many writers) lets many writers go beyond the fsync rate.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chronicle_engine::store::{Durability, Options, Store};
use chronicle_schemas::{Event, RunConfig, RunId, SessionId};
use tokio::runtime::Runtime;

use super::report::{Row, num, target_min};
use super::{Plan, median, ms, percentile, progress};

/// Bytes of each fsync probe write (one page).
const FSYNC_PROBE_BYTES: usize = 4096;
/// Fewest samples a timed loop takes even if its window has passed.
const SAMPLES_MIN: usize = 10;
/// The group-commit target: this share of the ceiling.
const GROUP_COMMIT_TARGET: f64 = 0.80;
/// Durable one-event appends per second, many writers.
const APPENDS_MANY_TARGET: f64 = 200_000.0;

fn run_started(w: usize) -> Event {
    Event::RunStarted {
        session_id: SessionId(format!("bench-append-{w}")),
        user_id: Some("bench".into()),
        request_id: format!("req_bench_{w}"),
        query: "전세금 인상 한도 확인".into(),
        config: RunConfig::default(),
        parent: None,
        owner: None,
        traceparent: None,
    }
}

/// The appended event: a typical narration line (about 150 bytes encoded).
fn one_event() -> Event {
    Event::Reasoning {
        message: "검색 결과를 분석합니다: 주택임대차보호법 제7조의 증액 한도를 확인".into(),
    }
}

pub(super) struct Fsync {
    /// Appending writes: each `fdatasync` also commits the grown file size (ext4: a journal
    /// commit), as for a log that grows, which sled's is.
    append_rate: f64,
    pub append_mean_ms: f64,
    /// Overwrites inside a preallocated file: the device's bare data flush.
    overwrite_rate: f64,
}

/// `FSYNC_PROBE_BYTES` written and `fdatasync`ed in a loop for `window`: the disk's ceiling for
/// one-at-a-time durable writes, appending (the ceiling used) and overwriting (for reference).
pub(super) fn fsync_rate(root: &Path, window: Duration) -> Result<Fsync> {
    let path = root.join("fsync-probe");
    let buf = vec![0xA5u8; FSYNC_PROBE_BYTES];
    let probe = |overwrite: bool| -> Result<(f64, f64)> {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        const SLOTS: u64 = 256;
        if overwrite {
            for _ in 0..SLOTS {
                f.write_all(&buf)?;
            }
            f.sync_all()?;
        }
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < window || n < SAMPLES_MIN as u64 {
            if overwrite {
                f.seek(SeekFrom::Start((n % SLOTS) * FSYNC_PROBE_BYTES as u64))?;
            }
            f.write_all(&buf)?;
            f.sync_data()?;
            n += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        Ok((n as f64 / secs, secs * 1000.0 / n as f64))
    };
    let (append_rate, append_mean_ms) = probe(false)?;
    let (overwrite_rate, _) = probe(true)?;
    std::fs::remove_file(&path).ok();
    Ok(Fsync {
        append_rate,
        append_mean_ms,
        overwrite_rate,
    })
}

/// The store's durability barrier (`Store::flush`: sled flush + fdatasync of sled's data file)
/// right after a one-event append, with the async flusher parked so it does not interfere.
pub(super) fn barrier_samples(
    root: &Path,
    plan: &Plan,
    window: Duration,
    name: &str,
) -> Result<Vec<f64>> {
    let dir = root.join(name);
    let store = Store::open(
        &dir,
        Options {
            durability: Durability::Async,
            async_flush_ms: 3_600_000,
            ..Options::default()
        },
    )?;
    let run = RunId::from_u128(1);
    store.append_blocking(run, 0, vec![run_started(0)])?;
    store.flush()?;
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut seq = 1;
    while start.elapsed() < window || samples.len() < SAMPLES_MIN {
        store.append_blocking(run, seq, vec![one_event()])?;
        seq += 1;
        let t = Instant::now();
        store.flush()?;
        samples.push(ms(t.elapsed()));
    }
    drop(store);
    plan.discard(&dir);
    Ok(samples)
}

/// Writes back every dirty page of the machine (`sync(1)`) so that write-back of earlier work,
/// such as the release build that `cargo run` just finished, does not land inside the fsync
/// measurements: on ext4 an `fdatasync` that commits the journal waits for it. Best effort.
pub(super) fn settle() {
    match std::process::Command::new("sync").status() {
        Ok(s) if s.success() => {}
        _ => progress("warning: sync(1) failed; earlier write-back may slow the fsync probes"),
    }
}

pub(super) struct AppendStats {
    pub rate: f64,
    pub appends: usize,
    /// Group commits that carried the appends: the sled writer stamps one `at` per commit, so
    /// this is the number of distinct `at` values (in `sync` mode, also the number of barriers).
    commits: usize,
    /// Barriers the store passed from the start of the window to the last append's answer
    /// (sled: flush + fdatasync; PostgreSQL: commits).
    pub barriers: u64,
    pub secs: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// `writers` tasks, each appending one event per call to its own run for `window`.
pub(super) async fn append_rate(
    store: &Store,
    writers: usize,
    window: Duration,
) -> Result<AppendStats> {
    let gate = Arc::new(tokio::sync::Barrier::new(writers));
    // The store's barriers when the window opens (every run's first append is answered by then).
    let barriers_at_start = Arc::new(std::sync::OnceLock::new());
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let (store, gate, at_start) = (store.clone(), gate.clone(), barriers_at_start.clone());
        tasks.spawn(async move {
            let run = RunId::from_u128(w as u128 + 1);
            store.append(run, 0, vec![run_started(w)]).await?;
            // Everyone starts together, after every run exists.
            if gate.wait().await.is_leader() {
                at_start.set(store.barriers()).ok();
            }
            let start = Instant::now();
            let mut lat_us = Vec::with_capacity(4096);
            let mut stamps = Vec::with_capacity(4096);
            let mut seq = 1;
            while start.elapsed() < window {
                let t = Instant::now();
                let envs = store.append(run, seq, vec![one_event()]).await?;
                lat_us.push(t.elapsed().as_secs_f64() * 1e6);
                stamps.extend(envs.first().map(|e| e.at.as_micros()));
                seq += 1;
            }
            anyhow::Ok((start, Instant::now(), lat_us, stamps))
        });
    }
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    let (mut lat, mut stamps) = (Vec::new(), Vec::new());
    while let Some(joined) = tasks.join_next().await {
        let (s, e, l, st) = joined.context("append task panicked")??;
        first = Some(first.map_or(s, |f| f.min(s)));
        last = Some(last.map_or(e, |x| x.max(e)));
        lat.extend(l);
        stamps.extend(st);
    }
    stamps.sort_unstable();
    stamps.dedup();
    let barriers = store.barriers() - barriers_at_start.get().copied().unwrap_or(0);
    let secs = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => f64::NAN,
    };
    let appends = lat.len();
    Ok(AppendStats {
        rate: appends as f64 / secs,
        appends,
        commits: stamps.len(),
        barriers,
        secs,
        p50_ms: percentile(&mut lat, 0.5) / 1000.0,
        p99_ms: percentile(&mut lat, 0.99) / 1000.0,
    })
}

fn measure(
    rt: &Runtime,
    root: &Path,
    plan: &Plan,
    durability: Durability,
    writers: usize,
) -> Result<AppendStats> {
    let window = plan.append_window;
    let name = if durability == Durability::Sync {
        "sync"
    } else {
        "async"
    };
    progress(&format!(
        "appends: {name}, {writers} writer(s), {:.1} s",
        window.as_secs_f64()
    ));
    let dir = root.join(format!("append-{name}-{writers}"));
    let store = Store::open(
        &dir,
        Options {
            durability,
            ..Options::default()
        },
    )
    .with_context(|| format!("opening {}", dir.display()))?;
    let stats = rt.block_on(append_rate(&store, writers, window))?;
    // Dropping joins the writer (and the async flusher), outside the runtime.
    drop(store);
    plan.discard(&dir);
    Ok(stats)
}

pub(super) fn section(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    settle();
    progress("fsync ceiling (before)");
    let fsync_before = fsync_rate(root, plan.fsync_window)?;
    progress("store barrier cost");
    let mut barrier = barrier_samples(root, plan, plan.barrier_window, "barrier")?;
    let many = plan.writers_many;
    let sync_1 = measure(rt, root, plan, Durability::Sync, 1)?;
    let sync_n = measure(rt, root, plan, Durability::Sync, many)?;
    let async_1 = measure(rt, root, plan, Durability::Async, 1)?;
    let async_n = measure(rt, root, plan, Durability::Async, many)?;
    progress("fsync ceiling (after)");
    let fsync_after = fsync_rate(root, plan.fsync_window)?;

    // The disk can drift during a run (VM disks do): use the mean of both probes.
    let fsync = (fsync_before.append_rate + fsync_after.append_rate) / 2.0;
    let barrier_p50 = median(&mut barrier);
    let barrier_p99 = percentile(&mut barrier, 0.99);
    let barrier_rate = 1000.0 / (barrier.iter().sum::<f64>() / barrier.len() as f64);

    let lat = |s: &AppendStats| {
        format!(
            "p50 {} ms, p99 {} ms; {} appends in {} commits ({} per commit)",
            num(s.p50_ms),
            num(s.p99_ms),
            num(s.appends as f64),
            num(s.commits as f64),
            num(s.appends as f64 / s.commits as f64)
        )
    };
    let eff_1 = sync_1.rate / fsync;
    let eff_n = sync_n.rate / (fsync * many as f64);
    // More writers cannot beat what the writer thread does without any barrier at all.
    let capped_n = (fsync * many as f64).min(async_n.rate);
    let per_barrier_estimate = sync_n.rate / fsync;
    let per_commit = sync_n.appends as f64 / sync_n.commits as f64;
    let commits_per_s = sync_n.commits as f64 / sync_n.secs;
    let barrier_mean_ms = barrier.iter().sum::<f64>() / barrier.len() as f64;
    let barrier_share = commits_per_s * barrier_mean_ms / 1000.0;
    Ok(vec![
        Row::new("fsync_per_s", "fsync ceiling: 4 KiB append + fdatasync", fsync, "fsync/s").note(format!(
            "mean of before {} and after {} the appends ({} / {} ms each); overwriting a preallocated \
             file instead: {} / {}; same filesystem as the stores",
            num(fsync_before.append_rate),
            num(fsync_after.append_rate),
            num(fsync_before.append_mean_ms),
            num(fsync_after.append_mean_ms),
            num(fsync_before.overwrite_rate),
            num(fsync_after.overwrite_rate)
        )),
        Row::new("barrier_ms", "store barrier (sled flush + fdatasync), 1-event batch", barrier_p50, "ms").note(
            format!(
                "p50; p99 {} ms; mean → {} barriers/s = {} fsync costs each",
                num(barrier_p99),
                num(barrier_rate),
                num(fsync / barrier_rate)
            ),
        ),
        Row::new("append_sync_1", "durable appends, sync, 1 writer", sync_1.rate, "appends/s").note(lat(&sync_1)),
        Row::new("append_sync_n", format!("durable appends, sync, {many} writers"), sync_n.rate, "appends/s")
            .note(format!("{}; {}", target_min(sync_n.rate, APPENDS_MANY_TARGET, "200,000"), lat(&sync_n))),
        Row::new("append_async_1", "appends, async (10 ms flush), 1 writer", async_1.rate, "appends/s")
            .note(lat(&async_1)),
        Row::new("append_async_n", format!("appends, async (10 ms flush), {many} writers"), async_n.rate, "appends/s")
            .note(lat(&async_n)),
        Row::new("group_commit_eff_1", "sync 1 writer ÷ (fsync/s × 1)", eff_1 * 100.0, "%")
            .note(target_min(eff_1, GROUP_COMMIT_TARGET, "80%")),
        Row::new(
            "group_commit_eff_n",
            format!("sync {many} writers ÷ (fsync/s × {many})"),
            eff_n * 100.0,
            "%",
        )
        .note(format!(
            "{}; vs min(fsync×{many}, async {many}-writer rate) = {}: {}%",
            target_min(eff_n, GROUP_COMMIT_TARGET, "80%"),
            num(capped_n),
            num(sync_n.rate / capped_n * 100.0)
        )),
        Row::new("appends_per_barrier", format!("appends per barrier, sync {many} writers"), per_commit, "appends")
            .note(format!(
                "measured: {} group commits/s, each one barrier; barriers ≈ {}% of the writer's time; \
                 the estimate appends/s ÷ fsync/s would say {}",
                num(commits_per_s),
                num(barrier_share * 100.0),
                num(per_barrier_estimate)
            )),
    ])
}
