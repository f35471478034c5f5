//! What the turn was given and what it remembered: the session's earlier turns, the user's
//! long-term memory as loaded, the items saved and deleted, and the session's tombstone.

use chronicle_schemas::{Envelope, Event, MemoryKind, SupervisorState};
use serde_json::{Map, Value};

pub(super) fn apply(s: &mut SupervisorState, env: &Envelope) {
    match &env.event {
        Event::SessionContextLoaded { turns, .. } => s.session_context.clone_from(turns),
        Event::MemoryLoaded { memories, .. } => {
            let mut preferences = Map::new();
            for m in memories.iter().filter(|m| m.kind == MemoryKind::Preference) {
                preferences.insert(m.key.clone(), m.value.clone());
            }
            s.loaded_memories = Some(
                memories
                    .iter()
                    .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
                    .collect(),
            );
            s.user_preferences = Some(Value::Object(preferences));
            s.memory_load_time = Some(env.at.to_string());
        }
        Event::MemorySaved { memory } => s.saved_memories.push(memory.clone()),
        Event::MemoryDeleted { memory_id, .. } => {
            s.saved_memories.retain(|m| &m.memory_id != memory_id)
        }
        Event::SessionDeleted { .. } => s.session_deleted = true,
        _ => {}
    }
}
