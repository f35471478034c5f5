//! The index of LangGraph thread records, kept as named records beside them and written in the
//! same atomic write as the thread record it describes, so the two never disagree (after a crash
//! too). What thread search reads instead of every thread record (see
//! `docs/decisions/thread-search.md`).
//!
//! Every entry exists once for all threads (scope `all`: what an admin searches) and once per
//! owner (scope `o/<owner digest>`); its key ends with the thread id, and its value is empty:
//!
//! - `c/<scope>/<created_at>/<thread>` and `u/<scope>/<updated_at>/<thread>`: by time;
//! - `i/<scope>/<thread>`: by thread id;
//! - `m/<scope>/<pair digest>/<updated_at>/<thread>`: one per top-level metadata key whose value
//!   is a scalar (string, number, bool, null), newest last; a thread with more such keys than
//!   [`PAIRS_INDEXED_MAX`] has one `w/<scope>/<thread>` ("wide") entry instead, which every
//!   metadata search reads too;
//! - `n/<scope>`: how many threads the scope holds (a decimal count);
//! - `version`: the index's version, written when it was built (at start, once per store).
//!
//! The index only narrows: every thread it names is read and checked (owner, filters) before it
//! is shown, so a digest that collides costs a read, never a wrong answer.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_engine::Principal;
use chronicle_engine::store::{
    Error as StoreError, RECORD_BATCH_OPS_MAX, RecordOp, RecordRange, Store,
};
use chronicle_schemas::Timestamp;
use serde_json::Value;
use uuid::Uuid;

use super::records::{self, ThreadRecord};
use crate::error::{ApiError, ApiResult};

const IX: &str = "langgraph-index/threads/";

/// The index's layout version: an index of another version is rebuilt at start.
const VERSION: &[u8] = b"1";

/// Most scalar metadata pairs indexed for one thread: a thread with more is listed as wide. It
/// keeps one thread's write (its entries for both scopes, before and after) well inside
/// `RECORD_BATCH_OPS_MAX`.
pub(crate) const PAIRS_INDEXED_MAX: usize = 64;

/// How often a thread's write is tried again when another write of the same thread (or of a
/// count) came between its read and its write.
const WRITE_ATTEMPTS_MAX: usize = 64;

/// Records read per page while walking the index.
pub(crate) const WALK_PAGE: usize = 256;

/// Which threads an index part covers: all of them, or one owner's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Scope(String);

impl Scope {
    pub fn all() -> Scope {
        Scope("all".into())
    }

    pub fn owner(owner: &str) -> Scope {
        Scope(format!("o/{}", digest("owner", owner.as_bytes())))
    }

    /// What `who` may search: every thread for an admin, else their own.
    pub fn of(who: &Principal) -> Scope {
        if who.admin {
            Scope::all()
        } else {
            Scope::owner(&who.name)
        }
    }
}

/// The orders the index keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    Created,
    Updated,
    ThreadId,
}

/// The prefix of the entries of `scope` in `order`.
pub(crate) fn order_prefix(scope: &Scope, order: Order) -> String {
    let part = match order {
        Order::Created => "c",
        Order::Updated => "u",
        Order::ThreadId => "i",
    };
    format!("{IX}{part}/{}/", scope.0)
}

/// The prefix of the entries of `scope` whose thread's metadata has `key: value`, by updated
/// time; `None` for a value that is not indexed (an object or an array).
pub(crate) fn pair_prefix(scope: &Scope, key: &str, value: &Value) -> Option<String> {
    Some(format!("{IX}m/{}/{}/", scope.0, pair_digest(key, value)?))
}

/// The prefix of the wide threads of `scope` (too many metadata pairs to index).
pub(crate) fn wide_prefix(scope: &Scope) -> String {
    format!("{IX}w/{}/", scope.0)
}

fn count_key(scope: &Scope) -> String {
    format!("{IX}n/{}", scope.0)
}

fn version_key() -> String {
    format!("{IX}version")
}

/// The thread an entry names: the last part of its key.
pub(crate) fn thread_of(key: &str) -> ApiResult<Uuid> {
    key.rsplit('/')
        .next()
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| {
            ApiError::internal(format!("the thread index entry {key:?} names no thread"))
        })
}

