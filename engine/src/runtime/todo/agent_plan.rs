//! An agent's own plan in agent mode: the list a `write_todos` call writes becomes the run's TODO
//! events, so `/todos`, the stream, the checkpoints and `replay` show the model's plan, and a
//! person's `/todo` commands work on it.
//!
//! The model writes its whole list each time. An item is matched to a TODO the agent planned
//! before by the `id` the previous answer gave it, else by its exact text; a new item is added
//! (`TodoAdded` by `agent:<name>`, then moved to its status); a changed status is a
//! `TodoStatusChanged` by `agent:<name>` when the transition table allows it (a TODO a person
//! skipped stays skipped, and the answer says so); a TODO the list leaves out is skipped.

use chronicle_schemas::{
    Actor, Event, PLANNED_BY, PlanningState, SupervisorTodo, Timestamp, TodoId, TodoStatus,
};
use serde_json::{Value, json};

use crate::plugin::tools::TodoItem;

/// What a `write_todos` call changes, and what it answers.
#[derive(Debug, PartialEq)]
pub struct AgentPlan {
    pub events: Vec<Event>,
    /// `{todos: [{id, content, status}], notes: [..]}`: the agent's list after the call.
    pub answer: Value,
}

/// The events that make the run's TODO list say what `items` say, for the agent of `driver`;
/// refused (with why) when the run would hold more than `max_todos` TODOs.
pub fn agent_plan(
    p: &PlanningState,
    driver: &SupervisorTodo,
    items: &[TodoItem],
    max_todos: usize,
    now: Timestamp,
) -> Result<AgentPlan, String> {
    let agent = Actor::agent(&driver.agent_name);
    let mut todos: Vec<SupervisorTodo> = p
        .todos
        .iter()
        .filter(|t| t.planned_by() == Some(driver.id.as_str()))
        .cloned()
        .collect();
    let mut matched: Vec<bool> = vec![false; todos.len()];
    let mut events = Vec::new();
    let mut notes = Vec::new();
    let mut next = p.todos.len();
    let mut order: Vec<usize> = Vec::new();
    for item in items {
        let by_id = item.id.as_ref().and_then(|id| {
            let i = todos.iter().position(|t| &t.id == id);
            if i.is_none() {
                notes.push(format!("{id} is not one of your TODOs: added as a new one"));
            }
            i
        });
        let found = by_id
            .filter(|i| !matched[*i])
            .or_else(|| (0..todos.len()).find(|i| !matched[*i] && todos[*i].name == item.content));
        let i = match found {
            Some(i) => i,
            None => {
                if next + 1 > max_todos {
                    return Err(format!(
                        "the list would give the run more than its max_todos limit of {max_todos} TODOs"
                    ));
                }
                let todo = planned_todo(driver, TodoId(format!("todo_{:03}", next + 1)), item, now);
                next += 1;
                events.push(Event::TodoAdded {
                    todo: todo.clone(),
                    added_by: agent.clone(),
                });
                todos.push(todo);
                matched.push(false);
                todos.len() - 1
            }
        };
        matched[i] = true;
        order.push(i);
        move_to(
            &mut todos[i],
            item.status,
            &agent,
            None,
            &mut events,
            &mut notes,
        );
    }
    for i in 0..todos.len() {
        if !matched[i] && !todos[i].status.is_final() {
            let reason = Some("left out of the agent's list".to_owned());
            move_to(
                &mut todos[i],
                TodoStatus::Skipped,
                &agent,
                reason,
                &mut events,
                &mut notes,
            );
            order.push(i);
        }
    }
    let list: Vec<Value> = order
        .iter()
        .map(|i| json!({"id": todos[*i].id, "content": todos[*i].name, "status": todos[*i].status}))
        .collect();
    let mut answer = json!({ "todos": list });
    if !notes.is_empty() {
        answer["notes"] = json!(notes);
    }
    Ok(AgentPlan { events, answer })
}

fn planned_todo(
    driver: &SupervisorTodo,
    id: TodoId,
    item: &TodoItem,
    now: Timestamp,
) -> SupervisorTodo {
    SupervisorTodo {
        id,
        name: item.content.clone(),
        description: item.content.clone(),
        agent_name: driver.agent_name.clone(),
        agent_purpose: driver.agent_purpose.clone(),
        team: driver.team.clone(),
        category: driver.category.clone(),
        created_at: now,
        metadata: [(PLANNED_BY.to_owned(), json!(driver.id))].into(),
        ..SupervisorTodo::default()
    }
}

