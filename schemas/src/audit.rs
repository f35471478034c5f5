//! The audit row: one approval decision (or expiry) with the request it answered and the decision
//! event's place in the chain. The projections fold a log into rows; the export encodes them and
//! `audit verify` reads them back, so the row is vocabulary every side shares.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    ApprovalId, Decision, Event, Hash, RunId, SessionId, Timestamp, TodoId, encode_record,
};

/// What an approval was about: a TODO (its agent runs) or one tool call of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    Todo,
    ToolCall,
}

impl SubjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::Todo => "todo",
            SubjectKind::ToolCall => "tool_call",
        }
    }
}

/// How an approval ended, as the audit shows it: a human's decision, or its expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditDecision {
    Approve,
    Reject,
    Edit,
    /// The approval's expiry passed (`ApprovalExpired`); the engine applied `on_expiry`.
    Expired,
}

impl AuditDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditDecision::Approve => "approve",
            AuditDecision::Reject => "reject",
            AuditDecision::Edit => "edit",
            AuditDecision::Expired => "expired",
        }
    }
}

impl From<Decision> for AuditDecision {
    fn from(d: Decision) -> Self {
        match d {
            Decision::Approve => AuditDecision::Approve,
            Decision::Reject => AuditDecision::Reject,
            Decision::Edit => AuditDecision::Edit,
        }
    }
}

/// One decision on one approval, with the request it answered and the decision event's place in
/// the chain.
///
/// There is one row per `ApprovalDecided` event, and also one per `ApprovalExpired` event, with
/// `decision: expired`, `decided_by: "engine"` and the applied action in `on_expiry`. Approvals
/// that were cancelled (by a restore, a superseding request or the run's end) were never decided
/// and have no row.
///
/// The row holds every field of its decision event: [`AuditRow::recompute_hash`] re-encodes the
/// event at `offset`/`seq` with `decided_at` as its time and `prev_hash` as its link, so a row
/// whose hash recomputes and matches the chain (`prev_hash` is the hash of the run's event at
/// `seq - 1`) is exactly what the log recorded. Field order is the export's column order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    pub run_id: RunId,
    /// From the run's `RunStarted` (empty if the fold never saw it).
    pub session_id: SessionId,
    pub approval_id: ApprovalId,
    /// `todo`, `tool_call`; `None` only for a decision whose request the fold never saw (the
    /// engine never writes one).
    pub subject_kind: Option<SubjectKind>,
    /// The TODO id, or the tool call id.
    pub subject: String,
    /// The TODO the subject belongs to (the subject itself for a TODO approval).
    pub todo_id: Option<TodoId>,
    /// The request's `tool_name`: the agent of a TODO approval, the tool of a tool-call one.
    pub tool_or_agent: String,
    pub requested_args: Value,
    pub decision: AuditDecision,
    /// The args that took effect: the edited ones for `edit`, the requested ones for `approve`,
    /// `None` for `reject` and `expired` (and for an `approve` whose request was never seen).
    pub effective_args: Option<Value>,
    /// The authenticated principal (never a name the client typed), or `engine` for an expiry.
    pub decided_by: String,
    pub comment: Option<String>,
    /// Only for `expired`: what the engine did about it.
    pub on_expiry: Option<Decision>,
    /// When the request was appended; `None` as for `subject_kind`.
    pub requested_at: Option<Timestamp>,
    /// When the decision event was appended (its `at`).
    pub decided_at: Timestamp,
    /// The decision event's seq in its run.
    pub seq: u64,
    /// The decision event's global offset.
    pub offset: u64,
    /// The decision event's chain hash.
    pub hash: Hash,
    /// The hash of the run's previous event (zeros at seq 0).
    pub prev_hash: Hash,
}

impl AuditRow {
    /// The decision event this row describes, rebuilt from the row's fields alone.
    pub fn decision_event(&self) -> Event {
        match self.decision {
            AuditDecision::Expired => Event::ApprovalExpired {
                approval_id: self.approval_id.clone(),
                // An expiry row always carries it; the default is the engine's default action.
                on_expiry: self.on_expiry.unwrap_or(Decision::Reject),
            },
            d => Event::ApprovalDecided {
                approval_id: self.approval_id.clone(),
                decision: match d {
                    AuditDecision::Approve => Decision::Approve,
                    AuditDecision::Reject => Decision::Reject,
                    _ => Decision::Edit,
                },
                // Only an edit carries edited args (the engine refuses them with anything else),
                // and for an edit they are the effective args.
                edited_args: if d == AuditDecision::Edit {
                    self.effective_args.clone()
                } else {
                    None
                },
                decided_by: self.decided_by.clone(),
                comment: self.comment.clone(),
            },
        }
    }

    /// The chain hash of [`AuditRow::decision_event`] stored at this row's position after
    /// `prev_hash`: equal to `hash` iff the row states exactly what the log recorded.
    pub fn recompute_hash(&self) -> Result<Hash, crate::Error> {
        encode_record(
            self.offset,
            self.run_id,
            self.seq,
            self.decided_at,
            &self.prev_hash,
            &self.decision_event(),
        )
        .map(|(_, hash)| hash)
    }

    /// Whether the row's fields re-encode to its `hash` (see [`AuditRow::recompute_hash`]).
    pub fn hash_recomputes(&self) -> bool {
        self.recompute_hash().is_ok_and(|h| h == self.hash)
    }
}
