//! The run's lifecycle: start, phases, interruptions, the end; and the node results the state
//! keeps (evaluation, aggregate, answer, the latest checkpoint and note).

use chronicle_schemas::{
    Envelope, Evaluation, Event, OWNER_OF_OLD_RUNS, Phase, RunStatus, SupervisorState,
};
use serde_json::Value;

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope) {
    match &env.event {
        Event::RunStarted {
            session_id,
            user_id,
            request_id,
            query,
            config,
            parent,
            owner,
            traceparent,
        } => {
            s.traceparent.clone_from(traceparent);
            s.query.clone_from(query);
            s.session_id = session_id.clone();
            s.request_id.clone_from(request_id);
            s.user_id.clone_from(user_id);
            s.config = config.clone();
            s.parent.clone_from(parent);
            s.owner = owner
                .clone()
                .unwrap_or_else(|| OWNER_OF_OLD_RUNS.to_owned());
            s.start_time = Some(env.at);
            s.status = "initialized".into();
            s.run_status = RunStatus::Running;
        }
        Event::PhaseChanged { phase } => {
            s.current_phase = *phase;
            if s.status == "initialized" {
                s.status = "processing".into();
            }
        }
        Event::RunInterrupted { reason, .. } => {
            s.interrupt_reason = Some(reason.clone());
            if !s.pending_approval_ids.is_empty() {
                s.run_status = RunStatus::WaitingForApproval;
            }
        }
        Event::RunResumed { .. } => {
            s.interrupt_reason = None;
        }
        Event::RunCompleted {
            total_execution_time_ms,
        } => {
            finish(s, env, RunStatus::Completed, "completed");
            s.total_execution_time = Some(*total_execution_time_ms as f64 / 1000.0);
            s.current_phase = Phase::Finished;
            if s.planning_state.is_some() {
                s.approval_status = Some("completed".into());
            }
        }
        Event::RunFailed { error } => {
            finish(s, env, RunStatus::Failed, "error");
            s.error_log.push(error.clone());
        }
        Event::RunCancelled { by, reason } => {
            finish(s, env, RunStatus::Cancelled, "cancelled");
            s.error_log.push(format!(
                "cancelled by {by}{}",
                reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ));
        }
        Event::EvaluationRecorded {
            quality_score,
            completeness,
            needs_retry,
            retry_agents,
            feedback,
            source,
            add_agents,
        } => {
            s.evaluation_rounds += 1;
            s.evaluation = Some(Evaluation {
                quality_score: *quality_score,
                completeness: *completeness,
                needs_retry: *needs_retry,
                retry_agents: retry_agents.clone(),
                feedback: feedback.clone(),
                source: *source,
                add_agents: add_agents.clone(),
            });
        }
        Event::ResultsAggregated { aggregated } => {
            s.aggregated_results = match aggregated {
                Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                other => [("result".to_owned(), other.clone())].into(),
            };
        }
        Event::ResponseGenerated { final_response } => {
            s.final_response = Some(final_response.clone());
        }
        Event::CheckpointSaved { checkpoint_id, .. } => {
            s.last_checkpoint_id = Some(checkpoint_id.clone());
        }
        Event::CommandReceived { .. } => s.commands_received += 1,
        Event::Reasoning { message } => s.last_reasoning = Some(message.clone()),
        _ => {}
    }
}

fn finish(s: &mut SupervisorState, env: &Envelope, run_status: RunStatus, status: &str) {
    s.run_status = run_status;
    s.status = status.to_owned();
    s.end_time = Some(env.at);
    s.pending_approval_ids.clear();
    s.active_teams.clear();
}
