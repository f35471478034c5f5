//! The supervisor fold: the original system's `MainSupervisorState` with `PlanningState` inside,
//! over the effective history (a restore replaces it, see `run.rs`). Team states are keyed by the
//! team each TODO's agent declared, never by agent names.

use chronicle_schemas::{
    AnalysisTeamState, ApprovalStatus, Decision, DocumentTeamState, Envelope, Evaluation, Event,
    ExecutionStepState, Payload, PlanningState, RunStatus, SearchTeamState, Subject,
    SupervisorState, TeamState, TodoId, TodoStatus, ToolCallState, ToolCallStatus,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::Approvals;

pub(crate) fn apply(s: &mut SupervisorState, env: &Envelope, approvals: &Approvals) {
    match &env.event {
        Event::RunStarted {
            session_id,
            user_id,
            request_id,
            query,
            config,
            parent,
        } => {
            s.query.clone_from(query);
            s.session_id = session_id.clone();
            s.request_id.clone_from(request_id);
            s.user_id.clone_from(user_id);
            s.config = config.clone();
            s.parent.clone_from(parent);
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
        Event::IntentAnalyzed {
            intent_type,
            confidence,
            keywords,
            entities,
            source,
        } => {
            let query = s.query.clone();
            let p = planning(s);
            p.raw_query = query;
            p.analyzed_intent = json!({
                "intent_type": intent_type,
                "confidence": confidence,
                "keywords": keywords,
                "entities": entities,
            });
            p.intent_confidence = *confidence;
            p.intent_source = Some(*source);
        }
        Event::PlanCreated {
            strategy,
            steps,
            parallel_groups,
            estimated_total_time,
            available_agents,
            available_teams,
            source,
        } => {
            s.execution_plan = Some(json!({
                "strategy": strategy.as_str(),
                "steps": steps,
                "parallel_groups": parallel_groups,
                "estimated_total_time": estimated_total_time,
                "source": source,
            }));
            for step in steps {
                push_unique(&mut s.active_teams, &step.agent_name);
            }
            let strategy = s.config.strategy.unwrap_or(*strategy);
            let p = planning(s);
            p.execution_strategy = strategy.as_str().to_owned();
            p.parallel_groups = (!parallel_groups.is_empty()).then(|| parallel_groups.clone());
            p.estimated_total_time = *estimated_total_time;
            p.available_agents.clone_from(available_agents);
            p.available_teams.clone_from(available_teams);
            p.plan_validated = true;
            p.validation_errors.clear();
        }
        Event::TodoAdded { todo, .. } => {
            push_unique(&mut s.active_teams, &todo.agent_name);
            let p = planning(s);
            let team = team_of(todo);
            p.execution_steps.push(ExecutionStepState {
                step_id: format!("step_{}", p.execution_steps.len()),
                step_type: team.clone(),
                agent_name: todo.agent_name.clone(),
                team,
                task: todo.name.clone(),
                description: todo.description.clone(),
                status: step_status(todo.status).into(),
                todo_id: todo.id.clone(),
                priority: todo.priority,
                dependencies: todo.dependencies.clone(),
                ..ExecutionStepState::default()
            });
            p.todos.push(todo.clone());
        }
        Event::TodoStatusChanged {
            todo_id,
            from,
            to,
            reason,
            ..
        } => {
            todo_status_changed(planning(s), env, todo_id, *from, *to, reason.as_deref());
        }
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
        Event::AgentStarted {
            todo_id,
            agent,
            input,
            attempt,
        } => {
            push_unique(&mut s.active_teams, agent);
            if let Some(t) = s.planning_state.as_mut().and_then(|p| p.todo_mut(todo_id)) {
                t.attempts = t.attempts.max(*attempt);
            }
            if let Some(step) = step_mut(s, todo_id) {
                step.progress_percentage = step.progress_percentage.max(10);
                if step.started_at.is_none() {
                    step.started_at = Some(env.at);
                }
            }
            team_started(s, todo_id, agent, input, env);
        }
        Event::AgentCompleted {
            todo_id,
            agent,
            result,
            duration_ms,
            ..
        } => {
            let value = payload_value(result);
            s.failed_teams.retain(|t| t != agent);
            push_unique(&mut s.completed_teams, agent);
            s.team_results.insert(agent.clone(), value.clone());
            if let Some(step) = step_mut(s, todo_id) {
                step.result = Some(value.clone());
                step.error = None;
            }
            team_finished(s, todo_id, Some(&value), None, *duration_ms, env);
        }
        Event::AgentFailed {
            todo_id,
            agent,
            error,
            retryable,
            ..
        } => {
            if !retryable {
                push_unique(&mut s.failed_teams, agent);
            }
            s.error_log.push(format!("{agent} ({todo_id}): {error}"));
            if let Some(step) = step_mut(s, todo_id) {
                step.error = Some(error.clone());
            }
            team_finished(s, todo_id, None, Some(error), 0, env);
        }
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
        Event::LlmCalled { .. } => s.llm_calls += 1,
        Event::EvaluationRecorded {
            quality_score,
            completeness,
            needs_retry,
            retry_agents,
            feedback,
            source,
        } => {
            s.evaluation_rounds += 1;
            s.evaluation = Some(Evaluation {
                quality_score: *quality_score,
                completeness: *completeness,
                needs_retry: *needs_retry,
                retry_agents: retry_agents.clone(),
                feedback: feedback.clone(),
                source: *source,
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
        Event::RunInterrupted { reason, .. } => {
            s.interrupt_reason = Some(reason.clone());
            if !s.pending_approval_ids.is_empty() {
                s.run_status = RunStatus::WaitingForApproval;
            }
        }
        Event::RunResumed { .. } => {
            s.interrupt_reason = None;
        }
        Event::Reasoning { message } => s.last_reasoning = Some(message.clone()),
        Event::RunCompleted {
            total_execution_time_ms,
        } => {
            finish(s, env, RunStatus::Completed, "completed");
            s.total_execution_time = Some(*total_execution_time_ms as f64 / 1000.0);
            s.current_phase = chronicle_schemas::Phase::Finished;
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
        // Handled by `RunState::apply`: it replaces the whole effective state.
        Event::RunRestored { .. } => {}
    }
}

fn planning(s: &mut SupervisorState) -> &mut PlanningState {
    s.planning_state.get_or_insert_with(PlanningState::default)
}

fn push_unique(v: &mut Vec<String>, item: &str) {
    if !v.iter().any(|x| x == item) {
        v.push(item.to_owned());
    }
}

fn step_mut<'a>(
    s: &'a mut SupervisorState,
    todo_id: &TodoId,
) -> Option<&'a mut ExecutionStepState> {
    s.planning_state
        .as_mut()?
        .execution_steps
        .iter_mut()
        .find(|st| &st.todo_id == todo_id)
}

/// Seed 001's step statuses are a subset of the TODO statuses.
fn step_status(t: TodoStatus) -> &'static str {
    match t {
        TodoStatus::Pending | TodoStatus::WaitingApproval => "pending",
        TodoStatus::InProgress => "in_progress",
        TodoStatus::Completed => "completed",
        TodoStatus::Failed => "failed",
        TodoStatus::Skipped | TodoStatus::Blocked => "skipped",
    }
}

fn todo_status_changed(
    p: &mut PlanningState,
    env: &Envelope,
    id: &TodoId,
    from: TodoStatus,
    to: TodoStatus,
    reason: Option<&str>,
) {
    let Some(t) = p.todo_mut(id) else { return };
    t.status = to;
    match to {
        TodoStatus::InProgress => {
            t.started_at = Some(env.at);
            t.completed_at = None;
            t.duration = None;
            t.error = None;
        }
        TodoStatus::Completed => {
            t.completed_at = Some(env.at);
            t.duration = t.started_at.map(|s| env.at.seconds_since(s));
            t.error = None;
        }
        TodoStatus::Failed => {
            t.completed_at = Some(env.at);
            t.duration = t.started_at.map(|s| env.at.seconds_since(s));
            t.error = Some(reason.unwrap_or("Unknown error").to_owned());
        }
        TodoStatus::Skipped => {
            t.completed_at = Some(env.at);
            t.error = reason
                .filter(|r| !r.is_empty())
                .map(|r| format!("Skipped: {r}"));
        }
        TodoStatus::Blocked => {
            t.error = Some(format!(
                "Blocked: {}",
                reason.unwrap_or("Dependencies not met")
            ));
        }
        TodoStatus::Pending => {
            if from == TodoStatus::Failed {
                t.retry_count += 1;
            }
            t.error = None;
        }
        TodoStatus::WaitingApproval => {}
    }
    let (started, completed, error) = (t.started_at, t.completed_at, t.error.clone());
    if matches!(to, TodoStatus::InProgress | TodoStatus::WaitingApproval) {
        p.current_todo_id = Some(id.clone());
    }
    for (status, list) in [
        (TodoStatus::Completed, &mut p.completed_todo_ids),
        (TodoStatus::Failed, &mut p.failed_todo_ids),
        (TodoStatus::Skipped, &mut p.skipped_todo_ids),
    ] {
        if status == to {
            if !list.contains(id) {
                list.push(id.clone());
            }
        } else {
            list.retain(|x| x != id);
        }
    }
    if let Some(step) = p.execution_steps.iter_mut().find(|st| &st.todo_id == id) {
        step.status = step_status(to).into();
        step.started_at = started;
        step.completed_at = completed;
        step.error = error;
        step.progress_percentage = match to {
            TodoStatus::Completed => 100,
            TodoStatus::InProgress => step.progress_percentage.max(10),
            _ => 0,
        };
    }
}

fn approval_settled(
    s: &mut SupervisorState,
    id: &chronicle_schemas::ApprovalId,
    status: ApprovalStatus,
) {
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

fn tool_call_mut<'a>(
    s: &'a mut SupervisorState,
    id: &chronicle_schemas::ToolCallId,
) -> Option<&'a mut chronicle_schemas::ToolCallState> {
    s.tool_calls
        .iter_mut()
        .rev()
        .find(|c| &c.tool_call_id == id)
}

fn finish(s: &mut SupervisorState, env: &Envelope, run_status: RunStatus, status: &str) {
    s.run_status = run_status;
    s.status = status.to_owned();
    s.end_time = Some(env.at);
    s.pending_approval_ids.clear();
    s.active_teams.clear();
}

fn payload_value(p: &Payload) -> Value {
    match p {
        Payload::Inline(v) => v.clone(),
        Payload::Blob(b) => json!({"blob": b.hash, "bytes": b.bytes}),
    }
}

/// Reads a team state out of an agent's result, leniently: unknown fields are ignored and a
/// result of another shape leaves the defaults.
fn from_result<T: DeserializeOwned + Default>(v: Option<&Value>) -> T {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The team a TODO's agent declared. TODOs of logs written before agents declared teams have
/// none recorded: their team is the agent's name without a `_team` suffix.
fn team_of(todo: &chronicle_schemas::SupervisorTodo) -> String {
    if !todo.team.is_empty() {
        return todo.team.clone();
    }
    let name = &todo.agent_name;
    name.strip_suffix("_team").unwrap_or(name).to_owned()
}

/// The declared team of the TODO an agent event belongs to.
fn todo_team(s: &SupervisorState, todo_id: &TodoId) -> Option<String> {
    s.planning_state.as_ref()?.todo(todo_id).map(team_of)
}

fn team_started(
    s: &mut SupervisorState,
    todo_id: &TodoId,
    agent: &str,
    input: &Value,
    env: &Envelope,
) {
    let Some(team) = todo_team(s, todo_id) else {
        return;
    };
    let t = s.teams.entry(team.clone()).or_insert_with(|| TeamState {
        team_name: team.clone(),
        start_time: Some(env.at),
        ..TeamState::default()
    });
    t.status = "in_progress".into();
    t.end_time = None;
    t.error = None;
    push_unique(&mut t.agents, agent);
    let shared = json!({"user_query": s.query, "session_id": s.session_id, "user_id": s.user_id});
    match team.as_str() {
        "search" => {
            s.search_team_state = Some(SearchTeamState {
                team_name: "search".into(),
                status: "in_progress".into(),
                shared_context: shared,
                filters: input
                    .get("filters")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new())),
                start_time: Some(env.at),
                ..SearchTeamState::default()
            });
        }
        "analysis" => {
            s.analysis_team_state = Some(AnalysisTeamState {
                team_name: "analysis".into(),
                status: "in_progress".into(),
                shared_context: shared,
                input_data: input.clone(),
                start_time: Some(env.at),
                ..AnalysisTeamState::default()
            });
        }
        "document" => {
            s.document_team_state = Some(DocumentTeamState {
                team_name: "document".into(),
                status: "in_progress".into(),
                shared_context: shared,
                start_time: Some(env.at),
                ..DocumentTeamState::default()
            });
        }
        _ => {}
    }
}

fn team_finished(
    s: &mut SupervisorState,
    todo_id: &TodoId,
    result: Option<&Value>,
    error: Option<&String>,
    duration_ms: u64,
    env: &Envelope,
) {
    let Some(team) = todo_team(s, todo_id) else {
        return;
    };
    let status = if error.is_some() {
        "failed"
    } else {
        "completed"
    };
    if let Some(t) = s.teams.get_mut(&team) {
        t.status = status.into();
        t.end_time = Some(env.at);
        t.error = error.cloned();
    }
    let secs = duration_ms as f64 / 1000.0;
    match team.as_str() {
        "search" => {
            let prev = s.search_team_state.take().unwrap_or_default();
            let mut t: SearchTeamState = from_result(result);
            t.team_name = "search".into();
            t.status = status.into();
            t.shared_context = prev.shared_context;
            t.start_time = prev.start_time;
            t.end_time = Some(env.at);
            t.error = error.cloned();
            if result.is_none() {
                t.filters = prev.filters;
            }
            s.search_team_state = Some(t);
        }
        "analysis" => {
            let prev = s.analysis_team_state.take().unwrap_or_default();
            let mut t: AnalysisTeamState = from_result(result);
            t.team_name = "analysis".into();
            t.status = status.into();
            t.shared_context = prev.shared_context;
            t.input_data = prev.input_data;
            t.start_time = prev.start_time;
            t.end_time = Some(env.at);
            t.analysis_time = result.map(|_| secs);
            t.error = error.cloned();
            s.analysis_team_state = Some(t);
        }
        "document" => {
            let prev = s.document_team_state.take().unwrap_or_default();
            let mut t: DocumentTeamState = from_result(result);
            t.team_name = "document".into();
            t.status = status.into();
            t.shared_context = prev.shared_context;
            t.start_time = prev.start_time;
            t.end_time = Some(env.at);
            t.generation_time = result.map(|_| secs);
            t.error = error.cloned();
            s.document_team_state = Some(t);
        }
        _ => {}
    }
}
