//! Deriving the index from events: what one event changes ([`Batch::take`]), over a sink that is
//! the store's index (the indexer) or a map (the rebuild a test compares it with).

use std::collections::BTreeMap;
use std::ops::Bound;

use chronicle_projections::RunFacts;
use chronicle_schemas::{Envelope, Event, Memory, RunId, SessionId, Timestamp};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::keys::{self, Key};
use crate::store::{self, IndexEntry, IndexOp, IndexRange, Store};

/// A session's facts: its first run's (which says whose it is and whether it is listed) and
/// its newest activity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct SessionFacts {
    pub session_id: SessionId,
    pub first_run: RunId,
    pub created_at: Timestamp,
    pub owner: String,
    pub user_id: Option<String>,
    /// The first run is a sub-agent run: the session is part of another's turn, not listed.
    pub child: bool,
    pub deleted: bool,
    /// The time of the newest event of any of its runs.
    pub last_activity: Timestamp,
}

impl SessionFacts {
    /// Shown in listings: its first run is a root run and it is not deleted.
    pub fn listed(&self) -> bool {
        !self.child && !self.deleted
    }
}

/// Where index entries are read from and written to.
pub(crate) trait Sink {
    fn get(&self, key: &[u8]) -> store::Result<Option<Vec<u8>>>;
    fn range(&self, range: &IndexRange) -> store::Result<Vec<IndexEntry>>;
}

impl Sink for Store {
    fn get(&self, key: &[u8]) -> store::Result<Option<Vec<u8>>> {
        self.index_get(key)
    }

    fn range(&self, range: &IndexRange) -> store::Result<Vec<IndexEntry>> {
        self.index_range(range)
    }
}

impl Sink for BTreeMap<Vec<u8>, Vec<u8>> {
    fn get(&self, key: &[u8]) -> store::Result<Option<Vec<u8>>> {
        Ok(BTreeMap::get(self, key).cloned())
    }

    fn range(&self, range: &IndexRange) -> store::Result<Vec<IndexEntry>> {
        let found = self
            .range::<Vec<u8>, _>((range.start.clone(), range.end.clone()))
            .map(|(k, v)| (k.clone(), v.clone()));
        Ok(if range.reverse {
            found.rev().take(range.limit).collect()
        } else {
            found.take(range.limit).collect()
        })
    }
}

/// Most items one run's memory index entries are read in, when its session is deleted.
const RUN_MEMORY_ITEMS_MAX: usize = 1_000_000;

pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    rmp_serde::to_vec_named(value).expect("index values encode")
}

pub(crate) fn decode<T: DeserializeOwned>(key: &[u8], bytes: &[u8]) -> store::Result<T> {
    rmp_serde::from_slice(bytes).map_err(|e| {
        store::Error::Decode(format!(
            "index entry {} does not decode: {e}",
            String::from_utf8_lossy(key)
        ))
    })
}

