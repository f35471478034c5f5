//! Long-term memory per user: the items saved (`MemorySaved`) and not deleted (`MemoryDeleted`),
//! read from the index (see `index`), which takes them in as it follows the log.
//!
//! Whose memory: a run's *memory user* is its `user_id` when it has one, else its owner; items
//! are kept per (owner principal, user). A run loads only what runs of its own owner saved for
//! its user; a principal lists and deletes only those too, and an admin lists and deletes
//! everyone's.
//!
//! Memory saved by a run whose session is deleted is deleted with it: the session's tombstone
//! takes its items out of the index (they are never loaded or listed again).

use std::collections::HashSet;

use chronicle_schemas::{Memory, MemoryKind};

use crate::Principal;
use crate::runtime::index;
use crate::store::{self, Store};

/// A run's memory user: its `user_id` when given, else its owner.
pub(crate) fn memory_user(user_id: Option<&str>, owner: &str) -> String {
    user_id.unwrap_or(owner).to_owned()
}

/// The memory items, as the index has them: every read is up to date with the durable log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemoryIndex<'a> {
    store: &'a Store,
}

impl<'a> MemoryIndex<'a> {
    /// The index caught up with the durable log.
    pub(crate) fn of(store: &'a Store) -> store::Result<Self> {
        index::catch_up(store)?;
        Ok(MemoryIndex { store })
    }

    /// What a run of `owner` for `user` loads: at most `max` items, newest first; of the
    /// preferences with the same key only the newest.
    pub(crate) fn load(&self, owner: &str, user: &str, max: usize) -> store::Result<Vec<Memory>> {
        let mut keys = HashSet::new();
        Ok(
            index::memory_items(self.store, Some(owner), user, usize::MAX)?
                .into_iter()
                .map(|s| s.memory)
                .filter(|m| m.kind != MemoryKind::Preference || keys.insert(m.key.clone()))
                .take(max)
                .collect(),
        )
    }

    /// The items of `user` that `who` may see (its own runs' ones; an admin: all), newest
    /// first, superseded preferences included (they can be deleted too).
    pub(crate) fn visible(&self, who: &Principal, user: &str) -> store::Result<Vec<Memory>> {
        let owner = (!who.admin).then_some(who.name.as_str());
        Ok(index::memory_items(self.store, owner, user, usize::MAX)?
            .into_iter()
            .map(|s| s.memory)
            .collect())
    }

    /// Up to `limit` items of `user` that `who` may see, saved before the position `before`,
    /// newest first, superseded preferences included; and where the next page starts.
    pub(crate) fn page(
        &self,
        who: &Principal,
        user: &str,
        before: Option<u64>,
        limit: usize,
    ) -> store::Result<(Vec<Memory>, Option<u64>)> {
        let owner = (!who.admin).then_some(who.name.as_str());
        let (items, more) = index::memory_page(self.store, owner, user, before, limit)?;
        let next = more.then(|| items.last().map(|(at, _)| *at)).flatten();
        Ok((items.into_iter().map(|(_, s)| s.memory).collect(), next))
    }

    /// The item `memory_id` of `user`, when `who` may see it.
    pub(crate) fn find(
        &self,
        who: &Principal,
        user: &str,
        memory_id: &str,
    ) -> store::Result<Option<Memory>> {
        Ok(index::memory_item(self.store, memory_id)?
            .filter(|s| s.memory.user_id == user && who.may_access(&s.owner))
            .map(|s| s.memory))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_schemas::{Actor, Event, RunId};
    use serde_json::json;

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

    fn started(owner: &str) -> Event {
        Event::RunStarted {
            session_id: format!("s-{owner}").as_str().into(),
            user_id: None,
            request_id: "r".into(),
            query: "q".into(),
            config: Default::default(),
            parent: None,
            owner: Some(owner.into()),
            traceparent: None,
        }
    }

    /// A run of `owner` that saves `events`.
    async fn run_of(store: &Store, owner: &str, events: Vec<Event>) -> RunId {
        let run = RunId(uuid::Uuid::now_v7());
        let mut all = vec![started(owner)];
        all.extend(events);
        store.append(run, 0, all).await.unwrap();
        run
    }

    fn ids(memories: &[Memory]) -> Vec<&str> {
        memories.iter().map(|m| m.memory_id.as_str()).collect()
    }

    #[tokio::test]
    async fn the_newest_preference_per_key_is_loaded_within_the_bound() {
        let store = Store::memory();
        let pref = MemoryKind::Preference;
        run_of(
            &store,
            "p",
            vec![
                saved("m1", pref, "deal_type", "sale", "u1"),
                saved("m2", MemoryKind::Fact, "job", "x", "u1"),
                saved("m3", pref, "deal_type", "jeonse", "u1"),
                saved("m4", pref, "deal_type", "sale", "u2"),
            ],
        )
        .await;
        run_of(
            &store,
            "q",
            vec![saved("m5", pref, "property_type", "villa", "u1")],
        )
        .await;
        let index = MemoryIndex::of(&store).unwrap();
        assert_eq!(ids(&index.load("p", "u1", 50).unwrap()), ["m3", "m2"]);
        assert_eq!(ids(&index.load("p", "u1", 1).unwrap()), ["m3"]);
        assert_eq!(ids(&index.load("q", "u1", 50).unwrap()), ["m5"]);
        let visible = |who| ids(&index.visible(&who, "u1").unwrap()).join(",");
        assert_eq!(visible(Principal::user("p")), "m3,m2,m1");
        assert_eq!(visible(Principal::admin("a")), "m5,m3,m2,m1");
        let find = |who: &str, user, id| index.find(&Principal::user(who), user, id).unwrap();
        assert!(find("q", "u1", "m3").is_none());
        assert!(find("p", "u2", "m3").is_none());
        assert!(find("p", "u1", "m3").is_some());
    }

    #[tokio::test]
    async fn a_deletion_and_a_session_tombstone_take_items_out() {
        let store = Store::memory();
        let pref = MemoryKind::Preference;
        let deleted = Event::MemoryDeleted {
            memory_id: "m2".into(),
            by: Actor::user("p"),
        };
        run_of(
            &store,
            "p",
            vec![
                saved("m1", pref, "deal_type", "sale", "u1"),
                // A second save of an id changes nothing.
                saved("m1", pref, "deal_type", "jeonse", "u1"),
                saved("m2", pref, "district", "gangnam", "u1"),
                deleted,
            ],
        )
        .await;
        let gone = run_of(&store, "p", vec![saved("m3", pref, "area", "84", "u1")]).await;
        let index = MemoryIndex::of(&store).unwrap();
        assert_eq!(ids(&index.load("p", "u1", 50).unwrap()), ["m3", "m1"]);
        assert_eq!(index.load("p", "u1", 50).unwrap()[1].value, json!("sale"));
        let tombstone = Event::SessionDeleted {
            by: Actor::user("p"),
        };
        store.append(gone, 2, vec![tombstone]).await.unwrap();
        let index = MemoryIndex::of(&store).unwrap();
        assert_eq!(ids(&index.load("p", "u1", 50).unwrap()), ["m1"]);
        assert!(
            index
                .find(&Principal::user("p"), "u1", "m3")
                .unwrap()
                .is_none()
        );
    }
}
