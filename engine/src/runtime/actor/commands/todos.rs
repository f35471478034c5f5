//! `/todos`: the TODO list with its summary, the current TODO and the sub-agent runs.

use chronicle_schemas::Event;
use chronicle_wire::TodosReply;

use super::RunActor;
use crate::Result;
use crate::runtime::{runs, todo};

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
