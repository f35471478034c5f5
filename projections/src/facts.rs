//! [`RunFacts`]: the few facts about a run that lists and recovery need (who owns it, its
//! session, its status, its pending approvals), folded from its events in constant memory, so an
//! index can keep them for every run without keeping every run's state.
//!
//! The fold agrees with [`RunState`](crate::RunState) wherever both say something: its `status`
//! is the supervisor's `run_status` and its `pending` the approvals the approvals projection has
//! pending. A `RunRestored` is the one event it cannot fold by itself: the caller passes the
//! run's state right after it, as [`RunFacts::restored`].

use chronicle_schemas::{
    ApprovalId, ApprovalStatus, Envelope, Event, OWNER_OF_OLD_RUNS, RunId, RunStatus, SessionId,
    Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::RunState;

/// One pending approval: its id, when it was requested, and the seq of the request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub approval_id: ApprovalId,
    pub requested_at: Timestamp,
    pub requested_seq: u64,
}

/// What lists and recovery need to know of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunFacts {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub owner: String,
    pub user_id: Option<String>,
    /// The run that started this one (a sub-agent run), if any.
    pub parent: Option<RunId>,
    pub created_at: Timestamp,
    /// The time of its newest event.
    pub updated_at: Timestamp,
    pub last_seq: u64,
    pub status: RunStatus,
    /// Its session was deleted (the run's last event is the tombstone).
    pub deleted: bool,
    /// The approvals that wait for a decision, oldest first (the approvals projection's pending
    /// ones).
    pub pending: Vec<PendingApproval>,
    /// The approvals the supervisor waits on (its `pending_approval_ids`): what makes the status
    /// `waiting_for_approval`. After a restore it may differ from `pending`.
    pub waiting_on: Vec<ApprovalId>,
}

impl RunFacts {
    /// Folds one event of the run. `RunRestored` is left to [`RunFacts::restored`]: this only
    /// moves the times and the seq for it.
    pub fn apply(&mut self, env: &Envelope) {
        self.updated_at = env.at;
        self.last_seq = env.seq;
        match &env.event {
            Event::RunStarted {
                session_id,
                user_id,
                parent,
                owner,
                ..
            } => {
                self.run_id = env.run_id;
                self.session_id = session_id.clone();
                self.user_id.clone_from(user_id);
                self.parent = parent.as_ref().map(|p| p.run_id);
                self.owner = owner
                    .clone()
                    .unwrap_or_else(|| OWNER_OF_OLD_RUNS.to_owned());
                self.created_at = env.at;
                self.status = RunStatus::Running;
            }
            Event::ApprovalRequested {
                approval_id,
                supersedes,
                ..
            } => {
                if let Some(old) = supersedes {
                    self.pending.retain(|p| &p.approval_id != old);
                    self.waiting_on.retain(|id| id != old);
                }
                if !self.waiting_on.contains(approval_id) {
                    self.waiting_on.push(approval_id.clone());
                }
                if !self.pending.iter().any(|p| &p.approval_id == approval_id) {
                    self.pending.push(PendingApproval {
                        approval_id: approval_id.clone(),
                        requested_at: env.at,
                        requested_seq: env.seq,
                    });
                }
                self.status = RunStatus::WaitingForApproval;
            }
            Event::ApprovalDecided { approval_id, .. }
            | Event::ApprovalExpired { approval_id, .. } => {
                self.pending.retain(|p| &p.approval_id != approval_id);
                self.waiting_on.retain(|id| id != approval_id);
                if self.waiting_on.is_empty() && self.status == RunStatus::WaitingForApproval {
                    self.status = RunStatus::Running;
                }
            }
            Event::RunInterrupted { .. } if !self.waiting_on.is_empty() => {
                self.status = RunStatus::WaitingForApproval;
            }
            Event::RunCompleted { .. } => self.finish(RunStatus::Completed),
            Event::RunFailed { .. } => self.finish(RunStatus::Failed),
            Event::RunCancelled { .. } => self.finish(RunStatus::Cancelled),
            Event::SessionDeleted { .. } => self.deleted = true,
            _ => {}
        }
    }

    /// A run's end cancels every approval still pending.
    fn finish(&mut self, status: RunStatus) {
        self.status = status;
        self.pending.clear();
        self.waiting_on.clear();
    }

    /// The facts of a run whose state (right after a `RunRestored`, or at any seq) is `state`.
    pub fn of_state(state: &RunState, created_at: Timestamp, updated_at: Timestamp) -> Self {
        let sup = &state.supervisor;
        let pending = state
            .approvals
            .list
            .iter()
            .filter(|a| a.status == ApprovalStatus::Pending)
            .map(|a| PendingApproval {
                approval_id: a.approval_id.clone(),
                requested_at: a.created_at,
                requested_seq: a.requested_seq,
            })
            .collect();
        RunFacts {
            run_id: state.run_id.unwrap_or_default(),
            session_id: sup.session_id.clone(),
            owner: sup.owner.clone(),
            user_id: sup.user_id.clone(),
            parent: sup.parent.as_ref().map(|p| p.run_id),
            created_at,
            updated_at,
            last_seq: state.last_seq.unwrap_or(0),
            status: sup.run_status,
            deleted: sup.session_deleted,
            pending,
            waiting_on: sup.pending_approval_ids.clone(),
        }
    }

    /// After a `RunRestored`: the facts of the state right after it (times and seq kept as
    /// [`RunFacts::apply`] moved them).
    pub fn restored(&mut self, state: &RunState) {
        *self = RunFacts::of_state(state, self.created_at, self.updated_at);
    }

    /// Not ended (completed, failed or cancelled): a run the engine drives.
    pub fn is_live(&self) -> bool {
        !self.status.is_terminal()
    }
}
