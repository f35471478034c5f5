//! `POST /threads/search` from the thread index ([`super::thread_index`]): the cost of a page
//! depends on the page and the filter, never on how many threads the store holds. What the index
//! cannot order or narrow is bounded (see `docs/decisions/thread-search.md`):
//!
//! - no filter, or a `metadata` filter the index cannot narrow (no top-level scalar value):
//!   walk the scope's entries in the order asked, checking each record, at most
//!   [`THREAD_SEARCH_EXAMINED_MAX`] entries;
//! - a `metadata` filter with a top-level scalar: one such pair's entries (newest updated last),
//!   walked in order for `updated_at`, else read whole (at most the same bound) and sorted;
//! - `ids`: each read directly;
//! - `status`, `values` or a sort by status need each candidate's turns: at most
//!   [`THREAD_SEARCH_LOADED_MAX`] candidates.
//!
//! Past a bound the search is refused with 422 naming it, unless the page is already full: then
//! the page is answered with the matches counted so far as its total and a next offset.

use std::collections::HashSet;

use axum::http::StatusCode;
use axum::response::Response;
use chronicle_engine::Principal as Who;
use chronicle_engine::store::RecordRange;
use chronicle_wire::langgraph::{SortOrder, ThreadSearch, ThreadSort};
use serde_json::{Value, json};
use uuid::Uuid;

use super::filter;
use super::loaded::{load, view};
use super::records::{self, ThreadRecord};
use super::request::{page_limit, page_of, paged};
use super::thread_index::{self, Order, Scope, WALK_PAGE};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Most index entries (and the records they name) one search steps over: what bounds its cost
/// when a filter narrows little, or an offset is deep.
pub const THREAD_SEARCH_EXAMINED_MAX: usize = 10_000;

/// Most threads whose turns one search reads, to filter by `status` or `values` or to sort by
/// status: the index does not hold a thread's state.
pub const THREAD_SEARCH_LOADED_MAX: usize = 1_000;

/// A search, checked.
struct Query<'a> {
    q: &'a ThreadSearch,
    limit: usize,
    offset: usize,
    metadata: Option<Value>,
    values: Option<Value>,
    ids: Option<HashSet<Uuid>>,
    sort: ThreadSort,
    desc: bool,
}

impl<'a> Query<'a> {
    fn of(q: &'a ThreadSearch) -> ApiResult<Self> {
        Ok(Query {
            q,
            limit: page_limit(q.limit)?,
            offset: usize::try_from(q.offset.unwrap_or(0)).unwrap_or(usize::MAX),
            metadata: q
                .metadata
                .as_ref()
                .map(|m| filter::checked("metadata", m))
                .transpose()?,
            values: q
                .values
                .as_ref()
                .map(|v| filter::checked("values", v))
                .transpose()?,
            // An id that is not a UUID names no thread.
            ids: q
                .ids
                .as_ref()
                .map(|ids| ids.iter().filter_map(|i| Uuid::parse_str(i).ok()).collect()),
            sort: q.sort_by.unwrap_or(ThreadSort::UpdatedAt),
            desc: q.sort_order.unwrap_or(SortOrder::Desc) == SortOrder::Desc,
        })
    }

    /// Whether each candidate's turns must be read (a filter or sort on its state).
    fn needs_state(&self) -> bool {
        self.q.status.is_some() || self.values.is_some() || self.sort == ThreadSort::Status
    }

    /// Whether a record passes the filters its record answers.
    fn keeps(&self, who: &Who, r: &ThreadRecord) -> bool {
        who.may_access(&r.owner)
            && self
                .metadata
                .as_ref()
                .is_none_or(|m| filter::contains(&json!(r.metadata), m))
            && self
                .ids
                .as_ref()
                .is_none_or(|ids| ids.contains(&r.thread_id))
    }

    /// The first top-level pair of the metadata filter the index holds (its key and value), and
    /// whether the filter is that pair alone.
    fn indexed_pair(&self) -> Option<(&str, &Value, bool)> {
        let m = self.metadata.as_ref()?.as_object()?;
        let (k, v) = m
            .iter()
            .find(|(_, v)| !matches!(v, Value::Array(_) | Value::Object(_)))?;
        Some((k, v, m.len() == 1))
    }

    fn order(&self) -> Option<Order> {
        match self.sort {
            ThreadSort::CreatedAt => Some(Order::Created),
            ThreadSort::UpdatedAt => Some(Order::Updated),
            ThreadSort::ThreadId => Some(Order::ThreadId),
            ThreadSort::Status => None,
        }
    }
}

fn over(what: String) -> ApiError {
    ApiError::unprocessable(format!(
        "{what}: narrow the search with a `metadata` filter on a top-level key with a string, number, bool or null value, or with `ids`"
    ))
}

