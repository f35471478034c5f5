//! The newest written events, kept decoded in memory.
//!
//! Every event is read again right after it is written: the bus follows the log to feed the
//! subscriptions, and the memory index catches up with it. Read from sled, each of those reads
//! looks the group up, checks its hash and decodes it again; from here it is a shared pointer
//! (or a clone, for a reader that needs its own copy). The writer
//! pushes each batch once it is in sled, so this never holds anything sled does not; a range it
//! does not hold whole is read from sled as before.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chronicle_schemas::{Envelope, Event, RECORD_FORMAT_EXTERNAL, RunId};

/// Events kept, and the bytes of their records (a record whose body is stored out of line, up to
/// 64 KiB, is not kept at all).
const RECENT_EVENTS_MAX: usize = 4096;
const RECENT_BYTES_MAX: usize = 2 << 20;
/// Runs whose newest writes are kept (the map starts over when it is full).
const RECENT_RUNS_MAX: usize = 65_536;
/// Writes (batches) kept per run.
const WRITES_PER_RUN: usize = 4;

#[derive(Debug)]
pub(crate) struct Recent(Mutex<Events>);

#[derive(Debug)]
struct Events {
    /// The offset of `envelopes[0]`.
    start: u64,
    /// Each with the length of its record.
    envelopes: VecDeque<(Arc<Envelope>, usize)>,
    /// The sum of those lengths.
    bytes: usize,
    /// Per run written to since the map started: its newest writes.
    newest: HashMap<RunId, Writes>,
}

/// The offset and seq of a run's last event in each of its newest writes (batches), oldest
/// first. A barrier makes whole batches durable, so the run's newest durable event is the last
/// event of its newest durable write.
#[derive(Debug, Default)]
struct Writes {
    last: [(u64, u64); WRITES_PER_RUN],
    len: usize,
}

impl Writes {
    /// Records the run's event at `offset` written by the batch that starts at `batch_start`.
    fn note(&mut self, batch_start: u64, offset: u64, seq: u64) {
        match self.len {
            n if n > 0 && self.last[n - 1].0 >= batch_start => self.last[n - 1] = (offset, seq),
            WRITES_PER_RUN => {
                self.last.rotate_left(1);
                self.last[WRITES_PER_RUN - 1] = (offset, seq);
            }
            n => {
                self.last[n] = (offset, seq);
                self.len += 1;
            }
        }
    }

    #[cfg(test)]
    fn newest(&self) -> Option<(u64, u64)> {
        self.len.checked_sub(1).map(|n| self.last[n])
    }
}

impl Recent {
    /// Empty, for a log whose next offset is `next_offset`.
    pub fn new(next_offset: u64) -> Self {
        Recent(Mutex::new(Events {
            start: next_offset,
            envelopes: VecDeque::new(),
            bytes: 0,
            newest: HashMap::new(),
        }))
    }

    /// Takes in a batch just written: its envelopes, in offset order, each with its stored
    /// record.
    pub fn push<'a>(&self, written: impl Iterator<Item = (&'a Envelope, &'a [u8])>) {
        // Cloned before the lock is taken: readers wait only for the moves.
        let written: Vec<(Arc<Envelope>, &[u8])> =
            written.map(|(e, r)| (Arc::new(e.clone()), r)).collect();
        let Some(batch_start) = written.first().map(|(e, _)| e.offset) else {
            return;
        };
        let mut events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (env, record) in written {
            if events.newest.len() == RECENT_RUNS_MAX && !events.newest.contains_key(&env.run_id) {
                events.newest.clear();
            }
            let writes = events.newest.entry(env.run_id).or_default();
            writes.note(batch_start, env.offset, env.seq);
            // What is kept is always one dense range: start over where it would break.
            if record.first() == Some(&RECORD_FORMAT_EXTERNAL) {
                events.clear(env.offset + 1);
                continue;
            }
            if env.offset != events.start + events.envelopes.len() as u64 {
                events.clear(env.offset);
            }
            while events.envelopes.len() == RECENT_EVENTS_MAX
                || events.bytes + record.len() > RECENT_BYTES_MAX
            {
                let Some((_, len)) = events.envelopes.pop_front() else {
                    break;
                };
                events.bytes -= len;
                events.start += 1;
            }
            events.envelopes.push_back((env, record.len()));
            events.bytes += record.len();
        }
    }

    /// The offset and seq of the newest event written to `run`, if the run was written to
    /// since the map started (every later write to it updates it).
    #[cfg(test)]
    pub fn newest(&self, run: RunId) -> Option<(u64, u64)> {
        let events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        events.newest.get(&run).and_then(Writes::newest)
    }

    /// The seq of `run`'s newest event below offset `durable` (everything below it is durable),
    /// when one of the run's kept writes is; `None` when this cannot tell (the run was not
    /// written to since the map started, or none of its kept writes is below `durable`).
    pub fn durable_seq(&self, run: RunId, durable: u64) -> Option<u64> {
        let events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let writes = events.newest.get(&run)?;
        writes.last[..writes.len]
            .iter()
            .rev()
            .find(|(offset, _)| *offset < durable)
            .map(|&(_, seq)| seq)
    }

    /// The events at offsets `from..to`, if every one of them is kept.
    pub fn range(&self, from: u64, to: u64) -> Option<Vec<Arc<Envelope>>> {
        self.range_where(from, to, |_| true)
    }

    /// Of the events at offsets `from..to`, those `keep` takes, if every one of them is kept.
    pub fn range_where(
        &self,
        from: u64,
        to: u64,
        keep: fn(&Event) -> bool,
    ) -> Option<Vec<Arc<Envelope>>> {
        let events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let end = events.start + events.envelopes.len() as u64;
        if from < events.start || to > end || from >= to {
            return None;
        }
        let skip = (from - events.start) as usize;
        let take = (to - from) as usize;
        let kept = events.envelopes.range(skip..skip + take);
        Some(
            kept.filter(|(env, _)| keep(&env.event))
                .map(|(env, _)| env.clone())
                .collect(),
        )
    }
}

