//! What a verification reports, and the chain check every implementation's `verify` walks the
//! log with: per run, seqs dense from 0 and each `prev_hash` the hash of the run's previous event.
//!
//! A chain cannot show that its newest events were cut off, so every report states the heads it
//! saw; comparing them with a remembered head detects truncation later.

use std::collections::{BTreeMap, HashMap};

use chronicle_schemas::{Envelope, Hash, RunId};
use serde::Serialize;

use crate::RunHead;

/// The first thing found wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub offset: u64,
    /// The run and seq of the bad record, when the index still tells them.
    pub run_id: Option<RunId>,
    pub seq: Option<u64>,
    pub reason: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    /// Records checked.
    pub events: u64,
    /// One past the last offset seen.
    pub next_offset: u64,
    /// Per run: the newest (seq, hash) that verified.
    pub heads: BTreeMap<RunId, (u64, Hash)>,
    /// `None` when everything verified.
    pub problem: Option<Problem>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// The record stored at `offset`, decoded (which checks its hash) and checked to claim that
/// offset: for the stores that keep records exactly as `encode_record` made them.
pub(crate) fn decode_at(offset: u64, record: &[u8]) -> crate::Result<chronicle_schemas::Envelope> {
    let env = chronicle_schemas::decode_record(record).map_err(|e| crate::Error::Corrupt {
        offset,
        reason: e.to_string(),
    })?;
    if env.offset != offset {
        return Err(crate::Error::Corrupt {
            offset,
            reason: format!("record claims offset {}", env.offset),
        });
    }
    Ok(env)
}

/// The newest verified (seq, hash) of every run walked so far.
#[derive(Debug, Default)]
pub(crate) struct Chains(HashMap<RunId, (u64, Hash)>);

impl Chains {
    /// Why `env` does not continue its run's chain, if it does not.
    pub fn check(&self, env: &Envelope) -> Result<(), String> {
        let (want_seq, want_prev) = self
            .0
            .get(&env.run_id)
            .map_or((0, Hash::ZERO), |(s, h)| (s + 1, *h));
        if env.seq != want_seq {
            return Err(format!(
                "run {} seq {} where {want_seq} was due",
                env.run_id, env.seq
            ));
        }
        if env.prev_hash != want_prev {
            return Err(format!(
                "run {} seq {} does not chain to seq {}",
                env.run_id,
                env.seq,
                want_seq.wrapping_sub(1)
            ));
        }
        Ok(())
    }

    /// Records `env` (already checked) as its run's newest event.
    pub fn extend(&mut self, env: &Envelope) {
        self.0.insert(env.run_id, (env.seq, env.hash));
    }

    /// Why `head` disagrees with the chain walked, if it does (a run cut short shows here).
    pub fn disagrees_with(&self, head: &RunHead) -> Option<String> {
        let chain = self.0.get(&head.run_id);
        (chain != Some(&(head.last_seq, head.last_hash))).then(|| {
            format!(
                "run {} head says seq {} but its chain ends at {:?}",
                head.run_id,
                head.last_seq,
                chain.map(|c| c.0)
            )
        })
    }

    pub fn into_heads(self) -> BTreeMap<RunId, (u64, Hash)> {
        self.0.into_iter().collect()
    }
}