/// One page of the threads `who` may see that match `q`.
pub(crate) fn search(st: &AppState, who: &Who, q: &ThreadSearch) -> ApiResult<Response> {
    let q = Query::of(q)?;
    let store = st.engine.store();
    if !thread_index::built(store)? {
        return Err(ApiError::internal(
            "the thread index is not built (its build at start failed: see the server's log)",
        ));
    }
    let scope = Scope::of(who);
    if let Some(ids) = &q.ids {
        if ids.len() > THREAD_SEARCH_EXAMINED_MAX {
            return Err(over(format!(
                "`ids` names {} threads, more than the {THREAD_SEARCH_EXAMINED_MAX} one search reads",
                ids.len()
            )));
        }
        let ids: Vec<Uuid> = ids.iter().copied().collect();
        return finish_bounded(st, who, &q, ids);
    }
    let metadata_filters = q.metadata.as_ref().is_some_and(|m| m != &json!({}));
    let pair = q.indexed_pair();
    if let Some((key, value, alone)) = pair {
        let prefix = thread_index::pair_prefix(&scope, key, value)
            .ok_or_else(|| ApiError::internal("a scalar pair has no index prefix"))?;
        let wide = thread_index::wide_prefix(&scope);
        let no_wide = store
            .records_range(&RecordRange::prefix(wide.clone(), 1))?
            .is_empty();
        if q.sort == ThreadSort::UpdatedAt && !q.needs_state() && no_wide {
            return walk(st, who, &q, &prefix, !alone, None);
        }
        let ids = collect(store, &[prefix, wide], THREAD_SEARCH_EXAMINED_MAX)?.ok_or_else(|| {
            over(format!(
                "more than {THREAD_SEARCH_EXAMINED_MAX} threads have `{key}: {value}`, and this sort or filter cannot be read in the index's order"
            ))
        })?;
        return finish_bounded(st, who, &q, ids);
    }
    match q.order() {
        Some(order) if !q.needs_state() => {
            let prefix = thread_index::order_prefix(&scope, order);
            let total = (!metadata_filters)
                .then(|| thread_index::count(store, &scope))
                .transpose()?;
            walk(st, who, &q, &prefix, metadata_filters, total)
        }
        _ => {
            let n = thread_index::count(store, &scope)?;
            if n > THREAD_SEARCH_LOADED_MAX as u64 {
                return Err(over(format!(
                    "a `status` or `values` filter or a sort by status reads each thread's state, at most {THREAD_SEARCH_LOADED_MAX} threads per search, and {n} could match"
                )));
            }
            let prefix = thread_index::order_prefix(&scope, Order::ThreadId);
            let ids = collect(store, &[prefix], THREAD_SEARCH_LOADED_MAX)?
                .ok_or_else(|| ApiError::internal("the thread count is behind its index"))?;
            finish_bounded(st, who, &q, ids)
        }
    }
}

