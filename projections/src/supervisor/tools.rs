//! Tool calls: requested, then completed with an output or an error.

use chronicle_schemas::{Envelope, Event, SupervisorState, ToolCallState, ToolCallStatus};

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope) {
    match &env.event {
        Event::ToolCallRequested {
            tool_call_id,
            todo_id,
            tool,
            args,
            attempt,
            index,
        } => {
            s.tool_calls.push(ToolCallState {
                tool_call_id: tool_call_id.clone(),
                todo_id: todo_id.clone(),
                tool: tool.clone(),
                args: args.clone(),
                attempt: *attempt,
                index: *index,
                ..ToolCallState::default()
            });
        }
        Event::ToolCallCompleted {
            tool_call_id,
            output,
            error,
            duration_ms,
        } => {
            if let Some(c) = s
                .tool_calls
                .iter_mut()
                .rev()
                .find(|c| &c.tool_call_id == tool_call_id)
            {
                c.status = if error.is_some() && output.is_none() {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                c.output.clone_from(output);
                c.error.clone_from(error);
                c.duration_ms = Some(*duration_ms);
            }
        }
        _ => {}
    }
}