impl Events {
    fn clear(&mut self, start: u64) {
        self.envelopes.clear();
        self.bytes = 0;
        self.start = start;
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

    fn offsets(envs: Option<Vec<Arc<Envelope>>>) -> Option<Vec<u64>> {
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
    fn keeps_the_newest_within_its_bounds() {
        let recent = Recent::new(0);
        let n = RECENT_EVENTS_MAX as u64;
        push(&recent, 0..n + 3, &[1]);
        assert_eq!(recent.range(2, 4), None, "dropped");
        assert!(recent.range(3, n + 3).is_some());
        // Larger records: bounded by their bytes.
        let big = vec![1u8; RECENT_BYTES_MAX / 4];
        let envs: Vec<Envelope> = (n + 3..n + 9).map(env).collect();
        recent.push(envs.iter().map(|e| (e, big.as_slice())));
        assert_eq!(recent.range(n + 4, n + 9), None);
        assert_eq!(recent.range(n + 5, n + 9).map(|v| v.len()), Some(4));
    }

    #[test]
    fn knows_the_newest_event_of_each_run_written_to() {
        let recent = Recent::new(0);
        push(&recent, 0..3, &[1]);
        assert_eq!(recent.newest(RunId::from_u128(1)), Some((2, 2)));
        // Also for a record that is not kept.
        push(&recent, 3..4, &[RECORD_FORMAT_EXTERNAL]);
        assert_eq!(recent.newest(RunId::from_u128(1)), Some((3, 3)));
        assert_eq!(recent.newest(RunId::from_u128(2)), None);
    }

    #[test]
    fn tells_a_runs_durable_seq_from_its_newest_writes() {
        let recent = Recent::new(0);
        let run = RunId::from_u128(1);
        // Six batches of two events of the run; the barrier covers whole batches.
        for b in 0..6 {
            push(&recent, b * 2..b * 2 + 2, &[1]);
        }
        assert_eq!(recent.durable_seq(run, 12), Some(11), "all durable");
        assert_eq!(
            recent.durable_seq(run, 10),
            Some(9),
            "the newest batch is not"
        );
        assert_eq!(recent.durable_seq(run, 6), Some(5), "the oldest write kept");
        assert_eq!(recent.durable_seq(run, 4), None, "older than what is kept");
        assert_eq!(recent.durable_seq(RunId::from_u128(2), 12), None);
        assert_eq!(recent.newest(run), Some((11, 11)));
    }

    #[test]
    fn a_batch_of_several_runs_and_appends_counts_as_one_write_of_each() {
        let recent = Recent::new(0);
        let (a, b) = (RunId::from_u128(1), RunId::from_u128(2));
        let of = |run: RunId, offset: u64, seq: u64| Envelope {
            run_id: run,
            seq,
            ..env(offset)
        };
        // One batch: two appends of `a` around one of `b`; then a batch of `b` alone.
        let first = [of(a, 0, 0), of(a, 1, 1), of(b, 2, 0), of(a, 3, 2)];
        recent.push(first.iter().map(|e| (e, &[1u8][..])));
        let second = [of(b, 4, 1)];
        recent.push(second.iter().map(|e| (e, &[1u8][..])));
        assert_eq!(
            recent.durable_seq(a, 4),
            Some(2),
            "the whole first batch is durable"
        );
        assert_eq!(recent.durable_seq(b, 4), Some(0));
        assert_eq!(recent.durable_seq(b, 5), Some(1));
        assert_eq!(recent.durable_seq(a, 0), None, "nothing durable yet");
        // Four more batches of `a`: its first batch is no longer kept, so a durable head inside
        // that history cannot be told from memory.
        for offset in 5..9 {
            let batch = [of(a, offset, offset - 2)];
            recent.push(batch.iter().map(|e| (e, &[1u8][..])));
        }
        assert_eq!(recent.durable_seq(a, 9), Some(6));
        assert_eq!(recent.durable_seq(a, 6), Some(3));
        assert_eq!(recent.durable_seq(a, 5), None, "older than what is kept");
    }

    #[test]
    fn a_filtered_range_clones_only_what_it_keeps() {
        let recent = Recent::new(0);
        let mut envs: Vec<Envelope> = (0..6).map(env).collect();
        envs[4].event = Event::RunCompleted {
            total_execution_time_ms: 0,
        };
        recent.push(envs.iter().map(|e| (e, &[1u8][..])));
        let completed = |e: &Event| matches!(e, Event::RunCompleted { .. });
        assert_eq!(offsets(recent.range_where(0, 6, completed)), Some(vec![4]));
        assert_eq!(offsets(recent.range_where(0, 4, completed)), Some(vec![]));
        assert_eq!(recent.range_where(0, 7, completed), None, "not held whole");
    }

    #[test]
    fn never_serves_across_a_record_stored_out_of_line_or_a_gap() {
        let recent = Recent::new(0);
        push(&recent, 0..3, &[1]);
        push(&recent, 3..4, &[RECORD_FORMAT_EXTERNAL]);
        push(&recent, 4..6, &[1]);
        assert_eq!(
            recent.range(2, 5),
            None,
            "the out-of-line record is not kept"
        );
        assert_eq!(offsets(recent.range(4, 6)), Some(vec![4, 5]));
        // Nothing else writes, but a gap would start over too.
        push(&recent, 9..10, &[1]);
        assert_eq!(recent.range(4, 6), None);
        assert_eq!(offsets(recent.range(9, 10)), Some(vec![9]));
    }
}
