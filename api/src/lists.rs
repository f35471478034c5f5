//! The lists the JSON routes and the console both answer from, so the two cannot differ: a page
//! of runs ([`page`], also how `chronicle runs` lists a data directory) and the approvals inbox
//! ([`inbox_items`]).

use chronicle_engine::Engine;
use chronicle_engine::index::{self, RunScope};
use chronicle_engine::store::{self, Store};
use chronicle_projections::{Approvals, RunFacts};
use chronicle_schemas::{ApprovalStatus, RunId, SessionId, Timestamp};
use chronicle_wire::{
    ApprovalView, DamagedRun, InboxItem, Order, RUNS_PAGE_MAX, RunList, RunSummary, RunsQuery,
};

use crate::error::{ApiError, ApiResult};

/// The most items one inbox answer lists (the oldest ones; `truncated` says if there were more).
pub const INBOX_ITEMS_MAX: usize = 1_000;

/// Why a page cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("limit must be 1..={RUNS_PAGE_MAX}, got {0}")]
    Limit(usize),
    #[error("after names run {0}, which is not among the listed runs")]
    UnknownAfter(RunId),
    #[error(transparent)]
    Store(#[from] store::Error),
}

impl From<PageError> for ApiError {
    fn from(e: PageError) -> Self {
        match e {
            PageError::Store(e) => e.into(),
            // A cursor naming no run the caller may see, as any unknown run: 404.
            e @ PageError::UnknownAfter(_) => ApiError::not_found(e.to_string()),
            e @ PageError::Limit(_) => ApiError::bad_request(e.to_string()),
        }
    }
}

