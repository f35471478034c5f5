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
}

impl Store {
    /// Loads a run's current state (from its newest snapshot, then the log) for appending. A run
    /// with no events yet loads as an empty state whose next seq is 0.
    pub fn load(&self, run_id: RunId) -> Result<LiveRun> {
        let state = match self.run_head(run_id)? {
            Some(head) => self.state_at(run_id, head.last_seq)?,
            None => RunState::default(),
        };
        Ok(LiveRun {
            store: self.clone(),
            run_id,
            state,
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

    /// Appends `events` after the last applied one; a concurrent writer makes this a
    /// `Conflict` (reload and decide again). Returns the stored envelopes, already applied.
    pub async fn append(&mut self, events: Vec<Event>) -> Result<Vec<Envelope>> {
        let envs = self
            .store
            .append(self.run_id, self.state.next_seq(), events)
            .await?;
        let interval = self.store.options().snapshot_interval_events;
        let src = self.store.source(self.run_id);
        for env in &envs {
            self.state.apply(env, &src)?;
            // A snapshot is a cache: the append is already durable, so failing to cache it
            // must not turn an acknowledged append into an error.
            if snapshot::is_due(env.seq, interval)
                && let Err(e) = self.store.put_snapshot(&self.state)
            {
                tracing::warn!(run = %self.run_id, seq = env.seq, error = %e, "snapshot not written");
            }
        }
        Ok(envs)
    }
}