/// The changes of a run of events, over what `sink` holds: reads see the changes made so far.
pub(crate) struct Batch<'a, S: Sink> {
    sink: &'a S,
    store: &'a Store,
    /// Runs' and sessions' facts read or changed in this batch, decoded (encoded once, at the
    /// end: a run's events mostly come many to a batch).
    runs: std::collections::HashMap<Vec<u8>, RunFacts>,
    sessions: std::collections::HashMap<Vec<u8>, SessionFacts>,
    changes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a, S: Sink> Batch<'a, S> {
    /// `store` is where a restored run's state is read.
    pub fn new(sink: &'a S, store: &'a Store) -> Self {
        Batch {
            sink,
            store,
            changes: BTreeMap::new(),
            runs: std::collections::HashMap::new(),
            sessions: std::collections::HashMap::new(),
        }
    }

    /// The changes, as one index write.
    pub fn ops(mut self) -> Vec<IndexOp> {
        for (k, f) in std::mem::take(&mut self.runs) {
            self.put(k, encode(&f));
        }
        for (k, f) in std::mem::take(&mut self.sessions) {
            self.put(k, encode(&f));
        }
        self.changes
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => IndexOp::Put(k, v),
                None => IndexOp::Delete(k),
            })
            .collect()
    }

    fn get(&self, key: &[u8]) -> store::Result<Option<Vec<u8>>> {
        match self.changes.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.sink.get(key),
        }
    }

    fn get_as<T: DeserializeOwned>(&self, key: &[u8]) -> store::Result<Option<T>> {
        self.get(key)?.map(|v| decode(key, &v)).transpose()
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.changes.insert(key, Some(value));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.changes.insert(key, None);
    }

    /// The keys under `prefix`, the changes so far included.
    fn keys_under(&self, prefix: &[u8]) -> store::Result<Vec<Vec<u8>>> {
        let mut keys: std::collections::BTreeSet<Vec<u8>> = self
            .sink
            .range(&IndexRange::prefix(prefix, RUN_MEMORY_ITEMS_MAX))?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let end = store::index::prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        for (k, v) in self
            .changes
            .range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), end))
        {
            match v {
                Some(_) => keys.insert(k.clone()),
                None => keys.remove(k),
            };
        }
        Ok(keys.into_iter().collect())
    }

    /// Replaces the entries `old` with `new` (both sets of keys with empty values).
    fn replace(&mut self, old: Vec<Vec<u8>>, new: Vec<Vec<u8>>) {
        for k in &old {
            if !new.contains(k) {
                self.delete(k.clone());
            }
        }
        for k in new {
            if !old.contains(&k) {
                self.put(k, Vec::new());
            }
        }
    }

    /// Moves a run from the counters `old` to the counters `new` (each a count of runs in a
    /// status, of one scope).
    fn recount(&mut self, old: Vec<Vec<u8>>, new: Vec<Vec<u8>>) -> store::Result<()> {
        for k in &old {
            if !new.contains(k) {
                self.add(k.clone(), -1)?;
            }
        }
        for k in new {
            if !old.contains(&k) {
                self.add(k, 1)?;
            }
        }
        Ok(())
    }

    /// Adds `delta` to the count under `key` (a count of 0 has no entry).
    fn add(&mut self, key: Vec<u8>, delta: i64) -> store::Result<()> {
        let now = self.get(&key)?.map_or(0, |v| count_of(&v));
        match now.saturating_add_signed(delta) {
            0 => self.delete(key),
            n => self.put(key, n.to_be_bytes().to_vec()),
        }
        Ok(())
    }

    /// Takes one durable event in.
    pub fn take(&mut self, env: &Envelope) -> store::Result<()> {
        let run_key = Key::new(keys::RUN).run(env.run_id).done();
        // Taken out of the batch (put back below): one copy per event, for `facts`.
        let old: Option<RunFacts> = match self.runs.remove(&run_key) {
            Some(f) => Some(f),
            None => self.get_as(&run_key)?,
        };
        if old.is_none() && !matches!(env.event, Event::RunStarted { .. }) {
            // A run whose start the index never saw (it cannot be: seq 0 comes first).
            tracing::warn!(run = %env.run_id, seq = env.seq, "an event of a run the index does not know");
            return Ok(());
        }
        let mut facts = old.clone().unwrap_or_default();
        facts.apply(env);
        if let Event::RunRestored { .. } = env.event {
            facts.restored(&self.store.state_at(env.run_id, env.seq)?);
        }
        self.memory(env, &facts)?;
        self.recount(count_keys(old.as_ref()), count_keys(Some(&facts)))?;
        let pending_before = old.as_ref().map_or(0, |o| o.pending.len());
        if facts.pending.len() != pending_before {
            let delta = facts.pending.len() as i64 - pending_before as i64;
            self.add(Key::new(keys::COUNT_PENDING).done(), delta)?;
        }
        self.replace(run_keys(old.as_ref()), run_keys(Some(&facts)));
        self.session(env, &facts)?;
        self.runs.insert(run_key, facts);
        Ok(())
    }

    fn session(&mut self, env: &Envelope, run: &RunFacts) -> store::Result<()> {
        let key = Key::new(keys::SESSION).tail(&run.session_id.0).done();
        let old: Option<SessionFacts> = match self.sessions.remove(&key) {
            Some(f) => Some(f),
            None => self.get_as(&key)?,
        };
        let mut s = old.clone().unwrap_or_default();
        let first = old.is_none() || (run.created_at, run.run_id) < (s.created_at, s.first_run);
        if first {
            s.session_id = run.session_id.clone();
            s.first_run = run.run_id;
            s.created_at = run.created_at;
        }
        if s.first_run == run.run_id {
            s.owner.clone_from(&run.owner);
            s.user_id.clone_from(&run.user_id);
            s.child = run.parent.is_some();
            s.deleted = run.deleted;
        }
        s.last_activity = s.last_activity.max(env.at);
        self.replace(session_keys(old.as_ref()), session_keys(Some(&s)));
        self.sessions.insert(key, s);
        Ok(())
    }

    fn memory(&mut self, env: &Envelope, run: &RunFacts) -> store::Result<()> {
        match &env.event {
            Event::MemorySaved { memory } if !run.deleted => {
                let id_key = Key::new(keys::MEMORY_ID).tail(&memory.memory_id).done();
                // The first save of an id wins.
                if self.get(&id_key)?.is_some() {
                    return Ok(());
                }
                let item = memory_key(&run.owner, &memory.user_id, env.offset);
                let by_user = Key::new(keys::USER_MEMORY)
                    .part(&memory.user_id)
                    .u64(env.offset)
                    .done();
                self.put(item.clone(), encode(&Stored::of(&run.owner, memory)));
                self.put(by_user, item.clone());
                self.put(id_key, item);
                let by_run = Key::new(keys::RUN_MEMORY)
                    .run(env.run_id)
                    .tail(&memory.memory_id)
                    .done();
                self.put(by_run, Vec::new());
            }
            Event::MemoryDeleted { memory_id, .. } => self.forget(memory_id)?,
            Event::SessionDeleted { .. } => {
                let prefix = Key::new(keys::RUN_MEMORY).run(env.run_id).done();
                for k in self.keys_under(&prefix)? {
                    let id = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                    self.forget(&id)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Takes an item out of every entry that names it.
    fn forget(&mut self, memory_id: &str) -> store::Result<()> {
        let id_key = Key::new(keys::MEMORY_ID).tail(memory_id).done();
        let Some(item) = self.get(&id_key)? else {
            return Ok(());
        };
        if let Some(stored) = self.get_as::<Stored>(&item)? {
            let offset = item_offset(&item);
            self.delete(
                Key::new(keys::USER_MEMORY)
                    .part(&stored.memory.user_id)
                    .u64(offset)
                    .done(),
            );
            self.delete(
                Key::new(keys::RUN_MEMORY)
                    .run(stored.memory.run_id)
                    .tail(memory_id)
                    .done(),
            );
        }
        self.delete(item);
        self.delete(id_key);
        Ok(())
    }
}

/// A memory item as the index keeps it: with the principal whose run saved it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stored {
    pub owner: String,
    pub memory: Memory,
}

impl Stored {
    fn of(owner: &str, memory: &Memory) -> Self {
        Stored {
            owner: owner.to_owned(),
            memory: memory.clone(),
        }
    }
}

pub(crate) fn memory_key(owner: &str, user: &str, offset: u64) -> Vec<u8> {
    Key::new(keys::MEMORY)
        .part(owner)
        .part(user)
        .u64(offset)
        .done()
}

/// The offset that ends a memory item's key.
pub(crate) fn item_offset(item: &[u8]) -> u64 {
    item.len()
        .checked_sub(8)
        .and_then(|at| item[at..].try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// A count's value: a big-endian `u64` (0 when it is not one).
pub(crate) fn count_of(bytes: &[u8]) -> u64 {
    bytes.try_into().map_or(0, u64::from_be_bytes)
}

/// The counters a run with these facts is counted in: its status in every run, and, unless its
/// session is deleted, among those anyone may see and among its owner's.
fn count_keys(facts: Option<&RunFacts>) -> Vec<Vec<u8>> {
    let Some(f) = facts else {
        return Vec::new();
    };
    let status = f.status.as_str();
    let mut out = vec![Key::new(keys::COUNT_ALL).tail(status).done()];
    if !f.deleted {
        out.push(Key::new(keys::COUNT_VISIBLE).tail(status).done());
        out.push(
            Key::new(keys::COUNT_OWNER)
                .part(&f.owner)
                .tail(status)
                .done(),
        );
    }
    out
}

/// The list entries of a run with these facts (none for `None`).
fn run_keys(facts: Option<&RunFacts>) -> Vec<Vec<u8>> {
    let Some(f) = facts else {
        return Vec::new();
    };
    let mut out = vec![
        Key::new(keys::ALL_RUNS)
            .time(f.created_at)
            .run(f.run_id)
            .done(),
    ];
    if f.is_live() {
        out.push(Key::new(keys::LIVE).run(f.run_id).done());
    }
    if !f.deleted {
        out.push(
            Key::new(keys::VISIBLE_RUNS)
                .time(f.created_at)
                .run(f.run_id)
                .done(),
        );
        out.push(
            Key::new(keys::OWNER_RUNS)
                .part(&f.owner)
                .time(f.created_at)
                .run(f.run_id)
                .done(),
        );
    }
    for p in &f.pending {
        out.push(
            Key::new(keys::PENDING)
                .time(p.requested_at)
                .run(f.run_id)
                .u64(p.requested_seq)
                .done(),
        );
        out.push(
            Key::new(keys::OWNER_PENDING)
                .part(&f.owner)
                .time(p.requested_at)
                .run(f.run_id)
                .u64(p.requested_seq)
                .done(),
        );
    }
    // Settled approvals are listed while the run is (an approval of a deleted session is not
    // shown to anyone).
    for a in f.settled.iter().filter(|_| !f.deleted) {
        out.push(
            Key::new(keys::SETTLED)
                .part(a.status.as_str())
                .time(a.requested_at)
                .run(f.run_id)
                .u64(a.requested_seq)
                .done(),
        );
        out.push(
            Key::new(keys::OWNER_SETTLED)
                .part(&f.owner)
                .part(a.status.as_str())
                .time(a.requested_at)
                .run(f.run_id)
                .u64(a.requested_seq)
                .done(),
        );
    }
    out
}

/// The list entries of a session with these facts.
fn session_keys(facts: Option<&SessionFacts>) -> Vec<Vec<u8>> {
    let Some(s) = facts.filter(|s| s.listed()) else {
        return Vec::new();
    };
    let id = &s.session_id.0;
    let at = s.last_activity;
    let mut out = vec![
        Key::new(keys::SESSIONS).time_desc(at).tail(id).done(),
        Key::new(keys::OWNER_SESSIONS)
            .part(&s.owner)
            .time_desc(at)
            .tail(id)
            .done(),
    ];
    if let Some(user) = &s.user_id {
        out.push(
            Key::new(keys::USER_SESSIONS)
                .part(user)
                .time_desc(at)
                .tail(id)
                .done(),
        );
        out.push(
            Key::new(keys::OWNER_USER_SESSIONS)
                .part(&s.owner)
                .part(user)
                .time_desc(at)
                .tail(id)
                .done(),
        );
    }
    out
}
