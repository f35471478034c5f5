//! The one table from events to their wire names: the SSE `event:` name (DESIGN §6) and seed
//! 003's AgentEvent `type`/`subtype`, plus the `data` object every stream sends.

use chronicle_schemas::{Envelope, Event};
use serde_json::{Value, json};

/// `(dotted name, type, subtype)` of an event.
pub fn wire_names(e: &Event) -> (&'static str, &'static str, &'static str) {
    match e {
        Event::RunStarted { .. } => ("run.started", "run", "start"),
        Event::PhaseChanged { .. } => ("phase.changed", "reasoning", "start"),
        Event::IntentAnalyzed { .. } => ("intent.analyzed", "reasoning", "chunk"),
        Event::PlanCreated { .. } => ("plan.created", "reasoning", "chunk"),
        Event::TodoAdded { .. } => ("todo.added", "reasoning", "chunk"),
        Event::TodoStatusChanged { .. } => ("todo.updated", "reasoning", "chunk"),
        Event::ApprovalRequested { .. } => ("approval.requested", "tool", "start"),
        Event::ApprovalDecided { .. } => ("approval.decided", "tool", "end"),
        Event::ApprovalExpired { .. } => ("approval.expired", "tool", "end"),
        Event::AgentStarted { .. } => ("agent.started", "tool", "start"),
        Event::AgentCompleted { .. } => ("agent.completed", "tool", "end"),
        Event::AgentFailed { .. } => ("agent.failed", "tool", "error"),
        Event::ToolCallRequested { .. } => ("tool.requested", "tool", "start"),
        Event::ToolCallCompleted { .. } => ("tool.completed", "tool", "end"),
        Event::LlmCalled { .. } => ("llm.called", "reasoning", "chunk"),
        Event::EvaluationRecorded { .. } => ("evaluation.recorded", "reasoning", "chunk"),
        Event::ResultsAggregated { .. } => ("results.aggregated", "reasoning", "chunk"),
        Event::ResponseGenerated { .. } => ("message.final", "message", "final"),
        Event::CheckpointSaved { .. } => ("checkpoint.saved", "reasoning", "chunk"),
        Event::CommandReceived { .. } => ("command.received", "reasoning", "chunk"),
        Event::RunInterrupted { .. } => ("run.interrupted", "run", "chunk"),
        Event::RunResumed { .. } => ("run.resumed", "run", "chunk"),
        Event::RunRestored { .. } => ("run.restored", "run", "chunk"),
        Event::Reasoning { .. } => ("reasoning.note", "reasoning", "chunk"),
        Event::RunCompleted { .. } => ("run.end", "run", "end"),
        Event::RunFailed { .. } => ("run.error", "run", "error"),
        Event::RunCancelled { .. } => ("run.end", "run", "end"),
    }
}

/// After these a run's stream ends (unless the client follows on).
pub fn ends_stream(e: &Event) -> bool {
    e.is_terminal()
}

/// The event's own fields as JSON (the variant's body, without the variant tag).
pub fn content(e: &Event) -> Value {
    match serde_json::to_value(e) {
        Ok(Value::Object(mut m)) if m.len() == 1 => m.remove(e.kind()).unwrap_or(Value::Null),
        Ok(other) => other,
        Err(_) => Value::Null,
    }
}

/// The `data` object of one SSE message / WebSocket `event`: `{run_id, seq, offset, at, kind,
/// type, subtype, content}`.
pub fn event_data(env: &Envelope) -> Value {
    let (_, ty, sub) = wire_names(&env.event);
    json!({
        "run_id": env.run_id,
        "seq": env.seq,
        "offset": env.offset,
        "at": env.at,
        "kind": env.event.kind(),
        "type": ty,
        "subtype": sub,
        "content": content(&env.event),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_names_and_content() {
        for e in chronicle_schemas::samples::sample_events() {
            let (name, ty, sub) = wire_names(&e);
            assert!(name.contains('.'), "{name}");
            assert!(
                ["reasoning", "tool", "message", "run"].contains(&ty),
                "{ty}"
            );
            assert!(
                ["start", "chunk", "end", "final", "error"].contains(&sub),
                "{sub}"
            );
            assert!(content(&e).is_object(), "{}", e.kind());
        }
        let e = Event::Reasoning {
            message: "m".into(),
        };
        assert_eq!(content(&e), json!({"message": "m"}));
    }
}
