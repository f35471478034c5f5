//! Threads: Chronicle sessions, with a record of their own for what a session does not have
//! (metadata, a creation before any turn, the turns a copy starts from). A thread's values,
//! status, checkpoints, history and interrupts are views of its turns' folded states.

use std::collections::{BTreeMap, HashSet};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chronicle_engine::Principal as Who;
use chronicle_schemas::{RunId, SessionId};
use chronicle_wire::langgraph::{
    Checkpoint as LgCheckpoint, HistoryRequest, IfExists, SortOrder, StateAtRequest, StateUpdate,
    StateUpdated, Thread, ThreadCreate, ThreadSearch, ThreadSort, ThreadState, ThreadStatus,
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::filter;
use super::records::{self, ThreadRecord};
use super::views::{self, Point, SUPERVISOR_GRAPH, ThreadRef, Turns};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json as Body, Path, Unread};
use crate::openapi::{
    LgBadBody, LgBadHost, LgBusy, LgForbidden, LgInsufficientStorage, LgInternal,
    LgPayloadTooLarge, LgRequestTimeout, LgThreadNotFound, LgUnauthorized, LgUnsupportedMediaType,
    LgUuid,
};
use crate::state::{AppState, now};
use chronicle_engine::RunState;
use chronicle_wire::langgraph::{Detail, HISTORY_BYTES_MAX};

/// A thread as read now: its record and its turns' states, oldest first (the copied ones
/// first).
pub(crate) struct Loaded {
    pub record: ThreadRecord,
    /// The ids the client gave its turns' human messages.
    pub given: views::GivenIds,
    pub id: String,
    pub assistant_id: String,
    pub turns: Vec<RunState>,
    /// The index of the first turn that is this thread's own (the ones before were copied).
    pub own_from: usize,
}

impl Loaded {
    /// Its turns as the tree LangGraph shows.
    pub fn tree(&self) -> Turns<'_> {
        Turns::new(self.turns.iter().collect(), self.own_from)
    }

    pub fn latest(&self) -> Option<&RunState> {
        self.turns.last()
    }

    /// The latest turn, when it is this thread's own.
    pub fn latest_own(&self) -> Option<&RunState> {
        (self.turns.len() > self.own_from)
            .then(|| self.turns.last())
            .flatten()
    }

    pub fn thread_ref(&self) -> ThreadRef<'_> {
        ThreadRef {
            thread_id: &self.id,
            assistant_id: &self.assistant_id,
            given: &self.given,
        }
    }

    pub fn session(&self) -> SessionId {
        SessionId(self.id.clone())
    }

    pub fn status(&self) -> ThreadStatus {
        views::thread_status(self.latest())
    }
}

/// A thread or run id from a path or a body: a UUID, else 422.
pub(crate) fn uuid_of(what: &str, s: &str) -> ApiResult<Uuid> {
    // The hyphenated form only, as the document's pattern says.
    Some(s)
        .filter(|s| s.len() == 36)
        .ok_or(())
        .and_then(|s| Uuid::parse_str(s).map_err(|_| ()))
        .map_err(|_| ApiError::unprocessable(format!("{what} must be a UUID, got {s:?}")))
}

fn not_found(thread: Uuid) -> ApiError {
    ApiError::not_found(format!("thread {thread} not found"))
}

