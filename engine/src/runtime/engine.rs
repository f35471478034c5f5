//! `Engine`: the handle every surface uses. It starts runs, routes decisions, commands, restores,
//! cancels and value updates to each run's actor (starting one on demand), serves state and
//! subscriptions, and on open recovers every run that is not terminal.

use std::sync::Arc;
use std::time::Duration;

use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalId, CheckpointId, Decision, Envelope, Memory, RunId, SessionId,
};
use chronicle_wire::{
    CommandOutcome, Restored, SessionDeletedView, SessionDetail, SessionList, SessionTurn,
    SessionsQuery, SubRun,
};
use serde_json::{Map, Value};
use tokio_stream::wrappers::ReceiverStream;

use crate::plugin::chunks::Chunk;
use crate::plugin::settings::Settings;
use crate::runtime::actor;
use crate::runtime::bus::Live;
use crate::runtime::index;
use crate::runtime::mailbox::{Input, RestoreTarget};
use crate::runtime::runs::{self, StartRun, Started};
use crate::runtime::sessions::{self, SessionReader};
use crate::runtime::shared::Shared;
use crate::store::{self, Store};
use crate::{Error, Principal, Result};

/// See [`Engine::cache_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Runs whose facts are cached, and the lookups the cache answered or missed.
    pub facts_runs: u64,
    pub facts_hits: u64,
    pub facts_misses: u64,
    /// Ended long runs whose states are kept, the events they fold, and the actors started
    /// from one (hits) or from the store (misses).
    pub idle_runs: u64,
    pub idle_events: u64,
    pub idle_hits: u64,
    pub idle_misses: u64,
    /// Runs with an actor now (going on, or just stopping): bounded by the runs in progress,
    /// not by the runs made.
    pub actors: u64,
    /// Events and run heads read from the store since it opened.
    pub store_events_read: u64,
    pub store_heads_read: u64,
    /// Durable events the index has not taken in yet.
    pub index_behind_events: u64,
    /// On a node of a cluster: the sessions it owns now (their runs' states are held only while
    /// it does).
    pub node_sessions: u64,
    /// Approvals waiting for a decision, of every run: the index's count, as far as it has
    /// taken in the log (`index_behind_events` says how far that is).
    pub pending_approvals: u64,
}

