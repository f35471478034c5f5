//! What the engine's parts share: the store, the settings, the bus, shutdown, and the run
//! actors' mailboxes. [`Shared::deliver`] hands an input to a run's actor, starting one when
//! there is none; the actor itself is started through the function the engine registers, so this
//! layer does not depend on the actor.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use chronicle_schemas::RunId;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bus::Bus;
use crate::mailbox::Input;
use crate::memory::MemoryIndex;
use crate::settings::Settings;
use crate::store::{LiveRun, Store};
use crate::{Error, Result};

/// Starts a run actor on its state and its mailbox (the actor keeps a sender, for the agents and
/// tool executions it starts).
pub(crate) type SpawnActor = fn(Arc<Shared>, LiveRun, mpsc::Sender<Input>, mpsc::Receiver<Input>);

/// Owners [`Shared`] remembers before it starts over.
const OWNERS_CACHED_MAX: usize = 65_536;

pub(crate) struct Shared {
    pub store: Store,
    pub settings: Settings,
    /// Where sessions' workspaces live.
    pub workspaces: PathBuf,
    pub shutdown: CancellationToken,
    pub tasks: TaskTracker,
    pub bus: Bus,
    /// Every user's long-term memory (filled by [`crate::Engine::open`]); read it through
    /// [`Shared::memory`], which brings it up to date with the log first.
    memory: MemoryIndex,
    actors: Mutex<HashMap<RunId, mpsc::Sender<Input>>>,
    /// Runs' owners, read from their `RunStarted` (an owner never changes); at most
    /// [`OWNERS_CACHED_MAX`], then forgotten and read again.
    owners: Mutex<HashMap<RunId, String>>,
    spawn: SpawnActor,
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
        let bus = Bus::start(
            store.clone(),
            settings.bus_buffer_events,
            settings.bus_buffer_chunks,
            shutdown.clone(),
        );
        let workspaces = settings
            .workspace_root
            .clone()
            .or_else(|| store.dir().map(|d| d.join("workspaces")))
            .unwrap_or_else(|| {
                std::env::temp_dir().join(format!("chronicle-workspaces-{}", std::process::id()))
            });
        Arc::new(Shared {
            store,
            settings,
            workspaces,
            shutdown,
            tasks: TaskTracker::new(),
            bus,
            memory: MemoryIndex::default(),
            actors: Mutex::new(HashMap::new()),
            owners: Mutex::new(HashMap::new()),
            spawn,
        })
    }

    /// The memory index, up to date with every durable event.
    pub(crate) fn memory(&self) -> &MemoryIndex {
        self.memory
            .catch_up(&self.store, |run| self.owner(run).ok().flatten());
        &self.memory
    }

    /// Builds the memory index from the whole log (before any actor runs).
    pub(crate) fn scan_memory(&self) -> Result<()> {
        Ok(self.memory.scan(&self.store)?)
    }

    /// The principal `run` belongs to; `None` for a run that does not exist.
    pub(crate) fn owner(&self, run: RunId) -> Result<Option<String>> {
        if let Some(owner) = self
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&run)
        {
            return Ok(Some(owner.clone()));
        }
        let Some(first) = self.store.read_run(run, 0, 0).next().transpose()? else {
            return Ok(None);
        };
        let owner = match first.event {
            chronicle_schemas::Event::RunStarted { owner, .. } => owner,
            _ => None,
        }
        .unwrap_or_else(|| chronicle_schemas::OWNER_OF_OLD_RUNS.to_owned());
        let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        if owners.len() >= OWNERS_CACHED_MAX {
            owners.clear();
        }
        owners.insert(run, owner.clone());
        Ok(Some(owner))
    }

    /// `run` exists and `who` may act on it; [`Error::RunNotFound`] otherwise, also when it
    /// exists but is someone else's (existence is not disclosed).
    pub(crate) fn authorize(&self, who: &crate::Principal, run: RunId) -> Result<()> {
        match self.owner(run)? {
            Some(owner) if who.may_access(&owner) => Ok(()),
            _ => Err(Error::RunNotFound(run)),
        }
    }

    fn open_mailbox(&self, run: RunId) -> Option<mpsc::Sender<Input>> {
        let actors = self.actors.lock().unwrap_or_else(PoisonError::into_inner);
        actors.get(&run).filter(|tx| !tx.is_closed()).cloned()
    }

    /// Hands `input` to the actor of `run`, starting one when there is none (or the last one
    /// finished). A new actor gets the input in its mailbox *before* it starts, so an actor of a
    /// finished run always answers what it was started for.
    pub(crate) async fn deliver(self: &Arc<Self>, run: RunId, input: Option<Input>) -> Result<()> {
        let input = match (self.open_mailbox(run), input) {
            (Some(_), None) => return Ok(()),
            (Some(tx), Some(input)) => match tx.send(input).await {
                Ok(()) => return Ok(()),
                Err(back) => Some(back.0),
            },
            (None, input) => input,
        };
        if self.shutdown.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        if self.store.run_head(run)?.is_none() {
            return Err(Error::RunNotFound(run));
        }
        let live = self.store.load(run)?;
        let (tx, rx) = mpsc::channel(self.settings.actor_mailbox_messages.max(1));
        if let Some(input) = input {
            // A fresh channel has room for one input.
            let _ = tx.try_send(input);
        }
        let raced = {
            let mut actors = self.actors.lock().unwrap_or_else(PoisonError::into_inner);
            match actors.get(&run).filter(|tx| !tx.is_closed()) {
                Some(old) => Some(old.clone()),
                None => {
                    actors.insert(run, tx.clone());
                    None
                }
            }
        };
        if let Some(old) = raced {
            // Another caller started an actor meanwhile: this one is dropped unstarted and the
            // input goes there instead.
            let mut rx = rx;
            if let Ok(input) = rx.try_recv() {
                old.send(input).await.map_err(|_| Error::ShuttingDown)?;
            }
            return Ok(());
        }
        (self.spawn)(self.clone(), live, tx, rx);
        Ok(())
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
            self.deliver(run, Some(make(reply))).await?;
            if let Ok(r) = rx.await {
                return r;
            }
        }
        Err(Error::ShuttingDown)
    }
}
