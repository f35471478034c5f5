//! Deleting an item of long-term memory: recorded in the run that saved it (`MemoryDeleted`,
//! by whom), so the run's history says what became of what it saved. The append updates the
//! memory index, and later turns no longer load the item.

use chronicle_schemas::{Actor, Event, Memory};

use super::RunActor;
use crate::{Error, Result};

impl RunActor {
    pub(super) async fn forget(&mut self, memory_id: &str, by: &str) -> Result<Memory> {
        let saved = &self.state().supervisor.saved_memories;
        let Some(memory) = saved.iter().find(|m| m.memory_id == memory_id).cloned() else {
            return Err(Error::MemoryNotFound(memory_id.to_owned()));
        };
        self.append(vec![Event::MemoryDeleted {
            memory_id: memory_id.to_owned(),
            by: Actor::user(by),
        }])
        .await?;
        Ok(memory)
    }
}
