//! The TODO state machine around the one transition table (`TodoStatus::can_transition_to`):
//! the plan → TODO converter, legality checks, which TODOs are ready or blocked, and an
//! agent's own plan (`write_todos` in agent mode, [`agent_plan()`]).

use std::collections::HashMap;

use chronicle_schemas::{
    PlanStep, PlanningState, SupervisorTodo, Timestamp, TodoId, TodoPriority, TodoStatus,
};
use serde_json::json;

use chronicle_wire::TodoSummary;

use crate::plugin::agents::Registry;
use crate::plugin::texts::{Text, Texts};
use crate::{Error, Result};

mod agent_plan;

pub use agent_plan::{AgentPlan, agent_plan};

/// The metadata key of the TODO whose agent drives the run (agent mode): its `write_todos` is
/// the run's TODO list.
pub const DRIVES_RUN: &str = "drives_run";

/// Whether `t` is the TODO of the agent that drives its run.
pub fn drives_run(t: &SupervisorTodo) -> bool {
    t.metadata
        .get(DRIVES_RUN)
        .and_then(serde_json::Value::as_bool)
        == Some(true)
}

/// The plan → TODO converter: ids `todo_001…`, dependencies mapped from agent names to the ids of
/// *earlier* steps (unknown or later ones are dropped), priority 0 → high, 1 → medium, else low,
/// `max_retries` from the step's `retry_count`, and metadata `timeout`, `optional`,
/// `input_mapping`, `original_priority`. `first_index` continues the numbering after TODOs that
/// already exist. Each TODO records the team and category its agent declares (`agents`), and is
/// named in the deployment's language (`texts`).
pub fn convert_plan(
    steps: &[PlanStep],
    first_index: usize,
    created_at: Timestamp,
    agents: &Registry,
    texts: &dyn Texts,
) -> Vec<SupervisorTodo> {
    let mut agent_to_id: HashMap<&str, TodoId> = HashMap::new();
    let mut todos = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let id = TodoId(format!("todo_{:03}", first_index + i + 1));
        let dependencies = step
            .dependencies
            .iter()
            .filter_map(|dep| agent_to_id.get(dep.as_str()).cloned())
            .collect();
        agent_to_id.insert(&step.agent_name, id.clone());
        let agent = step.agent_name.as_str();
        let (team, category) = declared(agents, agent, &step.team);
        todos.push(SupervisorTodo {
            id,
            name: texts.say(Text::TodoName { agent }),
            description: texts.say(Text::TodoDescription { agent }),
            agent_name: step.agent_name.clone(),
            team,
            category,
            agent_purpose: step
                .input_mapping
                .get("purpose")
                .and_then(|p| p.as_str())
                .unwrap_or_default()
                .to_owned(),
            priority: TodoPriority::from_plan_priority(step.priority),
            dependencies,
            created_at,
            max_retries: step.retry_count,
            metadata: [
                ("timeout".to_owned(), json!(step.timeout)),
                ("optional".to_owned(), json!(step.optional)),
                ("input_mapping".to_owned(), step.input_mapping.clone()),
                ("original_priority".to_owned(), json!(step.priority)),
            ]
            .into(),
            ..SupervisorTodo::default()
        });
    }
    todos
}

/// The team and HITL category an agent declares; for an agent the registry does not hold, the
/// step's team and `general`.
pub fn declared(agents: &Registry, agent: &str, fallback_team: &str) -> (String, String) {
    match agents.get(agent) {
        Some(a) => (a.team().to_owned(), a.category().to_owned()),
        None => (fallback_team.to_owned(), "general".to_owned()),
    }
}

/// Refuses a transition the table does not allow, naming both states.
pub fn check_transition(todo: &SupervisorTodo, to: TodoStatus) -> Result<()> {
    if todo.status.can_transition_to(to) {
        Ok(())
    } else {
        Err(Error::IllegalTransition {
            todo: todo.id.clone(),
            from: todo.status,
            to,
        })
    }
}

/// Pending TODOs sorted into those that may start and those that never can.
#[derive(Debug, Default, PartialEq)]
pub struct Readiness {
    /// All dependencies completed, in plan order.
    pub ready: Vec<TodoId>,
    /// A dependency was skipped or blocked, failed while optional, or does not exist.
    pub blocked: Vec<(TodoId, String)>,
}

/// Pending TODOs sorted by whether they may start. TODOs an agent planned are its own: the
/// engine starts none of them.
pub fn readiness(p: &PlanningState) -> Readiness {
    let status: HashMap<&TodoId, &SupervisorTodo> = p.todos.iter().map(|t| (&t.id, t)).collect();
    let mut out = Readiness::default();
    for t in p
        .todos
        .iter()
        .filter(|t| t.status == TodoStatus::Pending && t.planned_by().is_none())
    {
        let mut ready = true;
        let mut blocked = None;
        for dep in &t.dependencies {
            match status.get(dep) {
                None => blocked = Some(format!("unknown dependency {dep}")),
                Some(d) => match d.status {
                    TodoStatus::Completed => {}
                    TodoStatus::Skipped | TodoStatus::Blocked => {
                        blocked = Some(format!("dependency {dep} was {}", d.status));
                    }
                    TodoStatus::Failed if d.is_optional() => {
                        blocked = Some(format!("optional dependency {dep} failed"));
                    }
                    _ => ready = false,
                },
            }
            if blocked.is_some() {
                break;
            }
        }
        match blocked {
            Some(reason) => out.blocked.push((t.id.clone(), reason)),
            None if ready => out.ready.push(t.id.clone()),
            None => {}
        }
    }
    out
}

