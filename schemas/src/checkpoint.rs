//! A checkpoint: a named point of a run's history that a restore can return to.

use serde::{Deserialize, Serialize};

use crate::{CheckpointId, Timestamp};

/// One entry of the checkpoint tree. `parent` is the checkpoint before it on the same history;
/// `branch` counts restores (0 = the original history), so restores form a version tree.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Checkpoint {
    pub checkpoint_id: CheckpointId,
    pub seq: u64,
    pub node: String,
    pub at: Timestamp,
    pub todos_completed: u32,
    pub parent: Option<CheckpointId>,
    pub branch: u32,
    /// Made by a person setting values (`ValuesUpdated`), not by a node of the workflow: it
    /// does not count as a step of the run (`max_steps`). Left out when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub update: bool,
}
