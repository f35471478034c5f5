//! What an append must satisfy, checked and encoded in one place for every implementation:
//! `expected_seq` against the run's head, a `RunStarted` exactly at seq 0, a bounded session id,
//! and each record encoded and chained by `encode_record` (which refuses an event over
//! `EVENT_BYTES_MAX`). Nothing here writes; an implementation stores a [`Staged`] append whole.

use std::time::{SystemTime, UNIX_EPOCH};

use chronicle_schemas::{Envelope, Event, Hash, RunId, Timestamp, encode_record};

use crate::{Error, Result, RunHead};

/// Session ids go into index keys; bounded so one key stays small.
pub const SESSION_ID_BYTES_MAX: usize = 256;

/// One append, checked against its run's head and encoded, waiting to be stored.
#[derive(Debug)]
pub(crate) struct Staged {
    pub envelopes: Vec<Envelope>,
    /// `records[i]` is the stored form of `envelopes[i]`.
    pub records: Vec<Vec<u8>>,
    /// The run's head once the append is stored.
    pub head: RunHead,
}

impl Staged {
    /// The append starts its run (so the run joins its session's index).
    pub fn starts_run(&self) -> bool {
        self.envelopes.first().is_some_and(|e| e.seq == 0)
    }

    /// One past the last offset the append takes.
    pub fn next_offset(&self) -> u64 {
        self.head.last_offset + 1
    }
}

/// Checks `events` as an append to `run_id` at `expected_seq` whose first event gets `offset`,
/// and encodes them, all stamped `at`. `head` is the run's current head (`None` for a new run).
pub(crate) fn stage(
    run_id: RunId,
    expected_seq: u64,
    events: Vec<Event>,
    head: Option<&RunHead>,
    offset: u64,
    at: Timestamp,
) -> Result<Staged> {
    let actual = head.map_or(0, RunHead::next_seq);
    if expected_seq != actual {
        return Err(Error::Conflict {
            run_id,
            expected: expected_seq,
            actual,
        });
    }
    let Some(first) = events.first() else {
        return Err(Error::EmptyAppend { run_id });
    };
    let mut head = match head {
        Some(h) => h.clone(),
        None => new_head(run_id, first, offset, at)?,
    };
    let first_seq = actual;
    let mut prev = head.last_hash;
    let mut envelopes = Vec::with_capacity(events.len());
    let mut records = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        let seq = first_seq + i as u64;
        if seq > 0 && matches!(event, Event::RunStarted { .. }) {
            return Err(Error::RunStartedNotFirst { run_id, seq });
        }
        let (record, hash) = encode_record(offset + i as u64, run_id, seq, at, &prev, &event)
            .map_err(|source| Error::Encode { index: i, source })?;
        if event.is_terminal() {
            head.terminal = true;
        } else if matches!(event, Event::RunRestored { .. }) {
            head.terminal = false;
        }
        envelopes.push(Envelope {
            offset: offset + i as u64,
            run_id,
            seq,
            at,
            prev_hash: prev,
            hash,
            event,
        });
        records.push(record);
        prev = hash;
    }
    let n = envelopes.len() as u64;
    head.last_seq = first_seq + n - 1;
    head.last_hash = prev;
    head.last_offset = offset + n - 1;
    head.updated_at = at;
    Ok(Staged {
        envelopes,
        records,
        head,
    })
}

/// The head of a run that `first` starts; refuses anything but a `RunStarted` with a usable
/// session id.
fn new_head(run_id: RunId, first: &Event, offset: u64, at: Timestamp) -> Result<RunHead> {
    let Event::RunStarted { session_id, .. } = first else {
        return Err(Error::FirstEventNotRunStarted {
            run_id,
            kind: first.kind(),
        });
    };
    let s = session_id.as_str();
    if s.is_empty() || s.len() > SESSION_ID_BYTES_MAX || s.contains('\0') {
        return Err(Error::BadSessionId {
            bytes: s.len(),
            max: SESSION_ID_BYTES_MAX,
            contains_nul: s.contains('\0'),
        });
    }
    Ok(RunHead {
        run_id,
        last_seq: 0,
        last_hash: Hash::ZERO,
        last_offset: offset,
        session_id: session_id.clone(),
        created_at: at,
        updated_at: at,
        terminal: false,
    })
}

/// The writer's wall clock, made monotonic: `at` never goes back, even when the system clock does.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    last_micros: i64,
}

impl Clock {
    pub fn now(&mut self) -> Timestamp {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        self.last_micros = now.max(self.last_micros);
        Timestamp(self.last_micros)
    }
}
