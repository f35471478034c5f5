//! `LiveRun`: a run's projection kept in step with its own appends — the write path the run
//! actor uses. It appends with `expected_seq = state.next_seq()`, applies what was stored, and
//! caches a snapshot whenever one is due, so replays and restores of long runs stay cheap.

use chronicle_projections::{RunState, snapshot};
use chronicle_schemas::{Envelope, Event, RunId};

use crate::{Result, Store};

#[derive(Debug)]
pub struct LiveRun {
    store: Store,
    run_id: RunId,
    state: RunState,
    /// One past the newest offset this run wrote with `append_written` and has not yet seen
    /// durable; 0 when there is none.
    written_next: u64,
    /// When the next snapshot is due.
    snapshots: snapshot::Schedule,
}

/// Events [`Store::load_async`] holds at once.
const LOAD_PAGE_EVENTS: u64 = 256;

impl Store {
    /// Loads a run's current state (from its newest snapshot, then the log) for appending. A run
    /// with no events yet loads as an empty state whose next seq is 0.
    ///
    /// The state folds every event written, durable or not (another writer of the run may have
    /// stopped before its last events were durable): the loaded run remembers to wait for them
    /// before its state is shown to anyone ([`LiveRun::durable`]), so an answer never says more
    /// than a read after it shows.
    pub fn load(&self, run_id: RunId) -> Result<LiveRun> {
        let head = self.run_head(run_id)?;
        self.load_from(run_id, head)
    }

    /// [`Store::load`] that reads the run's head and events without blocking the caller's
    /// runtime (its newest snapshot is one short read).
    pub async fn load_async(&self, run_id: RunId) -> Result<LiveRun> {
        let Some(head) = self.run_head_async(run_id).await? else {
            return self.load_from(run_id, None);
        };
        let mut state = self
            .latest_snapshot(run_id, head.last_seq)?
            .unwrap_or_default();
        // A page at a time: a run without a snapshot (they are a cache) may be long.
        let src = self.source(run_id);
        let mut from = state.next_seq();
        while from <= head.last_seq {
            let to = head.last_seq.min(from.saturating_add(LOAD_PAGE_EVENTS - 1));
            let events = self.read_run_async(run_id, from, to).await?;
            if events.len() as u64 != to - from + 1 {
                return Err(crate::Error::Corrupt {
                    offset: head.last_offset,
                    reason: format!("run {run_id} has no seq {}", from + events.len() as u64),
                });
            }
            for env in events {
                state.apply(&env, &src)?;
            }
            from = to + 1;
        }
        let pending = head.last_offset >= self.durable_next_offset();
        Ok(LiveRun {
            store: self.clone(),
            run_id,
            state,
            written_next: if pending { head.last_offset + 1 } else { 0 },
            snapshots: snapshot::Schedule::new(self.options().snapshot_interval_events),
        })
    }

    fn load_from(&self, run_id: RunId, head: Option<crate::RunHead>) -> Result<LiveRun> {
        let (state, written_next) = match head {
            Some(head) => {
                let pending = head.last_offset >= self.durable_next_offset();
                let written_next = if pending { head.last_offset + 1 } else { 0 };
                (self.state_at(run_id, head.last_seq)?, written_next)
            }
            None => (RunState::default(), 0),
        };
        Ok(LiveRun {
            store: self.clone(),
            run_id,
            state,
            written_next,
            snapshots: snapshot::Schedule::new(self.options().snapshot_interval_events),
        })
    }
}

impl LiveRun {
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Drops the run's state off the caller's path (see [`free_elsewhere`]): a long run's
    /// state is megabytes of values.
    pub fn discard(self) {
        free_elsewhere(self.state);
    }

    /// Appends `events` after the last applied one; a concurrent writer makes this a
    /// `Conflict` (reload and decide again). Returns the stored envelopes, already applied, once
    /// they (and everything this run wrote before) are durable.
    pub async fn append(&mut self, events: Vec<Event>) -> Result<Vec<Envelope>> {
        let envs = self
            .store
            .append(self.run_id, self.state.next_seq(), events)
            .await?;
        self.written_next = 0;
        self.apply(&envs)?;
        Ok(envs)
    }

    /// [`LiveRun::append`] that returns once the events are written, before they are durable
    /// (see [`Store::append_written`]): the caller calls [`LiveRun::durable`] before anything
    /// outside the run may see their effect. When a snapshot is due it waits for durability
    /// first, so that no snapshot outlives the events it folds.
    pub async fn append_written(&mut self, events: Vec<Event>) -> Result<Vec<Envelope>> {
        let envs = self
            .store
            .append_written(self.run_id, self.state.next_seq(), events)
            .await?;
        if let Some(last) = envs.last() {
            self.written_next = last.offset + 1;
        }
        let mut probe = self.snapshots.clone();
        if envs.iter().any(|e| probe.due(e)) {
            self.durable().await?;
        }
        self.apply(&envs)?;
        Ok(envs)
    }

    /// Whether everything this run wrote is durable now.
    pub fn is_durable(&self) -> bool {
        self.written_next == 0 || self.store.durable_next_offset() >= self.written_next
    }

    /// Waits until everything this run wrote is durable.
    pub async fn durable(&mut self) -> Result<()> {
        if self.written_next > 0 {
            self.store.wait_durable(self.written_next).await?;
            self.written_next = 0;
        }
        Ok(())
    }

    /// Asks for a barrier if the run wrote events not yet known durable, without waiting: a run
    /// does so whenever it has nothing more to do for now, so that what it wrote becomes
    /// durable and visible soon.
    pub fn request_barrier(&self) {
        if self.written_next > 0 {
            self.store.request_barrier();
        }
    }

    /// Applies stored envelopes, and caches a snapshot whenever one is due.
    fn apply(&mut self, envs: &[Envelope]) -> Result<()> {
        let src = self.store.source(self.run_id);
        for env in envs {
            if let Some(replaced) = self.state.apply_replacing(env, &src)? {
                free_elsewhere(replaced);
            }
            // A snapshot is a cache: the append is already durable, so failing to cache it
            // must not turn an acknowledged append into an error.
            if self.snapshots.due(env)
                && let Err(e) = self.store.put_snapshot(&self.state)
            {
                tracing::warn!(run = %self.run_id, seq = env.seq, error = %e, "snapshot not written");
            }
        }
        Ok(())
    }
}

/// Frees a value on a blocking thread when there is a runtime (a restore replaces a run's whole
/// state, and freeing a long run's takes about a millisecond the restore's answer need not wait
/// for); otherwise here.
fn free_elsewhere<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(move || drop(value))),
        Err(_) => drop(value),
    }
}
