//! Snapshot encoding. A snapshot is a cache of a `RunState` at some seq, always re-derivable
//! from the log: `[format byte][blake3 of body: 32][msgpack named body]`. A snapshot that fails
//! its checksum or does not decode is ignored, never trusted.

use chronicle_schemas::{Envelope, Event};

use crate::RunState;

/// Take a snapshot after every this many events of a run.
pub const SNAPSHOT_INTERVAL_EVENTS: u64 = 1000;

/// Agent results written in place.
const SNAPSHOT_FORMAT_V1: u8 = 1;
/// Agent results as their own msgpack bytes (`LazyValue`); what is written now. A reader of
/// format 1 only would not decode them, so the byte says which.
const SNAPSHOT_FORMAT_V2: u8 = 2;

pub fn encode(state: &RunState) -> Vec<u8> {
    let mut buf = Vec::with_capacity(4096);
    buf.push(SNAPSHOT_FORMAT_V2);
    buf.extend_from_slice(&[0u8; 32]);
    // RunState holds only plain data and string-keyed maps: encoding cannot fail.
    rmp_serde::encode::write_named(&mut buf, state).expect("RunState encodes");
    let sum = blake3::hash(&buf[33..]);
    buf[1..33].copy_from_slice(sum.as_bytes());
    buf
}

/// `None` for anything that is not an intact snapshot of this format.
pub fn decode(bytes: &[u8]) -> Option<RunState> {
    let sum = bytes.get(1..33)?;
    if blake3::hash(bytes.get(33..)?).as_bytes() != sum {
        return None;
    }
    decode_verified(bytes)
}

/// [`decode`] of bytes whose integrity was checked already, such as a blob read back under its
/// content hash: the body is not hashed a second time (a megabyte's snapshot costs a few hundred
/// microseconds to hash). `None` for anything that is not a snapshot of this format.
pub fn decode_verified(bytes: &[u8]) -> Option<RunState> {
    if bytes.len() < 33 || ![SNAPSHOT_FORMAT_V1, SNAPSHOT_FORMAT_V2].contains(&bytes[0]) {
        return None;
    }
    rmp_serde::from_slice(&bytes[33..]).ok()
}

/// Whether a snapshot is due right after the event with this seq.
pub fn is_due(seq: u64, interval: u64) -> bool {
    interval > 0 && (seq + 1).is_multiple_of(interval)
}

/// When a run that is being written takes its snapshots: every `interval` events ([`is_due`]),
/// and also at a checkpoint, or at the run's end, once a quarter of `interval` events passed
/// since the newest one. Restores land on checkpoints and reads of a finished run start at its
/// end, so a long run's restores and reads fold at most that quarter from a snapshot.
#[derive(Clone, Debug)]
pub struct Schedule {
    interval: u64,
    /// Events applied since the newest snapshot (or since the schedule began).
    since: u64,
}

impl Schedule {
    pub fn new(interval: u64) -> Self {
        Schedule { interval, since: 0 }
    }

    /// Whether a snapshot is due right after `env`, counting it.
    pub fn due(&mut self, env: &Envelope) -> bool {
        if self.interval == 0 {
            return false;
        }
        self.since += 1;
        let landing = matches!(env.event, Event::CheckpointSaved { .. }) || env.event.is_terminal();
        let due =
            is_due(env.seq, self.interval) || (landing && self.since >= (self.interval / 4).max(1));
        if due {
            self.since = 0;
        }
        due
    }
}
