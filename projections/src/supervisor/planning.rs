//! The planning state: the intent, the plan, the TODOs and their transitions, and the
//! execution steps that mirror them.

use chronicle_schemas::{
    Actor, Envelope, Event, ExecutionStepState, PlanEdit, PlanningState, SupervisorState,
    SupervisorTodo, TodoId, TodoStatus,
};
use serde_json::json;

use super::{planning, push_unique};

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope) {
    match &env.event {
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
            by,
            ..
        } => {
            let planned = s
                .planning_state
                .as_ref()
                .and_then(|p| p.todo(todo_id))
                .is_some_and(|t| t.planned_by().is_some());
            // A person's change to an agent's own plan is told to that agent on its next turn.
            if planned && matches!(by, Actor::User(_)) {
                s.plan_edits.push(PlanEdit {
                    todo_id: todo_id.clone(),
                    from: *from,
                    to: *to,
                    by: by.clone(),
                    reason: reason.clone(),
                });
            }
            todo_status_changed(planning(s), env, todo_id, *from, *to, reason.as_deref());
        }
        _ => {}
    }
}

/// A plan step's statuses (`ExecutionStepState::status`) are a subset of the TODO statuses.
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

/// The team a TODO's agent declared. TODOs of logs written before agents declared teams have
/// none recorded: their team is the agent's name without a `_team` suffix.
pub(super) fn team_of(todo: &SupervisorTodo) -> String {
    if !todo.team.is_empty() {
        return todo.team.clone();
    }
    let name = &todo.agent_name;
    name.strip_suffix("_team").unwrap_or(name).to_owned()
}
