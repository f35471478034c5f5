//! Gated calls: the approval request a human sees (the tool's preview: path, line count, diff)
//! and why a rejected call was refused.

use chronicle_schemas::{ApprovalId, ApprovalStatus, Event, Subject, ToolCallState};
use serde_json::{Value, json};

use crate::plugin::texts::Text;
use crate::runtime::actor::RunActor;
use crate::runtime::actor::nodes::{approval_id_of, expiry};

impl RunActor {
    /// A gated call's approval request and the interruption it causes.
    pub(super) fn ask_human(
        &self,
        rec: &ToolCallState,
        supersedes: Option<ApprovalId>,
    ) -> [Event; 2] {
        let ask = self.tool_approval(rec, supersedes);
        let interrupted = Event::RunInterrupted {
            reason: format!("waiting for approval of {}", rec.tool),
            approval_id: approval_id_of(&ask),
        };
        [ask, interrupted]
    }

    fn tool_approval(&self, rec: &ToolCallState, supersedes: Option<ApprovalId>) -> Event {
        let cfg = &self.state().supervisor.config;
        let ctx = self.tool_ctx(rec);
        let mut preview = self
            .shared
            .settings
            .tools
            .get(&rec.tool)
            .map_or_else(|| json!({}), |t| t.preview(&ctx, &rec.args));
        if let Value::Object(m) = &mut preview {
            m.insert("tool".into(), json!(rec.tool));
            m.insert("tool_call_id".into(), json!(rec.tool_call_id));
            m.insert("todo_id".into(), json!(rec.todo_id));
        }
        let target = ["file_path", "description"]
            .iter()
            .find_map(|k| preview.get(*k).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        Event::ApprovalRequested {
            approval_id: ApprovalId(uuid::Uuid::new_v4().to_string()),
            subject: Subject::ToolCall {
                tool_call_id: rec.tool_call_id.clone(),
                todo_id: rec.todo_id.clone(),
            },
            tool_name: rec.tool.clone(),
            args: rec.args.clone(),
            preview,
            policy: cfg.hitl.as_str().to_owned(),
            message: self.shared.settings.texts.say_to(
                &self.state().supervisor.query,
                Text::ToolApproval {
                    tool: &rec.tool,
                    todo: &rec.todo_id,
                    target: &target,
                },
            ),
            expires_at: expiry(cfg.approval_timeout_ms),
            supersedes,
        }
    }

    pub(super) fn rejection_reason(&self, aid: &ApprovalId) -> String {
        match self.state().approvals.get(aid) {
            Some(a) if a.status == ApprovalStatus::Expired => format!("approval {aid} expired"),
            Some(a) => {
                let by = a.decided_by.as_deref().unwrap_or("a human");
                match &a.comment {
                    Some(c) => format!("rejected by {by}: {c}"),
                    None => format!("rejected by {by}"),
                }
            }
            None => "rejected".into(),
        }
    }
}
