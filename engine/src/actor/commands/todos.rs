//! `/todos`: the TODO list with its summary, the current TODO and the sub-agent runs.

use chronicle_schemas::Event;
use chronicle_wire::TodosReply;

use super::{Command, RunActor};
use crate::{Result, runs, todo};

pub(super) fn parse(args: &[&str]) -> std::result::Result<Command, String> {
    match args {
        [] => Ok(Command::Todos),
        _ => Err("usage: /todos".into()),
    }
}

impl RunActor {
    pub(super) async fn todos(&mut self, received: Event) -> Result<TodosReply> {
        let state = self.state();
        // Only the TODOs are cloned: the plan's steps hold every agent's result.
        let empty = Default::default();
        let p = state.supervisor.planning_state.as_ref().unwrap_or(&empty);
        let out = TodosReply {
            summary: todo::summary(p),
            todos: p.todos.clone(),
            current_todo_id: p.current_todo_id.clone(),
            checkpoint_id: state.checkpoints.head.clone(),
            pending_approval_ids: state.supervisor.pending_approval_ids.clone(),
            sub_runs: runs::sub_runs(&self.shared, state),
        };
        self.append(vec![received]).await?;
        Ok(out)
    }
}
