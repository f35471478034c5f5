//! Verification of the sled log: dense offsets, decodable records, intact hashes, unbroken
//! per-run chains, and a `streams` index, `runs` heads and `meta.next_offset` that agree with the
//! records. Also the open-time check of the tail, and its repair.

use chronicle_schemas::{Hash, RunId};

use super::{Trees, decode_head, decode_stored, keys};
use crate::verify::{Chains, Problem, VerifyReport};
use crate::{Error, Result};

/// One past the newest stored offset, per `meta` (written in the same transaction as events).
pub(crate) fn next_offset(t: &Trees) -> Result<u64> {
    Ok(t.meta
        .get("next_offset")?
        .and_then(|v| keys::parse_u64(&v))
        .unwrap_or(0))
}

pub(crate) fn verify(t: &Trees, only: Option<RunId>) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let mut chains = Chains::default();
    let mut expected = 0u64;
    let problem = |offset: u64, reason: String| {
        Some(Problem {
            offset,
            run_id: None,
            seq: None,
            reason,
        })
    };
    for kv in t.events.iter() {
        let (k, v) = match kv {
            Ok(kv) => kv,
            Err(e) => {
                report.problem = problem(expected, format!("sled cannot read the record: {e}"));
                break;
            }
        };
        let Some(offset) = keys::parse_u64(&k) else {
            report.problem = problem(expected, format!("malformed key of {} bytes", k.len()));
            break;
        };
        if offset != expected {
            report.problem = problem(
                expected,
                format!("missing; the next stored offset is {offset}"),
            );
            break;
        }
        expected += 1;
        let env = match decode_stored(t, offset, &v) {
            Ok(env) => env,
            Err(Error::Corrupt { reason, .. }) => {
                report.problem = problem(offset, reason);
                break;
            }
            Err(e) => return Err(e),
        };
        report.events += 1;
        if only.is_some_and(|r| r != env.run_id) {
            continue;
        }
        if let Err(reason) = chains.check(&env) {
            report.problem = problem(offset, reason);
            break;
        }
        match t
            .streams
            .get(keys::stream_key(env.run_id, env.seq))?
            .and_then(|o| keys::parse_u64(&o))
        {
            Some(o) if o == offset => {}
            other => {
                report.problem = problem(
                    offset,
                    format!(
                        "streams index for run {} seq {} says {other:?}",
                        env.run_id, env.seq
                    ),
                );
                break;
            }
        }
        chains.extend(&env);
    }
    report.next_offset = expected;
    if report.problem.is_none() {
        let meta_next = next_offset(t)?;
        if meta_next != expected {
            report.problem = problem(
                expected.min(meta_next),
                format!(
                    "log ends at offset {expected} but meta records {meta_next}: truncated tail"
                ),
            );
        }
    }
    if report.problem.is_none() {
        for kv in t.runs.iter() {
            let head = decode_head(&kv?.1)?;
            if only.is_some_and(|r| r != head.run_id) {
                continue;
            }
            if let Some(reason) = chains.disagrees_with(&head) {
                report.problem = problem(head.last_offset, reason);
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

/// The run and seq whose `streams` entry points at `offset` (a scan: only for reporting).
fn indexed_as(t: &Trees, offset: u64) -> Option<(RunId, u64)> {
    let want = keys::offset_key(offset);
    t.streams
        .iter()
        .filter_map(|kv| kv.ok())
        .find_map(|(k, v)| {
            (v.as_ref() == want.as_slice() && k.len() == 24).then(|| {
                let run = u128::from_be_bytes(k[..16].try_into().expect("16 bytes"));
                (
                    RunId::from_u128(run),
                    keys::parse_u64(&k[16..]).unwrap_or(0),
                )
            })
        })
}

/// Open-time check of the newest `tail` records. With `repair`, an undecodable *final* record is
/// dropped (with its index entry and the run head rolled back); anything else is refused.
pub(crate) fn check_tail(t: &Trees, tail: u64, repair: bool) -> Result<()> {
    if tail == 0 {
        return Ok(());
    }
    let meta_next = next_offset(t)?;
    let last_key = t
        .events
        .last()?
        .map(|(k, _)| keys::parse_u64(&k).unwrap_or(u64::MAX));
    let stored_next = last_key.map_or(0, |k| k.saturating_add(1));
    if stored_next != meta_next {
        return Err(Error::Corrupt {
            offset: stored_next.min(meta_next),
            reason: format!("log ends at offset {stored_next} but meta records {meta_next}"),
        });
    }
    let from = meta_next.saturating_sub(tail);
    for offset in from..meta_next {
        let Some(rec) = t.events.get(keys::offset_key(offset))? else {
            return Err(Error::Corrupt {
                offset,
                reason: "missing".into(),
            });
        };
        let env = match decode_stored(t, offset, &rec) {
            Ok(env) => env,
            Err(e) if repair && offset + 1 == meta_next => {
                return drop_final_record(t, offset, &e.to_string());
            }
            Err(e) => return Err(e),
        };
        let want_prev = if env.seq == 0 {
            Hash::ZERO
        } else {
            let prev_off = t
                .streams
                .get(keys::stream_key(env.run_id, env.seq - 1))?
                .and_then(|o| keys::parse_u64(&o))
                .ok_or_else(|| Error::Corrupt {
                    offset,
                    reason: format!("run {} seq {} has no predecessor", env.run_id, env.seq),
                })?;
            let prev = t
                .events
                .get(keys::offset_key(prev_off))?
                .ok_or_else(|| Error::Corrupt {
                    offset: prev_off,
                    reason: "missing".into(),
                })?;
            chronicle_schemas::peek_record_header(&prev)
                .map_err(|e| Error::Corrupt {
                    offset: prev_off,
                    reason: e.to_string(),
                })?
                .hash
        };
        if env.prev_hash != want_prev {
            return Err(Error::Corrupt {
                offset,
                reason: format!("run {} seq {} does not chain", env.run_id, env.seq),
            });
        }
    }
    Ok(())
}

fn drop_final_record(t: &Trees, offset: u64, why: &str) -> Result<()> {
    tracing::warn!(
        offset,
        reason = why,
        "dropping the undecodable final record (--repair-truncate-tail)"
    );
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
    t.events.remove(keys::offset_key(offset))?;
    t.meta.insert("next_offset", &offset.to_be_bytes())?;
    if let Some((k, mut head)) = owner {
        t.streams
            .remove(keys::stream_key(head.run_id, head.last_seq))?;
        if head.last_seq == 0 {
            t.runs.remove(k)?;
        } else {
            let prev_off = t
                .streams
                .get(keys::stream_key(head.run_id, head.last_seq - 1))?
                .and_then(|o| keys::parse_u64(&o))
                .ok_or_else(|| Error::Corrupt {
                    offset,
                    reason: "no predecessor to roll back to".into(),
                })?;
            let prev = t
                .events
                .get(keys::offset_key(prev_off))?
                .ok_or_else(|| Error::Corrupt {
                    offset: prev_off,
                    reason: "missing".into(),
                })?;
            let env = decode_stored(t, prev_off, &prev)?;
            head.last_seq = env.seq;
            head.last_hash = env.hash;
            head.last_offset = prev_off;
            head.terminal = env.event.is_terminal();
            let bytes = rmp_serde::to_vec_named(&head).map_err(|e| Error::Decode(e.to_string()))?;
            t.runs.insert(k, bytes)?;
        }
    }
    t.db.flush()?;
    Ok(())
}
