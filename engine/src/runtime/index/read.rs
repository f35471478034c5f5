//! Reads of the index: each a keyed range of at most the page asked for, so its cost depends on
//! the page, not on the store.

use chronicle_projections::RunFacts;
use chronicle_schemas::{ApprovalStatus, RunId, RunStatus, Timestamp};

use super::derive::{SessionFacts, Stored, count_of, decode};
use super::keys::{self, Key};
use crate::store::{self, IndexRange, Store};

/// Whose runs a runs page lists.
#[derive(Clone, Copy, Debug)]
pub enum RunScope<'a> {
    /// Every run, a deleted session's included (a data directory read by its operator).
    All,
    /// Every run anyone may see: not a deleted session's (an admin).
    Visible,
    /// The runs of one owner that are not a deleted session's.
    Owner(&'a str),
}

/// One page of runs, oldest first.
#[derive(Clone, Debug, Default)]
pub struct RunsPage {
    pub runs: Vec<RunFacts>,
    /// More runs follow the last one.
    pub more: bool,
}

fn prefix(scope: RunScope<'_>) -> Vec<u8> {
    match scope {
        RunScope::All => Key::new(keys::ALL_RUNS).done(),
        RunScope::Visible => Key::new(keys::VISIBLE_RUNS).done(),
        RunScope::Owner(owner) => Key::new(keys::OWNER_RUNS).part(owner).done(),
    }
}

/// How many runs of `scope` are in each status, in the order of [`RunStatus::ALL`]: a read of
/// one entry per status, however many runs there are.
pub fn status_counts(store: &Store, scope: RunScope<'_>) -> store::Result<Vec<(RunStatus, u64)>> {
    RunStatus::ALL
        .iter()
        .map(|&status| {
            let key = match scope {
                RunScope::All => Key::new(keys::COUNT_ALL),
                RunScope::Visible => Key::new(keys::COUNT_VISIBLE),
                RunScope::Owner(owner) => Key::new(keys::COUNT_OWNER).part(owner),
            }
            .tail(status.as_str())
            .done();
            Ok((status, store.index_get(&key)?.map_or(0, |v| count_of(&v))))
        })
        .collect()
}

/// How many approvals are pending, of every run: one entry, however many there are.
pub fn pending_approvals(store: &Store) -> store::Result<u64> {
    let key = Key::new(keys::COUNT_PENDING).done();
    Ok(store.index_get(&key)?.map_or(0, |v| count_of(&v)))
}

/// The facts of `run`.
pub fn run_facts(store: &Store, run: RunId) -> store::Result<Option<RunFacts>> {
    let key = Key::new(keys::RUN).run(run).done();
    store.index_get(&key)?.map(|v| decode(&key, &v)).transpose()
}

/// Whether `facts` is listed in `scope`.
pub fn in_scope(facts: &RunFacts, scope: RunScope<'_>) -> bool {
    match scope {
        RunScope::All => true,
        RunScope::Visible => !facts.deleted,
        RunScope::Owner(owner) => !facts.deleted && facts.owner == owner,
    }
}

/// Up to `limit` runs of `scope` after `after` (creation time, then id), oldest first, or newest
/// first with `newest_first`.
pub fn runs_page(
    store: &Store,
    scope: RunScope<'_>,
    after: Option<&RunFacts>,
    newest_first: bool,
    limit: usize,
) -> store::Result<RunsPage> {
    let prefix = prefix(scope);
    let after = after.map(|f| Key::new(0).time(f.created_at).run(f.run_id).done()[1..].to_vec());
    let range = IndexRange::prefix_after(
        &prefix,
        after.as_deref(),
        newest_first,
        limit.saturating_add(1),
    );
    let mut runs = Vec::new();
    let entries = store.index_range(&range)?;
    let more = entries.len() > limit;
    for (k, _) in entries.into_iter().take(limit) {
        let run = keys::run_at(&k, k.len() - 16).ok_or_else(|| bad_key(&k))?;
        runs.push(run_facts(store, run)?.ok_or_else(|| bad_key(&k))?);
    }
    Ok(RunsPage { runs, more })
}

fn bad_key(k: &[u8]) -> store::Error {
    store::Error::Decode(format!(
        "index entry {} names a run the index does not have",
        String::from_utf8_lossy(k)
    ))
}

/// The runs not ended (what the engine drives): as many as are going, however long the log.
pub(crate) fn live_runs(store: &Store) -> store::Result<Vec<RunId>> {
    let prefix = Key::new(keys::LIVE).done();
    store
        .index_range(&IndexRange::prefix(&prefix, usize::MAX))?
        .into_iter()
        .map(|(k, _)| keys::run_at(&k, 1).ok_or_else(|| bad_key(&k)))
        .collect()
}

