//! What the run does next, decided from its state alone: [`next_step`] is a pure function of the
//! projected state, the agents running now and the time, so a recovered run decides exactly what
//! the run would have decided before the crash.

use std::collections::HashMap;

use chronicle_projections::RunState;
use chronicle_schemas::{
    ApprovalId, ApprovalStatus, ExpiryAction, OnReject, Phase, PlanningState, SupervisorState,
    SupervisorTodo, Timestamp, TodoId, TodoStatus,
};
use serde_json::Value;

use crate::plugin::hitl;
use crate::runtime::todo;

/// The agents running now: TODO → attempt.
pub(crate) type Running = HashMap<TodoId, u32>;

/// The next thing the run should do.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    Wait,
    Fail(String),
    Initialize,
    AnalyzeIntent,
    BuildPlan,
    Block(Vec<(TodoId, String)>),
    RequestApprovals(Vec<TodoId>),
    /// TODO approvals a restore cancelled (or decided on an abandoned branch): ask again,
    /// superseding the old id.
    ReAsk(Vec<(TodoId, Option<ApprovalId>)>),
    Start(Vec<TodoId>),
    /// Agents that were running when the process stopped: run again in the same attempt.
    Rerun(Vec<TodoId>),
    SkipRejected(Vec<(TodoId, String)>),
    /// A person rejected this approval (of a TODO or of an agent's tool call) and the run's
    /// `on_reject` is `end_turn`: running agents stop, the remaining TODOs are skipped and the
    /// run answers with the rejection.
    EndTurn(ApprovalId),
    Evaluate,
    /// A new round: retry these agents, and add TODOs for the agents the evaluation added.
    AddRetries(Vec<String>, Vec<String>, u32),
    Aggregate,
    Respond,
}

/// The run's next step.
pub(crate) fn next_step(state: &RunState, running: &Running, now: Timestamp) -> Step {
    let s = &state.supervisor;
    if s.run_status.is_terminal() {
        return Step::Wait;
    }
    if state.checkpoints.checkpoints.is_empty() {
        return Step::Initialize;
    }
    if let Some(limit) = over_a_limit(state, now) {
        return Step::Fail(limit);
    }
    let Some(p) = s
        .planning_state
        .as_ref()
        .filter(|p| !p.analyzed_intent.is_null())
    else {
        return Step::AnalyzeIntent;
    };
    if s.execution_plan.is_none() {
        return Step::BuildPlan;
    }
    if matches!(
        s.current_phase,
        Phase::Aggregation | Phase::ResponseGeneration | Phase::Finished
    ) {
        return Step::Respond;
    }
    executing(state, p, running)
}

/// `max_steps` (node executions, counted as checkpoints) and the run timeout.
fn over_a_limit(state: &RunState, now: Timestamp) -> Option<String> {
    let s = &state.supervisor;
    let limits = &s.config.limits;
    let steps = state.checkpoints.steps() as u32;
    if steps >= limits.max_steps {
        return Some(format!(
            "max_steps limit of {} node executions reached",
            limits.max_steps
        ));
    }
    let start = s.start_time?;
    let elapsed_ms = (now.as_micros() - start.as_micros()).max(0) as u64 / 1000;
    (elapsed_ms > limits.run_timeout_ms)
        .then(|| format!("run timeout of {} ms exceeded", limits.run_timeout_ms))
}

/// The TODOs waiting for an approval, sorted by what their approval says now.
#[derive(Default)]
struct Awaiting {
    /// Still waiting for a human.
    waiting: usize,
    startable: Vec<TodoId>,
    rejected: Vec<(TodoId, String)>,
    reask: Vec<(TodoId, Option<ApprovalId>)>,
}

