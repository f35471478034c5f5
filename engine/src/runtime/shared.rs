//! What the engine's parts share: the store, the settings, the bus, shutdown, and the run
//! actors' mailboxes. [`Shared::deliver`] hands an input to a run's actor, starting one when
//! there is none; the actor itself is started through the function the engine registers, so this
//! layer does not depend on the actor.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use chronicle_schemas::{Event, RunId, SessionId};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::plugin::settings::Settings;
use crate::runtime::bus::Bus;
use crate::runtime::cluster::Cluster;
use crate::runtime::mailbox::Input;
use crate::runtime::memory::MemoryIndex;
use crate::store::{LiveRun, Store};
use crate::{Error, Result};

/// Starts a run actor on its state and its mailbox (the actor keeps a sender, for the agents and
/// tool executions it starts).
pub(crate) type SpawnActor = fn(Arc<Shared>, LiveRun, mpsc::Sender<Input>, mpsc::Receiver<Input>);

/// What [`Shared`] knows of a run without replaying it: who owns it, the user it works for,
/// whether it is a sub-agent run, and whether its session was deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunFacts {
    pub owner: String,
    pub user_id: Option<String>,
    /// A sub-agent run (`RunStarted.parent` set): part of its parent's turn, not a turn.
    pub child: bool,
    /// The run ends with `SessionDeleted`: every read treats it as absent.
    pub deleted: bool,
}

/// Whether the run's session was deleted: its last event is the tombstone. Stores written before
/// appends after the tombstone were refused may hold memory deletions after it: those are looked
/// past (a run holds at most one per item it saved).
fn ends_deleted(store: &Store, head: &crate::store::RunHead) -> Result<bool> {
    if head.last_seq == 0 {
        return Ok(false);
    }
    let mut seq = head.last_seq;
    let mut event = store.get(head.last_offset)?.map(|e| e.event);
    loop {
        match event {
            Some(Event::SessionDeleted { .. }) => return Ok(true),
            Some(Event::MemoryDeleted { .. }) if seq > 1 => seq -= 1,
            _ => return Ok(false),
        }
        event = store
            .read_run(head.run_id, seq, seq)
            .next()
            .transpose()?
            .map(|e| e.event);
    }
}

/// Runs' facts [`Shared`] remembers before it starts over.
const OWNERS_CACHED_MAX: usize = 65_536;

/// The cache of [`RunFacts`]: at most `max` runs, then forgotten and read again.
#[derive(Debug)]
pub(crate) struct Facts {
    map: Mutex<HashMap<RunId, RunFacts>>,
    max: usize,
    pub(crate) stats: CacheCounts,
}

impl Default for Facts {
    fn default() -> Self {
        Facts::with_max(OWNERS_CACHED_MAX)
    }
}

/// What a cache holds and how often it answered.
#[derive(Debug, Default)]
pub(crate) struct CacheCounts {
    pub hits: std::sync::atomic::AtomicU64,
    pub misses: std::sync::atomic::AtomicU64,
}

impl CacheCounts {
    fn hit(&self, hit: bool) {
        let c = if hit { &self.hits } else { &self.misses };
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }
}

impl Facts {
    /// A cache of at most `max` runs' facts (at least one).
    pub(crate) fn with_max(max: usize) -> Self {
        Facts {
            map: Mutex::default(),
            max: max.max(1),
            stats: CacheCounts::default(),
        }
    }

