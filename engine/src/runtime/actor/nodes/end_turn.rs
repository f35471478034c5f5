//! `end_turn`: a person rejected a TODO or an agent's tool call and the run's `on_reject` is
//! `end_turn`. Running agents stop, the TODOs that have not run to an end are skipped, and the
//! run completes with a short answer saying what was rejected and why (the decision's comment),
//! as a rejection ends the request in a plain request/answer flow.

use chronicle_schemas::{Actor, ApprovalId, Event, Phase, Subject, TodoStatus};
use serde_json::json;

use super::{RunActor, checkpoint, elapsed_ms};
use crate::Result;
use crate::plugin::texts::Text;
use crate::runtime::actor::now;

impl RunActor {
    pub(super) async fn end_turn(&mut self, rejected: ApprovalId) -> Result<()> {
        let Some(a) = self.state().approvals.get(&rejected).cloned() else {
            return Ok(());
        };
        let Some(t) = a.subject.as_ref().and_then(|s| self.todo(s.todo_id())) else {
            return Ok(());
        };
        let tool = match &a.subject {
            Some(Subject::ToolCall { .. }) => Some(a.tool_name.as_str()),
            _ => None,
        };
        let by = a.decided_by.clone().unwrap_or_default();
        let answer = self.shared.settings.texts.say_to(
            &self.state().supervisor.query,
            Text::TurnEndedOnReject {
                todo: &t.id,
                agent: &t.agent_name,
                tool,
                by: &by,
                comment: a.comment.as_deref(),
            },
        );
        let what = tool.map_or_else(|| t.id.to_string(), |tool| format!("{tool} of {}", t.id));
        self.cancel_sub_runs("engine", None);
        self.abort_agents();
        let mut ev = self.skip_unfinished(&format!("the turn ended: {what} was rejected"));
        ev.push(Event::Reasoning {
            message: answer.clone(),
        });
        ev.push(Event::ResponseGenerated {
            final_response: json!({
                "type": "rejected",
                "answer": answer,
                "rejected": {
                    "todo_id": t.id,
                    "agent": t.agent_name,
                    "tool": tool,
                    "approval_id": a.approval_id,
                    "decided_by": by,
                    "comment": a.comment,
                },
            }),
        });
        ev.push(checkpoint(self.state(), "end_turn", 0));
        ev.push(Event::PhaseChanged {
            phase: Phase::Finished,
        });
        let start = self.state().supervisor.start_time;
        ev.push(Event::RunCompleted {
            total_execution_time_ms: elapsed_ms(start, now()),
        });
        self.append(ev).await.map(drop)
    }

    /// Every supervisor TODO that has not run to an end (pending, waiting for its approval, or
    /// in progress: its agent was just stopped) skipped with `reason`.
    fn skip_unfinished(&self, reason: &str) -> Vec<Event> {
        let Some(p) = self.state().supervisor.planning_state.as_ref() else {
            return Vec::new();
        };
        p.todos
            .iter()
            .filter(|t| {
                t.planned_by().is_none()
                    && matches!(
                        t.status,
                        TodoStatus::Pending | TodoStatus::WaitingApproval | TodoStatus::InProgress
                    )
            })
            .map(|t| Event::TodoStatusChanged {
                todo_id: t.id.clone(),
                from: t.status,
                to: TodoStatus::Skipped,
                reason: Some(reason.to_owned()),
                attempt: t.attempts,
                by: Actor::Engine,
            })
            .collect()
    }
}
