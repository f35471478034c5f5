//! The supervisor fold: `SupervisorState` with `PlanningState` inside, over the effective history
//! (a restore replaces it, see `run.rs`). Team states are keyed by the team each TODO's agent
//! declared, never by agent names. One file per kind of event.

use chronicle_schemas::{
    Envelope, Event, ExecutionStepState, Payload, PlanningState, SupervisorState, TodoId,
};
use serde_json::{Value, json};

use crate::Approvals;

mod agents;
mod approvals;
mod lifecycle;
mod memory;
mod planning;
mod tools;
mod values;

pub(crate) fn apply(s: &mut SupervisorState, env: &Envelope, approvals: &Approvals) {
    use Event::*;
    match &env.event {
        IntentAnalyzed { .. }
        | PlanCreated { .. }
        | TodoAdded { .. }
        | TodoStatusChanged { .. } => planning::apply(s, env),
        ApprovalRequested { .. } | ApprovalDecided { .. } | ApprovalExpired { .. } => {
            approvals::apply(s, env, approvals)
        }
        AgentStarted { .. } | AgentCompleted { .. } | AgentFailed { .. } => agents::apply(s, env),
        ToolCallRequested { .. } | ToolCallCompleted { .. } | LlmCalled { .. } => {
            tools::apply(s, env)
        }
        SessionContextLoaded { .. }
        | MemoryLoaded { .. }
        | MemorySaved { .. }
        | MemoryDeleted { .. }
        | SessionDeleted { .. } => memory::apply(s, env),
        ValuesUpdated { values, .. } => values::apply(s, values),
        // Handled by `RunState::apply`: it replaces the whole effective state.
        RunRestored { .. } => {}
        _ => lifecycle::apply(s, env),
    }
}

pub(super) fn planning(s: &mut SupervisorState) -> &mut PlanningState {
    s.planning_state.get_or_insert_with(PlanningState::default)
}

pub(super) fn push_unique(v: &mut Vec<String>, item: &str) {
    if !v.iter().any(|x| x == item) {
        v.push(item.to_owned());
    }
}

pub(super) fn step_mut<'a>(
    s: &'a mut SupervisorState,
    todo_id: &TodoId,
) -> Option<&'a mut ExecutionStepState> {
    s.planning_state
        .as_mut()?
        .execution_steps
        .iter_mut()
        .find(|st| &st.todo_id == todo_id)
}

pub(super) fn payload_value(p: &Payload) -> Value {
    match p {
        Payload::Inline(v) => v.clone(),
        Payload::Blob(b) => json!({"blob": b.hash, "bytes": b.bytes}),
    }
}
