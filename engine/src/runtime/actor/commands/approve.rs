//! `/todo approve [<approval_id>|<todo_id>|all]`: approve what waits (name one when several do).

use chronicle_schemas::{Decision, Event, Subject};
use chronicle_wire::{Approved, ApprovedAll, CommandOutcome, tag};

use super::RunActor;
use crate::Result;
use crate::plugin::texts::Text;

impl RunActor {
    pub(super) async fn approve(
        &mut self,
        target: Option<String>,
        by: &str,
        received: Event,
    ) -> Result<CommandOutcome> {
        let ids = self.resolve_pending(target.as_deref())?;
        let mut out = Vec::new();
        let mut prefix = vec![received];
        for id in ids {
            let a = self
                .decide(
                    &id,
                    Decision::Approve,
                    None,
                    by,
                    None,
                    std::mem::take(&mut prefix),
                )
                .await?;
            let todo_id = a.subject.as_ref().map(|s| s.todo_id().clone());
            let texts = &self.shared.settings.texts;
            let message = match &a.subject {
                Some(Subject::ToolCall { todo_id, .. }) => texts.say(Text::ToolCallApproved {
                    todo: todo_id,
                    tool: &a.tool_name,
                }),
                _ => texts.say(Text::TodoApproved {
                    todo: todo_id.as_ref().map_or("", |t| t.as_str()),
                }),
            };
            out.push(Approved {
                status: tag::Resumed::default(),
                todo_id,
                approval_id: id,
                message,
            });
        }
        Ok(if out.len() == 1 {
            CommandOutcome::Approved(out.remove(0))
        } else {
            CommandOutcome::ApprovedAll(ApprovedAll {
                status: tag::Resumed::default(),
                approved: out,
            })
        })
    }
}