/// The threads the entries under `prefixes` name, or `None` when they are more than `max`.
fn collect(
    store: &chronicle_engine::store::Store,
    prefixes: &[String],
    max: usize,
) -> ApiResult<Option<Vec<Uuid>>> {
    let mut out = Vec::new();
    for prefix in prefixes {
        let entries =
            store.records_range(&RecordRange::prefix(prefix.clone(), max + 1 - out.len()))?;
        for (k, _) in entries {
            out.push(thread_index::thread_of(&k)?);
        }
        if out.len() > max {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

/// [`finish`] on the records of `ids` that pass the record's filters, when they are few enough
/// to read each one's state where the search needs it.
fn finish_bounded(
    st: &AppState,
    who: &Who,
    q: &Query<'_>,
    mut ids: Vec<Uuid>,
) -> ApiResult<Response> {
    // In id order, as the full scan read them: equal sort keys keep it.
    ids.sort_unstable();
    ids.dedup();
    let mut candidates = Vec::new();
    for id in ids {
        if let Some(r) = records::thread(st.engine.store(), id)?
            && q.keeps(who, &r)
        {
            candidates.push(r);
        }
    }
    if q.needs_state() && candidates.len() > THREAD_SEARCH_LOADED_MAX {
        return Err(over(format!(
            "a `status` or `values` filter or a sort by status reads each thread's state, at most {THREAD_SEARCH_LOADED_MAX} threads per search, and {} match the rest of the search",
            candidates.len()
        )));
    }
    finish(st, who, q, candidates)
}

/// Walks the entries under `prefix` in the order asked, from the start: skips `offset` matches,
/// keeps a page, and counts the matches after it for the total (`total: Some` when it is known,
/// and then the walk ends with the page). With `check`, every entry's record is read and checked
/// against the filters; without, only the page's are (the entries match by themselves).
fn walk(
    st: &AppState,
    who: &Who,
    q: &Query<'_>,
    prefix: &str,
    check: bool,
    total: Option<u64>,
) -> ApiResult<Response> {
    let store = st.engine.store();
    if let Some(n) = total
        && q.offset as u64 >= n
    {
        return Ok(page_of(Vec::<Value>::new(), n as usize, q.offset, q.limit));
    }
    let (mut page, mut matched, mut examined) = (Vec::new(), 0usize, 0usize);
    let mut after: Option<String> = None;
    let exhausted = 'walk: loop {
        let entries = store.records_range(&RecordRange {
            prefix: prefix.to_owned(),
            after: after.take(),
            reverse: q.desc,
            limit: WALK_PAGE,
        })?;
        for (k, _) in &entries {
            if total.is_some() && page.len() == q.limit {
                break 'walk false;
            }
            if examined == THREAD_SEARCH_EXAMINED_MAX {
                break 'walk false;
            }
            examined += 1;
            let in_page = matched >= q.offset && page.len() < q.limit;
            if !check && !in_page {
                matched += 1;
                continue;
            }
            let Some(r) = records::thread(store, thread_index::thread_of(k)?)? else {
                continue;
            };
            if !q.keeps(who, &r) {
                continue;
            }
            if in_page {
                page.push(r);
            }
            matched += 1;
        }
        if entries.len() < WALK_PAGE {
            break true;
        }
        after = entries.last().map(|(k, _)| k.clone());
    };
    let full = page.len() == q.limit;
    if !exhausted && !full {
        return Err(over(format!(
            "this search steps over at most {THREAD_SEARCH_EXAMINED_MAX} threads, and its page (offset {}, limit {}) lies beyond them",
            q.offset, q.limit
        )));
    }
    let found = views(st, who, page)?;
    match total {
        Some(n) => Ok(page_of(found, n as usize, q.offset, q.limit)),
        None if exhausted => Ok(page_of(found, matched, q.offset, q.limit)),
        // Stopped at the bound with a full page: the total counts the matches seen, and a next
        // page is offered (it may be refused, or short).
        None => {
            let mut res = page_of(found, matched, q.offset, q.limit);
            let next = q.offset.saturating_add(q.limit);
            res.headers_mut()
                .insert("x-pagination-next", axum::http::HeaderValue::from(next));
            Ok(res)
        }
    }
}

/// The threads of `records` as LangGraph shows them, skipping any deleted meanwhile.
fn views(
    st: &AppState,
    who: &Who,
    records: Vec<ThreadRecord>,
) -> ApiResult<Vec<chronicle_wire::langgraph::Thread>> {
    let mut found = Vec::new();
    for r in records {
        let l = match load(st, who, r.thread_id) {
            Ok(l) => l,
            // Deleted through Chronicle's own API meanwhile.
            Err(e) if e.status == StatusCode::NOT_FOUND => continue,
            Err(e) => return Err(e),
        };
        found.push(view(st, &l)?);
    }
    Ok(found)
}

/// The search over `candidates` (the records that pass the record's filters, in id order), as
/// the full scan answered it: sorted and paged by what the records say, unless the search needs
/// each thread's state, which is then read for every candidate.
fn finish(
    st: &AppState,
    who: &Who,
    q: &Query<'_>,
    mut candidates: Vec<ThreadRecord>,
) -> ApiResult<Response> {
    if !q.needs_state() {
        candidates.sort_by_key(|r| match q.sort {
            ThreadSort::ThreadId => (r.thread_id.to_string(), r.created_at),
            ThreadSort::CreatedAt => (String::new(), r.created_at),
            _ => (String::new(), r.updated_at),
        });
        if q.desc {
            candidates.reverse();
        }
        let total = candidates.len();
        let page = candidates
            .into_iter()
            .skip(q.offset)
            .take(q.limit)
            .collect();
        return Ok(page_of(views(st, who, page)?, total, q.offset, q.limit));
    }
    let mut found: Vec<_> = views(st, who, candidates)?
        .into_iter()
        .filter(|t| {
            q.values
                .as_ref()
                .is_none_or(|v| filter::contains(&t.values, v))
                && q.q.status.is_none_or(|s| s.as_str() == t.status)
        })
        .collect();
    found.sort_by_key(|t| match q.sort {
        ThreadSort::ThreadId => t.thread_id.clone(),
        ThreadSort::Status => t.status.clone(),
        ThreadSort::CreatedAt => t.created_at.clone(),
        ThreadSort::UpdatedAt => t.updated_at.clone(),
    });
    if q.desc {
        found.reverse();
    }
    Ok(paged(found, q.q.offset, q.limit))
}

/// The search as it was answered before the index: every thread record read, filtered, sorted
/// and paged. Kept as the oracle the indexed search is checked against.
#[doc(hidden)]
pub fn full_scan(st: &AppState, who: &Who, q: &ThreadSearch) -> ApiResult<Response> {
    let q = Query::of(q)?;
    let candidates = records::threads(st.engine.store(), who)?
        .into_iter()
        .filter(|r| q.keeps(who, r))
        .collect();
    finish(st, who, &q, candidates)
}
