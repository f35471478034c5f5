//! `end_turn`: a person rejected a TODO and the run's `on_reject` is `end_turn`. The TODOs that
//! have not run are skipped, and the run completes with a short answer saying what was rejected
//! and why (the decision's comment), as a rejection ends the request in a plain request/answer
//! flow.

use chronicle_schemas::{Actor, Event, Phase, TodoId, TodoStatus};
use serde_json::json;

use super::{RunActor, checkpoint, elapsed_ms};
use crate::Result;
use crate::actor::now;
use crate::texts::Text;

impl RunActor {
    pub(super) async fn end_turn(&mut self, rejected: TodoId) -> Result<()> {
        let Some(t) = self.todo(&rejected) else {
            return Ok(());
        };
        let approval = t
            .approval_id
            .as_ref()
            .and_then(|id| self.state().approvals.get(id))
            .cloned()
            .unwrap_or_default();
        let by = approval.decided_by.clone().unwrap_or_default();
        let comment = approval.comment.clone();
        let answer = self.shared.settings.texts.say(Text::TurnEndedOnReject {
            todo: &t.id,
            agent: &t.agent_name,
            by: &by,
            comment: comment.as_deref(),
        });
        let reason = format!("the turn ended: {} was rejected", t.id);
        let mut ev = self.skip_unfinished(&reason);
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
                    "approval_id": approval.approval_id,
                    "decided_by": by,
                    "comment": comment,
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
    /// left in progress by a stopped process) skipped with `reason`.
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
