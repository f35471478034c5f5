//! `/checkpoint list`: every checkpoint of the run, abandoned branches included.

use chronicle_schemas::Event;
use chronicle_wire::{CheckpointEntry, CommandOutcome};

use super::RunActor;
use crate::Result;

impl RunActor {
    pub(super) async fn checkpoint_list(&mut self, received: Event) -> Result<CommandOutcome> {
        let checkpoints = self
            .state()
            .checkpoints
            .with_abandoned()
            .into_iter()
            .map(|(c, abandoned)| CheckpointEntry::new(c, abandoned))
            .collect();
        self.append(vec![received]).await?;
        Ok(CommandOutcome::CheckpointList { checkpoints })
    }
}
