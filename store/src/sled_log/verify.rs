//! Verification of the sled log: dense offsets, decodable records, intact hashes, unbroken
//! per-run chains, and a `streams` index, `runs` heads and `meta.next_offset` that agree with the
//! records. Also the open-time check of the tail, and its repair, and dropping a batch that a
//! crash cut short.

use std::collections::HashMap;

use chronicle_schemas::{Event, Hash, RECORD_FORMAT_EXTERNAL, RunId, parse_external_stub};

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

use super::compress;
use super::groups::{self, Group};
use super::{Trees, decode_head, decode_stored, encode_head, keys};
use crate::verify::{Chains, Problem, VerifyReport};
use crate::{Error, Result};

/// One past the newest stored offset, per `meta` (written after each batch's events, as its end
/// mark); 0 before the first batch. A malformed value is damage.
pub(crate) fn next_offset(t: &Trees) -> Result<u64> {
    match t.meta.get("next_offset")? {
        None => Ok(0),
        Some(v) => keys::parse_u64(&v).ok_or_else(|| Error::Corrupt {
            offset: 0,
            reason: format!("meta's next offset is malformed ({} bytes)", v.len()),
        }),
    }
}

pub(crate) fn verify(t: &Trees, only: Option<RunId>) -> Result<VerifyReport> {
    // A live store may append while this runs: verify the log as it stood at the start. `meta`
    // is written after a batch's groups and index entries, so every group below it is whole.
    let meta_next = next_offset(t)?;
    let mut report = VerifyReport::default();
    let mut chains = Chains::default();
    let mut expected = 0u64;
    for kv in t.events.range(..keys::offset_key(meta_next)) {
        let group = kv
            .map_err(|e| problem(expected, format!("sled cannot read the record: {e}")).into())
            .and_then(|(k, v)| {
                Group::new(&k, v).map_err(|e| match (keys::parse_u64(&k), e) {
                    (Some(first), Error::Corrupt { reason, .. }) => problem(first, reason).into(),
                    _ => problem(expected, format!("malformed key of {} bytes", k.len())).into(),
                })
            });
        let checked = group.and_then(|g| {
            if g.first != expected {
                let reason = format!("missing; the next stored offset is {}", g.first);
                return Err(problem(expected, reason).into());
            }
            check_group(t, &g, only, &mut chains, &mut report)
        });
        match checked {
            Ok(next) => expected = next,
            Err(Checked::Problem(p)) => {
                report.problem = Some(p);
                break;
            }
            Err(Checked::Failed(e)) => return Err(e),
        }
    }
    report.next_offset = expected;
    if report.problem.is_none() && meta_next != expected {
        report.problem = Some(problem(
            expected.min(meta_next),
            format!("log ends at offset {expected} but meta records {meta_next}: truncated tail"),
        ));
    }
    if report.problem.is_none() {
        for kv in t.runs.iter() {
            let head = decode_head(&kv?.1)?;
            if only.is_some_and(|r| r != head.run_id) {
                continue;
            }
            // A head moved by an append made since the start is past what was walked.
            if head.last_offset >= meta_next && appended_past(t, head.last_offset)? {
                continue;
            }
            if let Some(reason) = chains.disagrees_with(&head) {
                report.problem = Some(problem(head.last_offset, reason));
                break;
            }
        }
    }
    if let Some(p) = &mut report.problem {
        (p.run_id, p.seq) =
            indexed_as(t, p.offset).map_or((None, None), |(r, s)| (Some(r), Some(s)));
    }
    report.heads = chains.into_heads();
    Ok(report)
}