fn executing(state: &RunState, p: &PlanningState, running: &Running) -> Step {
    let s = &state.supervisor;
    if let Some(id) = rejection_ending_turn(s, p) {
        return Step::EndTurn(id);
    }
    let orphans: Vec<TodoId> = p
        .todos
        .iter()
        .filter(|t| {
            t.status == TodoStatus::InProgress
                && !running.contains_key(&t.id)
                && t.planned_by().is_none()
        })
        .map(|t| t.id.clone())
        .collect();
    if !orphans.is_empty() {
        return Step::Rerun(orphans);
    }
    let r = todo::readiness(p);
    if !r.blocked.is_empty() {
        return Step::Block(r.blocked);
    }
    let mut a = awaiting(state, p);
    if !a.rejected.is_empty() {
        return Step::SkipRejected(a.rejected);
    }
    if !a.reask.is_empty() {
        return Step::ReAsk(a.reask);
    }
    let mut to_request = Vec::new();
    for id in &r.ready {
        let Some(t) = p.todo(id) else { continue };
        if hitl::todo_needs_approval(&s.config, category(t)) && !approved(t, s.config.on_expiry) {
            to_request.push(id.clone());
        } else {
            a.startable.push(id.clone());
        }
    }
    // Keep plan order across the two sources.
    let order = |id: &TodoId| {
        p.todos
            .iter()
            .position(|t| &t.id == id)
            .unwrap_or(usize::MAX)
    };
    a.startable.sort_by_key(order);
    if p.execution_strategy == "sequential" {
        return sequential(state, running, a, to_request, order);
    }
    if !to_request.is_empty() {
        return Step::RequestApprovals(to_request);
    }
    let in_flight = running.len();
    let capacity = (s.config.limits.max_concurrency.max(1) as usize).saturating_sub(in_flight);
    if !a.startable.is_empty() && capacity > 0 {
        a.startable.truncate(capacity);
        return Step::Start(a.startable);
    }
    if in_flight > 0 || a.waiting > 0 || !a.startable.is_empty() {
        return Step::Wait;
    }
    after_execution(s, p)
}

/// Under `on_reject: end_turn`, the approval a person rejected (on the effective history), of a
/// TODO or of a tool call: the turn ends with it. Derived from the state, so a crash between the
/// decision and the end of the turn ends it on recovery.
fn rejection_ending_turn(s: &SupervisorState, p: &PlanningState) -> Option<ApprovalId> {
    if s.config.on_reject != OnReject::EndTurn {
        return None;
    }
    let rejected = Some(ApprovalStatus::Rejected);
    let todo = p.todos.iter().find(|t| {
        t.planned_by().is_none()
            && t.approval_status == rejected
            && matches!(t.status, TodoStatus::Skipped | TodoStatus::WaitingApproval)
    });
    todo.and_then(|t| t.approval_id.clone()).or_else(|| {
        s.tool_calls
            .iter()
            .find(|c| c.approval_status == rejected)
            .and_then(|c| c.approval_id.clone())
    })
}

/// One at a time, in plan order: the first TODO that can move is the only one that may.
fn sequential(
    state: &RunState,
    running: &Running,
    mut a: Awaiting,
    mut to_request: Vec<TodoId>,
    order: impl Fn(&TodoId) -> usize,
) -> Step {
    if !running.is_empty() || a.waiting > 0 {
        return Step::Wait;
    }
    let first_start = a.startable.first().map(&order);
    let first_request = to_request.first().map(&order);
    match (first_start, first_request) {
        (Some(a_at), Some(b_at)) if b_at < a_at => {
            Step::RequestApprovals(vec![to_request.swap_remove(0)])
        }
        (Some(_), _) => Step::Start(vec![a.startable.swap_remove(0)]),
        (None, Some(_)) => Step::RequestApprovals(vec![to_request.swap_remove(0)]),
        (None, None) => match state.supervisor.planning_state.as_ref() {
            Some(p) => after_execution(&state.supervisor, p),
            None => Step::AnalyzeIntent,
        },
    }
}

