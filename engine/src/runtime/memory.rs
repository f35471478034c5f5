//! Long-term memory per user: the index of every item saved (`MemorySaved`) and not deleted
//! (`MemoryDeleted`) over the whole log.
//!
//! Whose memory: a run's *memory user* is its `user_id` when it has one, else its owner; items
//! are kept per (owner principal, user). A run loads only what runs of its own owner saved for
//! its user; a principal lists and deletes only those too, and an admin lists and deletes
//! everyone's.
//!
//! Memory saved by a run whose session is deleted is deleted with it: the session's tombstone
//! takes its items out of the index (they are never loaded or listed again).
//!
//! The index is built when the engine opens, by one pass over every run's events, and then
//! follows the log: every read first takes in what became durable since the last one
//! ([`MemoryIndex::catch_up`]), so whoever has seen an event (a subscriber, a run's state) finds
//! the index up to date with it. Both ways go through [`MemoryIndex::record`], which is
//! idempotent by `memory_id` (a deletion seen first keeps the item out when its save is seen
//! after), so a pass and a catch-up that race never count an item twice.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use chronicle_schemas::{Envelope, Event, Memory, MemoryKind, OWNER_OF_OLD_RUNS, RunId};

use crate::Principal;
use crate::store::{self, Store};

/// A run's memory user: its `user_id` when given, else its owner.
pub(crate) fn memory_user(user_id: Option<&str>, owner: &str) -> String {
    user_id.unwrap_or(owner).to_owned()
}

/// The events the index takes in: saves, deletions, and sessions' tombstones (what a run of a
/// deleted session saved is deleted with it).
fn is_memory_event(e: &Event) -> bool {
    matches!(
        e,
        Event::MemorySaved { .. } | Event::MemoryDeleted { .. } | Event::SessionDeleted { .. }
    )
}

/// One saved item, with the principal whose run saved it and where in the log it was saved
/// (newer items have higher offsets).
#[derive(Clone, Debug)]
struct Saved {
    owner: String,
    offset: u64,
    memory: Memory,
}

#[derive(Debug, Default)]
struct Items {
    saved: HashMap<String, Saved>,
    deleted: HashSet<String>,
    /// Runs whose session was deleted: nothing they saved is loaded or listed.
    deleted_runs: HashSet<RunId>,
}

/// Every item saved and not deleted, by `memory_id`.
#[derive(Debug, Default)]
pub(crate) struct MemoryIndex {
    items: Mutex<Items>,
    /// The offset the index has taken the log in up to (exclusive).
    cursor: Mutex<u64>,
}

impl MemoryIndex {
    /// Takes in everything the log holds now: one pass over each run's events. A run whose log
    /// cannot be read (a damaged record) is left out from there on, with a warning: the engine
    /// still opens, and reads of that run name the damage.
    pub(crate) fn scan(&self, store: &Store) -> store::Result<()> {
        let mut cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        *cursor = store.durable_next_offset();
        for head in store.runs() {
            let run = head?.run_id;
            if let Err(e) = self.scan_run(store, run) {
                tracing::warn!(%run, error = %e, "the memory saved by this run is left out");
            }
        }
        Ok(())
    }

