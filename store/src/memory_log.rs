//! The event log in memory: the same rules as the sled log (offsets, seqs, conflicts, limits, the
//! encoded and chained records, sessions, snapshots, blobs, named records, verification, fail-stop
//! after [`EventLog::fail_stop`]), behind one mutex and
//! without a writer thread. An append is durable as soon as it is stored: nothing outlives the
//! last handle, so there is nothing more to wait for.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chronicle_projections::{RunState, snapshot};
use chronicle_schemas::{BlobRef, Envelope, Event, Hash, RunId, SessionId, Timestamp};
use tokio::sync::watch;

use crate::append::{Clock, stage};
use crate::index::{IndexEntry, IndexOp, IndexRange};
use crate::log::Events;
use std::ops::Bound;

use crate::records::{self, RecordOp, RecordRange};
use crate::verify::{Chains, Problem, VerifyReport};
use crate::{Error, EventLog, Options, Result, RunHead, StorageHealth};

/// The event log in memory.
pub struct MemoryLog {
    opts: Options,
    state: Mutex<State>,
    head_tx: watch::Sender<u64>,
    /// Set only by [`EventLog::fail_stop`] (nothing here can fail an fsync).
    failure_tx: watch::Sender<Option<String>>,
}

#[derive(Default)]
struct State {
    /// The stored records by offset, exactly as `encode_record` made them.
    records: Vec<Vec<u8>>,
    /// Per run, the offset of each seq.
    streams: HashMap<RunId, Vec<u64>>,
    heads: BTreeMap<RunId, RunHead>,
    /// (session, created_at, run): a session's runs, oldest first.
    sessions: BTreeSet<(SessionId, Timestamp, RunId)>,
    /// Encoded snapshots by (run, seq), decoded on read like the sled store's.
    snapshots: BTreeMap<(RunId, u64), Vec<u8>>,
    blobs: HashMap<Hash, Vec<u8>>,
    /// Named records by key; a `BTreeMap` of `String` iterates in the keys' byte order.
    named: BTreeMap<String, Vec<u8>>,
    /// The index and its watermark.
    index: BTreeMap<Vec<u8>, Vec<u8>>,
    index_watermark: u64,
    clock: Clock,
}

impl std::fmt::Debug for MemoryLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryLog")
            .field("next_offset", &*self.head_tx.borrow())
            .finish_non_exhaustive()
    }
}

impl MemoryLog {
    pub fn new(opts: Options) -> MemoryLog {
        MemoryLog {
            opts,
            state: Mutex::new(State::default()),
            head_tx: watch::channel(0).0,
            failure_tx: watch::channel(None).0,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock in a way that leaves the state half-changed: an
        // append mutates only after it was staged whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn append_now(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.refuse_if_stopped()?;
        let mut st = self.state();
        let at = st.clock.now();
        let offset = st.records.len() as u64;
        let staged = stage(
            run_id,
            expected_seq,
            events,
            st.heads.get(&run_id),
            offset,
            at,
        )?;
        let head = staged.head.clone();
        if staged.starts_run() {
            st.sessions
                .insert((head.session_id.clone(), head.created_at, run_id));
        }
        let offsets = st.streams.entry(run_id).or_default();
        offsets.extend(staged.envelopes.iter().map(|e| e.offset));
        st.records.extend(staged.records);
        st.heads.insert(run_id, head);
        // Published under the lock, so the head never moves back between two appends.
        self.head_tx.send_replace(st.records.len() as u64);
        Ok(staged.envelopes)
    }

    /// `Err(Stopped)` once [`EventLog::fail_stop`] was called.
    fn refuse_if_stopped(&self) -> Result<()> {
        match self.failure() {
            Some(why) => Err(Error::Stopped(why)),
            None => Ok(()),
        }
    }

    /// The record at `offset`, decoded (it was stored by `encode_record`, so this is its check).
    fn decode(offset: u64, record: &[u8]) -> Result<Envelope> {
        crate::verify::decode_at(offset, record)
    }

    fn verify_only(&self, only: Option<RunId>) -> VerifyReport {
        let st = self.state();
        let mut report = VerifyReport::default();
        let mut chains = Chains::default();
        let mut problem = None;
        for (offset, record) in (0u64..).zip(&st.records) {
            report.next_offset = offset + 1;
            let env = match Self::decode(offset, record) {
                Ok(env) => env,
                Err(e) => {
                    problem = Some((offset, e.to_string()));
                    break;
                }
            };
            report.events += 1;
            if only.is_some_and(|r| r != env.run_id) {
                continue;
            }
            if let Err(reason) = chains.check(&env) {
                problem = Some((offset, reason));
                break;
            }
            chains.extend(&env);
        }
        if problem.is_none() {
            problem = st
                .heads
                .values()
                .filter(|h| only.is_none_or(|r| r == h.run_id))
                .find_map(|h| Some((h.last_offset, chains.disagrees_with(h)?)));
        }
        report.problem = problem.map(|(offset, reason)| {
            let indexed = st
                .streams
                .iter()
                .find_map(|(run, offsets)| Some((*run, offsets.binary_search(&offset).ok()?)));
            Problem {
                offset,
                run_id: indexed.map(|(r, _)| r),
                seq: indexed.map(|(_, s)| s as u64),
                reason,
            }
        });
        report.heads = chains.into_heads();
        report
    }
}

#[async_trait]
impl EventLog for MemoryLog {
    fn options(&self) -> &Options {
        &self.opts
    }