/// Up to `limit` listed sessions (of `owner` and `user` when given), the most recently active
/// first, after the position `after` (its last activity and id); and whether more follow.
pub(crate) fn sessions_page(
    store: &Store,
    owner: Option<&str>,
    user: Option<&str>,
    after: Option<(Timestamp, &str)>,
    limit: usize,
) -> store::Result<(Vec<SessionFacts>, bool)> {
    let prefix = match (owner, user) {
        (None, None) => Key::new(keys::SESSIONS),
        (Some(o), None) => Key::new(keys::OWNER_SESSIONS).part(o),
        (None, Some(u)) => Key::new(keys::USER_SESSIONS).part(u),
        (Some(o), Some(u)) => Key::new(keys::OWNER_USER_SESSIONS).part(o).part(u),
    }
    .done();
    let after = after.map(|(at, id)| Key::new(0).time_desc(at).tail(id).done()[1..].to_vec());
    let range = IndexRange::prefix_after(&prefix, after.as_deref(), false, limit.saturating_add(1));
    let entries = store.index_range(&range)?;
    let more = entries.len() > limit;
    let mut out = Vec::new();
    for (k, _) in entries.into_iter().take(limit) {
        let id = String::from_utf8_lossy(&k[prefix.len() + 8..]).into_owned();
        let key = Key::new(keys::SESSION).tail(&id).done();
        let facts = store
            .index_get(&key)?
            .ok_or_else(|| bad_key(&k))
            .and_then(|v| decode(&key, &v))?;
        out.push(facts);
    }
    Ok((out, more))
}

/// An approval as the index lists it: when it was requested, its run and the request's seq.
pub type ApprovalAt = (Timestamp, RunId, u64);

/// Up to `limit` approvals of `status` (of `owner`'s runs when given) requested before `before`,
/// oldest first; and whether more follow. Approvals of a deleted session are not listed.
pub fn approvals(
    store: &Store,
    status: ApprovalStatus,
    owner: Option<&str>,
    before: Option<Timestamp>,
    limit: usize,
) -> store::Result<(Vec<ApprovalAt>, bool)> {
    let prefix = match (status, owner) {
        (ApprovalStatus::Pending, None) => Key::new(keys::PENDING),
        (ApprovalStatus::Pending, Some(o)) => Key::new(keys::OWNER_PENDING).part(o),
        (s, None) => Key::new(keys::SETTLED).part(s.as_str()),
        (s, Some(o)) => Key::new(keys::OWNER_SETTLED).part(o).part(s.as_str()),
    }
    .done();
    let mut range = IndexRange::prefix(&prefix, limit.saturating_add(1));
    if let Some(before) = before {
        let mut end = prefix.clone();
        end.extend_from_slice(&Key::new(0).time(before).done()[1..]);
        range.end = std::ops::Bound::Excluded(end);
    }
    let entries = store.index_range(&range)?;
    let more = entries.len() > limit;
    let mut out = Vec::new();
    for (k, _) in entries.into_iter().take(limit) {
        let at = prefix.len();
        let bad = || bad_key(&k);
        let time = u64_at(&k, at).ok_or_else(bad)?;
        let run = keys::run_at(&k, at + 8).ok_or_else(bad)?;
        let seq = u64_at(&k, at + 24).ok_or_else(bad)?;
        out.push((Timestamp((time ^ (1 << 63)) as i64), run, seq));
    }
    Ok((out, more))
}

/// The big-endian number at `at..at + 8` of `key`.
fn u64_at(key: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(at..at + 8)?.try_into().ok()?))
}

/// One page of memory items: each with its position (the offset of its save; pass the last one
/// as `before` for the next page), newest first, and whether more follow.
pub type MemoryPage = (Vec<(u64, Stored)>, bool);

/// Up to `limit` memory items of `user` that runs of `owner` saved (every owner's when `None`),
/// saved before the position `before`, newest first.
pub fn memory_page(
    store: &Store,
    owner: Option<&str>,
    user: &str,
    before: Option<u64>,
    limit: usize,
) -> store::Result<MemoryPage> {
    let prefix = match owner {
        Some(owner) => Key::new(keys::MEMORY).part(owner).part(user).done(),
        None => Key::new(keys::USER_MEMORY).part(user).done(),
    };
    let before = before.map(u64::to_be_bytes);
    let range = IndexRange::prefix_after(
        &prefix,
        before.as_ref().map(|b| &b[..]),
        true,
        limit.saturating_add(1),
    );
    let entries = store.index_range(&range)?;
    let more = entries.len() > limit;
    let mut out = Vec::new();
    for (k, v) in entries.into_iter().take(limit) {
        let at = u64_at(&k, prefix.len()).ok_or_else(|| bad_key(&k))?;
        let stored = match owner {
            Some(_) => decode(&k, &v)?,
            // A user's entry names the item's key.
            None => match store.index_get(&v)? {
                Some(item) => decode(&v, &item)?,
                None => continue,
            },
        };
        out.push((at, stored));
    }
    Ok((out, more))
}

/// The memory items of `user` that runs of `owner` saved (every owner's when `None`), newest
/// first, at most `limit`.
pub fn memory_items(
    store: &Store,
    owner: Option<&str>,
    user: &str,
    limit: usize,
) -> store::Result<Vec<Stored>> {
    let (page, _) = memory_page(store, owner, user, None, limit)?;
    Ok(page.into_iter().map(|(_, s)| s).collect())
}

/// The memory item `memory_id`.
pub(crate) fn memory_item(store: &Store, memory_id: &str) -> store::Result<Option<Stored>> {
    let Some(item) = store.index_get(&Key::new(keys::MEMORY_ID).tail(memory_id).done())? else {
        return Ok(None);
    };
    store
        .index_get(&item)?
        .map(|v| decode(&item, &v))
        .transpose()
}