/// The TODO list's counts: one per status, and the total. A TODO waiting for its approval has
/// not started, so it counts as `pending` too.
pub fn summary(p: &PlanningState) -> TodoSummary {
    let count = |s: TodoStatus| p.todos.iter().filter(|t| t.status == s).count();
    TodoSummary {
        total: p.todos.len(),
        pending: count(TodoStatus::Pending) + count(TodoStatus::WaitingApproval),
        in_progress: count(TodoStatus::InProgress),
        completed: count(TodoStatus::Completed),
        failed: count(TodoStatus::Failed),
        skipped: count(TodoStatus::Skipped),
        blocked: count(TodoStatus::Blocked),
        waiting_approval: count(TodoStatus::WaitingApproval),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::texts::English;

    fn convert(steps: &[PlanStep], first: usize, at: Timestamp) -> Vec<SupervisorTodo> {
        convert_plan(steps, first, at, &Registry::empty(), &English)
    }

    fn step(agent: &str, priority: u32, deps: &[&str], optional: bool) -> PlanStep {
        PlanStep {
            agent_name: agent.into(),
            priority,
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            input_mapping: json!({"purpose": format!("{agent} purpose")}),
            timeout: 30,
            retry_count: 2,
            optional,
            ..PlanStep::default()
        }
    }

    #[test]
    fn converter_numbers_links_and_ranks_the_steps() {
        let steps = [
            step("search_team", 0, &[], false),
            step("analysis_team", 1, &["search_team", "document_team"], true),
            step("document_team", 2, &["analysis_team"], false),
        ];
        let todos = convert(&steps, 0, Timestamp(5));
        let ids: Vec<&str> = todos.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["todo_001", "todo_002", "todo_003"]);
        // document_team is a later step: the map of earlier steps does not know it yet, so it
        // is dropped.
        assert_eq!(todos[1].dependencies, [TodoId::from("todo_001")]);
        assert_eq!(todos[2].dependencies, [TodoId::from("todo_002")]);
        assert_eq!(
            todos.iter().map(|t| t.priority).collect::<Vec<_>>(),
            [TodoPriority::High, TodoPriority::Medium, TodoPriority::Low]
        );
        let t = &todos[1];
        assert_eq!(t.name, "run analysis_team");
        assert_eq!(t.description, "run analysis_team for the request");
        assert_eq!(t.agent_purpose, "analysis_team purpose");
        assert_eq!(
            (t.max_retries, t.status, t.created_at),
            (2, TodoStatus::Pending, Timestamp(5))
        );
        assert_eq!(t.metadata["timeout"], json!(30));
        assert_eq!(t.metadata["optional"], json!(true));
        assert_eq!(t.metadata["original_priority"], json!(1));
        assert_eq!(
            t.metadata["input_mapping"],
            json!({"purpose": "analysis_team purpose"})
        );
        assert_eq!(
            convert(&steps[..1], 4, Timestamp(0))[0].id.as_str(),
            "todo_005"
        );
    }

    #[test]
    fn readiness_and_blocking() {
        let mut todos = convert(
            &[
                step("a", 0, &[], false),
                step("b", 1, &["a"], false),
                step("c", 2, &["b"], false),
                step("d", 3, &[], true),
            ],
            0,
            Timestamp(0),
        );
        let mut p = PlanningState {
            todos: todos.clone(),
            ..Default::default()
        };
        let ids = |v: &[TodoId]| v.iter().map(|t| t.as_str().to_owned()).collect::<Vec<_>>();
        assert_eq!(ids(&readiness(&p).ready), ["todo_001", "todo_004"]);
        todos[0].status = TodoStatus::Skipped;
        p.todos = todos.clone();
        let r = readiness(&p);
        assert_eq!(
            r.blocked,
            [(
                TodoId::from("todo_002"),
                "dependency todo_001 was skipped".into()
            )]
        );
        todos[0].status = TodoStatus::Completed;
        todos[1].status = TodoStatus::Completed;
        todos[3].status = TodoStatus::Failed;
        todos[2].dependencies.push("todo_004".into());
        p.todos = todos;
        assert_eq!(
            readiness(&p).blocked,
            [(
                TodoId::from("todo_003"),
                "optional dependency todo_004 failed".into()
            )]
        );
    }

    #[test]
    fn illegal_transition_names_both_states() {
        let t = SupervisorTodo {
            id: "todo_002".into(),
            status: TodoStatus::Completed,
            ..Default::default()
        };
        let err = check_transition(&t, TodoStatus::InProgress).unwrap_err();
        assert_eq!(
            err.to_string(),
            "illegal transition todo_002: completed -> in_progress"
        );
        assert!(check_transition(&SupervisorTodo::default(), TodoStatus::InProgress).is_ok());
    }
}
