//! Nothing outlives its agent: when a TODO's agent stops (a person moved the TODO on, or the
//! agent ended with calls open), its tool executions and model calls are aborted, its sub-agent
//! runs cancelled and the approvals its calls wait for answered.

use chronicle_schemas::{ApprovalId, Event, Subject, TodoId, ToolCallId, ToolCallStatus};

use crate::runtime::actor::RunActor;
use crate::runtime::mailbox::Input;
use crate::runtime::runs::child_run_id;

impl RunActor {
    /// Stops a TODO's agent (a human moved the TODO on) and everything its calls started.
    pub(in crate::runtime::actor) fn stop_agent(
        &mut self,
        todo: &TodoId,
        by: &str,
        reason: &str,
    ) -> Vec<Event> {
        if let Some((_, h)) = self.running.remove(todo) {
            h.abort();
        }
        self.release_todo(todo, by, reason)
    }

    /// Ends what a TODO's calls left in flight: their executions are aborted, their sub-agent
    /// runs cancelled, and the approvals they wait for are answered with a rejection (returned,
    /// to record in the caller's append), so no approval stays pending for an agent that is gone.
    pub(in crate::runtime::actor) fn release_todo(
        &mut self,
        todo: &TodoId,
        by: &str,
        reason: &str,
    ) -> Vec<Event> {
        self.tool_tasks.retain(|_, (t, h)| {
            if t == todo {
                h.abort();
            }
            t != todo
        });
        self.abort_model_calls(Some(todo));
        self.cancel_sub_runs(by, Some(todo));
        let waiting: Vec<(ApprovalId, ToolCallId)> = self
            .state()
            .approvals
            .pending()
            .filter_map(|a| match &a.subject {
                Some(Subject::ToolCall {
                    tool_call_id,
                    todo_id,
                }) if todo_id == todo => Some((a.approval_id.clone(), tool_call_id.clone())),
                _ => None,
            })
            .collect();
        waiting
            .into_iter()
            .map(|(approval_id, call)| {
                self.parked.remove(&call);
                Event::ApprovalDecided {
                    approval_id,
                    decision: chronicle_schemas::Decision::Reject,
                    edited_args: None,
                    decided_by: by.to_owned(),
                    comment: Some(reason.to_owned()),
                }
            })
            .collect()
    }

    /// The `task` calls whose sub-agent run may still be running.
    pub(in crate::runtime::actor) fn sub_run_calls(&self) -> Vec<(TodoId, ToolCallId)> {
        self.state()
            .supervisor
            .tool_calls
            .iter()
            .filter(|c| c.tool == "task" && c.status == ToolCallStatus::Requested)
            .map(|c| (c.todo_id.clone(), c.tool_call_id.clone()))
            .collect()
    }

    /// Cancels the sub-agent runs still in flight, of one TODO or of all (a cancelled or failed
    /// parent leaves none running).
    pub(in crate::runtime::actor) fn cancel_sub_runs(&self, by: &str, todo: Option<&TodoId>) {
        let calls = self
            .sub_run_calls()
            .into_iter()
            .filter(|(t, _)| todo.is_none_or(|todo| t == todo))
            .collect();
        self.cancel_children(by, calls);
    }

    pub(in crate::runtime::actor) fn cancel_children(
        &self,
        by: &str,
        calls: Vec<(TodoId, ToolCallId)>,
    ) {
        let run_id = self.live.run_id();
        for (_, call) in calls {
            let child = child_run_id(run_id, &call);
            let (shared, by) = (self.shared.clone(), by.to_owned());
            let reason = Some(format!("parent run {run_id} stopped its call"));
            self.shared.tasks.spawn(async move {
                // Not started yet, or already finished: nothing to cancel.
                let _ = shared
                    .ask(child, |reply| Input::Cancel {
                        by: by.clone(),
                        reason: reason.clone(),
                        reply,
                    })
                    .await;
            });
        }
    }
}
