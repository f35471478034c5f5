//! Values a person sets on a settled run (LangGraph's `update_state`): recorded as
//! `ValuesUpdated`, by whom, with the checkpoint it makes, in one append. The workflow never
//! reads them, so they may be set on a run that waits for a human and on one that has ended
//! (after its terminal event, like a session's tombstone: the store keeps the run terminal and
//! recovery leaves it alone).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use chronicle_schemas::{Actor, CheckpointId, Event, SupervisorState};
use serde_json::{Map, Value};

use super::RunActor;
use super::nodes::{checkpoint, next_checkpoint_id};
use crate::{Error, Result};

/// The node a value update's checkpoint is recorded as when the caller names none.
pub(crate) const UPDATE_NODE: &str = "update";

/// Keys a person may not set: every field of the serialized supervisor state (its own `values`
/// included) and what a thread's values add to it (`messages`, `__interrupt__`).
static OWN_KEYS: LazyLock<BTreeSet<String>> = LazyLock::new(|| {
    let fields = match serde_json::to_value(SupervisorState::default()) {
        Ok(Value::Object(m)) => m.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    };
    fields
        .into_iter()
        .chain(["values", "messages", "__interrupt__"].map(str::to_owned))
        .collect()
});

/// Refuses values that set nothing or touch the workflow's own state.
fn check(values: &Map<String, Value>) -> Result<()> {
    if values.is_empty() {
        return Err(Error::NoValues);
    }
    match values.keys().find(|k| OWN_KEYS.contains(k.as_str())) {
        Some(key) => Err(Error::OwnStateKey(key.clone())),
        None => Ok(()),
    }
}

impl RunActor {
    /// Records the values and their checkpoint (its node `as_node`, else `update`); returns the
    /// checkpoint's id. A run still working is [`Error::RunBusy`]; a refusal writes nothing.
    pub(super) async fn update_values(
        &mut self,
        values: Map<String, Value>,
        as_node: Option<String>,
        by: &str,
    ) -> Result<CheckpointId> {
        check(&values)?;
        if !crate::runs::is_settled(self.state()) {
            return Err(Error::RunBusy(self.live.run_id()));
        }
        let node = as_node.as_deref().unwrap_or(UPDATE_NODE);
        let id = next_checkpoint_id(self.state());
        let saved = checkpoint(self.state(), node, 0);
        self.append(vec![
            Event::ValuesUpdated {
                values,
                as_node,
                by: Actor::user(by),
            },
            saved,
        ])
        .await?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn own_state_keys_are_refused_by_name() {
        for key in [
            "query",
            "final_response",
            "values",
            "messages",
            "__interrupt__",
        ] {
            let e = check(&map(serde_json::json!({ "note": 1, key: 2 }))).unwrap_err();
            assert!(
                matches!(&e, Error::OwnStateKey(k) if k == key),
                "{key}: {e}"
            );
        }
        assert!(matches!(check(&Map::new()), Err(Error::NoValues)));
        assert!(check(&map(serde_json::json!({"note": null}))).is_ok());
    }
}