/// One page of the runs `query` asks for in `scope`: it looks at up to `limit` runs after `after`
/// (by creation time, then id; newest first with `order=desc`) and lists those that match its status; `next` says where the next
/// page starts. Each run shows as of its newest durable event, as every read does. A run whose
/// records are damaged is named in `damaged` and the others are listed; a store that cannot be
/// read at all (an I/O error) fails the page. The runs come from the index (caught up first), so
/// a page costs what its runs cost, however many the store holds.
pub fn page(
    store: &Store,
    query: &RunsQuery,
    scope: RunScope<'_>,
    on_run: &mut dyn FnMut(),
) -> Result<RunList, PageError> {
    let limit = query.limit.unwrap_or(RUNS_PAGE_MAX);
    if limit == 0 || limit > RUNS_PAGE_MAX {
        return Err(PageError::Limit(limit));
    }
    index::catch_up(store)?;
    let newest_first = query.order == Some(Order::Desc);
    let (looked_at, more) = match &query.session_id {
        Some(s) => {
            let session = SessionId(s.clone());
            session_page(store, &session, query.after, scope, newest_first, limit)?
        }
        None => {
            let after = match query.after {
                None => None,
                Some(after) => Some(
                    index::run_facts(store, after)?
                        .filter(|f| index::in_scope(f, scope))
                        .ok_or(PageError::UnknownAfter(after))?,
                ),
            };
            let page = index::runs_page(store, scope, after.as_ref(), newest_first, limit)?;
            (page.runs, page.more)
        }
    };
    let mut runs = Vec::new();
    let mut damaged = Vec::new();
    for facts in &looked_at {
        let run = facts.run_id;
        let last_seq = store.run_head(run)?.map_or(facts.last_seq, |h| h.last_seq);
        let durable = store.durable_seq(run)?.unwrap_or(0).min(last_seq);
        let state = match store.state_at(run, durable) {
            Ok(state) => state,
            Err(e) if e.is_damage() => {
                tracing::error!(run = %run, error = %e, "a listed run is damaged");
                damaged.push(DamagedRun {
                    run_id: run,
                    session_id: facts.session_id.clone(),
                    created_at: facts.created_at,
                    error: e.to_string(),
                });
                on_run();
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        on_run();
        let sup = state.supervisor;
        if query.status.is_some_and(|s| s != sup.run_status) {
            continue;
        }
        runs.push(RunSummary {
            run_id: run,
            session_id: facts.session_id.clone(),
            status: sup.run_status,
            created_at: facts.created_at,
            updated_at: facts.updated_at,
            last_seq: durable,
            query: sup.query,
            parent: sup.parent,
            owner: sup.owner,
        });
    }
    let next = more.then(|| looked_at.last().map(|f| f.run_id)).flatten();
    Ok(RunList {
        runs,
        next,
        damaged,
    })
}

/// Up to `limit` runs of one session in `scope` after `after`, oldest first (or newest first),
/// and whether more follow (a session's runs are read from the session's own index).
fn session_page(
    store: &Store,
    session: &SessionId,
    after: Option<RunId>,
    scope: RunScope<'_>,
    newest_first: bool,
    limit: usize,
) -> Result<(Vec<RunFacts>, bool), PageError> {
    let mut runs = Vec::new();
    for run in store.session_runs(session)? {
        if let Some(f) = index::run_facts(store, run)?.filter(|f| index::in_scope(f, scope)) {
            runs.push(f);
        }
    }
    runs.sort_by_key(|f| (f.created_at, f.run_id));
    if newest_first {
        runs.reverse();
    }
    let start = match after {
        None => 0,
        Some(after) => {
            runs.iter()
                .position(|f| f.run_id == after)
                .ok_or(PageError::UnknownAfter(after))?
                + 1
        }
    };
    let end = start.saturating_add(limit).min(runs.len());
    let more = end < runs.len();
    Ok((runs.drain(start..end).collect(), more))
}

/// Up to `limit` approvals of `status` of the runs `who` may see, oldest request first (then by
/// run and seq), read from the index, which keeps them by status and request time: the page
/// costs what its items cost. And whether more are there.
pub(crate) fn inbox_items(
    engine: &Engine,
    who: &chronicle_engine::Principal,
    status: ApprovalStatus,
    before: Option<Timestamp>,
    now: Timestamp,
    limit: usize,
) -> ApiResult<(Vec<InboxItem>, bool)> {
    let (listed, more) = engine.approvals(who, status, before, limit)?;
    let mut out = Vec::with_capacity(listed.len());
    for (_, run, seq) in listed {
        let item = match status {
            ApprovalStatus::Pending => pending_item(engine, run, seq, now)?,
            _ => settled_item(engine, run, seq, status)?,
        };
        out.extend(item);
    }
    Ok((out, more))
}

/// A pending approval from its request alone (the one event at `seq`) and its run's facts in the
/// index: a pending approval is what its request made, so no run is folded.
fn pending_item(
    engine: &Engine,
    run: RunId,
    seq: u64,
    now: Timestamp,
) -> ApiResult<Option<InboxItem>> {
    let store = engine.store();
    let Some(facts) = index::run_facts(store, run)? else {
        return Ok(None);
    };
    let Some(request) = store.read_run(run, seq, seq).next().transpose()? else {
        return Ok(None);
    };
    let Some(a) = Approvals::requested(&request) else {
        return Ok(None);
    };
    Ok(Some(InboxItem {
        waiting_ms: Some((now.as_micros() - a.created_at.as_micros()).max(0) / 1000),
        approval: ApprovalView::new(run, a),
        session_id: facts.session_id,
        user_id: facts.user_id,
    }))
}

/// A settled approval as its run's state has it (a decision, an expiry or a restore made it).
fn settled_item(
    engine: &Engine,
    run: RunId,
    seq: u64,
    status: ApprovalStatus,
) -> ApiResult<Option<InboxItem>> {
    let state = engine.state(run, None)?;
    let Some(a) = state
        .approvals
        .list
        .iter()
        .find(|a| a.requested_seq == seq && a.status == status)
    else {
        return Ok(None);
    };
    Ok(Some(InboxItem {
        approval: ApprovalView::new(run, a.clone()),
        session_id: state.supervisor.session_id.clone(),
        user_id: state.supervisor.user_id.clone(),
        waiting_ms: None,
    }))
}

/// An approval status as a query names it, else 400.
pub(crate) fn parse_status(s: &str) -> ApiResult<ApprovalStatus> {
    ApprovalStatus::ALL
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "status must be pending, approved, rejected, edited, expired or cancelled, got {s:?}"
            ))
        })
}
