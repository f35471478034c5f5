//! `/todo add <agent> [after <id>[,<id>]]`: add a TODO while the run executes.

use chronicle_schemas::{Actor, Event, Phase, TodoId};
use chronicle_wire::{Added, tag};
use serde_json::json;

use super::RunActor;
use crate::plugin::texts::Text;
use crate::{Error, Result};

impl RunActor {
    pub(super) async fn add(
        &mut self,
        agent: String,
        after: Vec<String>,
        by: &str,
        received: Event,
    ) -> Result<Added> {
        self.shared.settings.registry.find(&agent)?;
        let s = &self.state().supervisor;
        if s.run_status.is_terminal()
            || matches!(
                s.current_phase,
                Phase::Aggregation | Phase::ResponseGeneration | Phase::Finished
            )
        {
            return Err(Error::PastExecution);
        }
        if s.execution_plan.is_none() {
            return Err(Error::NoPlanYet);
        }
        let todos = s.planning_state.as_ref().map_or(0, |p| p.todos.len());
        if todos >= s.config.limits.max_todos as usize {
            return Err(Error::TodoLimit(todos));
        }
        let deps: Vec<TodoId> = after.into_iter().map(TodoId).collect();
        if let Some(bad) = deps.iter().find(|d| self.todo(d).is_none()) {
            return Err(Error::TodoNotFound(bad.clone()));
        }
        let mut t = self.new_todo(todos, &agent, deps);
        t.metadata.insert("added_by".into(), json!("user"));
        t.metadata.insert("manual".into(), json!(true));
        t.metadata.insert("optional".into(), json!(false));
        let todo = t.clone();
        let message = self
            .shared
            .settings
            .texts
            .say(Text::TodoAdded { todo: &t.id });
        self.append(vec![
            received,
            Event::TodoAdded {
                todo: t,
                added_by: Actor::user(by),
            },
        ])
        .await?;
        Ok(Added {
            status: tag::Added::default(),
            todo,
            message,
        })
    }
}
