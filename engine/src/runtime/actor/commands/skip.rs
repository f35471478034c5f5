//! `/todo skip <todo_id> [reason]`: skip a TODO (one waiting for approval is rejected; a running
//! one's agent is stopped with everything its calls started).

use chronicle_schemas::{Actor, ApprovalStatus, Decision, Event, TodoId, TodoStatus};
use chronicle_wire::{Skipped, tag};

use super::RunActor;
use crate::plugin::texts::Text;
use crate::runtime::todo;
use crate::{Error, Result};

impl RunActor {
    pub(super) async fn skip(
        &mut self,
        todo: String,
        reason: Option<String>,
        by: &str,
        received: Event,
    ) -> Result<Skipped> {
        let id = TodoId(todo);
        let t = self
            .todo(&id)
            .ok_or_else(|| Error::TodoNotFound(id.clone()))?;
        todo::check_transition(&t, TodoStatus::Skipped)?;
        let reason = reason.unwrap_or_else(|| "User skipped".into());
        // Skipping a TODO that waits for approval answers that approval too.
        let pending = t.approval_id.clone().filter(|aid| {
            self.state()
                .approvals
                .get(aid)
                .is_some_and(|a| a.status == ApprovalStatus::Pending)
        });
        match pending {
            Some(aid) if t.status == TodoStatus::WaitingApproval => {
                self.decide(
                    &aid,
                    Decision::Reject,
                    None,
                    by,
                    Some(reason.clone()),
                    vec![received],
                )
                .await?;
            }
            _ => {
                let mut ev = vec![received];
                ev.extend(self.stop_agent(&id, by, &reason));
                ev.push(Event::TodoStatusChanged {
                    todo_id: id.clone(),
                    from: t.status,
                    to: TodoStatus::Skipped,
                    reason: Some(reason.clone()),
                    attempt: t.attempts,
                    by: Actor::user(by),
                });
                self.append(ev).await?;
            }
        }
        let message = self.shared.settings.texts.say(Text::TodoSkipped {
            todo: &id,
            reason: &reason,
        });
        Ok(Skipped {
            status: tag::Skipped::default(),
            todo_id: id,
            message,
        })
    }
}