    fn dir(&self) -> Option<&Path> {
        None
    }

    async fn append(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.append_now(run_id, expected_seq, events)
    }

    fn append_blocking(
        &self,
        run_id: RunId,
        expected_seq: u64,
        events: Vec<Event>,
    ) -> Result<Vec<Envelope>> {
        self.append_now(run_id, expected_seq, events)
    }

    fn run_head(&self, run_id: RunId) -> Result<Option<RunHead>> {
        Ok(self.state().heads.get(&run_id).cloned())
    }

    fn runs(&self) -> Box<dyn Iterator<Item = Result<RunHead>> + Send + '_> {
        let heads: Vec<_> = self.state().heads.values().cloned().collect();
        Box::new(heads.into_iter().map(Ok))
    }

    fn session_runs(&self, session: &SessionId) -> Result<Vec<RunId>> {
        let st = self.state();
        let from = (session.clone(), Timestamp(i64::MIN), RunId::from_u128(0));
        Ok(st
            .sessions
            .range(from..)
            .take_while(|(s, _, _)| s == session)
            .map(|(_, _, run)| *run)
            .collect())
    }

    fn get(&self, offset: u64) -> Result<Option<Envelope>> {
        let st = self.state();
        let record = usize::try_from(offset).ok().and_then(|i| st.records.get(i));
        record.map(|r| Self::decode(offset, r)).transpose()
    }

