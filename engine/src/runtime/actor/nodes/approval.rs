//! `approval`: TODOs that need a human first are asked for (several at once when the strategy
//! runs them together); asked again after a restore cancelled their request; skipped when a
//! human rejected them; blocked when their dependencies can never complete.

use chronicle_schemas::{
    Actor, ApprovalId, Event, Subject, SupervisorTodo, Timestamp, TodoId, TodoStatus,
};
use serde_json::json;

use super::{RunActor, checkpoint};
use crate::Result;
use crate::plugin::texts::Text;
use crate::runtime::actor::{now, step};

/// The engine moving several TODOs from one status to another, each with its reason.
fn engine_moves(list: Vec<(TodoId, String)>, from: TodoStatus, to: TodoStatus) -> Vec<Event> {
    list.into_iter()
        .map(|(todo_id, reason)| Event::TodoStatusChanged {
            todo_id,
            from,
            to,
            reason: Some(reason),
            attempt: 0,
            by: Actor::Engine,
        })
        .collect()
}

pub(crate) fn approval_id_of(e: &Event) -> Option<ApprovalId> {
    match e {
        Event::ApprovalRequested { approval_id, .. } => Some(approval_id.clone()),
        _ => None,
    }
}

impl RunActor {
    pub(super) async fn block(&mut self, list: Vec<(TodoId, String)>) -> Result<()> {
        let ev = engine_moves(list, TodoStatus::Pending, TodoStatus::Blocked);
        self.append(ev).await.map(drop)
    }

    pub(super) async fn skip_rejected(&mut self, list: Vec<(TodoId, String)>) -> Result<()> {
        let ev = engine_moves(list, TodoStatus::WaitingApproval, TodoStatus::Skipped);
        self.append(ev).await.map(drop)
    }

    pub(super) async fn request_approvals(&mut self, ids: Vec<TodoId>) -> Result<()> {
        let policy = self.state().supervisor.config.hitl.as_str();
        let mut ev = Vec::new();
        let mut first = None;
        for id in ids {
            let Some(t) = self.todo(&id) else { continue };
            ev.push(Event::TodoStatusChanged {
                todo_id: id.clone(),
                from: t.status,
                to: TodoStatus::WaitingApproval,
                reason: Some(format!("HITL policy {policy}")),
                attempt: t.attempts,
                by: Actor::Engine,
            });
            let req = self.approval_request(&t, None);
            first = first.or_else(|| approval_id_of(&req));
            ev.push(req);
        }
        ev.push(Event::RunInterrupted {
            reason: "waiting for approval".into(),
            approval_id: first,
        });
        ev.push(checkpoint(self.state(), "approval", 0));
        self.append(ev).await.map(drop)
    }

    pub(super) async fn reask(&mut self, list: Vec<(TodoId, Option<ApprovalId>)>) -> Result<()> {
        let mut ev = Vec::new();
        let mut first = None;
        for (id, old) in list {
            let Some(t) = self.todo(&id) else { continue };
            let req = self.approval_request(&t, old);
            first = first.or_else(|| approval_id_of(&req));
            ev.push(req);
        }
        ev.push(Event::RunInterrupted {
            reason: "waiting for approval".into(),
            approval_id: first,
        });
        self.append(ev).await.map(drop)
    }

    /// A TODO's approval request, with the deployment's message and the policy's expiry.
    pub(in crate::runtime::actor) fn approval_request(
        &self,
        t: &SupervisorTodo,
        supersedes: Option<ApprovalId>,
    ) -> Event {
        let s = &self.state().supervisor;
        let cfg = &s.config;
        let args = self.input_for(t);
        let message = self.shared.settings.texts.say_to(
            &s.query,
            Text::TodoApproval {
                todo: t,
                args: &args,
            },
        );
        Event::ApprovalRequested {
            approval_id: ApprovalId(uuid::Uuid::new_v4().to_string()),
            subject: Subject::Todo {
                todo_id: t.id.clone(),
            },
            tool_name: t.agent_name.clone(),
            args,
            preview: json!({
                "todo_id": t.id,
                "name": t.name,
                "agent": t.agent_name,
                "category": step::category(t),
                "priority": t.priority,
                "dependencies": t.dependencies,
            }),
            policy: cfg.hitl.as_str().to_owned(),
            message,
            expires_at: expiry(cfg.approval_timeout_ms),
            supersedes,
        }
    }
}

/// When an approval asked now expires, if the policy sets an expiry.
pub(in crate::runtime::actor) fn expiry(timeout_ms: Option<u64>) -> Option<Timestamp> {
    // Saturating: a timeout of centuries is "never", not an overflow into the past.
    let micros = |ms: u64| i64::try_from(ms.saturating_mul(1000)).unwrap_or(i64::MAX);
    timeout_ms.map(|ms| Timestamp(now().as_micros().saturating_add(micros(ms))))
}
