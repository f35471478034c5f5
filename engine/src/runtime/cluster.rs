//! One node of several on a shared store.
//!
//! The session is the unit: one node at a time drives a session's runs (its workspace, its turn
//! policy and its busy check stay on one node). The store records who owns each session, with an
//! epoch its appends are fenced by ([`crate::store::Membership`]). This module keeps the node's
//! side: it claims a session before it starts an actor in it (or says which node drives it),
//! heartbeats, declares silent nodes dead and claims their sessions, claims sessions whose
//! wake-up time passed, and releases sessions whose runs only wait, so that a run parked at an
//! approval needs no live node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chronicle_schemas::{RunId, SessionId, Timestamp};

use crate::plugin::settings::ClusterSettings;
use crate::runtime::shared::Shared;
use crate::store::{Claim, Lease, Membership, Release};
use crate::{Error, Result};

/// What became of a run's actor in a session this node owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    /// An actor drives it (or was started and stopped another way: the run may have work left).
    Active,
    /// It waits for a person with nothing in flight; it has work again at this time.
    Parked(Option<Timestamp>),
    /// It ended.
    Ended,
}

#[derive(Debug)]
struct Local {
    runs: HashMap<RunId, Mark>,
    touched: Instant,
    /// Being released: no actor may start in it until it is claimed again.
    releasing: bool,
}

impl Local {
    fn new() -> Self {
        Local {
            runs: HashMap::new(),
            touched: Instant::now(),
            releasing: false,
        }
    }

    /// When the session has work again: the earliest wake-up of its parked runs, now for a run
    /// that stopped with work left, `None` when only an input can give it work.
    fn wake_at(&self, now: Timestamp) -> Option<i64> {
        self.runs
            .values()
            .filter_map(|m| match m {
                Mark::Active => Some(now.0),
                Mark::Parked(t) => t.map(|t| t.0),
                Mark::Ended => None,
            })
            .min()
    }
}

/// The node's side of session ownership.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub settings: ClusterSettings,
    local: Mutex<HashMap<String, Local>>,
}

/// How long a caller waits for a release of the session it needs to end before it claims it.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

impl Cluster {
    pub(crate) fn new(settings: ClusterSettings) -> Self {
        Cluster {
            settings,
            local: Mutex::default(),
        }
    }

    fn lease(&self) -> Lease {
        Lease {
            ttl: Duration::from_millis(self.settings.lease_ms),
            crash_grace: Duration::from_millis(self.settings.crash_grace_ms),
        }
    }

