//! Replay and restore: folding the long run from encoded records in memory and from the sled
//! store, and the latency of a restore at two depths with and without snapshots, including a
//! real `RunRestored` applied live.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use chronicle_engine::store::Store;
use chronicle_projections::{RunState, VecSource, replay_from_zero, snapshot};
use chronicle_schemas::{
    Actor, Envelope, Event, Hash, RunId, Timestamp, decode_record, encode_record,
};

use super::report::{Row, num, target_max, target_min};
use super::{Plan, build_long_store, median, ms, progress, workload};

/// The replay target for decode + apply from memory.
const REPLAY_TARGET_EVENTS_PER_S: f64 = 2_000_000.0;
/// The restore target at depth 100,000 with snapshots.
const RESTORE_TARGET_MS: f64 = 50.0;
/// Replay-from-memory passes; the best one counts (the first warms caches and the allocator).
const MEMORY_PASSES: usize = 3;

/// The long run as stored records with a real hash chain, one millisecond apart.
fn encode_long_run(run: RunId, events: u64) -> Result<Vec<Vec<u8>>> {
    let mut prev = Hash::ZERO;
    let t0 = 1_759_658_400_000_000i64;
    workload::LongRun::new()
        .take(events as usize)
        .enumerate()
        .map(|(i, ev)| {
            let seq = i as u64;
            let (rec, hash) =
                encode_record(seq, run, seq, Timestamp(t0 + 1000 * i as i64), &prev, &ev)?;
            prev = hash;
            Ok(rec)
        })
        .collect()
}

/// Events per second of the best of `MEMORY_PASSES` passes of `f` over `n` events.
fn best_rate(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..MEMORY_PASSES {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(n as f64 / best)
}

fn in_memory(run: RunId, plan: &Plan) -> Result<Vec<Row>> {
    let n = plan.long_run_events;
    progress(&format!(
        "replay from memory: encoding {} events",
        num(n as f64)
    ));
    let records = encode_long_run(run, n)?;
    let bytes: usize = records.iter().map(Vec::len).sum();
    // Only a `RunRestored` reads the source, and the long run has none.
    let src = VecSource::default();

    progress("replay from memory: decode, apply, decode + apply");
    let decode = best_rate(records.len(), || {
        for r in &records {
            black_box(decode_record(r)?);
        }
        Ok(())
    })?;
    let envelopes: Vec<Envelope> = records
        .iter()
        .map(|r| decode_record(r))
        .collect::<Result<_, _>>()?;
    let apply = best_rate(envelopes.len(), || {
        let mut state = RunState::default();
        for env in &envelopes {
            let Ok(()) = state.apply(env, &src);
        }
        black_box(&state);
        Ok(())
    })?;
    drop(envelopes);
    let mut final_state = RunState::default();
    let both = best_rate(records.len(), || {
        let mut state = RunState::default();
        for r in &records {
            let env = decode_record(r)?;
            let Ok(()) = state.apply(&env, &src);
        }
        final_state = state;
        Ok(())
    })?;
    let state_bytes = snapshot::encode(&final_state).len();
    let label = num(n as f64);
    Ok(vec![
        Row::new(
            "replay_mem",
            format!("replay from memory, decode + apply ({label} events)"),
            both,
            "events/s",
        )
        .note(format!(
            "{}; records avg {} B; final state {} KiB encoded",
            target_min(both, REPLAY_TARGET_EVENTS_PER_S, "2,000,000"),
            num(bytes as f64 / n as f64),
            num(state_bytes as f64 / 1024.0)
        )),
        Row::new(
            "replay_mem_decode",
            "  of which: decode only (hash check + msgpack)",
            decode,
            "events/s",
        )
        .note(format!("{} ns/event", num(1e9 / decode))),
        Row::new(
            "replay_mem_apply",
            "  of which: apply only (RunState::apply)",
            apply,
            "events/s",
        )
        .note(format!("{} ns/event", num(1e9 / apply))),
    ])
}

/// Runs `f` `reps` times; the median and the minimum in milliseconds, and the last result.
fn timed<T>(reps: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, f64, T)> {
    let mut samples = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        last = Some(f()?);
        samples.push(ms(t.elapsed()));
    }
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let out = last.context("no repetition ran")?;
    Ok((median(&mut samples), min, out))
}