    /// Runs whose facts are cached now.
    pub(crate) fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// What is known of `run` from its first and last events; `None` for a run that does not
    /// exist. Cached (an owner never changes, and a tombstone is a run's last event: nothing
    /// is appended to a deleted run, so the flag changes only through [`Facts::mark_deleted`]).
    pub(crate) fn get(&self, store: &Store, run: RunId) -> Result<Option<RunFacts>> {
        if let Some(facts) = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&run)
        {
            self.stats.hit(true);
            return Ok(Some(facts.clone()));
        }
        self.stats.hit(false);
        let Some(head) = store.run_head(run)? else {
            return Ok(None);
        };
        let Some(first) = store.read_run(run, 0, 0).next().transpose()? else {
            return Ok(None);
        };
        let (owner, user_id, child) = match first.event {
            Event::RunStarted {
                owner,
                user_id,
                parent,
                ..
            } => (owner, user_id, parent.is_some()),
            _ => (None, None, false),
        };
        let facts = RunFacts {
            owner: owner.unwrap_or_else(|| chronicle_schemas::OWNER_OF_OLD_RUNS.to_owned()),
            user_id,
            child,
            deleted: ends_deleted(store, &head)?,
        };
        self.remember(run, facts.clone());
        Ok(Some(facts))
    }

    /// The runs of `session` `who` may see, oldest first, when `who` may see the session (empty
    /// for a session without runs); [`Error::SessionNotFound`] for someone else's session or a
    /// deleted one. A session belongs to the owner of its first run, and is deleted once its
    /// first run carries the tombstone (a delete gives it to that run last, so an interrupted
    /// delete can be repeated). Another principal's run in one's session (an admin's, or one
    /// that got in before sessions were claimed) is left out: a session never shows a run its
    /// reader could not read by its id.
    pub(crate) fn session_runs(
        &self,
        store: &Store,
        who: &crate::Principal,
        session: &SessionId,
    ) -> Result<Vec<RunId>> {
        let runs = store.session_runs(session)?;
        let Some(first) = runs.first() else {
            return Ok(runs);
        };
        match self.get(store, *first)? {
            Some(f) if !f.deleted && who.may_access(&f.owner) => {}
            _ => return Err(Error::SessionNotFound(session.to_string())),
        }
        let mut visible = Vec::with_capacity(runs.len());
        for run in runs {
            if self
                .get(store, run)?
                .is_some_and(|f| who.may_access(&f.owner))
            {
                visible.push(run);
            }
        }
        Ok(visible)
    }

    /// Caches what a read found, unless the tombstone was recorded meanwhile.
    fn remember(&self, run: RunId, facts: RunFacts) {
        let mut owners = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if owners.len() >= self.max {
            owners.clear();
        }
        owners.entry(run).or_insert(facts);
    }

    /// Forgets what is cached of `run`: its tombstone was recorded, here or by another process
    /// on the same store, and the next read learns it.
    pub(crate) fn forget(&self, run: RunId) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&run);
    }

    /// Records that `run` (with these facts) now ends with its session's tombstone; called by
    /// the run's actor right after appending it.
    pub(crate) fn mark_deleted(&self, run: RunId, facts: RunFacts) {
        let mut owners = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        owners.insert(
            run,
            RunFacts {
                deleted: true,
                ..facts
            },
        );
    }
}

/// Events the states kept by [`IdleRuns`] may fold in all, before the oldest are dropped: a
/// run's state grows with its events, so this bounds the memory they take (a few MB for a run of
/// hundreds of TODOs with the demo's results; more where results are larger).
const IDLE_EVENTS_MAX: u64 = 20_000;
/// Runs shorter than this are not kept: they load from the log in well under a millisecond, and
/// keeping the many short runs of a busy engine would only free their states later, colder.
const IDLE_EVENTS_MIN: u64 = 256;

/// The states of long runs whose actors stopped (the run ended), newest last: a command, restore
/// or decision on a run that just ended, the common case, starts its actor from here instead of
/// loading the run's newest snapshot (megabytes for a run of hundreds of TODOs). A state is used
/// only while the run's newest event is the one it folds, so it is always what a replay would
/// give.
#[derive(Debug)]
pub(crate) struct IdleRuns {
    inner: Mutex<IdleInner>,
    /// Events the kept states fold at most, in all.
    max_events: u64,
    pub(crate) stats: CacheCounts,
}

impl Default for IdleRuns {
    fn default() -> Self {
        IdleRuns::with_max(IDLE_EVENTS_MAX)
    }
}