    fn locals(&self) -> std::sync::MutexGuard<'_, HashMap<String, Local>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn membership(shared: &Shared) -> Result<&dyn Membership> {
        shared.store.membership().ok_or(Error::ShuttingDown)
    }

    /// Joins the store as this node and starts the node's background work.
    pub(crate) async fn join(self: &Arc<Self>, shared: &Arc<Shared>) -> Result<()> {
        let m = shared.store.membership().ok_or_else(|| {
            Error::Store(crate::store::Error::Unopenable(
                "several nodes need a store they share (PostgreSQL): this one serves one process"
                    .into(),
            ))
        })?;
        m.join(&self.settings.node_name, &self.settings.advertise_url)
            .await?;
        let beat = Duration::from_millis(self.settings.heartbeat_ms.max(10));
        // The heartbeat on a task of its own: nothing else the node does can delay it.
        let (store, stop) = (shared.store.clone(), shared.shutdown.clone());
        shared.tasks.clone().spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(beat) => {}
                }
                let Some(m) = store.membership() else { return };
                match m.heartbeat().await {
                    Ok(()) => {}
                    Err(e @ crate::store::Error::Fenced(_)) => {
                        tracing::error!(error = %e, "this node was fenced: it stops");
                        return;
                    }
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed; trying again"),
                }
            }
        });
        let (this, shared) = (self.clone(), shared.clone());
        let stop = shared.shutdown.clone();
        shared.tasks.clone().spawn(async move {
            let tick = beat / 2;
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(tick) => {}
                }
                if let Err(e) = this.tick(&shared).await {
                    if matches!(e, Error::Store(crate::store::Error::Fenced(_))) {
                        tracing::error!(error = %e, "this node was fenced: it stops");
                        return;
                    }
                    tracing::warn!(error = %e, "cluster upkeep failed; trying again");
                }
            }
        });
        Ok(())
    }

    /// One look: dead nodes, due sessions, idle sessions.
    async fn tick(self: &Arc<Self>, shared: &Arc<Shared>) -> Result<()> {
        let m = Self::membership(shared)?;
        m.sweep(self.lease()).await?;
        for session in m.claim_due(self.settings.claim_batch).await? {
            tracing::info!(session, "claimed a session that was due");
            self.claimed(shared, &session);
        }
        self.release_idle(shared).await;
        Ok(())
    }

    /// Makes this node the owner of `session`, claiming it when nobody drives it (or its node is
    /// dead); [`Error::Elsewhere`] when another live node does.
    pub(crate) async fn ensure(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        session: &str,
    ) -> Result<()> {
        let m = Self::membership(shared)?;
        let deadline = Instant::now() + RELEASE_WAIT;
        loop {
            let releasing = {
                let mut locals = self.locals();
                match locals.get_mut(session) {
                    Some(l) if l.releasing => true,
                    Some(l) if m.owns(session) => {
                        l.touched = Instant::now();
                        return Ok(());
                    }
                    _ => false,
                }
            };
            if releasing {
                if Instant::now() >= deadline {
                    return Err(Error::Store(crate::store::Error::Unavailable(format!(
                        "session {session} is being handed over; try again"
                    ))));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            return match m.claim(session, self.lease()).await? {
                Claim::Mine(_) => {
                    self.claimed(shared, session);
                    Ok(())
                }
                Claim::Elsewhere(node) => Err(Error::Elsewhere {
                    session: session.to_owned(),
                    node: node.name,
                    url: node.url,
                }),
            };
        }
    }

    /// A session became this node's: its unfinished runs get actors (a run that waits for a
    /// person parks again at once).
    fn claimed(self: &Arc<Self>, shared: &Arc<Shared>, session: &str) {
        {
            let mut locals = self.locals();
            let l = locals.entry(session.to_owned()).or_insert_with(Local::new);
            l.releasing = false;
            l.touched = Instant::now();
        }
        let (shared, session) = (shared.clone(), SessionId(session.to_owned()));
        shared.tasks.clone().spawn(async move {
            let store = shared.store.clone();
            let s = session.clone();
            let runs = match tokio::task::spawn_blocking(move || store.session_runs(&s)).await {
                Ok(Ok(runs)) => runs,
                Ok(Err(e)) => {
                    tracing::warn!(session = %session, error = %e, "listing a claimed session's runs failed");
                    return;
                }
                Err(_) => return,
            };
            for run in runs {
                match shared.store.run_head_async(run).await {
                    Ok(Some(head)) if !head.terminal => {
                        if let Err(e) = shared.deliver(run, None).await {
                            tracing::warn!(run = %run, error = %e, "resuming a claimed run failed");
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(run = %run, error = %e, "reading a claimed run failed"),
                }
            }
        });
    }

    /// Whether an actor of `run` may start in `session` now; asked under the actors' lock, so a
    /// release cannot cross it. Marks the run active.
    pub(crate) fn may_start(&self, shared: &Shared, session: &str, run: RunId) -> bool {
        let owns = shared.store.membership().is_some_and(|m| m.owns(session));
        let mut locals = self.locals();
        match locals.get_mut(session) {
            Some(l) if owns && !l.releasing => {
                l.runs.insert(run, Mark::Active);
                l.touched = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// A run's actor stopped: it ended, or it only waits.
    pub(crate) fn stopped(&self, session: &str, run: RunId, mark: Mark) {
        if let Some(l) = self.locals().get_mut(session) {
            l.runs.insert(run, mark);
            l.touched = Instant::now();
        }
    }

    /// Releases the sessions whose runs have no actor and have had no work for a while, each
    /// with the time it has work again.
    async fn release_idle(&self, shared: &Arc<Shared>) {
        let Ok(m) = Self::membership(shared) else {
            return;
        };
        let idle = Duration::from_millis(self.settings.release_idle_ms);
        let now = crate::runtime::actor::now();
        let due: Vec<Release> = shared.with_actors(|actors| {
            let mut locals = self.locals();
            let mut due = Vec::new();
            for (session, l) in locals.iter_mut() {
                let busy = l
                    .runs
                    .keys()
                    .any(|r| actors.get(r).is_some_and(|tx| !tx.is_closed()));
                if l.releasing || busy || l.touched.elapsed() < idle {
                    continue;
                }
                l.releasing = true;
                due.push(Release {
                    session: session.clone(),
                    wake_at_us: l.wake_at(now),
                });
            }
            due
        });
        for r in due {
            let session = r.session.clone();
            match m.release(r).await {
                Ok(()) => {
                    let mut locals = self.locals();
                    if locals.get(&session).is_some_and(|l| l.releasing) {
                        locals.remove(&session);
                    }
                    tracing::debug!(session, "released an idle session");
                }
                Err(e) => {
                    tracing::warn!(session, error = %e, "releasing a session failed");
                    if let Some(l) = self.locals().get_mut(&session) {
                        l.releasing = false;
                    }
                }
            }
        }
    }

    /// Sessions this node holds now (for a benchmark and the tests).
    pub(crate) fn sessions(&self) -> usize {
        self.locals().len()
    }

    /// Leaves the cluster: every session released, due now, for the other nodes.
    pub(crate) async fn leave(&self, shared: &Shared) {
        if let Ok(m) = Self::membership(shared)
            && let Err(e) = m.leave().await
        {
            tracing::warn!(error = %e, "leaving the cluster failed; the others take over once the lease ends");
        }
        self.locals().clear();
    }
}