fn from_store(root: &Path, run: RunId, plan: &Plan) -> Result<Vec<Row>> {
    let n = plan.long_run_events;
    let last = n - 1;
    let label = num(n as f64);
    progress(&format!("replay from sled: loading {label} events"));
    let (store, load_rate) =
        build_long_store(&root.join("long-run"), run, n, plan.bulk_batch_events)?;
    let mut rows = vec![
        Row::new(
            "bulk_load",
            format!(
                "bulk load, async, {}-event appends ({label} events)",
                plan.bulk_batch_events
            ),
            load_rate,
            "events/s",
        )
        .note("setup for the rows below, not a durable-append number"),
    ];

    progress("replay from sled: read_run, replay_from_zero");
    let (read_ms, _, count) = timed(1, || {
        let mut count = 0u64;
        for env in store.read_run(run, 0, last) {
            black_box(env?);
            count += 1;
        }
        Ok(count)
    })?;
    anyhow::ensure!(count == n, "read_run returned {count} events, expected {n}");
    // The run is the store's only one, so its events are offsets 0..n: the same records read by
    // one range scan of `events`, without read_run's `streams` index and per-event lookup.
    let (range_ms, _, count) = timed(1, || {
        let mut count = 0u64;
        for env in store.read_range(0, n) {
            black_box(env?);
            count += 1;
        }
        Ok(count)
    })?;
    anyhow::ensure!(
        count == n,
        "read_range returned {count} events, expected {n}"
    );
    let replay_rate = replay_rate(&store, run, n)?;
    rows.push(
        Row::new(
            "replay_sled",
            format!("replay from sled, replay_from_zero ({label} events)"),
            replay_rate,
            "events/s",
        )
        .note(format!(
            "{}; read_run alone (decode, no apply): {} events/s; read_range of the same offsets: {} events/s",
            target_min(replay_rate, REPLAY_TARGET_EVENTS_PER_S, "2,000,000"),
            num(n as f64 / (read_ms / 1000.0)),
            num(n as f64 / (range_ms / 1000.0))
        )),
    );

    rows.extend(restore(&store, run, last, plan)?);
    drop(store);
    plan.discard(&root.join("long-run"));
    Ok(rows)
}

/// Events per second of `replay_from_zero` over the `events` events of `run`, the store's only
/// run: read, decode and apply, from the log alone.
pub(super) fn replay_rate(store: &Store, run: RunId, events: u64) -> Result<f64> {
    let last = events - 1;
    let (replay_ms, _, state) = timed(1, || Ok(replay_from_zero(&store.source(run), last)?))?;
    anyhow::ensure!(
        state.last_seq == Some(last),
        "replay ended at {:?}, expected {last}",
        state.last_seq
    );
    Ok(events as f64 / (replay_ms / 1000.0))
}

