//! Human approvals: what is asked (a TODO or a tool call), the decision, and its status.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ApprovalId, Timestamp, TodoId, ToolCallId};

/// What an approval is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Todo {
        todo_id: TodoId,
    },
    ToolCall {
        tool_call_id: ToolCallId,
        todo_id: TodoId,
    },
}

impl Subject {
    pub fn todo_id(&self) -> &TodoId {
        match self {
            Subject::Todo { todo_id } | Subject::ToolCall { todo_id, .. } => todo_id,
        }
    }
}

/// A human's answer to an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
    Edit,
}

impl Decision {
    /// The one rule for what a decision lets take effect: the edited args for `edit` (the
    /// requested ones if an edit carried none), the requested args for `approve`, nothing for
    /// `reject`.
    pub fn effective_args(
        self,
        edited: Option<&Value>,
        requested: Option<&Value>,
    ) -> Option<Value> {
        match self {
            Decision::Reject => None,
            Decision::Edit => edited.or(requested).cloned(),
            Decision::Approve => requested.cloned(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::Edit => "edit",
        }
    }
}

/// Where an approval stands: waiting, decided (approved, rejected, edited), expired or
/// cancelled (its run ended or was restored past it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    #[default]
    Pending,
    Approved,
    Rejected,
    Edited,
    Expired,
    Cancelled,
}

impl ApprovalStatus {
    pub const ALL: [ApprovalStatus; 6] = [
        ApprovalStatus::Pending,
        ApprovalStatus::Approved,
        ApprovalStatus::Rejected,
        ApprovalStatus::Edited,
        ApprovalStatus::Expired,
        ApprovalStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Edited => "edited",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Cancelled => "cancelled",
        }
    }
}

impl From<Decision> for ApprovalStatus {
    fn from(d: Decision) -> Self {
        match d {
            Decision::Approve => ApprovalStatus::Approved,
            Decision::Reject => ApprovalStatus::Rejected,
            Decision::Edit => ApprovalStatus::Edited,
        }
    }
}

/// One approval as the approvals projection sees it: what was asked, of which TODO or tool call,
/// and what was decided, by whom and when.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct Approval {
    pub approval_id: ApprovalId,
    pub subject: Option<Subject>,
    pub tool_name: String,
    pub request_args: Value,
    pub request_preview: Value,
    pub policy: String,
    pub message: String,
    pub status: ApprovalStatus,
    pub decision: Option<Decision>,
    pub edited_args: Option<Value>,
    /// The args that take effect: the edited ones for `edit`, else the requested ones.
    pub effective_args: Option<Value>,
    pub decided_by: Option<String>,
    pub comment: Option<String>,
    /// Why an approval ended without a decision (expiry, restore, run end).
    pub cancel_reason: Option<String>,
    pub created_at: Timestamp,
    pub requested_seq: u64,
    pub decided_at: Option<Timestamp>,
    pub decided_seq: Option<u64>,
    pub expires_at: Option<Timestamp>,
}
