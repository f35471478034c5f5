//! `/checkpoint restore <checkpoint_id>`: go back to a checkpoint and continue from there.

use chronicle_schemas::{CheckpointId, Event};
use chronicle_wire::Restored;

use super::{Command, RunActor};
use crate::Result;
use crate::mailbox::RestoreTarget;

pub(super) fn parse(args: &[&str]) -> std::result::Result<Command, String> {
    match args {
        [id] => Ok(Command::CheckpointRestore {
            checkpoint: (*id).to_owned(),
        }),
        _ => Err("usage: /checkpoint restore <checkpoint_id>".into()),
    }
}

impl RunActor {
    pub(super) async fn checkpoint_restore(
        &mut self,
        checkpoint: String,
        by: &str,
        received: Event,
    ) -> Result<Restored> {
        let target = RestoreTarget::Checkpoint(CheckpointId(checkpoint));
        self.restore(target, by, vec![received]).await
    }
}
