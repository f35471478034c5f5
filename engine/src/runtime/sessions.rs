//! Sessions as a resource: the sequence of runs started with one `session_id`, each root run a
//! turn (a sub-agent run belongs to the turn whose `task` call started it). Listing, reading
//! and deleting them, always as a principal: someone else's session, and a deleted one, are
//! answered as if they did not exist.
//!
//! A delete is a recorded tombstone, not an erasure: every run of the session (its turns and
//! their sub-agent runs) gets `SessionDeleted` as its last event, a run still going being
//! cancelled in the same append. The events stay in the log, so the hash chain verifies and the
//! audit export keeps the decisions; every read refuses the runs from then on. The session's
//! workspace directory is removed from disk.

use std::sync::Arc;

use chronicle_projections::RunState;
use chronicle_schemas::{Envelope, Event, RunId, RunStatus, SessionId, Timestamp};
use chronicle_wire::{
    SESSIONS_PAGE_DEFAULT, SESSIONS_PAGE_MAX, SessionDeletedView, SessionDetail, SessionList,
    SessionSummary, SessionTurn, SessionsQuery, answer_text, session_title,
};

use crate::plugin::tools::Workspace;
use crate::runtime::index;
use crate::runtime::mailbox::Input;
use crate::runtime::runs;
use crate::runtime::shared::{Facts, RunFacts, Shared};
use crate::store::{RunHead, Store};
use crate::{Error, Principal, Result};

/// Where a listing stands: sessions are listed by last activity, newest first, then by id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    /// Negated, so that ascending order is newest first.
    newest_first: i64,
    session: String,
}

impl Position {
    fn of(last_activity: Timestamp, session: &SessionId) -> Self {
        Position {
            newest_first: -last_activity.as_micros(),
            session: session.to_string(),
        }
    }

    /// The opaque cursor: 16 hex digits of the (negated) time, then the session id's bytes in
    /// hex. Every string of that shape is a position, so only a malformed one is refused.
    fn cursor(&self) -> String {
        format!(
            "{:016x}{}",
            self.newest_first as u64,
            hex::encode(self.session.as_bytes())
        )
    }

    fn parse(cursor: &str) -> Result<Self> {
        let bad = || Error::BadCursor(cursor.to_owned());
        let lowercase = cursor
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !lowercase || cursor.len() < 18 {
            return Err(bad());
        }
        let (time, session) = cursor.split_at(16);
        let time = u64::from_str_radix(time, 16).map_err(|_| bad())?;
        let session = hex::decode(session).map_err(|_| bad())?;
        Ok(Position {
            newest_first: time as i64,
            session: String::from_utf8_lossy(&session).into_owned(),
        })
    }
}

/// A session a principal may see, as the listing sorts it.
struct Visible {
    session: SessionId,
    /// The session's runs, oldest first.
    heads: Vec<RunHead>,
    owner: String,
    user_id: Option<String>,
    last_activity: Timestamp,
}

/// One page of the sessions `who` may see, the most recently active first: a keyed read of the
/// index (caught up first), so a page costs what its sessions cost, however many the store holds.
fn list(r: &SessionReader, who: &Principal, q: &SessionsQuery) -> Result<SessionList> {
    let limit = q.limit.unwrap_or(SESSIONS_PAGE_DEFAULT);
    if limit == 0 || limit > SESSIONS_PAGE_MAX {
        return Err(Error::PageLimit {
            limit,
            max: SESSIONS_PAGE_MAX,
        });
    }
    let after = q.cursor.as_deref().map(Position::parse).transpose()?;
    index::catch_up(&r.store)?;
    let owner = who.list_owner(q.owner.as_deref())?;
    let after = after.as_ref().map(|p| {
        (
            Timestamp(p.newest_first.saturating_neg()),
            p.session.as_str(),
        )
    });
    let (page, more) = index::sessions_page(&r.store, owner, q.user.as_deref(), after, limit)?;
    let mut sessions = Vec::with_capacity(page.len());
    let mut last = None;
    for facts in page {
        let mut heads = r
            .store
            .session_runs(&facts.session_id)?
            .into_iter()
            .filter_map(|run| r.store.run_head(run).transpose())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        heads.sort_by_key(|h| (h.created_at, h.run_id));
        let v = Visible {
            session: facts.session_id.clone(),
            heads,
            owner: facts.owner,
            user_id: facts.user_id,
            last_activity: facts.last_activity,
        };
        sessions.push(listed_summary(r, &v)?);
        last = Some(Position::of(facts.last_activity, &facts.session_id));
    }
    let next_cursor = more.then(|| last.map(|p| p.cursor())).flatten();
    Ok(SessionList {
        sessions,
        next_cursor,
    })
}