/// Whether the log now holds `offset`: appended since verification started. The writer updates
/// a batch's run heads before its `meta`, so an append whose run head is already visible gets a
/// moment to show its `meta` too; in a store that nobody appends to, a head past the end of the
/// log is damage, found after that moment.
fn appended_past(t: &Trees, offset: u64) -> Result<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
    loop {
        if next_offset(t)? > offset {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Why verification stopped: a problem with the log, or a failure to read it at all.
enum Checked {
    Problem(Problem),
    Failed(Error),
}

fn problem(offset: u64, reason: String) -> Problem {
    Problem {
        offset,
        run_id: None,
        seq: None,
        reason,
    }
}

impl From<Problem> for Checked {
    fn from(p: Problem) -> Self {
        Checked::Problem(p)
    }
}

/// Checks one group: its records decode, hash and chain, belong to one run at consecutive seqs,
/// and its `streams` entry points at it. Returns the offset after it.
fn check_group(
    t: &Trees,
    g: &Group,
    only: Option<RunId>,
    chains: &mut Chains,
    report: &mut VerifyReport,
) -> Result<u64, Checked> {
    let records = g.records().map_err(|e| corrupt_at(g.first, e))?;
    let mut first: Option<(RunId, u64)> = None;
    for (offset, rec) in (g.first..).zip(&records) {
        let env = decode_stored(t, offset, rec).map_err(|e| corrupt_at(offset, e))?;
        report.events += 1;
        match first {
            None => first = Some((env.run_id, env.seq)),
            Some((run, seq)) if env.run_id == run && env.seq == seq + offset - g.first => {}
            Some((run, seq)) => {
                let reason = format!(
                    "in the group of run {run} from seq {seq} but is run {} seq {}",
                    env.run_id, env.seq
                );
                return Err(problem(offset, reason).into());
            }
        }
        if only.is_some_and(|r| r != env.run_id) {
            continue;
        }
        chains
            .check(&env)
            .map_err(|reason| problem(offset, reason))?;
        chains.extend(&env);
    }
    let Some((run, seq)) = first.filter(|(run, _)| only.is_none_or(|r| r == *run)) else {
        return Ok(g.first + records.len() as u64);
    };
    let indexed = t
        .streams
        .get(keys::stream_key(run, seq))
        .map_err(|e| Checked::Failed(e.into()))?;
    let indexed = indexed.as_deref().and_then(groups::parse_stream_value);
    if indexed != Some((g.first, records.len() as u64)) {
        let reason = format!("streams index for run {run} seq {seq} says {indexed:?}");
        return Err(problem(g.first, reason).into());
    }
    Ok(g.first + records.len() as u64)
}

/// A record that does not decode is a problem at its offset; anything else stops verification.
fn corrupt_at(offset: u64, e: Error) -> Checked {
    match e {
        Error::Corrupt { reason, .. } => problem(offset, reason).into(),
        other => Checked::Failed(other),
    }
}

/// The run and seq whose `streams` entry covers `offset` (a scan: only for reporting).
fn indexed_as(t: &Trees, offset: u64) -> Option<(RunId, u64)> {
    t.streams
        .iter()
        .filter_map(|kv| kv.ok())
        .find_map(|(k, v)| {
            let (first, count) = groups::parse_stream_value(&v)?;
            if k.len() != 24 || !(first..first.saturating_add(count)).contains(&offset) {
                return None;
            }
            let run = u128::from_be_bytes(k[..16].try_into().expect("16 bytes"));
            let seq = keys::stream_seq(&k);
            Some((RunId::from_u128(run), seq + offset - first))
        })
}

/// Open-time check of the newest `tail` records: they decode, hash and chain. Returns the records
/// among them whose *body* (in the body file) is damaged: their stubs in sled are whole, and with
/// them the chain and the index, so the store opens with those records kept as they are, and
/// names them. A body is fsynced before the stub that points at it is written, so a damaged one
/// is damage on disk, never a crash's torn tail, and nothing of it is dropped.
///
/// Damage in sled itself is refused, saying what to do: with `repair`, an undecodable *final*
/// record (what a crash may tear) is dropped, with its index entry, and its run head rolled back;
/// one before the last cannot be dropped (the records after it were acknowledged).
pub(crate) fn check_tail(t: &Trees, tail: u64, repair: bool) -> Result<Vec<Problem>> {
    if tail == 0 {
        return Ok(Vec::new());
    }
    let meta_next = next_offset(t)?;
    let stored_next = match t.events.last()? {
        Some((k, v)) => match Group::new(&k, v) {
            Ok(g) => {
                g.first
                    + g.records()
                        .map_err(|e| refusal(e, meta_next, repair))?
                        .len() as u64
            }
            // A final value of one record that does not even inflate: that record is the one
            // repair drops.
            Err(Error::Corrupt { reason, .. })
                if repair && meta_next > 0 && keys::parse_u64(&k) == Some(meta_next - 1) =>
            {
                drop_final_record(t, meta_next - 1, &reason)?;
                return Ok(Vec::new());
            }
            Err(e) => return Err(refusal(e, meta_next, repair)),
        },
        None => 0,
    };
    if stored_next != meta_next {
        return Err(Error::Corrupt {
            offset: stored_next.min(meta_next),
            reason: format!("log ends at offset {stored_next} but meta records {meta_next}"),
        });
    }
    let mut damaged = Vec::new();
    for offset in meta_next.saturating_sub(tail)..meta_next {
        let record = match groups::with_record(t, offset, |rec| tail_record(t, offset, rec)) {
            Ok(record) => record,
            Err(Error::Corrupt { reason, .. }) if repair && offset + 1 == meta_next => {
                drop_final_record(t, offset, &reason)?;
                return Ok(damaged);
            }
            Err(e) => return Err(refusal(e, meta_next, repair)),
        };
        let want_prev = if record.seq == 0 {
            Hash::ZERO
        } else {
            let prev_seq = record.seq - 1;
            let prev_off =
                groups::offset_of(t, record.run_id, prev_seq)?.ok_or_else(|| Error::Corrupt {
                    offset,
                    reason: format!(
                        "run {} seq {} has no predecessor",
                        record.run_id, record.seq
                    ),
                })?;
            groups::with_record(t, prev_off, |rec| {
                chronicle_schemas::peek_record_header(rec).map_err(|e| Error::Corrupt {
                    offset: prev_off,
                    reason: e.to_string(),
                })
            })?
            .hash
        };
        if record.prev_hash != want_prev {
            let reason = format!("run {} seq {} does not chain", record.run_id, record.seq);
            return Err(refusal(
                Error::Corrupt { offset, reason },
                meta_next,
                repair,
            ));
        }
        if let Some(reason) = record.damaged_body {
            damaged.push(Problem {
                offset,
                run_id: Some(record.run_id),
                seq: Some(record.seq),
                reason,
            });
        }
    }
    Ok(damaged)
}

/// What the tail check needs of one record: its run, seq and link, and why its body does not
/// read, if it is stored out of line and damaged there.
struct TailRecord {
    run_id: RunId,
    seq: u64,
    prev_hash: Hash,
    damaged_body: Option<String>,
}

/// The record `rec` at `offset`: damage to it in sled is an error, damage to its body is noted.
fn tail_record(t: &Trees, offset: u64, rec: &[u8]) -> Result<TailRecord> {
    if rec.first() != Some(&RECORD_FORMAT_EXTERNAL) {
        let env = decode_stored(t, offset, rec)?;
        return Ok(TailRecord {
            run_id: env.run_id,
            seq: env.seq,
            prev_hash: env.prev_hash,
            damaged_body: None,
        });
    }
    let (header, ext) = parse_external_stub(rec).map_err(|e| Error::Corrupt {
        offset,
        reason: e.to_string(),
    })?;
    let damaged_body = match decode_stored(t, offset, rec) {
        Ok(_) => None,
        Err(Error::Corrupt { reason, .. }) => Some(reason),
        // An I/O error is not damage: the open fails as the read did.
        Err(e) => return Err(e),
    };
    Ok(TailRecord {
        run_id: ext.run_id,
        seq: ext.seq,
        prev_hash: header.prev_hash,
        damaged_body,
    })
}

/// Damage the tail check refuses, with what to do: the final record is what
/// `--repair-truncate-tail` drops; one before it cannot be dropped.
fn refusal(e: Error, meta_next: u64, repair: bool) -> Error {
    let Error::Corrupt { offset, reason } = e else {
        return e;
    };
    let what_to_do = if offset + 1 >= meta_next && !repair {
        "it is the log's last record, which a crash may have torn: start with --repair-truncate-tail to drop it"
    } else {
        "it is not the last record, so it cannot be dropped without the acknowledged records after it: `chronicle verify` names the damaged records; restore the data directory from a backup"
    };
    Error::Corrupt {
        offset,
        reason: format!("{reason}; {what_to_do}"),
    }
}

/// Drops what a batch left past `meta`'s next offset when the process or the machine stopped
/// while the writer wrote it. The writer records the offsets a batch takes (`meta`'s `batch`),
/// then puts its groups, index entries and run heads into sled, and its end mark (`meta`'s next
/// offset) last; sled recovers a prefix of its writes. So groups past the end mark are that one
/// batch, never acknowledged (an append is answered only once the end mark is written, and, if
/// durable, after a barrier). They go, with their `streams` entries, the sessions of the runs
/// they started, and the run heads they moved, which roll back to the run's event before them.
/// Records past the end mark that no unfinished batch explains (`meta` damaged or behind), or
/// that do not decode, are refused as damage: nothing that may have been acknowledged is dropped.
pub(crate) fn drop_unfinished_batch(t: &Trees) -> Result<()> {
    let meta_next = next_offset(t)?;
    let mut groups = Vec::new();
    for kv in t.events.range(keys::offset_key(meta_next)..) {
        let (k, v) = kv?;
        groups.push(Group::new(&k, v)?);
    }
    let Some(last) = groups.last() else {
        return Ok(());
    };
    let batch = t.meta.get("batch")?.and_then(|v| keys::parse_batch(&v));
    let stored_end = last.first + last.records()?.len() as u64;
    let explained = batch.as_ref().is_some_and(|b| {
        b.start == meta_next && groups[0].first == meta_next && stored_end <= b.end
    });
    if !explained {
        return Err(Error::Corrupt {
            offset: meta_next,
            reason: format!(
                "records up to offset {stored_end} lie past the end of the log that meta records ({meta_next}), and no unfinished batch explains them (meta's batch: {batch:?})"
            ),
        });
    }
    // Per run, the first seq the batch wrote and whether it ended or restored the run; the
    // index entries and sessions it added.
    let mut runs_written: HashMap<RunId, (u64, bool)> = HashMap::new();
    let mut streams = Vec::new();
    let mut sessions = Vec::new();
    for g in &groups {
        for (offset, rec) in (g.first..).zip(g.records()?) {
            let env = decode_stored(t, offset, rec)?;
            if offset == g.first {
                streams.push(keys::stream_key(env.run_id, env.seq));
            }
            let (first, ends) = runs_written.entry(env.run_id).or_insert((env.seq, false));
            *first = (*first).min(env.seq);
            *ends |= env.event.is_terminal() || matches!(env.event, Event::RunRestored { .. });
            if let Event::RunStarted { session_id, .. } = &env.event {
                sessions.push(keys::session_key(session_id, env.at, env.run_id));
            }
        }
    }
    let mut heads = Vec::new();
    for (run, (first_seq, ends)) in runs_written {
        let Some(v) = t.runs.get(run.as_bytes())? else {
            continue;
        };
        let head = decode_head(&v)?;
        // A head the batch had not reached yet stays as it is.
        if head.last_offset < meta_next {
            continue;
        }
        // Unless the batch ended or restored the run, it is as finished as it was before.
        let terminal = (!ends).then_some(head.terminal);
        let rolled = match first_seq {
            0 => None,
            seq => Some(rolled_back(t, head, seq - 1, terminal)?),
        };
        heads.push((run, rolled));
    }
    tracing::warn!(
        from = meta_next,
        groups = groups.len(),
        "dropping the unfinished append batch a crash left past the end of the log"
    );
    (&t.events, &t.streams, &t.runs, &t.sessions)
        .transaction(|(events, streams_tree, runs, sess)| {
            for g in &groups {
                events.remove(&keys::offset_key(g.first))?;
            }
            for k in &streams {
                streams_tree.remove(k)?;
            }
            for k in &sessions {
                sess.remove(k.as_slice())?;
            }
            for (run, head) in &heads {
                match head {
                    Some(h) => runs.insert(run.as_bytes(), h.as_slice())?,
                    None => runs.remove(run.as_bytes())?,
                };
            }
            Ok::<_, ConflictableTransactionError<()>>(())
        })
        .map_err(|e: TransactionError<()>| Error::from(e))?;
    t.db.flush()?;
    Ok(())
}

/// Drops the last record of the log, at `offset` (the last of its group), in one sled
/// transaction; its run's head rolls back to the record before.
fn drop_final_record(t: &Trees, offset: u64, why: &str) -> Result<()> {
    tracing::warn!(
        offset,
        reason = why,
        "dropping the undecodable final record (--repair-truncate-tail)"
    );
    let missing = || Error::Corrupt {
        offset,
        reason: "missing".into(),
    };
    // The value that holds it, written back without it (or removed). A value that does not even
    // inflate can only go whole: when it holds nothing else (it is stored under the record's
    // offset).
    let (first, kept, kept_value) = match Group::holding(t, offset) {
        Ok(group) => {
            let group = group.ok_or_else(missing)?;
            let records = group.records()?;
            let kept = &records[..records.len() - 1];
            let value = (!kept.is_empty()).then(|| groups::encode(kept).into_owned());
            (group.first, kept.len(), value)
        }
        Err(e) => {
            let value = t.events.get(keys::offset_key(offset))?;
            if value.is_none_or(|v| compress::unpack(&v).is_ok()) {
                return Err(e);
            }
            (offset, 0, None)
        }
    };
    // The record's run is unknown (it does not decode); the head that points at it names it.
    let mut owner = None;
    for kv in t.runs.iter() {
        let (k, v) = kv?;
        let head = decode_head(&v)?;
        if head.last_offset == offset {
            owner = Some((k, head));
            break;
        }
    }
    // What the run's `streams` entry and head become.
    let mut run_writes = None;
    if let Some((k, head)) = owner {
        let group_seq = head.last_seq - kept as u64;
        let stream = keys::stream_key(head.run_id, group_seq);
        let position = (kept > 0).then(|| groups::stream_value(first, kept));
        let head = match head.last_seq {
            0 => None,
            seq => Some(rolled_back(t, head, seq - 1, None)?),
        };
        run_writes = Some((k, head, stream, position));
    }
    (&t.events, &t.meta, &t.streams, &t.runs)
        .transaction(|(events, meta, streams, runs)| {
            let key = keys::offset_key(first);
            match &kept_value {
                Some(v) => events.insert(&key, v.as_slice())?,
                None => events.remove(&key)?,
            };
            meta.insert("next_offset", &offset.to_be_bytes())?;
            if let Some((k, head, stream, position)) = &run_writes {
                match position {
                    Some(p) => streams.insert(stream, p.as_slice())?,
                    None => streams.remove(stream)?,
                };
                match head {
                    Some(h) => runs.insert(k, h.as_slice())?,
                    None => runs.remove(k)?,
                };
            }
            Ok::<_, ConflictableTransactionError<()>>(())
        })
        .map_err(|e: TransactionError<()>| Error::from(e))?;
    t.db.flush()?;
    Ok(())
}

/// `head` rolled back to the run's event at `seq`, encoded; whether the run is finished there
/// is `terminal`, or read from the run's events when not known.
fn rolled_back(
    t: &Trees,
    mut head: crate::RunHead,
    seq: u64,
    terminal: Option<bool>,
) -> Result<Vec<u8>> {
    let offset = groups::offset_of(t, head.run_id, seq)?.ok_or_else(|| Error::Corrupt {
        offset: head.last_offset,
        reason: format!(
            "run {} has no seq {seq} to roll its head back to",
            head.run_id
        ),
    })?;
    let env = groups::with_record(t, offset, |rec| decode_stored(t, offset, rec))?;
    head.last_seq = env.seq;
    head.last_hash = env.hash;
    head.last_offset = offset;
    head.updated_at = env.at;
    head.terminal = match terminal {
        Some(known) => known,
        None => terminal_at(t, head.run_id, seq)?,
    };
    encode_head(&head)
}

/// Whether a run is finished as of its event at `seq`: its newest terminal event up to there
/// comes after its newest restore (events may follow a run's end, such as commands on it).
fn terminal_at(t: &Trees, run: RunId, seq: u64) -> Result<bool> {
    let range = keys::stream_key(run, 0)..=keys::stream_key(run, seq);
    for kv in t.streams.range(range).rev() {
        let (k, v) = kv?;
        let (key_seq, first, count) = groups::stream_entry(run, &k, &v)?;
        let group = Group::holding(t, first)?.ok_or_else(|| Error::Corrupt {
            offset: first,
            reason: "missing".into(),
        })?;
        // Only the events up to `seq`: those after it may be what is being dropped.
        let end = first + count.min(seq - key_seq + 1);
        for env in group.envelopes(t, first, end).into_iter().rev() {
            let env = env?;
            if env.event.is_terminal() {
                return Ok(true);
            }
            if matches!(env.event, Event::RunRestored { .. }) {
                return Ok(false);
            }
        }
    }
    Ok(false)
}