/// Thread `thread` as `who` may see it: its record (made through this API, or, for a session
/// started through Chronicle's own API, one read from its first run), and its turns.
pub(crate) fn load(st: &AppState, who: &Who, thread: Uuid) -> ApiResult<Loaded> {
    let store = st.engine.store();
    let record = records::thread(store, thread)?;
    if let Some(r) = &record
        && !who.may_access(&r.owner)
    {
        return Err(not_found(thread));
    }
    let session = SessionId(thread.to_string());
    let runs = match st.engine.session_runs_of(who, &session) {
        Ok(runs) => runs,
        Err(chronicle_engine::Error::SessionNotFound(_)) => return Err(not_found(thread)),
        Err(e) => return Err(e.into()),
    };
    let record = match record {
        Some(r) => r,
        None => {
            let first = *runs.first().ok_or_else(|| not_found(thread))?;
            let owner = st.engine.owner(first)?.unwrap_or_default();
            let at = st
                .engine
                .store()
                .read_run(first, 0, 0)
                .next()
                .transpose()?
                .map(|e| e.at)
                .unwrap_or_default();
            ThreadRecord {
                thread_id: thread,
                owner,
                created_at: at,
                updated_at: at,
                metadata: Map::new(),
                copied: Vec::new(),
            }
        }
    };
    let mut turns = Vec::with_capacity(record.copied.len() + runs.len());
    for (run, seq) in &record.copied {
        // A copied turn whose thread was deleted since (or that `who` may no longer see) is
        // gone from the copy too: a copy shares the turns, it does not keep them alive.
        match st.engine.authorize(who, *run) {
            Ok(()) => turns.push(st.engine.state(*run, Some(*seq))?),
            Err(chronicle_engine::Error::RunNotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let own_from = turns.len();
    for run in runs {
        turns.push(st.engine.state(run, None)?);
    }
    let assistant_id = record
        .metadata
        .get("assistant_id")
        .and_then(Value::as_str)
        .map_or_else(
            || views::assistant_id(SUPERVISOR_GRAPH).to_string(),
            str::to_owned,
        );
    let given = records::runs(st.engine.store(), thread)?
        .into_iter()
        .filter(|r| r.kind == records::RunKind::Turn)
        .filter_map(|r| {
            Some((
                r.chronicle_run,
                super::runs::given_message_id(r.kwargs.get("input")?)?,
            ))
        })
        .collect();
    Ok(Loaded {
        given,
        id: thread.to_string(),
        assistant_id,
        record,
        turns,
        own_from,
    })
}

/// The state `p` is shown with: its turn's state now for its head; else its run folded up to
/// the event before the run's next checkpoint (so what happened after it — an interrupt, the
/// answer — belongs to it), or before the restore that ended its branch.
pub(crate) fn state_at(st: &AppState, l: &Loaded, p: Point<'_>) -> ApiResult<RunState> {
    let turn = &l.turns[p.turn];
    if turn.checkpoints.head.as_ref() == Some(&p.checkpoint.checkpoint_id) {
        return Ok(turn.clone());
    }
    let run = turn.run_id.unwrap_or(RunId(Uuid::nil()));
    let next = turn
        .checkpoints
        .checkpoints
        .iter()
        .filter(|c| c.seq > p.checkpoint.seq)
        .min_by_key(|c| c.seq);
    let end = match next {
        Some(c) if c.branch == p.checkpoint.branch => {
            return Ok(st.engine.state(run, Some(c.seq - 1))?);
        }
        Some(c) => c.seq,
        None => turn.next_seq(),
    };
    // A restore came between: `p`'s branch ends before it.
    let restored = st
        .engine
        .store()
        .read_run(run, p.checkpoint.seq + 1, end.saturating_sub(1))
        .find_map(|e| match e {
            Ok(e) if matches!(e.event, chronicle_schemas::Event::RunRestored { .. }) => {
                Some(Ok(e.seq))
            }
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .transpose()?;
    let to = restored.unwrap_or(end).saturating_sub(1);
    Ok(st.engine.state(run, Some(to))?)
}

/// The thread's state at `p` (`turns`: `l.tree()`).
pub(crate) fn state_of(
    st: &AppState,
    l: &Loaded,
    turns: &Turns<'_>,
    p: Point<'_>,
) -> ApiResult<ThreadState> {
    if p.is_input() {
        return Ok(views::input_state(l.thread_ref(), turns, p));
    }
    let at = state_at(st, l, p)?;
    Ok(views::thread_state_at(l.thread_ref(), turns, p, &at))
}

/// A thread with no checkpoint yet: empty values, no next node.
fn empty_state(thread: &str) -> Value {
    json!({
        "values": {}, "next": [], "tasks": [], "metadata": {}, "created_at": null,
        "checkpoint": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": null},
        "parent_checkpoint": null, "interrupts": [],
    })
}

/// The thread as LangGraph shows it.
pub(crate) fn view(st: &AppState, l: &Loaded) -> ApiResult<Thread> {
    let turns = l.tree();
    let mut updated = l.record.updated_at;
    let (values, interrupts) = match views::head(&turns) {
        Some(p) => {
            updated = updated.max(p.checkpoint.at);
            let s = state_of(st, l, &turns, p)?;
            let interrupts: BTreeMap<_, _> = s
                .tasks
                .into_iter()
                .filter(|t| !t.interrupts.is_empty())
                .map(|t| (t.id, t.interrupts))
                .collect();
            (s.values, interrupts)
        }
        None => (Value::Null, BTreeMap::new()),
    };
    Ok(Thread {
        thread_id: l.id.clone(),
        created_at: l.record.created_at.to_string(),
        updated_at: updated.to_string(),
        state_updated_at: updated.to_string(),
        metadata: l.record.metadata.clone(),
        status: l.status().as_str().to_owned(),
        config: Map::new(),
        values,
        error: None,
        interrupts,
    })
}

/// A thread of `who`'s that is not written yet (its first run writes it): no turn, no metadata.
pub(crate) fn fresh(who: &Who, thread: Uuid) -> Loaded {
    Loaded {
        record: new_record(who, thread, Map::new()),
        given: views::GivenIds::new(),
        id: thread.to_string(),
        assistant_id: views::assistant_id(SUPERVISOR_GRAPH).to_string(),
        turns: Vec::new(),
        own_from: 0,
    }
}

/// A new thread record of `who`'s.
pub(crate) fn new_record(who: &Who, thread: Uuid, metadata: Map<String, Value>) -> ThreadRecord {
    let at = now();
    ThreadRecord {
        thread_id: thread,
        owner: who.name.clone(),
        created_at: at,
        updated_at: at,
        metadata,
        copied: Vec::new(),
    }
}

/// Is the id taken, by a thread record or by a session of any principal's?
pub(crate) fn taken(st: &AppState, thread: Uuid) -> ApiResult<bool> {
    let store = st.engine.store();
    Ok(records::thread(store, thread)?.is_some()
        || !store
            .session_runs(&SessionId(thread.to_string()))?
            .is_empty())
}

#[utoipa::path(post, path = "/threads", operation_id = "create_thread", tag = "langgraph", request_body = ThreadCreate, security(("bearer" = [])),
    responses(
        (status = 200, description = "The new thread (idle, no values yet); with `if_exists: do_nothing`, the existing one", body = Thread),
        (status = 400, response = LgBadBody),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 408, response = LgRequestTimeout), (status = 413, response = LgPayloadTooLarge),
        (status = 415, response = LgUnsupportedMediaType),
        (status = 409, description = "A thread with this id exists", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, or a field of the wrong type", body = Detail),
        (status = 507, response = LgInsufficientStorage),
    ))]
pub(crate) async fn create(
    State(st): State<AppState>,
    Principal(who): Principal,
    Body(req): Body<ThreadCreate>,
) -> ApiResult<Json<Thread>> {
    let thread = match &req.thread_id {
        Some(id) => uuid_of("thread_id", id)?,
        None => Uuid::new_v4(),
    };
    if taken(&st, thread)? {
        return match (req.if_exists, load(&st, &who, thread)) {
            (Some(IfExists::DoNothing), Ok(l)) => Ok(Json(view(&st, &l)?)),
            _ => Err(ApiError::conflict(format!(
                "thread {thread} already exists"
            ))),
        };
    }
    // The session is claimed first, so nobody else's first run can take the thread over before
    // its owner's (and of two creators of one id, one wins).
    match st
        .engine
        .claim_session(&who, &SessionId(thread.to_string()))
    {
        Err(chronicle_engine::Error::SessionNotFound(_)) => {
            return Err(ApiError::conflict(format!(
                "thread {thread} already exists"
            )));
        }
        other => other?,
    }
    let record = new_record(&who, thread, req.metadata.unwrap_or_default());
    records::put_thread(st.engine.store(), &record)?;
    let l = load(&st, &who, thread)?;
    Ok(Json(view(&st, &l)?))
}

#[utoipa::path(get, path = "/threads/{thread_id}", operation_id = "get_thread", tag = "langgraph", security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 200, description = "The thread: its status, metadata, values (the latest turn's state with the conversation's `messages`) and pending interrupts", body = Thread),
        (status = 400, response = LgBadHost),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 404, response = LgThreadNotFound),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
    ))]
