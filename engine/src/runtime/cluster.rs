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
    /// The runs whose chunks are relayed here from the node that drives them.
    relays: Arc<Mutex<std::collections::HashSet<RunId>>>,
    http: reqwest::Client,
}

/// The header a node shows another its cluster's secret in.
pub const CLUSTER_TOKEN_HEADER: &str = "x-chronicle-cluster-token";

/// The route a node serves its runs' live chunks to the other nodes on.
pub fn chunks_path(run: RunId) -> String {
    format!("/internal/v1/runs/{run}/chunks")
}

/// The longest line of relayed chunks taken: a chunk holds at most a few KiB of text.
const RELAY_LINE_BYTES_MAX: usize = 64 * 1024;

/// How long a relay waits between looks at whether anyone still listens (and who drives the
/// run); longer while no other node does.
const RELAY_LOOK: Duration = Duration::from_millis(500);
const RELAY_IDLE_LOOK: Duration = Duration::from_secs(2);

/// How long a relay waits for another node's chunk route to answer.
const RELAY_CONNECT: Duration = Duration::from_secs(5);

/// Every how many looks a node asks which sessions the database says are its own.
const ADOPT_EVERY_TICKS: u64 = 20;

/// How long a caller waits for a release of the session it needs to end before it claims it.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

impl Cluster {
    pub(crate) fn new(settings: ClusterSettings) -> Self {
        Cluster {
            settings,
            local: Mutex::default(),
            relays: Arc::default(),
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
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
            for n in 1u64.. {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(tick) => {}
                }
                if let Err(e) = this.tick(&shared, n % ADOPT_EVERY_TICKS == 0).await {
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

    /// One look: dead nodes, due sessions, idle sessions; and now and then, sessions the
    /// database says are this node's that it does not know of.
    async fn tick(self: &Arc<Self>, shared: &Arc<Shared>, adopt: bool) -> Result<()> {
        let m = Self::membership(shared)?;
        m.sweep(self.lease()).await?;
        if adopt {
            for session in m.adopt().await? {
                tracing::warn!(session, "adopted a session whose claim's answer was lost");
                self.claimed(shared, &session);
            }
        }
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
                // Its node has not been heard from past the crash grace, yet holds its lock: a
                // stopped process or a partition, which its lease will tell. Sending it the
                // request would only wait; the caller tries again instead.
                Claim::Elsewhere(node) if node.quiet_ms >= self.settings.crash_grace_ms => {
                    Err(Error::Store(crate::store::Error::Unavailable(format!(
                        "session {session} is driven by node {} that has not been heard from \
                         for {} ms; try again",
                        node.name, node.quiet_ms
                    ))))
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

    /// Relays the live chunks of `run`, which another node may drive, to this node's subscribers
    /// while any listens: from the session's owner, found again after every change of owner.
    pub(crate) fn relay_chunks(&self, shared: &Shared, run: RunId, session: SessionId) {
        if !self
            .relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run)
        {
            return;
        }
        let relay = Relay {
            run,
            session,
            relays: self.relays.clone(),
            bus: shared.bus.clone(),
            store: shared.store.clone(),
            http: self.http.clone(),
            secret: self.settings.secret.clone(),
            me: self.settings.node_name.clone(),
        };
        let stop = shared.shutdown.clone();
        shared.tasks.spawn(async move {
            tokio::select! {
                () = relay.run() => {}
                () = stop.cancelled() => {}
            }
        });
    }

    /// Whether this node owns `session` now (or is releasing it).
    pub(crate) fn holds(&self, session: &str) -> bool {
        self.locals().contains_key(session)
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

/// One run's chunks relayed from the node that drives it (forgotten from the set when it ends).
struct Relay {
    run: RunId,
    session: SessionId,
    relays: Arc<Mutex<std::collections::HashSet<RunId>>>,
    bus: crate::runtime::bus::Bus,
    store: crate::store::Store,
    http: reqwest::Client,
    secret: String,
    me: String,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.run);
    }
}

impl Relay {
    async fn run(self) {
        while self.bus.listens_for_chunks(self.run) {
            let owner = match self.store.membership() {
                Some(m) => m.owner(self.session.as_str()).await.ok().flatten(),
                None => return,
            };
            match owner {
                // Driven elsewhere: its chunks come from there until the stream ends.
                Some(node) if node.name != self.me => {
                    if let Err(e) = self.pump(&node).await {
                        tracing::debug!(run = %self.run, error = %e, "relaying chunks: connecting again");
                    }
                }
                // Driven here (its chunks are this node's own) or by nobody now: look again
                // less often.
                _ => tokio::time::sleep(RELAY_IDLE_LOOK).await,
            }
            tokio::time::sleep(RELAY_LOOK).await;
        }
    }

    /// Whether `node` still drives the run's session.
    async fn still_owner(&self, node: &crate::store::Node) -> bool {
        let Some(m) = self.store.membership() else {
            return false;
        };
        match m.owner(self.session.as_str()).await {
            Ok(Some(now)) => now.name == node.name && now.incarnation == node.incarnation,
            Ok(None) => false,
            // The database out of reach: keep reading what comes.
            Err(_) => true,
        }
    }

    /// Reads the owner's chunk stream into this node's bus until it ends, nobody listens, or
    /// the session moved to another node.
    async fn pump(&self, node: &crate::store::Node) -> std::result::Result<(), String> {
        use tokio_stream::StreamExt;
        let url = format!(
            "{}{}",
            node.url.trim_end_matches('/'),
            chunks_path(self.run)
        );
        // The route answers its head at once; a node that does not (a stopped process) is
        // asked again later.
        let sent = self
            .http
            .get(&url)
            .header(CLUSTER_TOKEN_HEADER, &self.secret)
            .send();
        let res = tokio::time::timeout(RELAY_CONNECT, sent)
            .await
            .map_err(|_| format!("{url}: no answer within {RELAY_CONNECT:?}"))?
            .map_err(|e| e.to_string())?;
        if !res.status().is_success() {
            return Err(format!("{url}: {}", res.status()));
        }
        let mut body = res.bytes_stream();
        let mut line = Vec::new();
        // One timer for the whole stream: the looks happen while chunks flow too.
        let mut look = tokio::time::interval(RELAY_LOOK);
        look.tick().await;
        loop {
            let next = tokio::select! {
                next = body.next() => next,
                _ = look.tick() => {
                    if !self.bus.listens_for_chunks(self.run) || !self.still_owner(node).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            let bytes = match next {
                Some(Ok(b)) => b,
                Some(Err(e)) => return Err(e.to_string()),
                None => return Ok(()),
            };
            for piece in bytes.split_inclusive(|b| *b == b'\n') {
                line.extend_from_slice(piece);
                if line.len() > RELAY_LINE_BYTES_MAX {
                    return Err(format!("a relayed line over {RELAY_LINE_BYTES_MAX} bytes"));
                }
                if line.ends_with(b"\n") {
                    match serde_json::from_slice::<crate::chunks::RelayedChunk>(&line) {
                        Ok(c) => self.bus.relay(Arc::new(c.into())),
                        Err(e) => tracing::debug!(error = %e, "a relayed chunk does not decode"),
                    }
                    line.clear();
                }
            }
        }
    }
}
