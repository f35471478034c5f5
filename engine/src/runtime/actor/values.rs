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

/// The most bytes of JSON the values set on one run may hold in all. Every state of the run
/// (and of a LangGraph thread, at each of its checkpoints) carries them, so they are bounded as
/// a whole, not only per update.
pub const VALUES_BYTES_MAX: usize = 256 * 1024;

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

/// Refuses values that would make the run's values (`now`, merged with them as the projection
/// merges them) larger than [`VALUES_BYTES_MAX`].
fn check_size(now: &Map<String, Value>, values: &Map<String, Value>) -> Result<()> {
    let mut merged = now.clone();
    for (key, value) in values {
        if value.is_null() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    let bytes = serde_json::to_vec(&merged).map_or(usize::MAX, |b| b.len());
    if bytes > VALUES_BYTES_MAX {
        return Err(Error::ValuesTooLarge {
            bytes,
            max: VALUES_BYTES_MAX,
        });
    }
    Ok(())
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
        if !crate::runtime::runs::is_settled(self.state()) {
            return Err(Error::RunBusy(self.live.run_id()));
        }
        check_size(&self.state().supervisor.values, &values)?;
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

    #[test]
    fn the_values_are_bounded_as_a_whole_and_removing_makes_room() {
        // `{"a":"…"}` is 8 bytes of JSON around the string.
        let fill = |key: &str, bytes: usize| map(serde_json::json!({ key: "x".repeat(bytes - 8) }));
        let full = fill("a", VALUES_BYTES_MAX);
        assert!(check_size(&Map::new(), &full).is_ok());
        let e = check_size(&full, &map(serde_json::json!({"b": 1}))).unwrap_err();
        assert!(
            matches!(e, Error::ValuesTooLarge { bytes, max } if bytes == VALUES_BYTES_MAX + 6 && max == VALUES_BYTES_MAX),
            "{e}"
        );
        // Replacing or removing a key is measured after the merge.
        assert!(check_size(&full, &fill("a", 100)).is_ok());
        assert!(check_size(&full, &map(serde_json::json!({"a": null, "b": 1}))).is_ok());
    }
}
