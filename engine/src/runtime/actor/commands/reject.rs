//! `/todo reject [<id>] [reason]`: reject what waits; a TODO is skipped and never retried, a
//! tool call is refused to its agent.

use chronicle_schemas::{Approval, Decision, Event, Subject};
use chronicle_wire::{Rejected, tag};

use super::RunActor;
use crate::plugin::texts::Text;
use crate::{Error, Result};

impl RunActor {
    pub(super) async fn reject(
        &mut self,
        words: Vec<String>,
        by: &str,
        received: Event,
    ) -> Result<Rejected> {
        // The first word names the approval only when it is a pending approval's or TODO's id;
        // otherwise all the words are the reason.
        let pending: Vec<&Approval> = self.state().approvals.pending().collect();
        let names_one = words.first().is_some_and(|w| {
            pending.iter().any(|a| {
                a.approval_id.as_str() == w
                    || a.subject
                        .as_ref()
                        .is_some_and(|s| s.todo_id().as_str() == w)
            })
        });
        let (target, reason_words) = if names_one {
            (words.first().map(String::as_str), &words[1..])
        } else {
            (None, &words[..])
        };
        let reason = (!reason_words.is_empty()).then(|| reason_words.join(" "));
        let id = match self.resolve_pending(target)?.as_slice() {
            [one] => one.clone(),
            several => {
                return Err(Error::SeveralPending(
                    several.iter().map(ToString::to_string).collect(),
                ));
            }
        };
        let a = self
            .decide(
                &id,
                Decision::Reject,
                None,
                by,
                reason.clone(),
                vec![received],
            )
            .await?;
        let todo_id = a
            .subject
            .as_ref()
            .map(|s| s.todo_id().clone())
            .unwrap_or_default();
        let reason = reason.as_deref().unwrap_or("User rejected");
        let texts = &self.shared.settings.texts;
        let message = match &a.subject {
            Some(Subject::ToolCall { .. }) => texts.say(Text::ToolCallRejected {
                todo: &todo_id,
                tool: &a.tool_name,
                reason,
            }),
            _ => texts.say(Text::TodoRejected {
                todo: &todo_id,
                reason,
            }),
        };
        Ok(Rejected {
            status: tag::Rejected::default(),
            todo_id,
            approval_id: id,
            message,
        })
    }
}
