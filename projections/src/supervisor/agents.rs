//! Agents' starts and outcomes: the results, the teams that worked (keyed by the team each
//! agent declared) and the detailed states of the search, analysis and document teams.

use chronicle_schemas::{
    AgentStart, AnalysisTeamState, DocumentTeamState, Envelope, Event, SearchTeamState,
    SupervisorState, TeamState, TodoId,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::planning::team_of;
use super::{payload_value, push_unique, step_mut};

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope) {
    match &env.event {
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
            agent_start(s, todo_id, *attempt, input);
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
                step.result = Some(value.clone().into());
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
        _ => {}
    }
}

/// Records where this start of the attempt begins numbering its calls: after every call an
/// earlier start of the same attempt recorded.
fn agent_start(s: &mut SupervisorState, todo_id: &TodoId, attempt: u32, input: &Value) {
    let tools = s
        .tool_calls
        .iter()
        .filter(|c| &c.todo_id == todo_id && c.attempt == attempt)
        .map(|c| c.index);
    let models = s
        .model_turns
        .iter()
        .filter(|m| &m.todo_id == todo_id && m.attempt == attempt)
        .map(|m| m.index);
    let first_index = tools.chain(models).max().map_or(0, |i| i + 1);
    s.agent_starts.retain(|a| &a.todo_id != todo_id);
    s.agent_starts.push(AgentStart {
        todo_id: todo_id.clone(),
        attempt,
        first_index,
        input: input.clone(),
    });
}

/// Reads a team state out of an agent's result, leniently: unknown fields are ignored and a
/// result of another shape leaves the defaults.
fn from_result<T: DeserializeOwned + Default>(v: Option<&Value>) -> T {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
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
