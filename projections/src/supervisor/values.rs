//! Values a person set on the run (`ValuesUpdated`): merged key by key into the state's
//! `values`, a later update replacing a key and JSON `null` removing it.

use chronicle_schemas::SupervisorState;
use serde_json::{Map, Value};

pub(super) fn apply(s: &mut SupervisorState, values: &Map<String, Value>) {
    for (key, value) in values {
        if value.is_null() {
            s.values.remove(key);
        } else {
            s.values.insert(key.clone(), value.clone());
        }
    }
}
