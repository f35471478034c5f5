//! `RunState`: the three projections of one run folded together, with the restore semantics, and
//! the replay functions over any [`EventSource`].
//!
//! The supervisor state folds the *effective* history: `RunRestored { to_seq }` replaces it with
//! the state as it was right after `to_seq` (computed by a replay, which may itself pass through
//! earlier restores), then marks `restored_from`. The checkpoint tree and the approvals fold the
//! *whole* log: abandoned branches stay visible there.

use std::convert::Infallible;

use chronicle_schemas::{Envelope, Event, RunId, SupervisorState};
use serde::{Deserialize, Serialize};

use crate::{Approvals, CheckpointList, supervisor};

/// Where a replay reads a run's events (and, optionally, snapshots) from. The engine implements
/// it over sled; tests over a `Vec`. Implementations must yield events in seq order.
pub trait EventSource {
    type Error;

    /// Calls `f` with every event of the run whose seq is in `from_seq..=to_seq`, in order.
    fn for_each_event(
        &self,
        from_seq: u64,
        to_seq: u64,
        f: &mut dyn FnMut(Envelope) -> Result<(), Self::Error>,
    ) -> Result<(), Self::Error>;

    /// The newest snapshot whose `last_seq` is at or before `seq`, if the source keeps any.
    fn latest_snapshot(&self, seq: u64) -> Result<Option<RunState>, Self::Error> {
        let _ = seq;
        Ok(None)
    }
}

/// Everything projected from one run's events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunState {
    pub run_id: Option<RunId>,
    /// Seq of the last applied event; `None` before the first.
    pub last_seq: Option<u64>,
    pub supervisor: SupervisorState,
    pub checkpoints: CheckpointList,
    pub approvals: Approvals,
}

impl RunState {
    /// The seq the next event of this run must carry.
    pub fn next_seq(&self) -> u64 {
        self.last_seq.map_or(0, |s| s + 1)
    }

    /// Folds one event. Only a `RunRestored` reads from `src` (to rebuild the restored point).
    pub fn apply<S: EventSource>(&mut self, env: &Envelope, src: &S) -> Result<(), S::Error> {
        self.apply_replacing(env, src).map(drop)
    }

    /// [`RunState::apply`] that hands back the supervisor state a `RunRestored` replaced, so
    /// that the caller can free it off its own path (a long run's state is megabytes of values).
    pub fn apply_replacing<S: EventSource>(
        &mut self,
        env: &Envelope,
        src: &S,
    ) -> Result<Option<SupervisorState>, S::Error> {
        debug_assert_eq!(
            env.seq,
            self.next_seq(),
            "events must be applied in seq order"
        );
        if let Event::RunRestored {
            checkpoint_id,
            to_seq,
            ..
        } = &env.event
        {
            // A restore can only point backwards; clamp so a malformed event cannot recurse.
            let target = (*to_seq).min(env.seq.saturating_sub(1));
            let past = replay(src, target)?;
            let replaced = std::mem::replace(&mut self.supervisor, past.supervisor);
            self.supervisor.restored_from = Some(checkpoint_id.clone());
            self.checkpoints
                .on_restore(self.supervisor.last_checkpoint_id.clone());
            self.approvals.apply(env);
            self.run_id = Some(env.run_id);
            self.last_seq = Some(env.seq);
            return Ok(Some(replaced));
        }
        self.approvals.apply(env);
        supervisor::apply(&mut self.supervisor, env, &self.approvals);
        self.checkpoints.apply(env);
        self.run_id = Some(env.run_id);
        self.last_seq = Some(env.seq);
        Ok(None)
    }
}

/// The state right after `seq`, starting from the newest usable snapshot.
pub fn replay<S: EventSource>(src: &S, seq: u64) -> Result<RunState, S::Error> {
    let mut state = src.latest_snapshot(seq)?.unwrap_or_default();
    let from = state.next_seq();
    if from <= seq {
        src.for_each_event(from, seq, &mut |env| state.apply(&env, src))?;
    }
    Ok(state)
}

/// The state right after `seq`, folding every event from seq 0 and ignoring snapshots (also
/// inside restores). The reference that snapshot-based replay is tested against.
pub fn replay_from_zero<S: EventSource>(src: &S, seq: u64) -> Result<RunState, S::Error> {
    replay(&NoSnapshots(src), seq)
}

/// Hides a source's snapshots.
#[derive(Debug)]
pub struct NoSnapshots<'a, S>(pub &'a S);

impl<S: EventSource> EventSource for NoSnapshots<'_, S> {
    type Error = S::Error;
    fn for_each_event(
        &self,
        from_seq: u64,
        to_seq: u64,
        f: &mut dyn FnMut(Envelope) -> Result<(), Self::Error>,
    ) -> Result<(), Self::Error> {
        self.0.for_each_event(from_seq, to_seq, f)
    }
}

/// An in-memory run: its events (index = seq) and snapshots (sorted by `last_seq`).
#[derive(Clone, Debug, Default)]
pub struct VecSource {
    pub events: Vec<Envelope>,
    pub snapshots: Vec<RunState>,
}

impl EventSource for VecSource {
    type Error = Infallible;
    fn for_each_event(
        &self,
        from_seq: u64,
        to_seq: u64,
        f: &mut dyn FnMut(Envelope) -> Result<(), Infallible>,
    ) -> Result<(), Infallible> {
        let end = (to_seq as usize).saturating_add(1).min(self.events.len());
        for env in self.events.get(from_seq as usize..end).unwrap_or_default() {
            f(env.clone())?;
        }
        Ok(())
    }

    fn latest_snapshot(&self, seq: u64) -> Result<Option<RunState>, Infallible> {
        Ok(self
            .snapshots
            .iter()
            .rev()
            .find(|s| s.last_seq.is_some_and(|l| l <= seq))
            .cloned())
    }
}