pub(crate) async fn get(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
) -> ApiResult<Json<Thread>> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    Ok(Json(view(&st, &l)?))
}

#[utoipa::path(delete, path = "/threads/{thread_id}", operation_id = "delete_thread", tag = "langgraph", security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 204, description = "Deleted: its session too (a run still going is cancelled; the events stay in the log)"),
        (status = 400, response = LgBadHost),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 404, response = LgThreadNotFound),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
        (status = 507, response = LgInsufficientStorage),
    ))]
pub(crate) async fn delete(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
    _body: Unread,
) -> ApiResult<StatusCode> {
    let thread = uuid_of("thread_id", &thread)?;
    let l = load(&st, &who, thread)?;
    if l.turns.len() > l.own_from {
        st.engine.delete_session(&who, &l.session()).await?;
    }
    records::delete_thread(st.engine.store(), thread)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/threads/search", operation_id = "search_threads", tag = "langgraph", request_body = ThreadSearch, security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the caller's threads that match every filter, newest `updated_at` first by default", body = Vec<Thread>,
            headers(
                ("X-Pagination-Total" = u64, description = "How many threads match, over all pages"),
                ("X-Pagination-Next" = u64, description = "The `offset` of the next page, when there is one"),
            )),
        (status = 400, response = LgBadBody),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 408, response = LgRequestTimeout), (status = 413, response = LgPayloadTooLarge),
        (status = 415, response = LgUnsupportedMediaType),
        (status = 422, description = "A field of the wrong type, a `limit` outside 1..=1000, or a `metadata` or `values` filter over its bounds (256 JSON values, 8 levels, 16 KiB of keys and strings)", body = Detail),
    ))]