/// A session's summary as a list shows it, the same as [`summary`] of its turns, from the
/// index's facts of its runs and its first turn's start: no run is replayed, so a page costs a
/// few reads per session, however long its runs are.
fn listed_summary(r: &SessionReader, v: &Visible) -> Result<SessionSummary> {
    let mut first = None;
    let mut turns = 0;
    let mut status = RunStatus::default();
    for head in &v.heads {
        match r.facts(head.run_id)? {
            Some(f) if !f.child && !f.deleted => {}
            _ => continue,
        }
        let Some(f) = index::run_facts(&r.store, head.run_id)? else {
            continue;
        };
        turns += 1;
        status = f.status;
        first.get_or_insert(head.run_id);
    }
    let query = match first {
        Some(run) => match r.store.read_run(run, 0, 0).next().transpose()? {
            Some(Envelope {
                event: Event::RunStarted { query, .. },
                ..
            }) => query,
            _ => String::new(),
        },
        None => String::new(),
    };
    Ok(SessionSummary {
        session_id: v.session.clone(),
        title: if first.is_some() {
            session_title(&query)
        } else {
            String::new()
        },
        turns,
        last_activity: v.last_activity,
        status,
        user_id: v.user_id.clone(),
        owner: v.owner.clone(),
        created_at: v.heads.first().map(|h| h.created_at).unwrap_or_default(),
    })
}

/// The turns among a session's runs (its root runs not deleted), oldest first.
fn turns(r: &SessionReader, heads: &[RunHead]) -> Result<Vec<SessionTurn>> {
    Ok(turns_and_latest(r, heads)?.0)
}

/// A session's turns, oldest first, and the latest one's run with the state its turn was made
/// from (`None` without turns): one read, so the turn and the state never say two things.
pub type TurnsAndLatest = (Vec<SessionTurn>, Option<(RunId, RunState)>);

fn turns_and_latest(r: &SessionReader, heads: &[RunHead]) -> Result<TurnsAndLatest> {
    let mut out = Vec::new();
    let mut latest = None;
    for head in heads {
        match r.facts(head.run_id)? {
            Some(f) if !f.child && !f.deleted => {}
            _ => continue,
        }
        let state = runs::durable_state(&r.store, head.run_id, None)?;
        out.push(turn(head, &state));
        latest = Some((head.run_id, state));
    }
    Ok((out, latest))
}

fn turn(head: &RunHead, state: &RunState) -> SessionTurn {
    let sup = &state.supervisor;
    SessionTurn {
        run_id: head.run_id,
        query: sup.query.clone(),
        status: sup.run_status,
        answer: sup.final_response.as_ref().map(answer_text),
        started_at: head.created_at,
        updated_at: head.updated_at,
    }
}

fn summary(v: &Visible, turns: &[SessionTurn]) -> SessionSummary {
    SessionSummary {
        session_id: v.session.clone(),
        title: turns
            .first()
            .map(|t| session_title(&t.query))
            .unwrap_or_default(),
        turns: turns.len(),
        last_activity: v.last_activity,
        status: turns.last().map(|t| t.status).unwrap_or_default(),
        user_id: v.user_id.clone(),
        owner: v.owner.clone(),
        created_at: v.heads.first().map(|h| h.created_at).unwrap_or_default(),
    }
}

