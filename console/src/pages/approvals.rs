//! The approvals inbox across runs: what waits on a person, oldest first with how long it has
//! waited, a preview of its arguments, and the decision buttons (approve, reject with a
//! comment, edit the arguments); and the decided ones with who decided.

use askama::Template;
use chronicle_schemas::{ApprovalStatus, Subject};
use chronicle_wire::{Inbox, InboxItem};

use super::Chrome;
use crate::text;

/// The longest arguments a row shows, in characters (the editor gets them whole).
const ARGS_PREVIEW_CHARS_MAX: usize = 2_000;

/// One approval in the inbox.
#[derive(Clone, Debug)]
pub struct ApprovalRow {
    pub id: String,
    pub run_id: String,
    pub session_id: String,
    /// `todo` or `tool`.
    pub kind: &'static str,
    pub todo_id: String,
    pub tool: String,
    pub message: String,
    pub policy: String,
    pub status: &'static str,
    pub requested: String,
    pub waiting: String,
    pub args: String,
    /// The arguments as the editor starts them: the whole JSON.
    pub args_json: String,
    /// A preview the requester gave (an `edit_file` diff), as text.
    pub preview: String,
    /// The preview is text of its own (a diff), not the request's fields again: shown open.
    pub preview_text: bool,
    pub decided_by: String,
    pub decided: String,
    pub comment: String,
    pub edited: String,
    pub reason: String,
}

impl ApprovalRow {
    fn new(item: &InboxItem) -> Self {
        let a = &item.approval.approval;
        let (kind, todo_id) = match &a.subject {
            Some(Subject::Todo { todo_id }) => ("todo", todo_id.to_string()),
            Some(Subject::ToolCall { todo_id, .. }) => ("tool", todo_id.to_string()),
            None => ("todo", String::new()),
        };
        Self {
            id: a.approval_id.to_string(),
            run_id: item.approval.run_id.to_string(),
            session_id: item.session_id.0.clone(),
            kind,
            todo_id,
            tool: a.tool_name.clone(),
            message: a.message.clone(),
            policy: a.policy.clone(),
            status: a.status.as_str(),
            requested: text::date_time(a.created_at),
            waiting: item
                .waiting_ms
                .map(|ms| {
                    text::wait(
                        chronicle_schemas::Timestamp::from_micros(0),
                        chronicle_schemas::Timestamp::from_micros(ms.saturating_mul(1000)),
                    )
                })
                .unwrap_or_default(),
            args: text::pretty(&a.request_args, ARGS_PREVIEW_CHARS_MAX),
            args_json: serde_json::to_string_pretty(&a.request_args).unwrap_or_default(),
            preview: preview(&a.request_preview),
            preview_text: a.request_preview.is_string() || a.request_preview.get("diff").is_some(),
            decided_by: a.decided_by.clone().unwrap_or_default(),
            decided: a.decided_at.map(text::date_time).unwrap_or_default(),
            comment: a.comment.clone().unwrap_or_default(),
            edited: a
                .edited_args
                .as_ref()
                .map(|v| text::pretty(v, ARGS_PREVIEW_CHARS_MAX))
                .unwrap_or_default(),
            reason: a.cancel_reason.clone().unwrap_or_default(),
        }
    }
}

/// The preview as text: a `diff` string when it has one (what `edit_file` sends), else JSON.
fn preview(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::Object(m) if m.is_empty() => String::new(),
        serde_json::Value::String(s) => text::cut(s, ARGS_PREVIEW_CHARS_MAX),
        _ => match v.get("diff").and_then(|d| d.as_str()) {
            Some(diff) => text::cut(diff, ARGS_PREVIEW_CHARS_MAX),
            None => text::pretty(v, ARGS_PREVIEW_CHARS_MAX),
        },
    }
}

/// `/console/approvals`.
#[derive(Clone, Debug, Template)]
#[template(path = "approvals.html")]
pub struct ApprovalsPage {
    pub chrome: Chrome,
    pub status: &'static str,
    pub rows: Vec<ApprovalRow>,
    /// The inbox's count, before the kind and agent filters.
    pub count: usize,
    pub truncated: bool,
    pub kind: String,
    pub tool: String,
    /// The tools named in the inbox, for the filter.
    pub tools: Vec<String>,
}

impl ApprovalsPage {
    pub fn new(chrome: Chrome, inbox: &Inbox, kind: Option<&str>, tool: Option<&str>) -> Self {
        let mut tools: Vec<String> = inbox
            .approvals
            .iter()
            .map(|i| i.approval.approval.tool_name.clone())
            .collect();
        tools.sort();
        tools.dedup();
        let rows = inbox
            .approvals
            .iter()
            .map(ApprovalRow::new)
            .filter(|r| kind.is_none_or(|k| r.kind == k))
            .filter(|r| tool.is_none_or(|t| r.tool == t))
            .collect();
        Self {
            chrome,
            status: inbox.status.as_str(),
            rows,
            count: inbox.count,
            truncated: inbox.truncated,
            kind: kind.unwrap_or_default().to_owned(),
            tool: tool.unwrap_or_default().to_owned(),
            tools,
        }
    }

    pub fn pending(&self) -> bool {
        self.status == ApprovalStatus::Pending.as_str()
    }

    pub fn tabs(&self) -> [&'static str; 6] {
        ApprovalStatus::ALL.map(ApprovalStatus::as_str)
    }
}