#[derive(Debug, Default)]
struct IdleInner {
    /// Each state with the number it was kept under.
    runs: HashMap<RunId, (u64, LiveRun)>,
    /// Oldest first, by the number each state was kept under; an entry whose state is gone
    /// (taken, or kept again under a newer number) is skipped.
    order: std::collections::VecDeque<(RunId, u64)>,
    /// The number the next state is kept under.
    next: u64,
    events: u64,
}

impl IdleInner {
    fn is_current(&self, (run, n): &(RunId, u64)) -> bool {
        self.runs.get(run).is_some_and(|(kept, _)| kept == n)
    }
}

fn events_of(live: &LiveRun) -> u64 {
    live.state().next_seq()
}

impl IdleRuns {
    /// Keeping states of at most `max_events` events in all (none when below the shortest run
    /// kept).
    pub(crate) fn with_max(max_events: u64) -> Self {
        IdleRuns {
            inner: Mutex::default(),
            max_events,
            stats: CacheCounts::default(),
        }
    }

    /// The runs whose states are kept now, and the events they fold.
    pub(crate) fn size(&self) -> (usize, u64) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (inner.runs.len(), inner.events)
    }

    /// Keeps the state of a run whose actor stops (with what it wrote and has not seen durable
    /// yet, so the next actor waits for it as this one would have).
    pub(crate) fn keep(&self, live: LiveRun) {
        let run = live.run_id();
        let size = events_of(&live);
        if !(IDLE_EVENTS_MIN..=self.max_events).contains(&size) {
            return;
        }
        let mut dropped = Vec::new();
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let n = inner.next;
        inner.next += 1;
        inner.events += size;
        if let Some((_, old)) = inner.runs.insert(run, (n, live)) {
            inner.events -= events_of(&old);
            dropped.push(old);
        }
        inner.order.push_back((run, n));
        while inner.events > self.max_events {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if inner.is_current(&oldest)
                && let Some((_, old)) = inner.runs.remove(&oldest.0)
            {
                inner.events -= events_of(&old);
                dropped.push(old);
            }
        }
        if inner.order.len() > 2 * inner.runs.len() + 64 {
            let order = std::mem::take(&mut inner.order);
            inner.order = order.into_iter().filter(|e| inner.is_current(e)).collect();
        }
        drop(inner);
        for old in dropped {
            old.discard();
        }
    }

    /// The kept state of `run` when it still folds the run's newest event, `last_seq`.
    pub(crate) fn take(&self, run: RunId, last_seq: u64) -> Option<LiveRun> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((_, live)) = inner.runs.remove(&run) else {
            drop(inner);
            self.stats.hit(false);
            return None;
        };
        inner.events -= events_of(&live);
        drop(inner);
        let current = live.state().last_seq == Some(last_seq);
        self.stats.hit(current);
        if current {
            Some(live)
        } else {
            live.discard();
            None
        }
    }

    #[cfg(test)]
    fn queued(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .order
            .len()
    }
}