/// The heads of a session's runs, oldest first, when `who` may see it.
fn heads_of(r: &SessionReader, who: &Principal, session: &SessionId) -> Result<Vec<RunHead>> {
    Ok(r.session_runs(who, session)?
        .iter()
        .filter_map(|run| r.store.run_head(*run).transpose())
        .collect::<Result<_, _>>()?)
}

/// The session and all its turns; [`Error::SessionNotFound`] for a session without turns,
/// someone else's, or a deleted one.
fn get(r: &SessionReader, who: &Principal, session: &SessionId) -> Result<SessionDetail> {
    let not_found = || Error::SessionNotFound(session.to_string());
    let heads = heads_of(r, who, session)?;
    let first = heads.first().ok_or_else(not_found)?.run_id;
    let facts = r.facts(first)?.ok_or_else(not_found)?;
    if facts.child {
        return Err(not_found());
    }
    let turns = turns(r, &heads)?;
    let v = Visible {
        session: session.clone(),
        last_activity: heads.iter().map(|h| h.updated_at).max().unwrap_or_default(),
        heads,
        owner: facts.owner,
        user_id: facts.user_id,
    };
    Ok(SessionDetail {
        session: summary(&v, &turns),
        turns,
    })
}

/// Reads of sessions on a store: what the engine serves, and what the CLI reads from a data
/// directory without starting an engine (which would resume its unfinished runs).
#[derive(Clone, Debug)]
pub struct SessionReader {
    store: Store,
    facts: Arc<Facts>,
}

impl SessionReader {
    /// Reads on `store` with a cache of its own.
    pub fn new(store: Store) -> Self {
        Self::with(store, Arc::default())
    }

    pub(crate) fn with(store: Store, facts: Arc<Facts>) -> Self {
        Self { store, facts }
    }

    fn facts(&self, run: RunId) -> Result<Option<RunFacts>> {
        self.facts.get(&self.store, run)
    }

    fn session_runs(&self, who: &Principal, session: &SessionId) -> Result<Vec<RunId>> {
        self.facts.session_runs(&self.store, who, session)
    }

    /// One page of the sessions `who` may see (an admin: all), the most recently active first.
    pub fn list(&self, who: &Principal, query: &SessionsQuery) -> Result<SessionList> {
        list(self, who, query)
    }

    /// A session `who` may see, with all its turns, oldest first.
    pub fn get(&self, who: &Principal, session: &SessionId) -> Result<SessionDetail> {
        get(self, who, session)
    }

    /// The turns of a session `who` may see, oldest first (none for a session of sub-agent
    /// runs).
    pub fn turns(&self, who: &Principal, session: &SessionId) -> Result<Vec<SessionTurn>> {
        turns(self, &heads_of(self, who, session)?)
    }

    /// Every turn of a session `who` may see, oldest first, with the latest turn's run and the
    /// state that turn was made from (`None` for a session without turns).
    pub fn latest(&self, who: &Principal, session: &SessionId) -> Result<TurnsAndLatest> {
        turns_and_latest(self, &heads_of(self, who, session)?)
    }
}

/// The sub-agent runs `run` started, and theirs, deepest first.
fn descendants(shared: &Shared, run: RunId) -> Result<Vec<RunId>> {
    let mut out = Vec::new();
    let state = runs::state(shared, run, None)?;
    for child in runs::sub_runs(shared, &state) {
        if shared.store.run_head(child.run_id)?.is_some() {
            out.extend(descendants(shared, child.run_id)?);
            out.push(child.run_id);
        }
    }
    Ok(out)
}

