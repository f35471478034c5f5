//! The index of runs, sessions, approvals and memory items that lists and recovery read,
//! so that neither the engine's start nor any list reads the whole log.
//!
//! It is kept in the store's index (see `chronicle_store::index`) by following the log: each
//! [`catch_up`] takes in the durable events past the index's watermark, a chunk at a time, each
//! chunk's changes written with the watermark in one atomic write. So after a crash the index is
//! what it was after some chunk, and the next catch-up goes on from there: it always ends where a
//! rebuild from the first event ends ([`rebuild`], which the tests compare it with). A store
//! written before the index existed has a watermark of 0: its first catch-up is the migration,
//! reading the log once (with progress on the log every few seconds). So is an index of an older
//! format (see [`INDEX_VERSION`]): it is cleared and made again from the log, once.
//!
//! Readers catch up before they read (the engine also follows the log in the background), so a
//! list shows at least every event that was durable when it was asked for.

mod derive;
pub(crate) mod keys;
mod read;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use derive::Stored;
pub use keys::INDEX_VERSION;
pub use read::{
    ApprovalAt, MemoryPage, RunScope, RunsPage, approvals, in_scope, memory_items, memory_page,
    pending_approvals, run_facts, runs_page, status_counts,
};
pub(crate) use read::{live_runs, memory_item, sessions_page};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::{self, Store};

/// Events one index write takes in at most.
pub const INDEX_CHUNK_EVENTS: u64 = 512;

/// How often a long catch-up (a migration) says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Takes every durable event past the index's watermark into the index. Returns the new
/// watermark. Two callers racing do the work once: the loser's write is refused as a conflict
/// and it reads the winner's watermark.
pub fn catch_up(store: &Store) -> store::Result<u64> {
    let mut said = Instant::now();
    catch_up_with(store, &mut |done, of| {
        if said.elapsed() >= PROGRESS_EVERY {
            said = Instant::now();
            tracing::info!(done, of, "indexing the log ({}%)", done * 100 / of.max(1));
        }
    })
}

/// Events behind the log's head: what a [`catch_up`] now would take in.
pub fn behind(store: &Store) -> store::Result<u64> {
    Ok(store
        .durable_next_offset()
        .saturating_sub(store.index_watermark()?))
}

/// [`catch_up`], telling `progress` after each chunk how many events it took in of how many.
pub fn catch_up_with(store: &Store, progress: &mut dyn FnMut(u64, u64)) -> store::Result<u64> {
    let _one_at_a_time = store.index_lock();
    let mut at = store.index_watermark()?;
    let end = store.durable_next_offset();
    if at > end {
        // The log lost its tail (a repaired store) after the index took it in: start over.
        tracing::warn!(
            index = at,
            log = end,
            "the index is ahead of the log; rebuilding it"
        );
        at = clear(store, at)?;
    }
    let version = version(store)?;
    if version != Some(INDEX_VERSION) {
        // Entries of another format (an index written before some keys existed lacks them):
        // the index is made again from the log, once, as a store without one is.
        if at > 0 {
            tracing::warn!(
                found = version.unwrap_or(1),
                now = INDEX_VERSION,
                "the index is of another format; rebuilding it"
            );
        }
        at = clear(store, at)?;
    }
    let start = at;
    // Far behind (a store indexed for the first time), larger chunks: fewer rewrites of the
    // same runs' facts, fewer transactions.
    let chunk = match end - at > INDEX_CHUNK_EVENTS * 64 {
        true => INDEX_CHUNK_EVENTS * 16,
        false => INDEX_CHUNK_EVENTS,
    };
    while at < end {
        let to = end.min(at + chunk);
        let mut batch = derive::Batch::new(store, store);
        for env in store.read_range(at, to) {
            match env {
                Ok(env) => batch.take(&env)?,
                // The damaged record is named by every read of its run; the index goes on.
                Err(e) if e.is_damage() => {
                    tracing::error!(error = %e, "a damaged record is left out of the index")
                }
                Err(e) => return Err(e),
            }
        }
        match store.index_apply(&batch.ops(), at, to) {
            Ok(()) => at = to,
            Err(store::Error::IndexConflict { actual, .. }) => at = actual,
            Err(e) => return Err(e),
        }
        progress(at - start, end - start);
    }
    Ok(at)
}

/// Keeps the index caught up in the background: after each move of the durable head, until
/// `stop`.
pub(crate) fn follow(store: &Store, tasks: &TaskTracker, stop: CancellationToken) {
    let store = store.clone();
    let mut head = store.watch_head();
    tasks.spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = head.changed() => if changed.is_err() { return },
            }
            let s = store.clone();
            match tokio::task::spawn_blocking(move || catch_up(&s)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "the index could not take the log in"),
                Err(e) => tracing::error!(error = %e, "indexing the log panicked"),
            }
        }
    });
}

/// The format of the index's entries ([`INDEX_VERSION`] when current; `None` without the entry).
fn version(store: &Store) -> store::Result<Option<u32>> {
    let key = [keys::VERSION];
    Ok(store
        .index_get(&key)?
        .map(|v| v.as_slice().try_into().map_or(0, u32::from_be_bytes)))
}

/// The entry saying the index is of the current format.
fn version_entry() -> (Vec<u8>, Vec<u8>) {
    (vec![keys::VERSION], INDEX_VERSION.to_be_bytes().to_vec())
}

/// Deletes every index entry and marks the empty index as of the current format (an empty index
/// at watermark 0 is one of every format); returns the watermark, now 0.
fn clear(store: &Store, mut at: u64) -> store::Result<u64> {
    loop {
        let page = store.index_range(&store::IndexRange::prefix(b"", 4096))?;
        let mut ops: Vec<_> = page
            .into_iter()
            .map(|(k, _)| store::IndexOp::Delete(k))
            .collect();
        let last = ops.is_empty();
        if last {
            let (k, v) = version_entry();
            ops.push(store::IndexOp::Put(k, v));
        }
        store.index_apply(&ops, at, if last { 0 } else { at })?;
        if last {
            return Ok(0);
        }
        at = store.index_watermark()?;
    }
}

/// The index a rebuild from the first event makes: every entry, by key (what [`catch_up`]'s
/// index must equal).
pub fn rebuild(store: &Store, upto: u64) -> store::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut map = BTreeMap::from([version_entry()]);
    let mut at = 0;
    while at < upto {
        let to = upto.min(at + INDEX_CHUNK_EVENTS);
        let mut batch = derive::Batch::new(&map, store);
        for env in store.read_range(at, to) {
            batch.take(&env?)?;
        }
        for op in batch.ops() {
            match op {
                store::IndexOp::Put(k, v) => map.insert(k, v),
                store::IndexOp::Delete(k) => map.remove(&k),
            };
        }
        at = to;
    }
    Ok(map)
}

/// Every entry of the store's index, by key.
pub fn entries(store: &Store) -> store::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    Ok(store
        .index_range(&store::IndexRange::prefix(b"", usize::MAX))?
        .into_iter()
        .collect())
}