pub(crate) async fn search(
    State(st): State<AppState>,
    Principal(who): Principal,
    Body(q): Body<ThreadSearch>,
) -> ApiResult<Response> {
    // It reads and folds threads and matches filters: off the async workers.
    tokio::task::spawn_blocking(move || search_threads(&st, &who, &q))
        .await
        .map_err(ApiError::internal)?
}

fn search_threads(st: &AppState, who: &Who, q: &ThreadSearch) -> ApiResult<Response> {
    let limit = super::page_limit(q.limit)?;
    let metadata = q
        .metadata
        .as_ref()
        .map(|m| filter::checked("metadata", m))
        .transpose()?;
    let values = q
        .values
        .as_ref()
        .map(|v| filter::checked("values", v))
        .transpose()?;
    // An id that is not a UUID names no thread.
    let ids: Option<HashSet<Uuid>> = q
        .ids
        .as_ref()
        .map(|ids| ids.iter().filter_map(|i| Uuid::parse_str(i).ok()).collect());
    let sort = q.sort_by.unwrap_or(ThreadSort::UpdatedAt);
    let desc = q.sort_order.unwrap_or(SortOrder::Desc) == SortOrder::Desc;
    // What the records say is filtered (and, when it can be, sorted and paged) before any
    // thread's turns are read.
    let mut candidates: Vec<ThreadRecord> = records::threads(st.engine.store(), who)?
        .into_iter()
        .filter(|r| {
            metadata
                .as_ref()
                .is_none_or(|m| filter::contains(&json!(r.metadata), m))
                && ids.as_ref().is_none_or(|ids| ids.contains(&r.thread_id))
        })
        .collect();
    let by_record = q.status.is_none() && values.is_none() && sort != ThreadSort::Status;
    let (total, offset) = if by_record {
        candidates.sort_by_key(|r| match sort {
            ThreadSort::ThreadId => (r.thread_id.to_string(), r.created_at),
            ThreadSort::CreatedAt => (String::new(), r.created_at),
            _ => (String::new(), r.updated_at),
        });
        if desc {
            candidates.reverse();
        }
        let total = candidates.len();
        let offset = usize::try_from(q.offset.unwrap_or(0)).unwrap_or(usize::MAX);
        candidates = candidates.into_iter().skip(offset).take(limit).collect();
        (Some(total), offset)
    } else {
        (None, 0)
    };
    let mut found = Vec::new();
    for r in candidates {
        let l = match load(st, who, r.thread_id) {
            Ok(l) => l,
            // Deleted through Chronicle's own API meanwhile.
            Err(e) if e.status == StatusCode::NOT_FOUND => continue,
            Err(e) => return Err(e),
        };
        let t = view(st, &l)?;
        let keep = values
            .as_ref()
            .is_none_or(|v| filter::contains(&t.values, v))
            && q.status.is_none_or(|s| s.as_str() == t.status);
        if keep {
            found.push(t);
        }
    }
    if let Some(total) = total {
        return Ok(super::page_of(found, total, offset, limit));
    }
    found.sort_by_key(|t| match sort {
        ThreadSort::ThreadId => t.thread_id.clone(),
        ThreadSort::Status => t.status.clone(),
        ThreadSort::CreatedAt => t.created_at.clone(),
        ThreadSort::UpdatedAt => t.updated_at.clone(),
    });
    if desc {
        found.reverse();
    }
    Ok(super::paged(found, q.offset, limit))
}

