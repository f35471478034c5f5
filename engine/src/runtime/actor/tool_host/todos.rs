//! `write_todos` of the agent that drives the run (agent mode): the host keeps the run's TODO list
//! itself. The TODO events the list makes (`todo::agent_plan`) are recorded in the same append as
//! the call's completion, so a crash keeps both or neither, and a re-execution answers the call
//! from the log without changing the list again.

use chronicle_schemas::ToolCallState;
use serde_json::Value;

use super::completed;
use crate::Result;
use crate::plugin::tools::{TodoItem, ToolError};
use crate::runtime::actor::{RunActor, now};
use crate::runtime::mailbox::{Input, ToolCallMsg, Waiter};
use crate::runtime::todo;

impl RunActor {
    /// Whether `rec` is a `write_todos` call the host answers itself.
    pub(super) fn keeps_plan(&self, rec: &ToolCallState) -> bool {
        rec.tool == crate::plugin::tools::WRITE_TODOS
            && self
                .todo(&rec.todo_id)
                .is_some_and(|t| todo::drives_run(&t))
    }

    pub(super) async fn write_agent_plan(
        &mut self,
        rec: &ToolCallState,
        args: Value,
        waiter: Waiter,
    ) -> Result<()> {
        let Some(driver) = self.todo(&rec.todo_id) else {
            return Ok(());
        };
        let max_todos = self.state().supervisor.config.limits.max_todos as usize;
        let p = self
            .state()
            .supervisor
            .planning_state
            .clone()
            .unwrap_or_default();
        let plan = TodoItem::parse_list(&args)
            .and_then(|items| todo::agent_plan(&p, &driver, &items, max_todos, now()));
        let (mut ev, answer) = match plan {
            Ok(plan) => (plan.events, Ok(plan.answer)),
            Err(e) => (vec![], Err(ToolError::Failed(e))),
        };
        let output = match &answer {
            Ok(v) => Ok(self.payload(v.clone())?),
            Err(e) => Err(e),
        };
        ev.push(completed(rec.tool_call_id.clone(), output, 0));
        match self.append(ev).await {
            // Nothing was recorded: the call comes again once there may be space, and is worked
            // out again on the list as it will be then.
            Err(e) if e.is_retryable() => {
                let again = ToolCallMsg {
                    todo_id: rec.todo_id.clone(),
                    attempt: rec.attempt,
                    epoch: self.epoch,
                    index: rec.index,
                    tool: rec.tool.clone(),
                    args: rec.args.clone(),
                    reply: waiter.reply,
                };
                crate::runtime::actor::redeliver(self.tx.clone(), Input::ToolCall(again));
                Ok(())
            }
            Err(e) => Err(e),
            Ok(_) => {
                waiter.answer(answer);
                Ok(())
            }
        }
    }
}
