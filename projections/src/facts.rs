//! [`RunFacts`]: the few facts about a run that lists and recovery need (who owns it, its
//! session, its status, its approvals), folded from its events in memory that grows only with
//! the run's approvals, so an index can keep them for every run without keeping every run's
//! state.
//!
//! The fold agrees with [`RunState`](crate::RunState) wherever both say something: its `status`
//! is the supervisor's `run_status`, its `pending` the approvals the approvals projection has
//! pending and its `settled` the others, with their status. A `RunRestored` is the one event it cannot fold by itself: the caller passes the
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

/// One approval no longer pending: its id, when it was requested, the seq of the request, and how
/// it ended (approved, rejected, edited, expired or cancelled).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledApproval {
    pub approval_id: ApprovalId,
    pub requested_at: Timestamp,
    pub requested_seq: u64,
    pub status: ApprovalStatus,
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
    /// The approvals no longer pending, in request order (the approvals projection's others).
    pub settled: Vec<SettledApproval>,
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
                    self.settle(old, ApprovalStatus::Cancelled);
                    self.waiting_on.retain(|id| id != old);
                }
                if !self.waiting_on.contains(approval_id) {
                    self.waiting_on.push(approval_id.clone());
                }
                // A repeated id is ignored, as the approvals projection ignores it.
                let known = self.pending.iter().any(|p| &p.approval_id == approval_id)
                    || self.settled.iter().any(|s| &s.approval_id == approval_id);
                if !known {
                    self.pending.push(PendingApproval {
                        approval_id: approval_id.clone(),
                        requested_at: env.at,
                        requested_seq: env.seq,
                    });
                }
                self.status = RunStatus::WaitingForApproval;
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                ..
            } => self.decided(approval_id, (*decision).into()),
            Event::ApprovalExpired { approval_id, .. } => {
                self.decided(approval_id, ApprovalStatus::Expired);
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

    /// An approval decided (or expired): no longer pending nor waited on.
    fn decided(&mut self, approval_id: &ApprovalId, status: ApprovalStatus) {
        self.settle(approval_id, status);
        self.waiting_on.retain(|id| id != approval_id);
        if self.waiting_on.is_empty() && self.status == RunStatus::WaitingForApproval {
            self.status = RunStatus::Running;
        }
    }

    /// Moves a pending approval to the settled ones, in request order.
    fn settle(&mut self, approval_id: &ApprovalId, status: ApprovalStatus) {
        let Some(at) = self
            .pending
            .iter()
            .position(|p| &p.approval_id == approval_id)
        else {
            return;
        };
        let p = self.pending.remove(at);
        let to = self
            .settled
            .partition_point(|s| s.requested_seq < p.requested_seq);
        self.settled.insert(
            to,
            SettledApproval {
                approval_id: p.approval_id,
                requested_at: p.requested_at,
                requested_seq: p.requested_seq,
                status,
            },
        );
    }

    /// A run's end cancels every approval still pending.
    fn finish(&mut self, status: RunStatus) {
        self.status = status;
        let ids: Vec<ApprovalId> = self.pending.iter().map(|p| p.approval_id.clone()).collect();
        for id in &ids {
            self.settle(id, ApprovalStatus::Cancelled);
        }
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
        let settled = state
            .approvals
            .list
            .iter()
            .filter(|a| a.status != ApprovalStatus::Pending)
            .map(|a| SettledApproval {
                approval_id: a.approval_id.clone(),
                requested_at: a.created_at,
                requested_seq: a.requested_seq,
                status: a.status,
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
            settled,
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
