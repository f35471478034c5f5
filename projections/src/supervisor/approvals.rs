//! Approvals as the effective history sees them: which TODO or tool call waits, what a decision
//! changes (an edit becomes the effective input or args), and when the run waits.

use chronicle_schemas::{
    ApprovalId, ApprovalStatus, Decision, Envelope, Event, RunStatus, Subject, SupervisorState,
    ToolCallId, ToolCallState,
};

use crate::Approvals;

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope, approvals: &Approvals) {
    match &env.event {
        Event::ApprovalRequested {
            approval_id,
            message,
            supersedes,
            subject,
            ..
        } => {
            if let Some(t) = s
                .planning_state
                .as_mut()
                .and_then(|p| p.todo_mut(subject.todo_id()))
                && matches!(subject, Subject::Todo { .. })
            {
                t.approval_id = Some(approval_id.clone());
                t.approval_status = Some(ApprovalStatus::Pending);
            }
            if let Subject::ToolCall { tool_call_id, .. } = subject
                && let Some(c) = tool_call_mut(s, tool_call_id)
            {
                c.approval_id = Some(approval_id.clone());
                c.approval_status = Some(ApprovalStatus::Pending);
            }
            if let Some(old) = supersedes {
                s.pending_approval_ids.retain(|id| id != old);
            }
            if !s.pending_approval_ids.contains(approval_id) {
                s.pending_approval_ids.push(approval_id.clone());
            }
            s.approval_status = Some("waiting".into());
            s.approval_message = Some(message.clone());
            s.run_status = RunStatus::WaitingForApproval;
        }
        Event::ApprovalDecided {
            approval_id,
            decision,
            edited_args,
            ..
        } => {
            // An edit of a TODO approval makes the edited args the TODO's effective input.
            if let (Decision::Edit, Some(args), Some(a)) =
                (decision, edited_args, approvals.get(approval_id))
                && let Some(Subject::Todo { todo_id }) = &a.subject
                && let Some(t) = s.planning_state.as_mut().and_then(|p| p.todo_mut(todo_id))
            {
                t.effective_input = Some(args.clone());
            }
            if let Some(c) = s
                .tool_calls
                .iter_mut()
                .rev()
                .find(|c| c.approval_id.as_ref() == Some(approval_id))
            {
                c.effective_args = decision.effective_args(edited_args.as_ref(), Some(&c.args));
            }
            approval_settled(s, approval_id, ApprovalStatus::from(*decision));
        }
        Event::ApprovalExpired { approval_id, .. } => {
            approval_settled(s, approval_id, ApprovalStatus::Expired);
        }
        _ => {}
    }
}

fn approval_settled(s: &mut SupervisorState, id: &ApprovalId, status: ApprovalStatus) {
    s.pending_approval_ids.retain(|x| x != id);
    s.approval_status = Some(status.as_str().to_owned());
    if let Some(t) = s.planning_state.as_mut().and_then(|p| {
        p.todos
            .iter_mut()
            .find(|t| t.approval_id.as_ref() == Some(id))
    }) {
        t.approval_status = Some(status);
    }
    if let Some(c) = s
        .tool_calls
        .iter_mut()
        .rev()
        .find(|c| c.approval_id.as_ref() == Some(id))
    {
        c.approval_status = Some(status);
    }
    if s.pending_approval_ids.is_empty() && s.run_status == RunStatus::WaitingForApproval {
        s.run_status = RunStatus::Running;
    }
}

fn tool_call_mut<'a>(s: &'a mut SupervisorState, id: &ToolCallId) -> Option<&'a mut ToolCallState> {
    s.tool_calls
        .iter_mut()
        .rev()
        .find(|c| &c.tool_call_id == id)
}
