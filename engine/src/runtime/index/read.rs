//! Reads of the index: each a keyed range of at most the page asked for, so its cost depends on
//! the page, not on the store.

use chronicle_projections::RunFacts;
use chronicle_schemas::{RunId, Timestamp};

use super::derive::{SessionFacts, Stored, decode};
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

/// A pending approval as the index lists it: when it was requested, its run and the request's
/// seq.
pub type PendingAt = (Timestamp, RunId, u64);

/// Up to `limit` pending approvals (of `owner`'s runs when given) requested before `before`,
/// oldest first; and whether more follow.
pub fn pending_approvals(
    store: &Store,
    owner: Option<&str>,
    before: Option<Timestamp>,
    limit: usize,
) -> store::Result<(Vec<PendingAt>, bool)> {
    let prefix = match owner {
        None => Key::new(keys::PENDING),
        Some(o) => Key::new(keys::OWNER_PENDING).part(o),
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
        let time = u64::from_be_bytes(
            k.get(at..at + 8)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        );
        let run = keys::run_at(&k, at + 8).ok_or_else(bad)?;
        let seq = u64::from_be_bytes(
            k.get(at + 24..at + 32)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        );
        out.push((Timestamp((time ^ (1 << 63)) as i64), run, seq));
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
    let mut out = Vec::new();
    match owner {
        Some(owner) => {
            let prefix = Key::new(keys::MEMORY).part(owner).part(user).done();
            let range = IndexRange::prefix_after(&prefix, None, true, limit);
            for (k, v) in store.index_range(&range)? {
                out.push(decode(&k, &v)?);
            }
        }
        None => {
            let prefix = Key::new(keys::USER_MEMORY).part(user).done();
            let range = IndexRange::prefix_after(&prefix, None, true, limit);
            for (_, item) in store.index_range(&range)? {
                if let Some(v) = store.index_get(&item)? {
                    out.push(decode(&item, &v)?);
                }
            }
        }
    }
    Ok(out)
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