fn restore(store: &Store, run: RunId, last: u64, plan: &Plan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let interval = store.options().snapshot_interval_events;
    progress("restore: write_snapshots");
    let (write_ms, _, written) = timed(1, || Ok(store.write_snapshots(run)?))?;
    rows.push(
        Row::new(
            "write_snapshots",
            format!("write_snapshots over {} events", num((last + 1) as f64)),
            write_ms,
            "ms",
        )
        .note(format!("{written} snapshots, one every {interval} events")),
    );

    let depths = plan.restore_depths.map(|d| d.min(last + 1));
    let mut with = Vec::new();
    for depth in depths {
        progress(&format!(
            "restore: state_at at depth {} with snapshots",
            num(depth as f64)
        ));
        let aligned = depth - 1;
        // The newest snapshot is as far back as it gets: `interval - 1` events to fold after it.
        let worst = aligned.saturating_sub(1);
        let (worst_ms, _, state) = timed(plan.restore_reps_snapshot, || {
            Ok(store.state_at(run, worst)?)
        })?;
        let (aligned_ms, _, _) = timed(plan.restore_reps_snapshot, || {
            Ok(store.state_at(run, aligned)?)
        })?;
        let snap_kib = snapshot::encode(&state).len() as f64 / 1024.0;
        with.push((depth, worst, worst_ms, aligned_ms, snap_kib));
    }
    store.clear_snapshots()?;
    let mut without = Vec::new();
    for depth in depths {
        progress(&format!(
            "restore: state_at at depth {} without snapshots",
            num(depth as f64)
        ));
        let (scratch_ms, _, _) = timed(plan.restore_reps_scratch, || {
            Ok(store.state_at(run, depth - 1)?)
        })?;
        without.push(scratch_ms);
    }
    for ((depth, worst, worst_ms, aligned_ms, snap_kib), scratch_ms) in
        with.into_iter().zip(without)
    {
        let d = num(depth as f64);
        let mut note = format!(
            "median state_at(seq {}): newest snapshot {} events back; at a snapshot (seq {}): {} ms; snapshot {} KiB",
            num(worst as f64),
            worst % interval + 1,
            num((depth - 1) as f64),
            num(aligned_ms),
            num(snap_kib)
        );
        if depth == plan.restore_depths[1] {
            note = format!(
                "{}; {note}",
                target_max(worst_ms, RESTORE_TARGET_MS, "50 ms")
            );
        }
        rows.push(
            Row::new(
                format!("restore_snap_{depth}"),
                format!("restore @ depth {d}, snapshots"),
                worst_ms,
                "ms",
            )
            .note(note),
        );
        rows.push(
            Row::new(
                format!("restore_scratch_{depth}"),
                format!("restore @ depth {d}, no snapshots"),
                scratch_ms,
                "ms",
            )
            .note(format!(
                "median state_at(seq {}) after clear_snapshots = a fold from seq 0 ({} events/s)",
                num((depth - 1) as f64),
                num(depth as f64 / (scratch_ms / 1000.0))
            )),
        );
    }

    progress("restore: live RunRestored");
    store.write_snapshots(run)?;
    let src = store.source(run);
    let mut live = store.state_at(run, last)?;
    for depth in depths {
        let Some(cp) = live
            .checkpoints
            .checkpoints
            .iter()
            .filter(|c| c.seq < depth)
            .max_by_key(|c| c.seq)
            .cloned()
        else {
            continue;
        };
        let restore = Event::RunRestored {
            checkpoint_id: cp.checkpoint_id.clone(),
            to_seq: cp.seq,
            by: Actor::user("bench"),
        };
        let env = store
            .append_blocking(run, live.next_seq(), vec![restore])?
            .pop()
            .context("append returned no envelope")?;
        // Each repetition restores a copy of the live state; only the apply is timed.
        let mut samples = Vec::new();
        for _ in 0..plan.restore_reps_snapshot {
            let mut copy = live.clone();
            let t = Instant::now();
            copy.apply(&env, &src)?;
            samples.push(ms(t.elapsed()));
            black_box(copy);
        }
        live.apply(&env, &src)?;
        anyhow::ensure!(
            live.supervisor.last_checkpoint_id.as_ref() == Some(&cp.checkpoint_id),
            "restore to {} left the head at {:?}",
            cp.checkpoint_id,
            live.supervisor.last_checkpoint_id
        );
        let value = median(&mut samples);
        let mut note = format!(
            "median RunState::apply of RunRestored{{to_seq {}}} with the store source (snapshots on)",
            num(cp.seq as f64)
        );
        if depth == plan.restore_depths[1] {
            note = format!("{}; {note}", target_max(value, RESTORE_TARGET_MS, "50 ms"));
        }
        rows.push(
            Row::new(
                format!("restore_live_{depth}"),
                format!(
                    "live restore to {} (depth ~{})",
                    cp.checkpoint_id,
                    num(depth as f64)
                ),
                value,
                "ms",
            )
            .note(note),
        );
    }
    Ok(rows)
}

pub(super) fn section(root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let run = RunId::from_u128(0xB0);
    let mut rows = in_memory(run, plan)?;
    rows.extend(from_store(root, run, plan)?);
    Ok(rows)
}
