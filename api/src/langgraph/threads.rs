//! The threads' routes. Threads are Chronicle sessions, with a record of their own for what a
//! session does not have (metadata, a creation before any turn, the turns a copy starts from); a
//! thread's values, status, checkpoints, history and interrupts are views of its turns' folded
//! states (see [`super::loaded`]).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chronicle_engine::Principal as Who;
use chronicle_schemas::{RunId, SessionId};
use chronicle_wire::langgraph::{
    Checkpoint as LgCheckpoint, HistoryRequest, IfExists, StateAtRequest, StateUpdate,
    StateUpdated, Thread, ThreadCreate, ThreadSearch, ThreadState,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::filter;
use super::graphs::SUPERVISOR_NODES;
use super::loaded::{
    Loaded, checkpoint_id_in, empty_state, load, new_record, point, state_of, taken, uuid_of, view,
};
use super::records;
use super::request::{ThreadPath, page_limit};
use super::thread_search;
use super::views::{self, Point, Turns};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{CheckpointIdPath, Json as Body, LgUuid, Unread};
use crate::refusals::{LgReadError, LgThreadReadError, LgThreadWriteError, LgWriteError};
use crate::state::AppState;
use chronicle_wire::langgraph::{Detail, HISTORY_BYTES_MAX};

#[utoipa::path(post, path = "/threads", operation_id = "create_thread", tag = "langgraph", request_body = ThreadCreate, security(("bearer" = [])),
    responses(
        (status = 200, description = "The new thread (idle, no values yet); with `if_exists: do_nothing`, the existing one", body = Thread),
        (status = 409, description = "A thread with this id exists", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, or a field of the wrong type", body = Detail),
        LgWriteError,
    ))]
pub(crate) async fn create(
    State(st): State<AppState>,
    Principal(who): Principal,
    Body(req): Body<ThreadCreate>,
) -> Result<Json<Thread>, LgWriteError> {
    let thread = match &req.thread_id {
        Some(id) => uuid_of("thread_id", id)?,
        None => Uuid::new_v4(),
    };
    if taken(&st, thread)? {
        return match (req.if_exists, load(&st, &who, thread)) {
            (Some(IfExists::DoNothing), Ok(l)) => Ok(Json(view(&st, &l)?)),
            _ => Err(ApiError::conflict(format!("thread {thread} already exists")).into()),
        };
    }
    // The session is claimed first, so nobody else's first run can take the thread over before
    // its owner's (and of two creators of one id, one wins).
    match st
        .engine
        .claim_session(&who, &SessionId(thread.to_string()))
    {
        Err(chronicle_engine::Error::SessionNotFound(_)) => {
            return Err(ApiError::conflict(format!("thread {thread} already exists")).into());
        }
        other => other?,
    }
    let record = new_record(&who, thread, req.metadata.unwrap_or_default());
    records::put_thread(st.engine.store(), &record)?;
    let l = load(&st, &who, thread)?;
    Ok(Json(view(&st, &l)?))
}

#[utoipa::path(get, path = "/threads/{thread_id}", operation_id = "get_thread", tag = "langgraph", security(("bearer" = [])),
    params(ThreadPath),
    responses(
        (status = 200, description = "The thread: its status, metadata, values (the latest turn's state with the conversation's `messages`) and pending interrupts", body = Thread),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
        LgThreadReadError,
    ))]
pub(crate) async fn get(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
) -> Result<Json<Thread>, LgThreadReadError> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    Ok(Json(view(&st, &l)?))
}

#[utoipa::path(delete, path = "/threads/{thread_id}", operation_id = "delete_thread", tag = "langgraph", security(("bearer" = [])),
    params(ThreadPath),
    responses(
        (status = 204, description = "Deleted: its session too (a run still going is cancelled; the events stay in the log)"),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
        LgThreadWriteError,
    ))]
pub(crate) async fn delete(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    _body: Unread,
) -> Result<StatusCode, LgThreadWriteError> {
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
                ("X-Pagination-Total" = u64, description = "How many threads match, over all pages (when the search stopped at its bound of 10000 threads stepped over with its page full: the matches counted so far)"),
                ("X-Pagination-Next" = u64, description = "The `offset` of the next page, when there is one"),
            )),
        (status = 422, description = "A field of the wrong type, a `limit` outside 1..=1000, a `metadata` or `values` filter over its bounds (256 JSON values, 8 levels, 16 KiB of keys and strings), or a search over its bounds: one that steps over more than 10000 threads before its page is full, or reads the state of more than 1000 (a `status` or `values` filter, a sort by status); a `metadata` filter on a top-level key with a string, number, bool or null value, or `ids`, narrows it", body = Detail),
        LgReadError,
    ))]
pub(crate) async fn search(
    State(st): State<AppState>,
    Principal(who): Principal,
    Body(q): Body<ThreadSearch>,
) -> Result<Response, LgReadError> {
    // It reads and folds threads and matches filters: off the async workers.
    Ok(
        tokio::task::spawn_blocking(move || thread_search::search(&st, &who, &q))
            .await
            .map_err(ApiError::internal)??,
    )
}

