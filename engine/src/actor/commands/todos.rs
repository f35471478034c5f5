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
        let p = state.supervisor.planning_state.clone().unwrap_or_default();
        let out = TodosReply {
            summary: todo::summary(&p),
            todos: p.todos,
            current_todo_id: p.current_todo_id,
            checkpoint_id: state.checkpoints.head.clone(),
            pending_approval_ids: state.supervisor.pending_approval_ids.clone(),
            sub_runs: runs::sub_runs(&self.shared, state),
        };
        self.append(vec![received]).await?;
        Ok(out)
    }
}