pub(crate) struct Shared {
    pub store: Store,
    pub settings: Settings,
    /// Where sessions' workspaces live.
    pub workspaces: PathBuf,
    pub shutdown: CancellationToken,
    pub tasks: TaskTracker,
    pub bus: Bus,
    /// The mailbox of each run's actor, while it runs: an actor forgets its own when it stops
    /// ([`Shared::actor_stopped`]).
    actors: Mutex<HashMap<RunId, mpsc::Sender<Input>>>,
    /// The states of runs that ended recently, for their next actor.
    pub idle: IdleRuns,
    /// Runs' facts, read from their first and last events.
    facts: Arc<Facts>,
    spawn: SpawnActor,
    /// This node's side of session ownership, when it is one of several on a shared store.
    pub cluster: Option<Arc<Cluster>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("store", &self.store)
            .field("workspaces", &self.workspaces)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn new(store: Store, settings: Settings, spawn: SpawnActor) -> Arc<Shared> {
        let shutdown = CancellationToken::new();
        let facts = Arc::new(Facts::with_max(settings.facts_cache_runs));
        let forget = {
            let facts = facts.clone();
            Box::new(move |run| facts.forget(run))
        };
        let bus = Bus::start(
            store.clone(),
            settings.bus_buffer_events,
            settings.bus_buffer_chunks,
            shutdown.clone(),
            forget,
        );
        let workspaces = settings
            .workspace_root
            .clone()
            .or_else(|| store.dir().map(|d| d.join("workspaces")))
            .unwrap_or_else(|| {
                std::env::temp_dir().join(format!("chronicle-workspaces-{}", std::process::id()))
            });
        let idle = IdleRuns::with_max(settings.idle_cache_events);
        let cluster = settings.cluster.clone().map(|c| Arc::new(Cluster::new(c)));
        Arc::new(Shared {
            store,
            settings,
            workspaces,
            shutdown,
            tasks: TaskTracker::new(),
            bus,
            actors: Mutex::new(HashMap::new()),
            idle,
            facts,
            spawn,
            cluster,
        })
    }

