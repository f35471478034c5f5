//! `/checkpoint list`: every checkpoint of the run, abandoned branches included.

use chronicle_schemas::Event;
use serde_json::{Value, json};

use super::{Command, RunActor};
use crate::Result;

pub(super) fn parse(args: &[&str]) -> std::result::Result<Command, String> {
    match args {
        [] => Ok(Command::CheckpointList),
        _ => Err("usage: /checkpoint list".into()),
    }
}

impl RunActor {
    pub(super) async fn checkpoint_list(&mut self, received: Event) -> Result<Value> {
        let list: Vec<Value> = self
            .state()
            .checkpoints
            .with_abandoned()
            .into_iter()
            .map(|(c, abandoned)| {
                json!({
                    "checkpoint_id": c.checkpoint_id,
                    "timestamp": c.at,
                    "node": c.node,
                    "todos_completed": c.todos_completed,
                    "seq": c.seq,
                    "parent": c.parent,
                    "branch": c.branch,
                    "abandoned": abandoned,
                })
            })
            .collect();
        self.append(vec![received]).await?;
        Ok(json!({"checkpoints": list}))
    }
}