#[utoipa::path(get, path = "/threads/{thread_id}/state", operation_id = "get_thread_state", tag = "langgraph", security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 200, description = "The thread's state at its head (a `ThreadState`; for a thread with no turn yet, empty values and a `null` checkpoint id)", body = serde_json::Value),
        (status = 400, response = LgBadHost),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 404, response = LgThreadNotFound),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
    ))]
pub(crate) async fn state(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
) -> ApiResult<Json<Value>> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    let turns = l.tree();
    Ok(Json(match views::head(&turns) {
        Some(p) => json!(state_of(&st, &l, &turns, p)?),
        None => empty_state(&l.id),
    }))
}

/// [`point`], where an id that is not a UUID is not found either (it came in a body field that
/// may hold any JSON).
fn known_point<'a>(l: &Loaded, turns: &Turns<'a>, id: &str) -> ApiResult<Point<'a>> {
    match uuid_of("checkpoint_id", id) {
        Ok(_) => point(l, turns, id),
        Err(_) => Err(ApiError::not_found(format!(
            "checkpoint {id:?} not found in thread {}",
            l.id
        ))),
    }
}

/// The point of `l` named by checkpoint id `id` (a UUID), else 404.
pub(crate) fn point<'a>(l: &Loaded, turns: &Turns<'a>, id: &str) -> ApiResult<Point<'a>> {
    let uuid = uuid_of("checkpoint_id", id)?;
    views::find(turns, uuid)
        .ok_or_else(|| ApiError::not_found(format!("checkpoint {id} not found in thread {}", l.id)))
}

#[utoipa::path(get, path = "/threads/{thread_id}/state/{checkpoint_id}", operation_id = "get_thread_state_at_checkpoint", tag = "langgraph", security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID"), ("checkpoint_id" = inline(LgUuid), Path, description = "A checkpoint of the thread: a UUID")),
    responses(
        (status = 200, description = "The thread's state at the checkpoint (a `ThreadState`; for a thread with no checkpoint yet, its empty state with a `null` checkpoint id)", body = serde_json::Value),
        (status = 400, response = LgBadHost),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 404, description = "No thread has this id, or the thread has checkpoints and none with this id", body = Detail),
        (status = 422, description = "A `thread_id` or `checkpoint_id` that is not a UUID", body = Detail),
    ))]
pub(crate) async fn state_at_checkpoint(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path((thread, checkpoint)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    state_at_id(&st, &l, &checkpoint).map(Json)
}

#[utoipa::path(post, path = "/threads/{thread_id}/state/checkpoint", operation_id = "post_thread_state_at_checkpoint", tag = "langgraph", request_body = StateAtRequest, security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 200, description = "The thread's state at the checkpoint (a `ThreadState`; for a thread with no checkpoint yet, its empty state with a `null` checkpoint id)", body = serde_json::Value),
        (status = 400, response = LgBadBody),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 408, response = LgRequestTimeout), (status = 413, response = LgPayloadTooLarge),
        (status = 415, response = LgUnsupportedMediaType),
        (status = 404, description = "No thread has this id, or the thread has checkpoints and none with this id", body = Detail),
        (status = 422, description = "A `thread_id` or checkpoint id that is not a UUID, or a `checkpoint` without `checkpoint_id`", body = Detail),
    ))]
