//! The newest written events, kept decoded in memory.
//!
//! Every event is read again right after it is written: the bus follows the log to feed the
//! subscriptions, and the memory index catches up with it. Read from sled, each of those reads
//! looks the group up, checks its hash and decodes it again; from here it is a clone. The writer
//! pushes each batch once it is in sled, so this never holds anything sled does not; a range it
//! does not hold whole is read from sled as before.

use std::collections::VecDeque;
use std::sync::Mutex;

use chronicle_schemas::{Envelope, RECORD_FORMAT_EXTERNAL};

/// Events kept. Records in sled are at most 4 KiB, so this bounds the memory too; a record
/// whose body is stored out of line (up to 64 KiB) is not kept.
const RECENT_EVENTS_MAX: usize = 4096;

#[derive(Debug)]
pub(crate) struct Recent(Mutex<Events>);

#[derive(Debug)]
struct Events {
    /// The offset of `envelopes[0]`.
    start: u64,
    envelopes: VecDeque<Envelope>,
}

impl Recent {
    /// Empty, for a log whose next offset is `next_offset`.
    pub fn new(next_offset: u64) -> Self {
        Recent(Mutex::new(Events {
            start: next_offset,
            envelopes: VecDeque::new(),
        }))
    }

    /// Takes in a batch just written: its envelopes, in offset order, each with its stored
    /// record.
    pub fn push<'a>(&self, written: impl Iterator<Item = (&'a Envelope, &'a [u8])>) {
        let mut events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (env, record) in written {
            // What is kept is always one dense range: start over where it would break.
            if record.first() == Some(&RECORD_FORMAT_EXTERNAL) {
                events.envelopes.clear();
                events.start = env.offset + 1;
                continue;
            }
            if env.offset != events.start + events.envelopes.len() as u64 {
                events.envelopes.clear();
                events.start = env.offset;
            }
            if events.envelopes.len() == RECENT_EVENTS_MAX {
                events.envelopes.pop_front();
                events.start += 1;
            }
            events.envelopes.push_back(env.clone());
        }
    }

    /// The events at offsets `from..to`, if every one of them is kept.
    pub fn range(&self, from: u64, to: u64) -> Option<Vec<Envelope>> {
        let events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let end = events.start + events.envelopes.len() as u64;
        if from < events.start || to > end || from >= to {
            return None;
        }
        let skip = (from - events.start) as usize;
        let take = (to - from) as usize;
        Some(events.envelopes.range(skip..skip + take).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{Event, Hash, RunId, Timestamp};

    use super::*;

    fn env(offset: u64) -> Envelope {
        Envelope {
            offset,
            run_id: RunId::from_u128(1),
            seq: offset,
            at: Timestamp(0),
            prev_hash: Hash::ZERO,
            hash: Hash::ZERO,
            event: Event::Reasoning {
                message: offset.to_string(),
            },
        }
    }

    fn push(recent: &Recent, offsets: std::ops::Range<u64>, record: &[u8]) {
        let envs: Vec<Envelope> = offsets.map(env).collect();
        recent.push(envs.iter().map(|e| (e, record)));
    }

    fn offsets(envs: Option<Vec<Envelope>>) -> Option<Vec<u64>> {
        envs.map(|v| v.into_iter().map(|e| e.offset).collect())
    }

    #[test]
    fn serves_only_ranges_it_holds_whole() {
        let recent = Recent::new(10);
        push(&recent, 10..15, &[1]);
        assert_eq!(offsets(recent.range(11, 14)), Some(vec![11, 12, 13]));
        assert_eq!(
            offsets(recent.range(10, 15)),
            Some(vec![10, 11, 12, 13, 14])
        );
        assert_eq!(recent.range(9, 12), None, "starts before");
        assert_eq!(recent.range(12, 16), None, "ends after");
        assert_eq!(recent.range(12, 12), None, "empty");
    }

    #[test]
    fn keeps_the_newest_and_skips_records_stored_out_of_line() {
        let recent = Recent::new(0);
        push(&recent, 0..(RECENT_EVENTS_MAX as u64 + 3), &[1]);
        assert_eq!(recent.range(2, 4), None, "dropped");
        assert!(recent.range(3, RECENT_EVENTS_MAX as u64 + 3).is_some());
        push(
            &recent,
            (RECENT_EVENTS_MAX as u64 + 3)..(RECENT_EVENTS_MAX as u64 + 4),
            &[RECORD_FORMAT_EXTERNAL],
        );
        let next = RECENT_EVENTS_MAX as u64 + 4;
        push(&recent, next..next + 2, &[1]);
        assert_eq!(
            recent.range(next - 1, next + 1),
            None,
            "the out-of-line record is not kept"
        );
        assert_eq!(
            offsets(recent.range(next, next + 2)),
            Some(vec![next, next + 1])
        );
        // A gap (nothing else writes, but never serve across one) starts over.
        push(&recent, next + 5..next + 6, &[1]);
        assert_eq!(recent.range(next, next + 2), None);
        assert_eq!(recent.range(next + 5, next + 6).map(|v| v.len()), Some(1));
    }
}