    /// Runs `f` on the actors' mailboxes, under their lock (a session's release checks that none
    /// of its runs has an actor while no actor can start).
    pub(crate) fn with_actors<T>(
        &self,
        f: impl FnOnce(&HashMap<RunId, mpsc::Sender<Input>>) -> T,
    ) -> T {
        f(&self.actors.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// What is known of `run` without replaying it; `None` for a run that does not exist.
    pub(crate) fn facts(&self, run: RunId) -> Result<Option<RunFacts>> {
        self.facts.get(&self.store, run)
    }

    /// The memory items, up to date with every durable event.
    pub(crate) fn memory(&self) -> Result<MemoryIndex<'_>> {
        Ok(MemoryIndex::of(&self.store)?)
    }

    /// Records that `run` (with these facts) now ends with its session's tombstone.
    pub(crate) fn mark_deleted(&self, run: RunId, facts: RunFacts) {
        self.facts.mark_deleted(run, facts);
    }

    /// The cache of run facts, shared with the session reads.
    pub(crate) fn facts_cache(&self) -> Arc<Facts> {
        self.facts.clone()
    }

    /// The principal `run` belongs to; `None` for a run that does not exist.
    pub(crate) fn owner(&self, run: RunId) -> Result<Option<String>> {
        Ok(self.facts(run)?.map(|f| f.owner))
    }

    /// `run` exists, its session is not deleted, and `who` may act on it;
    /// [`Error::RunNotFound`] otherwise, also when it exists but is someone else's (existence is
    /// not disclosed).
    pub(crate) fn authorize(&self, who: &crate::Principal, run: RunId) -> Result<()> {
        match self.facts(run)? {
            Some(f) if !f.deleted && who.may_access(&f.owner) => Ok(()),
            _ => Err(Error::RunNotFound(run)),
        }
    }

    /// The runs of `session`, oldest first, when `who` may see it (empty for a session without
    /// runs); [`Error::SessionNotFound`] for someone else's session or a deleted one.
    pub(crate) fn session_runs(
        &self,
        who: &crate::Principal,
        session: &SessionId,
    ) -> Result<Vec<RunId>> {
        self.facts.session_runs(&self.store, who, session)
    }

    /// Runs whose actors are known by their mailboxes now: the runs that are going on, and
    /// those whose actors are just stopping.
    pub(crate) fn actors(&self) -> usize {
        self.actors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Forgets the mailbox `tx` of `run`'s actor, which stopped: a sender kept here would keep
    /// the channel and its buffer alive, for every run ever made. A newer actor's mailbox,
    /// started meanwhile, stays.
    pub(crate) fn actor_stopped(&self, run: RunId, tx: &mpsc::Sender<Input>) {
        let mut actors = self.actors.lock().unwrap_or_else(PoisonError::into_inner);
        if actors.get(&run).is_some_and(|kept| kept.same_channel(tx)) {
            actors.remove(&run);
        }
    }

    fn open_mailbox(&self, run: RunId) -> Option<mpsc::Sender<Input>> {
        let actors = self.actors.lock().unwrap_or_else(PoisonError::into_inner);
        actors.get(&run).filter(|tx| !tx.is_closed()).cloned()
    }

    /// Hands `input` to the actor of `run`, starting one when there is none (or the last one
    /// finished), and returns the actor's mailbox. A new actor gets the input in its mailbox
    /// *before* it starts, so an actor of a finished run always answers what it was started for.
    pub(crate) async fn deliver(
        self: &Arc<Self>,
        run: RunId,
        input: Option<Input>,
    ) -> Result<mpsc::Sender<Input>> {
        let input = match (self.open_mailbox(run), input) {
            (Some(tx), None) => return Ok(tx),
            (Some(tx), Some(input)) => match tx.send(input).await {
                Ok(()) => return Ok(tx),
                Err(back) => Some(back.0),
            },
            (None, input) => input,
        };
        let mut input = input;
        let (live, tx, rx, raced) = loop {
            if self.shutdown.is_cancelled() {
                return Err(Error::ShuttingDown);
            }
            let Some(head) = self.store.run_head_async(run).await? else {
                return Err(Error::RunNotFound(run));
            };
            // On a node of a cluster, the run's session must be this node's first.
            if let Some(cluster) = &self.cluster {
                cluster.ensure(self, head.session_id.as_str()).await?;
            }
            let live = match self.idle.take(run, head.last_seq) {
                Some(live) => live,
                None => self.store.load_async(run).await?,
            };
            let (tx, mut rx) = mpsc::channel(self.settings.actor_mailbox_messages.max(1));
            if let Some(input) = input.take() {
                // A fresh channel has room for one input.
                let _ = tx.try_send(input);
            }
            let raced = {
                let mut actors = self.actors.lock().unwrap_or_else(PoisonError::into_inner);
                match actors.get(&run).filter(|tx| !tx.is_closed()) {
                    Some(old) => Some(old.clone()),
                    None if self
                        .cluster
                        .as_ref()
                        .is_some_and(|c| !c.may_start(self, head.session_id.as_str(), run)) =>
                    {
                        None
                    }
                    None => {
                        actors.insert(run, tx.clone());
                        break (live, tx, rx, None);
                    }
                }
            };
            if raced.is_some() {
                break (live, tx, rx, raced);
            }
            // The session was released meanwhile: claim it again.
            live.discard();
            input = rx.try_recv().ok();
        };
        if let Some(old) = raced {
            // Another caller started an actor meanwhile: this one is dropped unstarted and the
            // input goes there instead.
            live.discard();
            let mut rx = rx;
            if let Ok(input) = rx.try_recv() {
                old.send(input).await.map_err(|_| Error::ShuttingDown)?;
            }
            return Ok(old);
        }
        (self.spawn)(self.clone(), live, tx.clone(), rx);
        Ok(tx)
    }

    /// Sends an input built by `make` and awaits its reply; a reply lost to an actor that was
    /// just finishing is asked again once.
    pub(crate) async fn ask<T>(
        self: &Arc<Self>,
        run: RunId,
        make: impl Fn(oneshot::Sender<Result<T>>) -> Input,
    ) -> Result<T> {
        for _ in 0..2 {
            let (reply, rx) = oneshot::channel();
            let mailbox = self.deliver(run, Some(make(reply))).await?;
            if let Some(r) = crate::runtime::mailbox::answer(&mailbox, rx).await {
                return r;
            }
        }
        Err(Error::ShuttingDown)
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{Actor, Event};

    use super::*;

    /// A run of `events + 1` events in `store` (its start, then commands), loaded for appending.
    async fn run_of(store: &Store, events: usize) -> LiveRun {
        let mut live = store.load(RunId(uuid::Uuid::now_v7())).unwrap();
        live.append(vec![Event::RunStarted {
            session_id: "s".into(),
            user_id: None,
            request_id: "r".into(),
            query: "q".into(),
            config: Default::default(),
            parent: None,
            owner: Some("p".into()),
            traceparent: None,
        }])
        .await
        .unwrap();
        let said = |i: usize| Event::CommandReceived {
            command: format!("/todos {i}"),
            by: Actor::user("p"),
            accepted: true,
            said: None,
        };
        for from in (0..events).step_by(500) {
            let batch = (from..events.min(from + 500)).map(said).collect();
            live.append(batch).await.unwrap();
        }
        live
    }

    #[tokio::test]
    async fn a_kept_state_is_taken_once_and_only_at_the_runs_newest_event() {
        let store = Store::memory();
        let idle = IdleRuns::default();
        let last = IDLE_EVENTS_MIN;
        let live = run_of(&store, last as usize).await;
        let run = live.run_id();
        let state = live.state().clone();
        idle.keep(live);
        assert!(idle.take(run, last - 1).is_none(), "the run moved on since");
        assert!(idle.take(run, last).is_none(), "a miss forgets the state");

        let live = store.load(run).unwrap();
        idle.keep(live);
        let taken = idle.take(run, last).expect("kept at its last seq");
        assert_eq!(taken.state(), &state);
        assert!(idle.take(run, last).is_none(), "taken once");

        let short = run_of(&store, IDLE_EVENTS_MIN as usize - 2).await;
        let run = short.run_id();
        idle.keep(short);
        assert!(
            idle.take(run, IDLE_EVENTS_MIN - 2).is_none(),
            "a short run loads from the log"
        );
        assert!(idle.take(RunId(uuid::Uuid::now_v7()), 0).is_none());
    }

    #[tokio::test]
    async fn a_run_kept_and_taken_again_and_again_stays_one_entry_and_is_evicted_by_age() {
        let store = Store::memory();
        let idle = IdleRuns::default();
        let per_run = IDLE_EVENTS_MAX / 4;
        let hot = run_of(&store, per_run as usize - 1).await;
        let (hot_run, last) = (hot.run_id(), per_run - 1);
        idle.keep(hot);
        let mut others = Vec::new();
        for _ in 0..2 {
            let live = run_of(&store, per_run as usize - 1).await;
            others.push(live.run_id());
            idle.keep(live);
        }
        // A run polled again and again (each command takes its state and leaves it again).
        for _ in 0..1000 {
            let live = idle.take(hot_run, last).expect("kept");
            idle.keep(live);
        }
        assert!(
            idle.queued() <= 3 * 2 + 64,
            "{} entries queued",
            idle.queued()
        );
        // Now the newest: the two kept before it are the oldest and go first.
        for _ in 0..2 {
            let live = run_of(&store, per_run as usize - 1).await;
            idle.keep(live);
        }
        assert!(idle.take(others[0], last).is_none(), "the oldest made room");
        assert!(
            idle.take(hot_run, last).is_some(),
            "kept: used most recently"
        );
    }

    #[tokio::test]
    async fn kept_states_fold_at_most_the_event_budget_oldest_dropped_first() {
        let store = Store::memory();
        let idle = IdleRuns::default();
        let per_run = IDLE_EVENTS_MAX / 4;
        let mut runs = Vec::new();
        for _ in 0..5 {
            let live = run_of(&store, per_run as usize - 1).await;
            runs.push(live.run_id());
            idle.keep(live);
        }
        let last = per_run - 1;
        assert!(idle.take(runs[0], last).is_none(), "the oldest made room");
        for run in &runs[1..] {
            assert!(idle.take(*run, last).is_some());
        }
        // A state larger than the whole budget is not kept.
        let big = run_of(&store, IDLE_EVENTS_MAX as usize).await;
        let run = big.run_id();
        idle.keep(big);
        assert!(idle.take(run, IDLE_EVENTS_MAX).is_none());
    }
}