/// Moves `t` to `to` through legal transitions (pending → in_progress → completed may be one
/// step or two), or notes why it stays.
fn move_to(
    t: &mut SupervisorTodo,
    to: TodoStatus,
    by: &Actor,
    reason: Option<String>,
    events: &mut Vec<Event>,
    notes: &mut Vec<String>,
) {
    if t.status == to {
        return;
    }
    if !t.status.can_transition_to(to) {
        notes.push(format!("{} is {}: not changed to {to}", t.id, t.status));
        return;
    }
    events.push(Event::TodoStatusChanged {
        todo_id: t.id.clone(),
        from: t.status,
        to,
        reason,
        attempt: t.attempts,
        by: by.clone(),
    });
    t.status = to;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(content: &str, status: TodoStatus, id: Option<&str>) -> TodoItem {
        TodoItem {
            id: id.map(TodoId::from),
            content: content.into(),
            status,
        }
    }

    fn driver() -> SupervisorTodo {
        SupervisorTodo {
            id: "todo_001".into(),
            agent_name: "analyst".into(),
            status: TodoStatus::InProgress,
            ..SupervisorTodo::default()
        }
    }

    /// The state after folding `events` the way the projection does, for TODOs only.
    fn apply(p: &mut PlanningState, events: &[Event]) {
        for e in events {
            match e {
                Event::TodoAdded { todo, .. } => p.todos.push(todo.clone()),
                Event::TodoStatusChanged { todo_id, to, .. } => {
                    p.todo_mut(todo_id).unwrap().status = *to;
                }
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn a_list_becomes_todos_and_later_lists_change_them() {
        use TodoStatus::*;
        let mut p = PlanningState {
            todos: vec![driver()],
            ..Default::default()
        };
        let first = [
            item("read the data", InProgress, None),
            item("analyse it", Pending, None),
            item("write the report", Pending, None),
        ];
        let plan = agent_plan(&p, &driver(), &first, 50, Timestamp(1)).unwrap();
        let kinds: Vec<&str> = plan.events.iter().map(Event::kind).collect();
        assert_eq!(
            kinds,
            ["TodoAdded", "TodoStatusChanged", "TodoAdded", "TodoAdded"]
        );
        assert!(plan.events.iter().all(|e| match e {
            Event::TodoAdded { added_by, todo } =>
                *added_by == Actor::agent("analyst") && todo.planned_by() == Some("todo_001"),
            Event::TodoStatusChanged { by, .. } => *by == Actor::agent("analyst"),
            _ => false,
        }));
        assert_eq!(
            plan.answer["todos"],
            json!([
                {"id": "todo_002", "content": "read the data", "status": "in_progress"},
                {"id": "todo_003", "content": "analyse it", "status": "pending"},
                {"id": "todo_004", "content": "write the report", "status": "pending"},
            ])
        );
        apply(&mut p, &plan.events);
        // A person skipped the report meanwhile.
        p.todo_mut(&"todo_004".into()).unwrap().status = Skipped;
        // The second list: by id, by text, one dropped, the skipped one asked for again.
        let second = [
            item("read it all", Completed, Some("todo_002")),
            item("write the report", InProgress, None),
        ];
        let plan = agent_plan(&p, &driver(), &second, 50, Timestamp(2)).unwrap();
        assert_eq!(
            plan.answer,
            json!({
                "todos": [
                    {"id": "todo_002", "content": "read the data", "status": "completed"},
                    {"id": "todo_004", "content": "write the report", "status": "skipped"},
                    {"id": "todo_003", "content": "analyse it", "status": "skipped"},
                ],
                "notes": ["todo_004 is skipped: not changed to in_progress"],
            })
        );
        // A list over the run's limit changes nothing.
        let err = agent_plan(
            &p,
            &driver(),
            &[item("more", Pending, None)],
            4,
            Timestamp(3),
        );
        assert_eq!(
            err.unwrap_err(),
            "the list would give the run more than its max_todos limit of 4 TODOs"
        );
    }

    #[test]
    fn pending_to_completed_is_one_step_and_repeats_change_nothing() {
        let p = PlanningState {
            todos: vec![driver()],
            ..Default::default()
        };
        let list = [item("done already", TodoStatus::Completed, None)];
        let plan = agent_plan(&p, &driver(), &list, 50, Timestamp(1)).unwrap();
        assert_eq!(plan.events.len(), 2);
        let mut p = p;
        apply(&mut p, &plan.events);
        let again = agent_plan(&p, &driver(), &list, 50, Timestamp(2)).unwrap();
        assert!(again.events.is_empty(), "{:?}", again.events);
    }
}
