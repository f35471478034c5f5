//! `/checkpoint restore <checkpoint_id>`: go back to a checkpoint and continue from there.

use chronicle_schemas::{CheckpointId, Event};
use chronicle_wire::Restored;

use super::RunActor;
use crate::Result;
use crate::runtime::mailbox::RestoreTarget;

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