pub(crate) async fn state_at_checkpoint_post(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
    Body(req): Body<StateAtRequest>,
) -> ApiResult<Json<Value>> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    state_at_id(&st, &l, &req.checkpoint.checkpoint_id).map(Json)
}

/// The thread's state at checkpoint `id`; a thread with no checkpoint yet is at its empty
/// state whatever the id (as on a LangGraph server), one with checkpoints answers 404 for an
/// id that is none of them.
fn state_at_id(st: &AppState, l: &Loaded, id: &str) -> ApiResult<Value> {
    uuid_of("checkpoint_id", id)?;
    let turns = l.tree();
    if views::head(&turns).is_none() {
        return Ok(empty_state(&l.id));
    }
    Ok(json!(state_of(st, l, &turns, point(l, &turns, id)?)?))
}

/// A checkpoint id given as a string, `{checkpoint_id}` or `{configurable: {checkpoint_id}}`.
pub(crate) fn checkpoint_id_in(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => match m.get("checkpoint_id") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => m.get("configurable").and_then(checkpoint_id_in),
        },
        _ => None,
    }
}

#[utoipa::path(post, path = "/threads/{thread_id}/history", operation_id = "get_thread_history", tag = "langgraph", request_body = HistoryRequest, security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 200, description = "The thread's states at the checkpoints a client is shown (each turn's input, the end of each of its branches, where a restore parted them, and value updates), all branches, newest first; at most `limit` states and 4 MiB of JSON (at least one state): page on with `before`", body = Vec<ThreadState>),
        (status = 400, response = LgBadBody),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 408, response = LgRequestTimeout), (status = 413, response = LgPayloadTooLarge),
        (status = 415, response = LgUnsupportedMediaType),
        (status = 404, description = "No thread has this id, or `before` names no checkpoint of it", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, a `limit` outside 1..=1000, a `metadata` filter over its bounds (256 JSON values, 8 levels, 16 KiB of keys and strings), or a `before` that names no checkpoint id", body = Detail),
    ))]
pub(crate) async fn history(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
    Body(req): Body<HistoryRequest>,
) -> ApiResult<Response> {
    // It folds a run once per state shown: off the async workers.
    tokio::task::spawn_blocking(move || history_page(&st, &who, &thread, req))
        .await
        .map_err(ApiError::internal)?
}

/// One history page as JSON: at most `limit` states and [`HISTORY_BYTES_MAX`] bytes (but always
/// one state when there is one), each state made and written out before the next is made.
fn history_page(
    st: &AppState,
    who: &Who,
    thread: &str,
    req: HistoryRequest,
) -> ApiResult<Response> {
    let limit = super::page_limit(req.limit)?;
    let want = req
        .metadata
        .as_ref()
        .map(|m| filter::checked("metadata", m))
        .transpose()?;
    let l = load(st, who, uuid_of("thread_id", thread)?)?;
    let turns = l.tree();
    // A `before` that names no checkpoint id (`null`, `{}`) sets no bound.
    let before = match req.before.as_ref().and_then(checkpoint_id_in) {
        None => None,
        Some(id) => Some(known_point(&l, &turns, &id)?.uuid(&turns)),
    };
    let points = views::history(&turns, before).unwrap_or_default();
    let mut body = b"[".to_vec();
    let mut shown = 0;
    for p in points {
        let s = state_of(st, &l, &turns, p)?;
        if want
            .as_ref()
            .is_some_and(|w| !filter::contains(&json!(s.metadata), w))
        {
            continue;
        }
        let json = serde_json::to_vec(&s).map_err(ApiError::internal)?;
        if shown > 0 && body.len() + 1 + json.len() + 1 > HISTORY_BYTES_MAX {
            break;
        }
        if shown > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&json);
        shown += 1;
        if shown == limit {
            break;
        }
    }
    body.push(b']');
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}