/// 16 bytes of a keyed blake3 of `bytes`, in hex: fixed-width, whatever the input.
fn digest(what: &str, bytes: &[u8]) -> String {
    let mut h = blake3::Hasher::new_derive_key(&format!("chronicle langgraph thread index {what}"));
    h.update(bytes);
    h.finalize().as_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The digest of a top-level metadata pair whose value is a scalar, over its canonical JSON (so
/// values a filter finds equal digest equally: `-0.0` is `0.0`).
fn pair_digest(key: &str, value: &Value) -> Option<String> {
    let value = match value {
        Value::Number(n) if n.as_f64() == Some(0.0) && n.is_f64() => "0.0".to_owned(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => value.to_string(),
        Value::Array(_) | Value::Object(_) => return None,
    };
    let canonical = serde_json::to_vec(&(key, value)).ok()?;
    Some(digest("pair", &canonical))
}

/// A time as 16 hex digits that sort as the times do.
fn time_key(t: Timestamp) -> String {
    format!("{:016x}", (t.0 as u64) ^ (1 << 63))
}

fn scopes(t: &ThreadRecord) -> [Scope; 2] {
    [Scope::all(), Scope::owner(&t.owner)]
}

/// Every index entry of `t`.
fn entries(t: &ThreadRecord) -> BTreeSet<String> {
    let id = t.thread_id;
    let (created, updated) = (time_key(t.created_at), time_key(t.updated_at));
    let pairs: Vec<String> = t
        .metadata
        .iter()
        .filter_map(|(k, v)| pair_digest(k, v))
        .collect();
    let mut out = BTreeSet::new();
    for s in scopes(t) {
        let s = &s.0;
        out.insert(format!("{IX}c/{s}/{created}/{id}"));
        out.insert(format!("{IX}u/{s}/{updated}/{id}"));
        out.insert(format!("{IX}i/{s}/{id}"));
        if pairs.len() > PAIRS_INDEXED_MAX {
            out.insert(format!("{IX}w/{s}/{id}"));
        } else {
            for p in &pairs {
                out.insert(format!("{IX}m/{s}/{p}/{updated}/{id}"));
            }
        }
    }
    out
}

/// How many threads `scope` holds.
pub(crate) fn count(store: &Store, scope: &Scope) -> ApiResult<u64> {
    Ok(read_count(store, &count_key(scope))?.0)
}

fn read_count(store: &Store, key: &str) -> ApiResult<(u64, Option<Vec<u8>>)> {
    let bytes = store.record(key)?;
    let n = match &bytes {
        None => 0,
        Some(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ApiError::internal(format!("the count {key:?} does not read")))?,
    };
    Ok((n, bytes))
}

/// Stores `new` as the record of `thread` (`None` deletes it), with its index entries and the
/// counts, in one atomic write. The write expects the record (and each count it changes) to be
/// what it read, and is made again from a fresh read when another write came between: two
/// writes of one thread can never leave the entries of a record that is gone.
pub(crate) fn write(store: &Store, thread: Uuid, new: Option<&ThreadRecord>) -> ApiResult<()> {
    // One writer at a time in this process: every create and delete changes the same counts, so
    // writers racing would mostly refuse each other (and, with enough of them, run out of
    // attempts). The expectations still guard against a writer this lock does not see.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = records::thread_key(thread);
    let new_bytes = new
        .map(serde_json::to_vec)
        .transpose()
        .map_err(ApiError::internal)?;
    for _ in 0..WRITE_ATTEMPTS_MAX {
        let old_bytes = store.record(&key)?;
        let old: Option<ThreadRecord> = old_bytes
            .as_deref()
            .map(|b| records::parse(&key, b))
            .transpose()?;
        let before = old.as_ref().map(entries).unwrap_or_default();
        let after = new.map(entries).unwrap_or_default();
        let mut ops = vec![RecordOp::Expect(key.clone(), old_bytes)];
        ops.extend(before.difference(&after).cloned().map(RecordOp::Delete));
        ops.extend(
            after
                .difference(&before)
                .map(|k| RecordOp::Put(k.clone(), Vec::new())),
        );
        let mut deltas: BTreeMap<Scope, i64> = BTreeMap::new();
        for s in old.as_ref().map(scopes).into_iter().flatten() {
            *deltas.entry(s).or_default() -= 1;
        }
        for s in new.map(scopes).into_iter().flatten() {
            *deltas.entry(s).or_default() += 1;
        }
        for (scope, delta) in deltas.into_iter().filter(|(_, d)| *d != 0) {
            let ck = count_key(&scope);
            let (n, bytes) = read_count(store, &ck)?;
            let n = n.saturating_add_signed(delta);
            ops.push(RecordOp::Expect(ck.clone(), bytes));
            ops.push(RecordOp::Put(ck, n.to_string().into_bytes()));
        }
        ops.push(match &new_bytes {
            Some(b) => RecordOp::Put(key.clone(), b.clone()),
            None => RecordOp::Delete(key.clone()),
        });
        match store.records_apply(&ops) {
            Err(StoreError::RecordConflict { .. }) => continue,
            other => return Ok(other?),
        }
    }
    Err(ApiError::conflict(format!(
        "thread {thread} was changed {WRITE_ATTEMPTS_MAX} times while this write was made: try again"
    )))
}

/// Whether the index is built (at the version this server keeps).
pub(crate) fn built(store: &Store) -> ApiResult<bool> {
    Ok(store.record(&version_key())?.as_deref() == Some(VERSION))
}

/// Builds the index of a store whose thread records predate it (or whose index is of another
/// version), once: every entry there is removed, every thread record's are written, then the
/// counts and the version in one write. A store whose index is built is not read. Run before
/// the server serves, so no thread is written meanwhile; a crash in the middle leaves no
/// version, and the next start builds it again from the start.
pub(crate) fn build(store: &Store) -> ApiResult<usize> {
    if built(store)? {
        return Ok(0);
    }
    loop {
        let page = store.records_range(&RecordRange::prefix(IX, RECORD_BATCH_OPS_MAX))?;
        if page.is_empty() {
            break;
        }
        let ops: Vec<RecordOp> = page.into_iter().map(|(k, _)| RecordOp::Delete(k)).collect();
        store.records_apply(&ops)?;
    }
    let mut counts: BTreeMap<Scope, u64> = BTreeMap::new();
    let mut ops = Vec::new();
    let mut after = None;
    let mut threads = 0;
    loop {
        let page = store.records_range(&RecordRange {
            prefix: records::THREADS.into(),
            after: after.take(),
            reverse: false,
            limit: WALK_PAGE,
        })?;
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        for (k, b) in &page {
            let t: ThreadRecord = records::parse(k, b)?;
            let mine = entries(&t);
            if ops.len() + mine.len() > RECORD_BATCH_OPS_MAX {
                store.records_apply(&std::mem::take(&mut ops))?;
            }
            ops.extend(mine.into_iter().map(|k| RecordOp::Put(k, Vec::new())));
            for s in scopes(&t) {
                *counts.entry(s).or_default() += 1;
            }
            threads += 1;
        }
    }
    store.records_apply(&ops)?;
    // The counts and the version last, so a build cut short is not taken for a built index.
    let mut ops: Vec<RecordOp> = Vec::new();
    for (scope, n) in counts {
        ops.push(RecordOp::Put(count_key(&scope), n.to_string().into_bytes()));
        if ops.len() == RECORD_BATCH_OPS_MAX - 1 {
            store.records_apply(&std::mem::take(&mut ops))?;
        }
    }
    ops.push(RecordOp::Put(version_key(), VERSION.to_vec()));
    store.records_apply(&ops)?;
    Ok(threads)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn time_keys_sort_as_times_do() {
        let times = [i64::MIN, -5, -1, 0, 1, 1_700_000_000_000_000, i64::MAX];
        let keys: Vec<String> = times.iter().map(|t| time_key(Timestamp(*t))).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert!(keys.iter().all(|k| k.len() == 16));
    }

    #[test]
    fn equal_scalars_digest_equally_and_nested_values_are_not_indexed() {
        let d = |v: Value| pair_digest("k", &v);
        assert_eq!(d(json!(-0.0)), d(json!(0.0)));
        assert_ne!(
            d(json!(1)),
            d(json!(1.0)),
            "the filter tells them apart too"
        );
        assert_ne!(d(json!("1")), d(json!(1)));
        assert_ne!(pair_digest("a", &json!("b")), pair_digest("ab", &json!("")));
        assert_eq!(d(json!({"a": 1})), None);
        assert_eq!(d(json!([1])), None);
        let long = d(json!("x".repeat(100_000))).unwrap();
        assert_eq!(long.len(), 32);
    }
}