/// The workflow engine; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.shared.store)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts the engine on an open store and recovers every run that is not terminal: each gets
    /// its actor back, which continues from its stored state (re-running an agent that was
    /// running, expiring approvals that expired meanwhile).
    pub async fn open(store: Store, settings: Settings) -> Result<Engine> {
        let shared = Shared::new(store, settings, actor::spawn);
        // The index is caught up with the log (for a store written before it existed: built,
        // once), and names the runs to recover: the cost of opening does not grow with the log.
        index::catch_up(&shared.store)?;
        index::follow(&shared.store, &shared.tasks, shared.shutdown.clone());
        // A node of a cluster recovers nothing itself: it joins, and claims the sessions nobody
        // drives (its own earlier incarnation's among them) as every node does.
        if let Some(cluster) = &shared.cluster {
            cluster.join(&shared).await?;
            return Ok(Engine { shared });
        }
        let mut recovered = 0;
        for run in index::live_runs(&shared.store)? {
            match shared.deliver(run, None).await {
                Ok(_) => recovered += 1,
                // A run whose records are damaged stays as it is (reads of it name the damage);
                // the other runs are served.
                Err(crate::Error::Store(e)) if e.is_damage() => tracing::error!(
                    run = %run, error = %e,
                    "a damaged run is not resumed; `chronicle verify` names the damaged record"
                ),
                Err(e) => return Err(e),
            }
        }
        if recovered > 0 {
            tracing::info!(runs = recovered, "recovered runs");
        }
        Ok(Engine { shared })
    }

    /// Whether this process writes the events of `session`: always on a single server; on a
    /// node of a cluster, while it owns the session. A node that follows the shared log to
    /// export what runs did takes only these, so no two nodes send the same thing.
    pub fn drives_session(&self, session: &str) -> bool {
        self.shared
            .cluster
            .as_ref()
            .is_none_or(|c| c.holds(session))
    }

    /// What the engine's caches hold and how often they answered, what was read from the store,
    /// and how far the index is behind the log: what `/metrics` shows.
    pub fn cache_stats(&self) -> CacheStats {
        let s = &self.shared;
        let (facts_hits, facts_misses) = s.facts_cache().stats.get();
        let (idle_runs, idle_events) = s.idle.size();
        let (idle_hits, idle_misses) = s.idle.stats.get();
        CacheStats {
            facts_runs: s.facts_cache().len() as u64,
            facts_hits,
            facts_misses,
            idle_runs: idle_runs as u64,
            idle_events,
            idle_hits,
            idle_misses,
            actors: s.actors() as u64,
            store_events_read: s.store.reads().events(),
            store_heads_read: s.store.reads().heads(),
            index_behind_events: index::behind(&s.store).unwrap_or(0),
            node_sessions: s.cluster.as_ref().map_or(0, |c| c.sessions() as u64),
            pending_approvals: index::pending_approvals(&s.store).unwrap_or(0),
        }
    }

    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// Stops every actor and subscription and waits for them (agents are aborted; their runs
    /// resume on the next open), then the tool sources (MCP servers' processes are reaped).
    /// Then flushes the store.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
        // Its sessions are the other nodes' at once: what the actors wrote is committed.
        if let Some(cluster) = &self.shared.cluster {
            cluster.leave(&self.shared).await;
        }
        self.shared.settings.tools.stop().await;
        if let Err(e) = self.shared.store.flush() {
            tracing::error!(error = %e, "flush at shutdown failed");
        }
    }

    /// Starts a run: validates the request (nothing is written for a refused one), records
    /// `RunStarted` and the initialize node, and hands the run to its actor.
    pub async fn start_run(&self, req: StartRun) -> Result<Started> {
        runs::start(&self.shared, RunId(uuid::Uuid::now_v7()), req).await
    }

    /// [`Engine::start_run`] with the run's id chosen by the caller (a surface whose own id for
    /// the run is this one); a run that exists already is a conflict and nothing is written.
    pub async fn start_run_with_id(&self, run_id: RunId, req: StartRun) -> Result<Started> {
        runs::start(&self.shared, run_id, req).await
    }

    /// The run a request with this `Idempotency-Key` from `by` started already, if any.
    pub async fn started_before(&self, by: &Principal, key: &str) -> Result<Option<Started>> {
        runs::started_before(&self.shared, by, key).await
    }

    /// Whether `run` was started in `session` with `query` (a retried request's check).
    pub(crate) fn same_request(
        &self,
        run: RunId,
        session: &SessionId,
        query: &str,
    ) -> Result<bool> {
        runs::same_request(&self.shared, run, Some(session), query)
    }

    /// The sub-agent runs started by `state`'s `task` calls, with their status.
    pub fn sub_runs(&self, state: &RunState) -> Vec<SubRun> {
        runs::sub_runs(&self.shared, state)
    }

    /// `run` exists and `who` may see and act on it: [`crate::Error::RunNotFound`] otherwise,
    /// also for someone else's run (existence is not disclosed).
    pub fn authorize(&self, who: &Principal, run: RunId) -> Result<()> {
        self.shared.authorize(who, run)
    }

    /// The runs of `session`, oldest first (empty for a session without runs), when `who` may
    /// see it; [`crate::Error::SessionNotFound`] for someone else's or a deleted one.
    pub fn session_runs_of(&self, who: &Principal, session: &SessionId) -> Result<Vec<RunId>> {
        self.shared.session_runs(who, session)
    }

    /// One page of the sessions `who` may see (an admin: all), the most recently active first.
    pub fn sessions(&self, who: &Principal, query: &SessionsQuery) -> Result<SessionList> {
        self.session_reader().list(who, query)
    }

    /// A session `who` may see, with all its turns, oldest first.
    pub fn session(&self, who: &Principal, session: &SessionId) -> Result<SessionDetail> {
        self.session_reader().get(who, session)
    }

    /// Reads of sessions, with the engine's cache of run facts.
    pub fn session_reader(&self) -> SessionReader {
        SessionReader::with(self.shared.store.clone(), self.shared.facts_cache())
    }

    /// The turns of a session `who` may see, oldest first.
    pub fn session_turns(&self, who: &Principal, session: &SessionId) -> Result<Vec<SessionTurn>> {
        self.session_reader().turns(who, session)
    }

    /// The turns of a session `who` may see, oldest first, with the latest turn's run and the
    /// state that turn was made from, read once ([`Error::SessionNotFound`] for a session
    /// without turns).
    pub fn session_latest(
        &self,
        who: &Principal,
        session: &SessionId,
    ) -> Result<(Vec<SessionTurn>, RunId, RunState)> {
        match self.session_reader().latest(who, session)? {
            (turns, Some((run, state))) => Ok((turns, run, state)),
            (_, None) => Err(Error::SessionNotFound(session.to_string())),
        }
    }

    /// Claims a session that has no runs yet for `who`, so that nobody else can start one in it
    /// (a LangGraph thread made before its first run); [`Error::SessionNotFound`] when it is
    /// someone else's, claimed or not.
    pub fn claim_session(&self, who: &Principal, session: &SessionId) -> Result<()> {
        runs::check_session_id(session)?;
        runs::claim_session(&self.shared, session, who)
    }

    /// Deletes a session `who` may see: every run of it gets the tombstone `SessionDeleted`
    /// (a run still going is cancelled first), reads treat its runs as absent from then on, and
    /// its workspace directory is removed. The events stay in the log.
    pub async fn delete_session(
        &self,
        who: &Principal,
        session: &SessionId,
    ) -> Result<SessionDeletedView> {
        sessions::delete(&self.shared, who, session).await
    }

    /// The principal `run` belongs to; `None` for a run that does not exist.
    pub fn owner(&self, run: RunId) -> Result<Option<String>> {
        self.shared.owner(run)
    }

    /// Decides a pending approval of a run `by` may act on; the decision is recorded as
    /// theirs.
    pub async fn decide(
        &self,
        run: RunId,
        approval_id: ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        by: &Principal,
        comment: Option<String>,
    ) -> Result<Approval> {
        self.authorize(by, run)?;
        self.shared
            .ask(run, |reply| Input::Decide {
                approval_id: approval_id.clone(),
                decision,
                edited_args: edited_args.clone(),
                by: by.name.clone(),
                comment: comment.clone(),
                reply,
            })
            .await
    }

    /// Runs a slash command; every command, carried out or refused, is recorded. A refused one
    /// is [`crate::Error::Command`], with the reason and the deployment's help.
    pub async fn command(&self, run: RunId, text: &str, by: &Principal) -> Result<CommandOutcome> {
        self.authorize(by, run)?;
        self.shared
            .ask(run, |reply| Input::Command {
                text: text.to_owned(),
                by: by.name.clone(),
                reply,
            })
            .await
    }

    /// Plain words to a run that waits for a human, read as the command they mean and carried
    /// out (recorded with the words); `None` when they mean no command. See [`crate::said`].
    pub async fn say(
        &self,
        run: RunId,
        text: &str,
        by: &Principal,
    ) -> Result<Option<(String, CommandOutcome)>> {
        self.authorize(by, run)?;
        self.shared
            .ask(run, |reply| Input::Say {
                text: text.to_owned(),
                by: by.name.clone(),
                reply,
            })
            .await
    }

    pub async fn restore(
        &self,
        run: RunId,
        target: RestoreTarget,
        by: &Principal,
    ) -> Result<Restored> {
        self.authorize(by, run)?;
        self.shared
            .ask(run, |reply| Input::Restore {
                target: target.clone(),
                by: by.name.clone(),
                reply,
            })
            .await
    }

    pub async fn cancel(&self, run: RunId, by: &Principal, reason: Option<String>) -> Result<()> {
        self.authorize(by, run)?;
        self.shared
            .ask(run, |reply| Input::Cancel {
                by: by.name.clone(),
                reason: reason.clone(),
                reply,
            })
            .await
    }

    /// Sets values on the state of a run `by` may act on (LangGraph's `update_state`): records
    /// `ValuesUpdated`, by them, and a checkpoint whose node is `as_node` (else `update`), in
    /// one append; returns the checkpoint's id. Refused, writing nothing, for no values
    /// ([`crate::Error::NoValues`]), a key of the workflow's own state
    /// ([`crate::Error::OwnStateKey`]: those change through commands) and a run still working
    /// ([`crate::Error::RunBusy`]); a run that waits for approval or has ended takes them.
    pub async fn update_values(
        &self,
        run: RunId,
        values: Map<String, Value>,
        as_node: Option<String>,
        by: &Principal,
    ) -> Result<CheckpointId> {
        self.authorize(by, run)?;
        self.shared
            .ask(run, |reply| Input::UpdateValues {
                values: values.clone(),
                as_node: as_node.clone(),
                by: by.name.clone(),
                reply,
            })
            .await
    }

    /// Up to `limit` approvals of `status` in runs `who` may see (an admin: all), requested
    /// before `before`, oldest first, as (requested at, run, seq of the request); and whether
    /// more are there. Read from the index, after it took in every durable event.
    pub fn approvals(
        &self,
        who: &Principal,
        status: chronicle_schemas::ApprovalStatus,
        before: Option<chronicle_schemas::Timestamp>,
        limit: usize,
    ) -> Result<(Vec<index::ApprovalAt>, bool)> {
        let store = &self.shared.store;
        index::catch_up(store)?;
        let owner = (!who.admin).then_some(who.name.as_str());
        Ok(index::approvals(store, status, owner, before, limit)?)
    }

    /// The long-term memory of `user` that `who` may see (what its own runs saved; an admin:
    /// everyone's), newest first: every item (what deleting them all deletes).
    pub fn memories(&self, who: &Principal, user: &str) -> Result<Vec<Memory>> {
        Ok(self.shared.memory()?.visible(who, user)?)
    }

    /// Up to `limit` items of the long-term memory of `user` that `who` may see (what its own
    /// runs saved; an admin: everyone's), saved before the position `before` (a page's
    /// `next_before`), newest first; and the position the next page starts before (`None` on
    /// the last page).
    pub fn memories_page(
        &self,
        who: &Principal,
        user: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<Memory>, Option<u64>)> {
        Ok(self.shared.memory()?.page(who, user, before, limit)?)
    }

    /// Deletes an item of `user`'s memory that `who` may see, recorded in the run that saved
    /// it; [`crate::Error::MemoryNotFound`] for an unknown item or someone else's.
    pub async fn forget(&self, who: &Principal, user: &str, memory_id: &str) -> Result<Memory> {
        let not_found = || crate::Error::MemoryNotFound(memory_id.to_owned());
        let memory = self
            .shared
            .memory()?
            .find(who, user, memory_id)?
            .ok_or_else(not_found)?;
        self.shared
            .ask(memory.run_id, |reply| Input::Forget {
                memory_id: memory_id.to_owned(),
                by: who.name.clone(),
                reply,
            })
            .await
    }

    /// Deletes every item of `user`'s memory that `who` may see; the items deleted.
    pub async fn forget_all(&self, who: &Principal, user: &str) -> Result<Vec<Memory>> {
        let mut deleted = Vec::new();
        for memory in self.memories(who, user)? {
            match self.forget(who, user, &memory.memory_id).await {
                Ok(m) => deleted.push(m),
                // Deleted meanwhile by someone else: nothing left to do for it.
                Err(crate::Error::MemoryNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// The run's projected state now (or right after `seq`), as of its newest *durable* event.
    pub fn state(&self, run: RunId, seq: Option<u64>) -> Result<RunState> {
        runs::state(&self.shared, run, seq)
    }

    /// Every event of `run` from `from_seq`: history, then live; no gap, no duplicate.
    pub fn subscribe(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> Result<ReceiverStream<Result<Arc<Envelope>, store::Error>>> {
        runs::subscribe(&self.shared, run, from_seq)
    }

    /// [`Engine::subscribe`], with the run's live chunks (pieces of its model answers while
    /// they are written) from now on between the events. Chunks are not stored: a subscriber
    /// gets the ones written while it listens, each after the events that came before it, and
    /// loses some when it falls behind.
    pub fn subscribe_live(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> Result<ReceiverStream<Result<Live, store::Error>>> {
        runs::subscribe_live(&self.shared, run, from_seq)
    }

    /// The live chunks of `run` from now on, as this node sends them to another node of the
    /// cluster whose subscribers follow the run.
    pub fn run_chunks(
        &self,
        run: RunId,
    ) -> impl tokio_stream::Stream<Item = crate::chunks::RelayedChunk> + Send + Unpin + use<> {
        use tokio_stream::StreamExt;
        self.shared
            .bus
            .run_chunks(run)
            .map(|c| crate::chunks::RelayedChunk::from(c.as_ref()))
    }

    /// The live chunks of every run from now on (the all-runs stream's; the caller filters what
    /// its client may see). A reader that falls behind loses some.
    pub fn all_chunks(
        &self,
    ) -> impl tokio_stream::Stream<Item = Arc<Chunk>> + Send + Unpin + use<> {
        self.shared.bus.all_chunks()
    }

    /// Waits until `done(state)` holds, re-checking after each event of the run; a
    /// [`crate::Error::Timeout`] after `timeout`.
    pub async fn wait_until(
        &self,
        run: RunId,
        timeout: Duration,
        done: impl Fn(&RunState) -> bool,
    ) -> Result<RunState> {
        runs::wait_until(&self.shared, run, timeout, done).await
    }

    /// Waits until the run needs nothing but a human or has ended ([`runs::is_settled`]), and
    /// returns its state then, as of its newest durable event; a [`crate::Error::Timeout`]
    /// after `timeout`.
    pub async fn wait_settled(&self, run: RunId, timeout: Duration) -> Result<RunState> {
        runs::wait_settled(&self.shared, run, timeout).await
    }
}
