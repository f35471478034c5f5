//! Deciding an approval: the decision is recorded (with the command that asked for it, if any);
//! rejecting a TODO skips it; the last pending decision resumes the run.

use chronicle_schemas::{
    Actor, Approval, ApprovalId, ApprovalStatus, Decision, Event, Subject, TodoStatus,
};
use serde_json::Value;

use super::RunActor;
use crate::{Error, Result};

impl RunActor {
    /// Records a decision (after `prefix` events, e.g. the command that asked for it).
    pub(super) async fn decide(
        &mut self,
        approval_id: &ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        by: &str,
        comment: Option<String>,
        prefix: Vec<Event>,
    ) -> Result<Approval> {
        let a = self
            .state()
            .approvals
            .get(approval_id)
            .cloned()
            .ok_or_else(|| Error::ApprovalNotFound(approval_id.clone()))?;
        if a.status != ApprovalStatus::Pending {
            return Err(Error::AlreadyDecided {
                approval_id: approval_id.clone(),
                status: a.status,
            });
        }
        match (decision, &edited_args) {
            (Decision::Edit, Some(Value::Object(_)))
            | (Decision::Approve | Decision::Reject, None) => {}
            (Decision::Edit, _) => return Err(Error::EditWithoutArgs),
            (_, Some(_)) => return Err(Error::ArgsWithoutEdit(decision)),
        }
        let mut ev = prefix;
        ev.push(Event::ApprovalDecided {
            approval_id: approval_id.clone(),
            decision,
            edited_args,
            decided_by: by.to_owned(),
            comment: comment.clone(),
        });
        if decision == Decision::Reject {
            let reason = match &comment {
                Some(c) => format!("rejected by {by}: {c}"),
                None => format!("rejected by {by}"),
            };
            ev.extend(self.skip_waiting(&a, reason, Actor::user(by)));
        }
        if self.state().approvals.pending().count() == 1 {
            ev.push(Event::RunResumed {
                by: Actor::user(by),
            });
        }
        self.append(ev).await?;
        self.state()
            .approvals
            .get(approval_id)
            .cloned()
            .ok_or_else(|| Error::ApprovalNotFound(approval_id.clone()))
    }

    /// A rejected (or expired-as-rejected) approval of a TODO that still waits for it skips the
    /// TODO: it is never retried.
    pub(super) fn skip_waiting(&self, a: &Approval, reason: String, by: Actor) -> Option<Event> {
        let Some(Subject::Todo { todo_id }) = &a.subject else {
            return None;
        };
        self.todo(todo_id)
            .filter(|t| t.status == TodoStatus::WaitingApproval)
            .map(|_| Event::TodoStatusChanged {
                todo_id: todo_id.clone(),
                from: TodoStatus::WaitingApproval,
                to: TodoStatus::Skipped,
                reason: Some(reason),
                attempt: 0,
                by,
            })
    }
}