    fn read_range(&self, from: u64, to: u64) -> Events<'_> {
        let end = to.min(self.state().records.len() as u64);
        // One lock per event: the log only grows, so every offset below `end` stays there.
        Box::new((from..end).map(move |offset| {
            self.get(offset)?.ok_or_else(|| Error::Corrupt {
                offset,
                reason: "missing".into(),
            })
        }))
    }

    fn read_run(&self, run_id: RunId, from_seq: u64, to_seq: u64) -> Events<'_> {
        let offsets: Vec<u64> = match self.state().streams.get(&run_id) {
            Some(offsets) if from_seq <= to_seq => {
                let len = offsets.len() as u64;
                let (from, to) = (from_seq.min(len), to_seq.saturating_add(1).min(len));
                offsets[from as usize..to as usize].to_vec()
            }
            _ => Vec::new(),
        };
        Box::new(offsets.into_iter().map(move |offset| {
            self.get(offset)?.ok_or_else(|| Error::Corrupt {
                offset,
                reason: format!("indexed by run {run_id} but missing"),
            })
        }))
    }

    fn durable_next_offset(&self) -> u64 {
        *self.head_tx.borrow()
    }

    fn watch_head(&self) -> watch::Receiver<u64> {
        self.head_tx.subscribe()
    }

    fn durable_seq(&self, run_id: RunId) -> Result<Option<u64>> {
        Ok(self.state().heads.get(&run_id).map(|h| h.last_seq))
    }

    fn put_snapshot(&self, state: &RunState) -> Result<()> {
        let (Some(run), Some(seq)) = (state.run_id, state.last_seq) else {
            return Ok(());
        };
        let value = snapshot::encode(state);
        self.state().snapshots.insert((run, seq), value);
        Ok(())
    }

    fn latest_snapshot(&self, run_id: RunId, seq: u64) -> Result<Option<RunState>> {
        let st = self.state();
        Ok(st
            .snapshots
            .range((run_id, 0)..=(run_id, seq))
            .rev()
            .find_map(|(_, value)| snapshot::decode(value)))
    }

    fn clear_snapshots(&self) -> Result<()> {
        self.state().snapshots.clear();
        Ok(())
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<BlobRef> {
        self.refuse_if_stopped()?;
        let hash = Hash::of_content(bytes);
        self.state()
            .blobs
            .entry(hash)
            .or_insert_with(|| bytes.to_vec());
        Ok(BlobRef {
            hash,
            bytes: bytes.len() as u64,
        })
    }

    fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        let bytes = self
            .state()
            .blobs
            .get(&blob.hash)
            .cloned()
            .ok_or(Error::BlobMissing(blob.hash))?;
        let actual = Hash::of_content(&bytes);
        if actual != blob.hash {
            return Err(Error::BlobCorrupt {
                hash: blob.hash,
                actual,
            });
        }
        Ok(bytes)
    }

    fn index_apply(&self, ops: &[IndexOp], from: u64, to: u64) -> Result<()> {
        crate::index::check(ops)?;
        self.refuse_if_stopped()?;
        let mut st = self.state();
        if st.index_watermark != from {
            return Err(Error::IndexConflict {
                expected: from,
                actual: st.index_watermark,
            });
        }
        for op in ops {
            match op {
                IndexOp::Put(k, v) => st.index.insert(k.clone(), v.clone()),
                IndexOp::Delete(k) => st.index.remove(k),
            };
        }
        st.index_watermark = to;
        Ok(())
    }

    fn index_watermark(&self) -> Result<u64> {
        Ok(self.state().index_watermark)
    }

    fn index_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.state().index.get(key).cloned())
    }

    fn index_range(&self, range: &IndexRange) -> Result<Vec<IndexEntry>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let st = self.state();
        let bounds = (range.start.clone(), range.end.clone());
        let entries = st.index.range::<Vec<u8>, _>(bounds);
        let take = |it: &mut dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>| {
            it.take(range.limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        Ok(if range.reverse {
            take(&mut entries.rev())
        } else {
            take(&mut { entries })
        })
    }

    fn put_record(&self, key: &str, value: &[u8]) -> Result<()> {
        records::check(key, Some(value))?;
        self.refuse_if_stopped()?;
        self.state().named.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn put_record_if_absent(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>> {
        records::check(key, Some(value))?;
        self.refuse_if_stopped()?;
        let mut st = self.state();
        if let Some(there) = st.named.get(key) {
            return Ok(Some(there.clone()));
        }
        st.named.insert(key.to_owned(), value.to_vec());
        Ok(None)
    }

    fn record(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.state().named.get(key).cloned())
    }

    fn records(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let st = self.state();
        Ok(st
            .named
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn delete_record(&self, key: &str) -> Result<()> {
        records::check(key, None)?;
        self.refuse_if_stopped()?;
        self.state().named.remove(key);
        Ok(())
    }

    fn records_apply(&self, ops: &[RecordOp]) -> Result<()> {
        records::check_batch(ops)?;
        self.refuse_if_stopped()?;
        let mut st = self.state();
        for op in ops {
            if let RecordOp::Expect(key, want) = op
                && st.named.get(key) != want.as_ref()
            {
                return Err(Error::RecordConflict { key: key.clone() });
            }
        }
        for op in ops {
            match op {
                RecordOp::Put(key, v) => {
                    st.named.insert(key.clone(), v.clone());
                }
                RecordOp::Delete(key) => {
                    st.named.remove(key);
                }
                RecordOp::Expect(..) => {}
            }
        }
        Ok(())
    }

    fn records_range(&self, range: &RecordRange) -> Result<Vec<(String, Vec<u8>)>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let st = self.state();
        let (start, end) = range.bounds();
        // A `String` map iterates in the keys' byte order; a bound that is not UTF-8 (the end of
        // a prefix may not be) is kept by comparing bytes instead.
        let as_str = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(k) => {
                String::from_utf8(k.clone()).map_or(Bound::Unbounded, Bound::Included)
            }
            Bound::Excluded(k) => {
                String::from_utf8(k.clone()).map_or(Bound::Unbounded, Bound::Excluded)
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        let after_start = |k: &[u8]| match &start {
            Bound::Included(s) => k >= s.as_slice(),
            Bound::Excluded(s) => k > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = |k: &[u8]| match &end {
            Bound::Included(e) => k <= e.as_slice(),
            Bound::Excluded(e) => k < e.as_slice(),
            Bound::Unbounded => true,
        };
        let entries = st.named.range::<String, _>((as_str(&start), as_str(&end)));
        let owned = |(k, v): (&String, &Vec<u8>)| (k.clone(), v.clone());
        Ok(if range.reverse {
            entries
                .rev()
                .skip_while(|(k, _)| !before_end(k.as_bytes()))
                .take_while(|(k, _)| after_start(k.as_bytes()))
                .take(range.limit)
                .map(owned)
                .collect()
        } else {
            entries
                .skip_while(|(k, _)| !after_start(k.as_bytes()))
                .take_while(|(k, _)| before_end(k.as_bytes()))
                .take(range.limit)
                .map(owned)
                .collect()
        })
    }

    fn health(&self) -> StorageHealth {
        match self.failure() {
            Some(why) => StorageHealth::Failed(why),
            None => StorageHealth::Ok,
        }
    }

    fn failure(&self) -> Option<String> {
        self.failure_tx.borrow().clone()
    }

    fn fail_stop(&self, why: &str) {
        self.failure_tx.send_if_modified(|f| {
            let first = f.is_none();
            if first {
                *f = Some(why.to_owned());
            }
            first
        });
    }

    fn watch_failure(&self) -> watch::Receiver<Option<String>> {
        self.failure_tx.subscribe()
    }

    /// Everything stored is as durable as it gets.
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn verify(&self) -> Result<VerifyReport> {
        Ok(self.verify_only(None))
    }

    fn verify_run(&self, run_id: RunId) -> Result<VerifyReport> {
        Ok(self.verify_only(Some(run_id)))
    }
}

#[cfg(test)]
mod conformance {
    crate::conformance_tests!(crate::conformance::Memory);
}