#[utoipa::path(post, path = "/threads/{thread_id}/copy", operation_id = "copy_thread", tag = "langgraph", security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 200, description = "A new thread with the same metadata that starts from this one's turns (shown before its own)", body = Thread),
        (status = 400, response = LgBadHost),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 404, response = LgThreadNotFound),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
        (status = 507, response = LgInsufficientStorage),
    ))]
pub(crate) async fn copy(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
    _body: Unread,
) -> ApiResult<Json<Thread>> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    // The conversation as its head shows it: the turns of the head's branch (a copy's turns
    // follow one another).
    let turns = l.tree();
    let branch = match turns.states().len().checked_sub(1) {
        Some(newest) => turns.chain(newest),
        None => Vec::new(),
    };
    let copied = branch
        .into_iter()
        .filter_map(|t| {
            let s = turns.states()[t];
            Some((s.run_id?, s.last_seq?))
        })
        .collect();
    let mut record = new_record(&who, Uuid::new_v4(), l.record.metadata.clone());
    record.copied = copied;
    records::put_thread(st.engine.store(), &record)?;
    let copy = load(&st, &who, record.thread_id)?;
    Ok(Json(view(&st, &copy)?))
}

#[utoipa::path(post, path = "/threads/{thread_id}/state", operation_id = "update_thread_state", tag = "langgraph", request_body = StateUpdate, security(("bearer" = [])),
    params(("thread_id" = inline(LgUuid), Path, description = "The thread: a UUID")),
    responses(
        (status = 200, description = "The values are set on the thread's latest turn, recorded as an event by the caller with a new checkpoint (`source: update`)", body = StateUpdated),
        (status = 400, response = LgBadBody),
        (status = 401, response = LgUnauthorized), (status = 403, response = LgForbidden),
        (status = 408, response = LgRequestTimeout), (status = 413, response = LgPayloadTooLarge),
        (status = 415, response = LgUnsupportedMediaType),
        (status = 404, response = LgThreadNotFound),
        (status = 409, description = "The thread has no turn yet, its latest turn is running, a `checkpoint` that is not the head, or `values` naming a key of the workflow's own state (commands change those)", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, empty `values`, values that would make the thread's values more than 256 KiB of JSON in all, or an `as_node` that is not a node of the graph", body = Detail),
        (status = 500, response = LgInternal), (status = 503, response = LgBusy),
        (status = 507, response = LgInsufficientStorage),
    ))]
pub(crate) async fn update_state(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
    Body(req): Body<StateUpdate>,
) -> ApiResult<Json<StateUpdated>> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    let values = req.values;
    if let Some(node) = &req.as_node
        && !super::assistants::SUPERVISOR_NODES.contains(&node.as_str())
    {
        return Err(ApiError::unprocessable(format!(
            "as_node must be a node of the graph ({}), got {node:?}",
            super::assistants::SUPERVISOR_NODES.join(", ")
        )));
    }
    let turns = l.tree();
    let named = req
        .checkpoint
        .as_ref()
        .and_then(checkpoint_id_in)
        .or(req.checkpoint_id.clone());
    if let Some(id) = named
        && Some(known_point(&l, &turns, &id)?) != views::head(&turns)
    {
        return Err(ApiError::conflict(
            "updates go to the thread's head: the checkpoint named is an older one",
        ));
    }
    let latest = l.latest_own().ok_or_else(|| {
        ApiError::conflict(format!(
            "thread {} has no turn yet: start a run first",
            l.id
        ))
    })?;
    let run = latest.run_id.unwrap_or(RunId(Uuid::nil()));
    let made = st
        .engine
        .update_values(run, values, req.as_node, &who)
        .await?;
    let now_state = st.engine.state(run, None)?;
    let checkpoint = now_state.checkpoints.get(&made).ok_or_else(|| {
        ApiError::internal(format!("checkpoint {made} of run {run} is not in its list"))
    })?;
    Ok(Json(StateUpdated {
        checkpoint: LgCheckpoint {
            checkpoint_id: views::checkpoint_uuid(run, &checkpoint.checkpoint_id).to_string(),
            thread_id: l.id.clone(),
            checkpoint_ns: String::new(),
        },
    }))
}