/// The TODO's approval as the effective history sees it, checked against the whole log:
/// pending on both means a human is still to answer; pending here but not in the log means a
/// restore cancelled it, or it was decided on an abandoned branch.
fn awaiting(state: &RunState, p: &PlanningState) -> Awaiting {
    let mut a = Awaiting::default();
    let on_expiry = state.supervisor.config.on_expiry;
    for t in p
        .todos
        .iter()
        .filter(|t| t.status == TodoStatus::WaitingApproval && t.planned_by().is_none())
    {
        let logged = t
            .approval_id
            .as_ref()
            .and_then(|id| state.approvals.get(id));
        match t.approval_status {
            Some(ApprovalStatus::Pending)
                if logged.map(|l| l.status) == Some(ApprovalStatus::Pending) =>
            {
                a.waiting += 1
            }
            _ if approved(t, on_expiry) => a.startable.push(t.id.clone()),
            Some(ApprovalStatus::Rejected | ApprovalStatus::Expired) => {
                let reason = logged.and_then(|l| {
                    l.cancel_reason
                        .clone()
                        .or_else(|| l.decided_by.as_ref().map(|b| format!("rejected by {b}")))
                });
                a.rejected
                    .push((t.id.clone(), reason.unwrap_or_else(|| "rejected".into())));
            }
            _ => a.reask.push((t.id.clone(), t.approval_id.clone())),
        }
    }
    a
}

/// Every TODO settled (or none can move): evaluate, retry, or aggregate. TODOs an agent planned
/// are its own plan, not the engine's work: the run does not wait for them.
fn after_execution(s: &SupervisorState, p: &PlanningState) -> Step {
    let unsettled: Vec<&SupervisorTodo> = p
        .todos
        .iter()
        .filter(|t| {
            matches!(
                t.status,
                TodoStatus::Pending | TodoStatus::InProgress | TodoStatus::WaitingApproval
            ) && t.planned_by().is_none()
        })
        .collect();
    if !unsettled.is_empty() {
        // Pending TODOs whose dependencies can never finish (a cycle): block them.
        let stuck: Vec<(TodoId, String)> = unsettled
            .iter()
            .filter(|t| t.status == TodoStatus::Pending)
            .map(|t| {
                (
                    t.id.clone(),
                    "dependencies can never complete (cycle)".to_owned(),
                )
            })
            .collect();
        return if stuck.is_empty() {
            Step::Wait
        } else {
            Step::Block(stuck)
        };
    }
    let round = 1 + p
        .todos
        .iter()
        .filter_map(|t| t.metadata.get("round").and_then(Value::as_u64))
        .max()
        .unwrap_or(0) as u32;
    if s.evaluation_rounds < round {
        return Step::Evaluate;
    }
    if let Some(ev) = &s.evaluation {
        // Only agents of this plan whose failure was retryable (`failed_teams` holds the
        // non-retryable ones).
        let agents: Vec<String> = ev
            .retry_agents
            .iter()
            .filter(|a| p.todos.iter().any(|t| &t.agent_name == *a) && !s.failed_teams.contains(a))
            .cloned()
            .collect();
        // Agents the evaluation added, once: an agent with a TODO in the plan is not added.
        let added: Vec<String> = ev
            .add_agents
            .iter()
            .filter(|a| !p.todos.iter().any(|t| &t.agent_name == *a))
            .cloned()
            .collect();
        let retry = ev.needs_retry && !agents.is_empty();
        if (retry || !added.is_empty()) && round <= s.config.max_retries {
            let agents = if retry { agents } else { vec![] };
            return Step::AddRetries(agents, added, round);
        }
    }
    Step::Aggregate
}

/// A TODO has a standing go-ahead from a human on the effective history (so a retry does not
/// ask again).
pub(crate) fn approved(t: &SupervisorTodo, on_expiry: ExpiryAction) -> bool {
    match t.approval_status {
        Some(ApprovalStatus::Approved | ApprovalStatus::Edited) => true,
        Some(ApprovalStatus::Expired) => on_expiry == ExpiryAction::Approve,
        _ => false,
    }
}

/// The HITL category recorded with a TODO; TODOs of logs written before agents declared
/// categories count as `general`.
pub(crate) fn category(t: &SupervisorTodo) -> &str {
    if t.category.is_empty() {
        "general"
    } else {
        &t.category
    }
}

/// The pure decision, over states folded from recorded events: no store, no actor, no clock.
#[cfg(test)]
mod tests {
    use chronicle_projections::VecSource;
    use chronicle_projections::fixtures::{FIXTURE_T0_MICROS, envelopes, scenario_1_events};
    use chronicle_schemas::{Event, Limits, RunId, TodoStatus};

