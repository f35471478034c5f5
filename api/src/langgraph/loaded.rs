//! A thread as read now: its record (metadata, creation, the turns a copy starts from) and its
//! turns' folded states, with the views every LangGraph route shows of it (the thread, its state
//! at a checkpoint). Threads are Chronicle sessions; a thread that was never created through
//! this API is read from its first run.

use std::collections::BTreeMap;

use chronicle_engine::Principal as Who;
use chronicle_engine::RunState;
use chronicle_schemas::{RunId, SessionId};
use chronicle_wire::langgraph::{Thread, ThreadState, ThreadStatus};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::records::{self, ThreadRecord};
use super::views::{self, Point, SUPERVISOR_GRAPH, ThreadRef, Turns};
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, now};

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
        .filter_map(|r| Some((r.chronicle_run, given_message_id(r.kwargs.get("input")?)?)))
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
pub(crate) fn empty_state(thread: &str) -> Value {
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

/// The point of `l` named by checkpoint id `id` (a UUID), else 404.
pub(crate) fn point<'a>(l: &Loaded, turns: &Turns<'a>, id: &str) -> ApiResult<Point<'a>> {
    let uuid = uuid_of("checkpoint_id", id)?;
    views::find(turns, uuid)
        .ok_or_else(|| ApiError::not_found(format!("checkpoint {id} not found in thread {}", l.id)))
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

/// The last human message of a run's `input.messages` (a list, or one message).
pub(crate) fn human_message(input: &Value) -> Option<&Value> {
    let human = |m: &&Value| {
        matches!(
            m.get("type").and_then(Value::as_str),
            Some("human" | "user")
        ) || m.get("role").and_then(Value::as_str) == Some("user")
    };
    match input.get("messages")? {
        Value::Array(ms) => ms.iter().rev().find(human),
        m @ Value::Object(_) => Some(m).filter(human),
        _ => None,
    }
}

/// The id the client gave the human message of a run's `input`, if it gave one.
pub(crate) fn given_message_id(input: &Value) -> Option<String> {
    let id = human_message(input)?.get("id")?.as_str()?;
    (!id.is_empty()).then(|| id.to_owned())
}