#[utoipa::path(get, path = "/threads/{thread_id}/state", operation_id = "get_thread_state", tag = "langgraph", security(("bearer" = [])),
    params(ThreadPath),
    responses(
        (status = 200, description = "The thread's state at its head (a `ThreadState`; for a thread with no turn yet, empty values and a `null` checkpoint id)", body = serde_json::Value),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
        LgThreadReadError,
    ))]
pub(crate) async fn state(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
) -> Result<Json<Value>, LgThreadReadError> {
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

#[utoipa::path(get, path = "/threads/{thread_id}/state/{checkpoint_id}", operation_id = "get_thread_state_at_checkpoint", tag = "langgraph", security(("bearer" = [])),
    params(ThreadPath, ("checkpoint_id" = inline(LgUuid), Path, description = "A checkpoint of the thread: a UUID")),
    responses(
        (status = 200, description = "The thread's state at the checkpoint (a `ThreadState`; for a thread with no checkpoint yet, its empty state with a `null` checkpoint id)", body = serde_json::Value),
        (status = 404, description = "No thread has this id, or the thread has checkpoints and none with this id", body = Detail),
        (status = 422, description = "A `thread_id` or `checkpoint_id` that is not a UUID", body = Detail),
        LgReadError,
    ))]
pub(crate) async fn state_at_checkpoint(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    CheckpointIdPath(checkpoint): CheckpointIdPath,
) -> Result<Json<Value>, LgReadError> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    Ok(state_at_id(&st, &l, &checkpoint).map(Json)?)
}

#[utoipa::path(post, path = "/threads/{thread_id}/state/checkpoint", operation_id = "post_thread_state_at_checkpoint", tag = "langgraph", request_body = StateAtRequest, security(("bearer" = [])),
    params(ThreadPath),
    responses(
        (status = 200, description = "The thread's state at the checkpoint (a `ThreadState`; for a thread with no checkpoint yet, its empty state with a `null` checkpoint id)", body = serde_json::Value),
        (status = 404, description = "No thread has this id, or the thread has checkpoints and none with this id", body = Detail),
        (status = 422, description = "A `thread_id` or checkpoint id that is not a UUID, or a `checkpoint` without `checkpoint_id`", body = Detail),
        LgReadError,
    ))]
pub(crate) async fn state_at_checkpoint_post(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    Body(req): Body<StateAtRequest>,
) -> Result<Json<Value>, LgReadError> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    Ok(state_at_id(&st, &l, &req.checkpoint.checkpoint_id).map(Json)?)
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

#[utoipa::path(post, path = "/threads/{thread_id}/history", operation_id = "get_thread_history", tag = "langgraph", request_body = HistoryRequest, security(("bearer" = [])),
    params(ThreadPath),
    responses(
        (status = 200, description = "The thread's states at the checkpoints a client is shown (each turn's input, the end of each of its branches, where a restore parted them, and value updates), all branches, newest first; at most `limit` states and 4 MiB of JSON (at least one state): page on with `before`", body = Vec<ThreadState>),
        (status = 404, description = "No thread has this id, or `before` names no checkpoint of it", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, a `limit` outside 1..=1000, a `metadata` filter over its bounds (256 JSON values, 8 levels, 16 KiB of keys and strings), or a `before` that names no checkpoint id", body = Detail),
        LgReadError,
    ))]
pub(crate) async fn history(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    Body(req): Body<HistoryRequest>,
) -> Result<Response, LgReadError> {
    // It folds a run once per state shown: off the async workers.
    Ok(
        tokio::task::spawn_blocking(move || history_page(&st, &who, &thread, req))
            .await
            .map_err(ApiError::internal)??,
    )
}

/// One history page as JSON: at most `limit` states and [`HISTORY_BYTES_MAX`] bytes (but always
/// one state when there is one), each state made and written out before the next is made.
fn history_page(
    st: &AppState,
    who: &Who,
    thread: &str,
    req: HistoryRequest,
) -> ApiResult<Response> {
    let limit = page_limit(req.limit)?;
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
    params(ThreadPath),
    responses(
        (status = 200, description = "A new thread with the same metadata that starts from this one's turns (shown before its own)", body = Thread),
        (status = 422, description = "A `thread_id` that is not a UUID", body = Detail),
        LgThreadWriteError,
    ))]
pub(crate) async fn copy(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    _body: Unread,
) -> Result<Json<Thread>, LgThreadWriteError> {
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
    params(ThreadPath),
    responses(
        (status = 200, description = "The values are set on the thread's latest turn, recorded as an event by the caller with a new checkpoint (`source: update`)", body = StateUpdated),
        (status = 409, description = "The thread has no turn yet, its latest turn is running, a `checkpoint` that is not the head, or `values` naming a key of the workflow's own state (commands change those)", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, empty `values`, values that would make the thread's values more than 256 KiB of JSON in all, or an `as_node` that is not a node of the graph", body = Detail),
        LgThreadWriteError,
    ))]
pub(crate) async fn update_state(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    Body(req): Body<StateUpdate>,
) -> Result<Json<StateUpdated>, LgThreadWriteError> {
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    let values = req.values;
    if let Some(node) = &req.as_node
        && !SUPERVISOR_NODES.contains(&node.as_str())
    {
        return Err(ApiError::unprocessable(format!(
            "as_node must be a node of the graph ({}), got {node:?}",
            SUPERVISOR_NODES.join(", ")
        ))
        .into());
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
        )
        .into());
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