    /// Takes in the memory events that became durable since the last call (`owner_of` names a
    /// run's owner). A record that cannot be read is skipped with a warning.
    pub(crate) fn catch_up(&self, store: &Store, owner_of: impl Fn(RunId) -> Option<String>) {
        let mut cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        let end = store.durable_next_offset();
        for env in store.read_range_where(*cursor, end, is_memory_event) {
            match env {
                Ok(env) => {
                    let owner = owner_of(env.run_id);
                    self.record(owner.as_deref().unwrap_or(OWNER_OF_OLD_RUNS), &env);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "memory events after an unreadable record are left out");
                    break;
                }
            }
        }
        *cursor = end;
    }

    fn scan_run(&self, store: &Store, run: RunId) -> store::Result<()> {
        let mut owner = OWNER_OF_OLD_RUNS.to_owned();
        for env in store.read_run(run, 0, u64::MAX) {
            let env = env?;
            match &env.event {
                Event::RunStarted { owner: Some(o), .. } => owner.clone_from(o),
                _ => self.record(&owner, &env),
            }
        }
        Ok(())
    }

    /// Takes a durable event of a run `owner` owns into account (anything but a memory event is
    /// ignored). Recording the same event twice changes nothing.
    pub(crate) fn record(&self, owner: &str, env: &Envelope) {
        if !is_memory_event(&env.event) {
            return;
        }
        let mut items = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        let items = &mut *items;
        match &env.event {
            Event::MemorySaved { memory }
                if !items.deleted.contains(&memory.memory_id)
                    && !items.deleted_runs.contains(&env.run_id) =>
            {
                items
                    .saved
                    .entry(memory.memory_id.clone())
                    .or_insert_with(|| Saved {
                        owner: owner.to_owned(),
                        offset: env.offset,
                        memory: memory.clone(),
                    });
            }
            Event::MemoryDeleted { memory_id, .. } => {
                items.saved.remove(memory_id);
                items.deleted.insert(memory_id.clone());
            }
            // A run of a deleted session: what it saved goes with it.
            Event::SessionDeleted { .. } => {
                items.deleted_runs.insert(env.run_id);
                let deleted = &mut items.deleted;
                items.saved.retain(|id, s| {
                    let keep = s.memory.run_id != env.run_id;
                    if !keep {
                        deleted.insert(id.clone());
                    }
                    keep
                });
            }
            _ => {}
        }
    }

    /// The items of `user` that `pass` lets through, newest first.
    fn of_user(&self, user: &str, pass: impl Fn(&Saved) -> bool) -> Vec<Memory> {
        let items = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found: Vec<&Saved> = items
            .saved
            .values()
            .filter(|s| s.memory.user_id == user && pass(s))
            .collect();
        found.sort_by_key(|s| std::cmp::Reverse(s.offset));
        found.into_iter().map(|s| s.memory.clone()).collect()
    }

    /// What a run of `owner` for `user` loads: at most `max` items, newest first; of the
    /// preferences with the same key only the newest.
    pub(crate) fn load(&self, owner: &str, user: &str, max: usize) -> Vec<Memory> {
        let mut keys = HashSet::new();
        self.of_user(user, |s| s.owner == owner)
            .into_iter()
            .filter(|m| m.kind != MemoryKind::Preference || keys.insert(m.key.clone()))
            .take(max)
            .collect()
    }

    /// The items of `user` that `who` may see (its own runs' ones; an admin: all), newest
    /// first, superseded preferences included (they can be deleted too).
    pub(crate) fn visible(&self, who: &Principal, user: &str) -> Vec<Memory> {
        self.of_user(user, |s| who.may_access(&s.owner))
    }

    /// The item `memory_id` of `user`, when `who` may see it.
    pub(crate) fn find(&self, who: &Principal, user: &str, memory_id: &str) -> Option<Memory> {
        let items = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        items
            .saved
            .get(memory_id)
            .filter(|s| s.memory.user_id == user && who.may_access(&s.owner))
            .map(|s| s.memory.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_schemas::{Actor, Hash, Timestamp};
    use serde_json::json;

    fn env(offset: u64, event: Event) -> Envelope {
        Envelope {
            offset,
            run_id: RunId(uuid::Uuid::nil()),
            seq: offset,
            at: Timestamp(0),
            prev_hash: Hash::default(),
            hash: Hash::default(),
            event,
        }
    }

    fn saved(id: &str, kind: MemoryKind, key: &str, value: &str, user: &str) -> Event {
        Event::MemorySaved {
            memory: Memory {
                memory_id: id.into(),
                kind,
                key: key.into(),
                value: json!(value),
                user_id: user.into(),
                ..Memory::default()
            },
        }
    }

    fn ids(memories: &[Memory]) -> Vec<&str> {
        memories.iter().map(|m| m.memory_id.as_str()).collect()
    }

    #[test]
    fn the_newest_preference_per_key_is_loaded_within_the_bound() {
        let index = MemoryIndex::default();
        let pref = MemoryKind::Preference;
        index.record("p", &env(1, saved("m1", pref, "deal_type", "sale", "u1")));
        index.record(
            "p",
            &env(2, saved("m2", MemoryKind::Fact, "job", "x", "u1")),
        );
        index.record("p", &env(3, saved("m3", pref, "deal_type", "jeonse", "u1")));
        index.record("p", &env(4, saved("m4", pref, "deal_type", "sale", "u2")));
        index.record(
            "q",
            &env(5, saved("m5", pref, "property_type", "villa", "u1")),
        );
        assert_eq!(ids(&index.load("p", "u1", 50)), ["m3", "m2"]);
        assert_eq!(ids(&index.load("p", "u1", 1)), ["m3"]);
        assert_eq!(ids(&index.load("q", "u1", 50)), ["m5"]);
        assert_eq!(
            ids(&index.visible(&Principal::user("p"), "u1")),
            ["m3", "m2", "m1"]
        );
        assert_eq!(
            ids(&index.visible(&Principal::admin("a"), "u1")),
            ["m5", "m3", "m2", "m1"]
        );
        assert!(index.find(&Principal::user("q"), "u1", "m3").is_none());
        assert!(index.find(&Principal::user("p"), "u2", "m3").is_none());
        assert!(index.find(&Principal::user("p"), "u1", "m3").is_some());
    }

    #[tokio::test]
    async fn a_catch_up_takes_in_what_became_durable_once() {
        let store = Store::memory();
        let index = MemoryIndex::default();
        index.scan(&store).unwrap();
        let run = RunId(uuid::Uuid::now_v7());
        let mut live = store.load(run).unwrap();
        let started = Event::RunStarted {
            session_id: "s".into(),
            user_id: Some("u1".into()),
            request_id: "r".into(),
            query: "q".into(),
            config: Default::default(),
            parent: None,
            owner: Some("p".into()),
        };
        let pref = MemoryKind::Preference;
        live.append(vec![
            started,
            saved("m1", pref, "deal_type", "jeonse", "u1"),
        ])
        .await
        .unwrap();
        assert!(index.load("p", "u1", 50).is_empty(), "not read yet");
        let owner_of = |_| Some("p".to_owned());
        index.catch_up(&store, owner_of);
        index.catch_up(&store, owner_of);
        assert_eq!(ids(&index.load("p", "u1", 50)), ["m1"]);
        // A new index over the same log finds the same.
        let rebuilt = MemoryIndex::default();
        rebuilt.scan(&store).unwrap();
        assert_eq!(ids(&rebuilt.load("p", "u1", 50)), ["m1"]);
    }

    #[test]
    fn recording_is_idempotent_and_a_deletion_stays() {
        let index = MemoryIndex::default();
        let pref = MemoryKind::Preference;
        let deleted = Event::MemoryDeleted {
            memory_id: "m2".into(),
            by: Actor::user("p"),
        };
        index.record("p", &env(1, saved("m1", pref, "deal_type", "sale", "u1")));
        index.record("p", &env(1, saved("m1", pref, "deal_type", "sale", "u1")));
        // A deletion seen before its save (a scan racing an append) keeps the item out.
        index.record("p", &env(3, deleted.clone()));
        index.record("p", &env(2, saved("m2", pref, "deal_type", "jeonse", "u1")));
        index.record("p", &env(3, deleted));
        assert_eq!(ids(&index.load("p", "u1", 50)), ["m1"]);
        assert_eq!(ids(&index.visible(&Principal::user("p"), "u1")), ["m1"]);
    }
}