/// Deletes the session (see the module): every run gets its tombstone through its actor, the
/// turns newest first, each after its sub-agent runs, and the first turn last, so that a delete
/// cut short leaves a session that can be deleted again.
pub(crate) async fn delete(
    shared: &Arc<Shared>,
    who: &Principal,
    session: &SessionId,
) -> Result<SessionDeletedView> {
    let reader = SessionReader::with(shared.store.clone(), shared.facts_cache());
    let detail = reader.get(who, session)?;
    let mut view = SessionDeletedView {
        session_id: session.clone(),
        runs: vec![],
        cancelled: vec![],
    };
    for turn in detail.turns.iter().rev() {
        // Stop the turn first, so that it starts no sub-agent run while they are tombstoned.
        if !turn.status.is_terminal() && stop(shared, who, turn.run_id).await? {
            view.cancelled.push(turn.run_id);
        }
        let runs = tombstone_turn(shared, who, turn.run_id, &mut view.cancelled).await?;
        view.runs.extend(runs);
    }
    remove_workspace(shared, session);
    Ok(view)
}

/// Cancels a run through the existing cancel path; whether it was still going.
async fn stop(shared: &Arc<Shared>, who: &Principal, run: RunId) -> Result<bool> {
    let stopped = shared
        .ask(run, |reply| Input::Cancel {
            by: who.name.clone(),
            reason: Some("the session was deleted".into()),
            reply,
        })
        .await;
    match stopped {
        Ok(()) => Ok(true),
        Err(Error::RunFinished { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Tombstones a stopped turn's sub-agent runs, then the turn; the runs it covered, and those it
/// cancelled added to `cancelled`.
async fn tombstone_turn(
    shared: &Arc<Shared>,
    who: &Principal,
    turn: RunId,
    cancelled: &mut Vec<RunId>,
) -> Result<Vec<RunId>> {
    let runs: Vec<RunId> = descendants(shared, turn)?
        .into_iter()
        .chain([turn])
        .collect();
    for run in &runs {
        if tombstone(shared, who, *run).await? {
            cancelled.push(*run);
        }
    }
    Ok(runs)
}

/// Appends `SessionDeleted` to `run` (cancelling it first if it is still going); whether it
/// cancelled. A run that already has one is left as it is.
async fn tombstone(shared: &Arc<Shared>, who: &Principal, run: RunId) -> Result<bool> {
    if shared.facts(run)?.is_none_or(|f| f.deleted) {
        return Ok(false);
    }
    shared
        .ask(run, |reply| Input::DeleteSession {
            by: who.name.clone(),
            reply,
        })
        .await
}

/// Removes the session's workspace directory (sub-agent runs work in their parent's); a
/// workspace that cannot be removed is logged, as the tombstones are already recorded.
fn remove_workspace(shared: &Shared, session: &SessionId) {
    let workspace = Workspace::for_session(&shared.workspaces, session);
    match std::fs::remove_dir_all(workspace.root()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(
            session = %session,
            path = %workspace.root().display(),
            error = %e,
            "removing a deleted session's workspace failed"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_the_position_it_was_made_from_and_only_that_shape_parses() {
        for (micros, session) in [(0, "a"), (1_764_000_000_000_000, "스레드-1 / x"), (-5, "s")] {
            let p = Position::of(Timestamp(micros), &SessionId::from(session));
            assert_eq!(Position::parse(&p.cursor()).unwrap(), p);
        }
        let newer = Position::of(Timestamp(2), &SessionId::from("b"));
        let older = Position::of(Timestamp(1), &SessionId::from("a"));
        assert!(newer < older, "newest first");
        for bad in [
            "",
            "00",
            "not-a-cursor",
            "0000000000000000",
            "0000000000000000a",
            "ZZ00000000000000aa",
            "00000000000000000G",
        ] {
            assert!(
                matches!(Position::parse(bad), Err(Error::BadCursor(_))),
                "{bad:?}"
            );
        }
    }
}
