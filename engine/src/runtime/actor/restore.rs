//! Restoring a checkpoint (or any seq): the run continues from the state it had there; what came
//! after stays in the log as an abandoned branch.

use chronicle_schemas::{Actor, CheckpointId, Event};
use chronicle_wire::{Restored, tag};

use super::RunActor;
use crate::plugin::texts::Text;
use crate::runtime::mailbox::RestoreTarget;
use crate::runtime::todo;
use crate::{Error, Result};

impl RunActor {
    pub(super) async fn restore(
        &mut self,
        target: RestoreTarget,
        by: &str,
        prefix: Vec<Event>,
    ) -> Result<Restored> {
        let state = self.state();
        let (checkpoint_id, to_seq) = match target {
            RestoreTarget::Checkpoint(id) => {
                let cp = state
                    .checkpoints
                    .get(&id)
                    .ok_or_else(|| Error::CheckpointNotFound(id.clone()))?;
                (id, cp.seq)
            }
            RestoreTarget::Seq(seq) => {
                if seq >= state.next_seq() {
                    return Err(Error::SeqBeyondEnd {
                        seq,
                        last: state.next_seq().saturating_sub(1),
                    });
                }
                (CheckpointId(format!("seq_{seq}")), seq)
            }
        };
        self.abort_agents();
        let children_before = self.sub_run_calls();
        let mut ev = prefix;
        ev.push(Event::RunRestored {
            checkpoint_id: checkpoint_id.clone(),
            to_seq,
            by: Actor::user(by),
        });
        self.append(ev).await?;
        // Sub-agent runs of calls the restore abandoned stop; those of calls still on the
        // effective history keep running (their calls find them again).
        let kept = self.sub_run_calls();
        let abandoned: Vec<_> = children_before
            .into_iter()
            .filter(|c| !kept.contains(c))
            .collect();
        self.cancel_children(by, abandoned);
        // The plan is only read: a long run's steps hold every agent's result.
        let empty = Default::default();
        let p = self
            .state()
            .supervisor
            .planning_state
            .as_ref()
            .unwrap_or(&empty);
        let (summary, current_todo_id) = (todo::summary(p), p.current_todo_id.clone());
        let message = self.shared.settings.texts.say(Text::Restored {
            checkpoint: checkpoint_id.as_str(),
        });
        Ok(Restored {
            status: tag::Restored::default(),
            checkpoint_id,
            to_seq,
            summary,
            current_todo_id,
            message,
        })
    }
}
