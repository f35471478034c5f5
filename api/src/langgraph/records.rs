//! What the LangGraph API keeps beside the log, as named records in the store (durable when
//! written): a thread's own record (who made it, when, its metadata, and the turns of another
//! thread it was copied from) and one record per LangGraph run (the Chronicle run it drives,
//! the seq its part of that run starts at, and what it was asked). Everything a thread *is* —
//! its turns, checkpoints, messages and interrupts — is read from the log.

use chronicle_engine::Principal;
use chronicle_engine::store::Store;
use chronicle_schemas::{RunId, Timestamp};
use chronicle_wire::langgraph::MultitaskStrategy;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::thread_index;
use crate::error::{ApiError, ApiResult};

pub(crate) const THREADS: &str = "langgraph/thread/";
const RUNS: &str = "langgraph/run/";

/// A thread made through this API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ThreadRecord {
    pub thread_id: Uuid,
    /// The principal it belongs to (its runs are theirs too).
    pub owner: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub metadata: Map<String, Value>,
    /// The turns it was copied from (`POST /threads/{id}/copy`): each a run of the source
    /// thread and the seq its state was copied at, oldest first. Shown before its own turns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copied: Vec<(RunId, u64)>,
}

/// What a LangGraph run does to its Chronicle run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunKind {
    /// Started it: a new turn (the LangGraph run id is the Chronicle run id).
    Turn,
    /// Decided its pending interrupts.
    Resume,
    /// Ended its waiting turn (`goto: "__end__"`).
    End,
    /// Restored it to an older checkpoint and let it go on (time travel).
    Fork,
}

/// A LangGraph run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub run_id: Uuid,
    pub thread_id: Uuid,
    pub kind: RunKind,
    pub chronicle_run: RunId,
    /// The first seq of the Chronicle run this LangGraph run caused.
    pub from_seq: u64,
    pub created_at: Timestamp,
    pub assistant_id: String,
    pub metadata: Map<String, Value>,
    pub kwargs: Map<String, Value>,
    pub multitask_strategy: MultitaskStrategy,
    /// Cancelled through this API.
    #[serde(default)]
    pub cancelled: bool,
}

pub(crate) fn thread_key(thread: Uuid) -> String {
    format!("{THREADS}{thread}")
}

fn runs_prefix(thread: Uuid) -> String {
    format!("{RUNS}{thread}/")
}

fn run_key(thread: Uuid, run: Uuid) -> String {
    format!("{RUNS}{thread}/{run}")
}

fn put<T: Serialize>(store: &Store, key: &str, value: &T) -> ApiResult<()> {
    let bytes = serde_json::to_vec(value).map_err(ApiError::internal)?;
    store.put_record(key, &bytes)?;
    Ok(())
}

pub(crate) fn parse<T: for<'de> Deserialize<'de>>(key: &str, bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::internal(format!("the record {key} does not read: {e}")))
}

/// Stores `t`, with its entries in the thread index, in one write.
pub(crate) fn put_thread(store: &Store, t: &ThreadRecord) -> ApiResult<()> {
    thread_index::write(store, t.thread_id, Some(t))
}

/// The record of `thread`, whoever owns it.
pub(crate) fn thread(store: &Store, thread: Uuid) -> ApiResult<Option<ThreadRecord>> {
    let key = thread_key(thread);
    store.record(&key)?.map(|b| parse(&key, &b)).transpose()
}

/// Every thread record `who` may see, in id order: a read of every thread record, for the few
/// callers that act on each of them anyway (cancelling all of a principal's runs) and for the
/// full scan search is checked against; search itself reads the index.
pub(crate) fn threads(store: &Store, who: &Principal) -> ApiResult<Vec<ThreadRecord>> {
    store
        .records(THREADS)?
        .into_iter()
        .map(|(k, b)| parse::<ThreadRecord>(&k, &b))
        .filter(|t| t.as_ref().map_or(true, |t| who.may_access(&t.owner)))
        .collect()
}

pub(crate) fn delete_thread(store: &Store, thread: Uuid) -> ApiResult<()> {
    for r in runs(store, thread)? {
        store.delete_record(&run_key(thread, r.run_id))?;
    }
    thread_index::write(store, thread, None)
}

pub(crate) fn put_run(store: &Store, r: &RunRecord) -> ApiResult<()> {
    put(store, &run_key(r.thread_id, r.run_id), r)
}

pub(crate) fn delete_run(store: &Store, r: &RunRecord) -> ApiResult<()> {
    store.delete_record(&run_key(r.thread_id, r.run_id))?;
    Ok(())
}

/// The LangGraph runs of `thread`, oldest first (run ids are UUIDv7: key order is time order).
pub(crate) fn runs(store: &Store, thread: Uuid) -> ApiResult<Vec<RunRecord>> {
    store
        .records(&runs_prefix(thread))?
        .into_iter()
        .map(|(k, b)| parse(&k, &b))
        .collect()
}