    use super::*;

    const RUN: RunId = RunId::from_u128(0x57E9);
    /// A minute into the fixture run: well inside its run timeout.
    const NOW: Timestamp = Timestamp(FIXTURE_T0_MICROS + 60_000_000);

    fn fold(events: &[Event]) -> RunState {
        let mut src = VecSource::default();
        let mut state = RunState::default();
        for env in envelopes(RUN, events.to_vec()) {
            src.events.push(env.clone());
            state.apply(&env, &src).expect("fixture folds");
        }
        state
    }

    /// The scenario's events up to and including the `nth` (0-based) one that `is`.
    fn upto(nth: usize, is: impl Fn(&Event) -> bool) -> Vec<Event> {
        let events = scenario_1_events();
        let at = events
            .iter()
            .enumerate()
            .filter(|(_, e)| is(e))
            .nth(nth)
            .map(|(i, _)| i)
            .expect("the fixture has it");
        events[..=at].to_vec()
    }

    fn step_after(events: &[Event], running: &[(&str, u32)]) -> Step {
        let running: Running = running.iter().map(|(t, a)| ((*t).into(), *a)).collect();
        next_step(&fold(events), &running, NOW)
    }

    fn ids(list: &[&str]) -> Vec<TodoId> {
        list.iter().map(|i| (*i).into()).collect()
    }

    #[test]
    fn the_supervisor_flow_node_by_node() {
        let started = upto(0, |e| matches!(e, Event::RunStarted { .. }));
        assert_eq!(step_after(&started, &[]), Step::Initialize);
        let initialized = upto(0, |e| matches!(e, Event::CheckpointSaved { .. }));
        assert_eq!(step_after(&initialized, &[]), Step::AnalyzeIntent);
        let analysed = upto(0, |e| matches!(e, Event::IntentAnalyzed { .. }));
        assert_eq!(step_after(&analysed, &[]), Step::BuildPlan);
        // Under `every_todo`, sequentially: the first TODO is asked for, alone.
        let planned = upto(1, |e| matches!(e, Event::TodoAdded { .. }));
        assert_eq!(
            step_after(&planned, &[]),
            Step::RequestApprovals(ids(&["todo_001"]))
        );
        let asked = upto(0, |e| matches!(e, Event::RunInterrupted { .. }));
        assert_eq!(step_after(&asked, &[]), Step::Wait, "a human is to answer");
        let approved = upto(0, |e| matches!(e, Event::ApprovalDecided { .. }));
        assert_eq!(step_after(&approved, &[]), Step::Start(ids(&["todo_001"])));
        // An agent in progress: running → wait; not running (the process stopped) → re-run.
        let running = upto(0, |e| matches!(e, Event::AgentStarted { .. }));
        assert_eq!(step_after(&running, &[("todo_001", 1)]), Step::Wait);
        assert_eq!(step_after(&running, &[]), Step::Rerun(ids(&["todo_001"])));
        // The second TODO is asked for only once the first completed.
        let first_done = upto(0, |e| {
            matches!(
                e,
                Event::TodoStatusChanged {
                    to: TodoStatus::Completed,
                    ..
                }
            )
        });
        assert_eq!(
            step_after(&first_done, &[]),
            Step::RequestApprovals(ids(&["todo_002"]))
        );
        let all_done = upto(1, |e| {
            matches!(
                e,
                Event::TodoStatusChanged {
                    to: TodoStatus::Completed,
                    ..
                }
            )
        });
        assert_eq!(step_after(&all_done, &[]), Step::Evaluate);
        let evaluated = upto(0, |e| matches!(e, Event::EvaluationRecorded { .. }));
        assert_eq!(step_after(&evaluated, &[]), Step::Aggregate);
        let aggregated = upto(0, |e| matches!(e, Event::ResultsAggregated { .. }));
        assert_eq!(step_after(&aggregated, &[]), Step::Respond);
        assert_eq!(step_after(&scenario_1_events(), &[]), Step::Wait, "ended");
    }

