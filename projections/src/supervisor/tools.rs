//! What agents do through the host: tool calls (requested, then completed with an output or an
//! error) and model calls (one event each; an agent's are kept by position for re-execution).

use chronicle_schemas::{
    Envelope, Event, ModelTurnState, SupervisorState, ToolCallState, ToolCallStatus,
};

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope) {
    match &env.event {
        Event::ToolCallRequested {
            tool_call_id,
            todo_id,
            tool,
            args,
            attempt,
            index,
            server: _,
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
        Event::LlmCalled {
            model,
            prompt_hash,
            response,
            duration_ms,
            error,
            turn,
            usage,
            notice,
            ..
        } => {
            s.llm_calls += 1;
            let Some(turn) = turn else { return };
            s.plan_edits_told = s.plan_edits_told.max(turn.plan_edits_seen);
            s.model_turns.push(ModelTurnState {
                todo_id: turn.todo_id.clone(),
                attempt: turn.attempt,
                index: turn.index,
                prompt_hash: *prompt_hash,
                model: model.clone(),
                response: response.clone(),
                error: error.clone(),
                notice: notice.clone(),
                usage: *usage,
                duration_ms: *duration_ms,
            });
        }
        _ => {}
    }
}
