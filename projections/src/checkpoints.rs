//! The checkpoint tree: every `CheckpointSaved` of the whole log, each linked to the checkpoint
//! before it on its history. A restore starts a new branch whose first parent is the restored
//! checkpoint, so the list reads like a version history.

use chronicle_schemas::{Checkpoint, CheckpointId, Envelope, Event};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckpointList {
    /// In log order, across all branches.
    pub checkpoints: Vec<Checkpoint>,
    /// The newest checkpoint of the effective history.
    pub head: Option<CheckpointId>,
    /// The branch new checkpoints belong to: the number of restores so far.
    pub branch: u32,
    /// The seq of a `ValuesUpdated` whose checkpoint (the next event, same append) is still to
    /// come. Kept in the state so a snapshot taken between the two stays exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_at: Option<u64>,
}

impl CheckpointList {
    pub fn get(&self, id: &CheckpointId) -> Option<&Checkpoint> {
        // Ids are `cp_NNN` in log order, so the position is a good first guess.
        let guess = id
            .as_str()
            .strip_prefix("cp_")
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1));
        match guess.and_then(|i| self.checkpoints.get(i)) {
            Some(c) if &c.checkpoint_id == id => Some(c),
            _ => self.checkpoints.iter().find(|c| &c.checkpoint_id == id),
        }
    }

    pub(crate) fn apply(&mut self, env: &Envelope) {
        if let Event::ValuesUpdated { .. } = &env.event {
            self.update_at = Some(env.seq);
        }
        if let Event::CheckpointSaved {
            checkpoint_id,
            node,
            todos_completed,
        } = &env.event
        {
            let update = self.update_at.take().is_some_and(|s| s + 1 == env.seq);
            self.checkpoints.push(Checkpoint {
                checkpoint_id: checkpoint_id.clone(),
                seq: env.seq,
                node: node.clone(),
                at: env.at,
                todos_completed: *todos_completed,
                parent: self.head.clone(),
                branch: self.branch,
                update,
            });
            self.head = Some(checkpoint_id.clone());
        }
    }

    /// A restore moves the head back to the effective history's newest checkpoint at the
    /// restored point and opens a new branch.
    pub(crate) fn on_restore(&mut self, head: Option<CheckpointId>) {
        self.head = head;
        self.branch += 1;
    }

    /// The checkpoints the workflow's nodes made (all but those of a person's value updates):
    /// the run's steps so far, across all branches.
    pub fn steps(&self) -> usize {
        self.checkpoints.iter().filter(|c| !c.update).count()
    }

    /// Checkpoints of the effective history, oldest first.
    pub fn effective_path(&self) -> Vec<&Checkpoint> {
        let mut path = Vec::new();
        let mut cur = self.head.as_ref();
        while let Some(id) = cur {
            let Some(cp) = self.get(id) else { break };
            path.push(cp);
            cur = cp.parent.as_ref();
        }
        path.reverse();
        path
    }

    /// A checkpoint that is not on the effective history lies on an abandoned branch. (To
    /// classify many, collect `effective_path` once instead.)
    pub fn is_abandoned(&self, id: &CheckpointId) -> bool {
        !self.effective_path().iter().any(|c| &c.checkpoint_id == id)
    }

    /// Every checkpoint in log order with whether it lies on an abandoned branch; one walk.
    pub fn with_abandoned(&self) -> Vec<(&Checkpoint, bool)> {
        let live: std::collections::HashSet<&CheckpointId> = self
            .effective_path()
            .into_iter()
            .map(|c| &c.checkpoint_id)
            .collect();
        self.checkpoints
            .iter()
            .map(|c| (c, !live.contains(&c.checkpoint_id)))
            .collect()
    }
}