    #[test]
    fn limits_fail_the_run_with_their_reason() {
        let planned = upto(1, |e| matches!(e, Event::TodoAdded { .. }));
        let mut state = fold(&planned);
        state.supervisor.config.limits = Limits {
            max_steps: 2,
            ..Limits::default()
        };
        assert_eq!(
            next_step(&state, &Running::new(), NOW),
            Step::Fail("max_steps limit of 2 node executions reached".into())
        );
        state.supervisor.config.limits = Limits {
            run_timeout_ms: 1_000,
            ..Limits::default()
        };
        assert_eq!(
            next_step(&state, &Running::new(), NOW),
            Step::Fail("run timeout of 1000 ms exceeded".into())
        );
    }

    #[test]
    fn a_rejected_todo_is_skipped_and_a_skipped_dependency_blocks() {
        let mut events = upto(0, |e| matches!(e, Event::RunInterrupted { .. }));
        events.push(Event::ApprovalDecided {
            approval_id: "apr_001".into(),
            decision: chronicle_schemas::Decision::Reject,
            edited_args: None,
            decided_by: "alice".into(),
            comment: None,
        });
        assert_eq!(
            step_after(&events, &[]),
            Step::SkipRejected(vec![("todo_001".into(), "rejected by alice".into())])
        );
        events.push(Event::TodoStatusChanged {
            todo_id: "todo_001".into(),
            from: TodoStatus::WaitingApproval,
            to: TodoStatus::Skipped,
            reason: Some("rejected by alice".into()),
            attempt: 0,
            by: chronicle_schemas::Actor::user("alice"),
        });
        assert_eq!(
            step_after(&events, &[]),
            Step::Block(vec![(
                "todo_002".into(),
                "dependency todo_001 was skipped".into()
            )])
        );
    }

    #[test]
    fn under_end_turn_a_rejection_ends_the_turn() {
        let mut events = upto(0, |e| matches!(e, Event::RunInterrupted { .. }));
        events.push(Event::ApprovalDecided {
            approval_id: "apr_001".into(),
            decision: chronicle_schemas::Decision::Reject,
            edited_args: None,
            decided_by: "alice".into(),
            comment: Some("not this".into()),
        });
        events.push(Event::TodoStatusChanged {
            todo_id: "todo_001".into(),
            from: TodoStatus::WaitingApproval,
            to: TodoStatus::Skipped,
            reason: Some("rejected by alice: not this".into()),
            attempt: 0,
            by: chronicle_schemas::Actor::user("alice"),
        });
        let mut state = fold(&events);
        state.supervisor.config.on_reject = OnReject::EndTurn;
        assert_eq!(
            next_step(&state, &Running::new(), NOW),
            Step::EndTurn("apr_001".into())
        );
        // Agents still running do not hold the end up: the node stops them.
        let running: Running = [("todo_002".into(), 1)].into_iter().collect();
        assert_eq!(
            next_step(&state, &running, NOW),
            Step::EndTurn("apr_001".into())
        );
        // Under `skip` the next TODO is blocked by the skipped one instead.
        state.supervisor.config.on_reject = OnReject::Skip;
        assert!(matches!(
            next_step(&state, &Running::new(), NOW),
            Step::Block(_)
        ));
    }

    #[test]
    fn without_a_policy_parallel_todos_start_together_up_to_the_concurrency_limit() {
        let mut state = fold(&upto(1, |e| matches!(e, Event::TodoAdded { .. })));
        state.supervisor.config.hitl = chronicle_schemas::HitlMode::None;
        let p = state.supervisor.planning_state.as_mut().unwrap();
        p.execution_strategy = "parallel".into();
        p.todos[1].dependencies.clear();
        assert_eq!(
            next_step(&state, &Running::new(), NOW),
            Step::Start(ids(&["todo_001", "todo_002"]))
        );
        state.supervisor.config.limits.max_concurrency = 1;
        assert_eq!(
            next_step(&state, &Running::new(), NOW),
            Step::Start(ids(&["todo_001"]))
        );
    }
}
