//! The one table from events to their wire names: the SSE `event:` name and the stream's
//! `type`/`subtype` (e.g. `tool`/`start`), plus the `data` object every stream sends
//! ([`EventData`]), and the live chunks streams send beside the events ([`ChunkData`]).

use chronicle_schemas::{Envelope, Event, RunId, Timestamp, TodoId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `(dotted name, type, subtype)` of an event.
pub fn wire_names(e: &Event) -> (&'static str, &'static str, &'static str) {
    match e {
        Event::RunStarted { .. } => ("run.started", "run", "start"),
        Event::PhaseChanged { .. } => ("phase.changed", "reasoning", "start"),
        Event::IntentAnalyzed { .. } => ("intent.analyzed", "reasoning", "chunk"),
        Event::PlanCreated { .. } => ("plan.created", "reasoning", "chunk"),
        Event::TodoAdded { .. } => ("todo.added", "reasoning", "chunk"),
        Event::TodoStatusChanged { .. } => ("todo.updated", "reasoning", "chunk"),
        Event::ApprovalRequested { .. } => ("approval.requested", "tool", "start"),
        Event::ApprovalDecided { .. } => ("approval.decided", "tool", "end"),
        Event::ApprovalExpired { .. } => ("approval.expired", "tool", "end"),
        Event::AgentStarted { .. } => ("agent.started", "tool", "start"),
        Event::AgentCompleted { .. } => ("agent.completed", "tool", "end"),
        Event::AgentFailed { .. } => ("agent.failed", "tool", "error"),
        Event::ToolCallRequested { .. } => ("tool.requested", "tool", "start"),
        Event::ToolCallCompleted { .. } => ("tool.completed", "tool", "end"),
        Event::LlmCalled { .. } => ("llm.called", "reasoning", "chunk"),
        Event::EvaluationRecorded { .. } => ("evaluation.recorded", "reasoning", "chunk"),
        Event::ResultsAggregated { .. } => ("results.aggregated", "reasoning", "chunk"),
        Event::ResponseGenerated { .. } => ("message.final", "message", "final"),
        Event::CheckpointSaved { .. } => ("checkpoint.saved", "reasoning", "chunk"),
        Event::CommandReceived { .. } => ("command.received", "reasoning", "chunk"),
        Event::RunInterrupted { .. } => ("run.interrupted", "run", "chunk"),
        Event::RunResumed { .. } => ("run.resumed", "run", "chunk"),
        Event::RunRestored { .. } => ("run.restored", "run", "chunk"),
        Event::Reasoning { .. } => ("reasoning.note", "reasoning", "chunk"),
        Event::RunCompleted { .. } => ("run.end", "run", "end"),
        Event::RunFailed { .. } => ("run.error", "run", "error"),
        Event::RunCancelled { .. } => ("run.end", "run", "end"),
        Event::SessionContextLoaded { .. } => ("context.loaded", "reasoning", "chunk"),
        Event::MemoryLoaded { .. } => ("memory.loaded", "reasoning", "chunk"),
        Event::MemorySaved { .. } => ("memory.saved", "reasoning", "chunk"),
        Event::MemoryDeleted { .. } => ("memory.deleted", "reasoning", "chunk"),
        Event::SessionDeleted { .. } => ("session.deleted", "run", "chunk"),
        Event::ValuesUpdated { .. } => ("values.updated", "run", "chunk"),
    }
}

/// Every SSE name an event can have (several events share `run.end`), for a client that follows
/// every kind: a browser's `EventSource` listens by name.
pub const EVENT_NAMES: [&str; 32] = [
    "run.started",
    "phase.changed",
    "intent.analyzed",
    "plan.created",
    "todo.added",
    "todo.updated",
    "approval.requested",
    "approval.decided",
    "approval.expired",
    "agent.started",
    "agent.completed",
    "agent.failed",
    "tool.requested",
    "tool.completed",
    "llm.called",
    "evaluation.recorded",
    "results.aggregated",
    "message.final",
    "checkpoint.saved",
    "command.received",
    "run.interrupted",
    "run.resumed",
    "run.restored",
    "reasoning.note",
    "run.end",
    "run.error",
    "context.loaded",
    "memory.loaded",
    "memory.saved",
    "memory.deleted",
    "session.deleted",
    "values.updated",
];

/// The SSE names after which a run's stream ends (unless the client follows on): the names of
/// the events for which [`ends_stream`] holds. A client that only sees names checks these, and
/// goes on past one whose data says `abandoned` (the end of a branch a restore left).
pub const END_NAMES: [&str; 2] = ["run.end", "run.error"];

/// After these a run's stream ends (unless the client follows on, or the event lies on an
/// abandoned branch: the run went on from an earlier checkpoint).
pub fn ends_stream(e: &Event) -> bool {
    e.is_terminal()
}

/// The event's own fields as JSON (the variant's body, without the variant tag).
pub fn content(e: &Event) -> Value {
    match serde_json::to_value(e) {
        Ok(Value::Object(mut m)) if m.len() == 1 => m.remove(e.kind()).unwrap_or(Value::Null),
        Ok(other) => other,
        Err(_) => Value::Null,
    }
}

/// The `data` object of one SSE message / WebSocket `event`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventData {
    pub run_id: RunId,
    pub seq: u64,
    /// The event's global offset in the log.
    pub offset: u64,
    pub at: Timestamp,
    /// The event's variant name (`TodoStatusChanged`).
    pub kind: String,
    /// `run`, `reasoning`, `tool` or `message`.
    #[serde(rename = "type")]
    pub kind_type: String,
    /// `start`, `chunk`, `end`, `final` or `error`.
    pub subtype: String,
    /// The variant's fields; approval events may carry a few more (`tool`, `approval_required`,
    /// `effective_args`).
    pub content: Value,
    /// On a run's stream: the event lies on a branch a later restore abandoned. Absent when false.
    //
    // As the stream knew when it sent it: history, not what the run does now; the
    // `run.restored` that left it comes later on the same stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abandoned: bool,
}

impl EventData {
    /// The event back from `kind` and `content` (extra content fields are ignored).
    pub fn event(&self) -> Result<Event, serde_json::Error> {
        let mut tagged = serde_json::Map::new();
        tagged.insert(self.kind.clone(), self.content.clone());
        serde_json::from_value(Value::Object(tagged))
    }
}

/// The `data` object of one event: `{run_id, seq, offset, at, kind, type, subtype, content}`.
pub fn event_data(env: &Envelope) -> EventData {
    let (_, ty, sub) = wire_names(&env.event);
    EventData {
        run_id: env.run_id,
        seq: env.seq,
        offset: env.offset,
        at: env.at,
        kind: env.event.kind().to_owned(),
        kind_type: ty.to_owned(),
        subtype: sub.to_owned(),
        content: content(&env.event),
        abandoned: false,
    }
}

/// The SSE names of live chunks: the pieces of a model's answer while it is written
/// (`message.chunk`) and of its reasoning (`reasoning.chunk`). They are not stored, so they carry
/// no `id:`, and a stream resumed with `Last-Event-ID` goes on with the next ones.
pub const CHUNK_NAMES: [&str; 2] = ["message.chunk", "reasoning.chunk"];

/// What a chunk is a piece of: `message` or `reasoning` (the stream's `type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkType {
    Message,
    Reasoning,
}

/// The `subtype` of every chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkSubtype {
    #[default]
    Chunk,
}

/// The `data` object of a live chunk (SSE `message.chunk` / `reasoning.chunk`, a WebSocket
/// `event`): `{run_id, kind, type, subtype: "chunk", content: {text, todo_id?, agent?}}`, the
/// shape of [`EventData`] without what only a stored event has (seq, offset, at). Its `kind`
/// (`MessageChunk`, `ReasoningChunk`) is no event's: stored events of type `reasoning` have the
/// subtype `chunk` too, and a reader of WebSocket frames tells them apart by it (or by the
/// missing `seq`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkData {
    pub run_id: RunId,
    pub kind: ChunkKind,
    #[serde(rename = "type")]
    pub kind_type: ChunkType,
    pub subtype: ChunkSubtype,
    pub content: ChunkContent,
}

/// A chunk's `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChunkKind {
    MessageChunk,
    ReasoningChunk,
}

/// A chunk's text and where it comes from: the agent and its TODO when an agent's model writes
/// it, neither when it is the supervisor's own answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkContent {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo_id: Option<TodoId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl ChunkData {
    /// A chunk of `run`'s message or reasoning.
    pub fn new(run_id: RunId, kind_type: ChunkType, content: ChunkContent) -> Self {
        Self {
            run_id,
            kind: match kind_type {
                ChunkType::Message => ChunkKind::MessageChunk,
                ChunkType::Reasoning => ChunkKind::ReasoningChunk,
            },
            kind_type,
            subtype: ChunkSubtype::Chunk,
            content,
        }
    }

    /// The SSE name: `message.chunk` or `reasoning.chunk` (one of [`CHUNK_NAMES`]).
    pub fn name(&self) -> &'static str {
        match self.kind_type {
            ChunkType::Message => CHUNK_NAMES[0],
            ChunkType::Reasoning => CHUNK_NAMES[1],
        }
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::samples::sample_events;
    use chronicle_schemas::{Envelope, Hash, TodoId};
    use serde_json::json;

    use super::*;

    fn envelope(seq: u64, event: Event) -> Envelope {
        Envelope {
            offset: 40 + seq,
            run_id: RunId::from_u128(7),
            seq,
            at: Timestamp(1_759_658_400_000_000),
            prev_hash: Hash::ZERO,
            hash: Hash::ZERO,
            event,
        }
    }

    #[test]
    fn the_list_of_names_is_every_name_an_event_has() {
        let mut names: Vec<&str> = sample_events().iter().map(|e| wire_names(e).0).collect();
        names.sort_unstable();
        names.dedup();
        let mut listed = EVENT_NAMES.to_vec();
        listed.sort_unstable();
        assert_eq!(names, listed);
    }

    #[test]
    fn every_variant_has_names_and_content() {
        for e in sample_events() {
            let (name, ty, sub) = wire_names(&e);
            assert!(name.contains('.'), "{name}");
            assert!(
                ["reasoning", "tool", "message", "run"].contains(&ty),
                "{ty}"
            );
            assert!(
                ["start", "chunk", "end", "final", "error"].contains(&sub),
                "{sub}"
            );
            assert!(content(&e).is_object(), "{}", e.kind());
            assert_eq!(ends_stream(&e), END_NAMES.contains(&name), "{name}");
        }
        let e = Event::Reasoning {
            message: "m".into(),
        };
        assert_eq!(content(&e), json!({"message": "m"}));
    }

    #[test]
    fn chunk_data_is_the_stream_shape_without_a_seq() {
        let chunk = ChunkData::new(
            RunId::from_u128(7),
            ChunkType::Message,
            ChunkContent {
                text: "Sun".into(),
                todo_id: Some(TodoId("todo_001".into())),
                agent: Some("weather".into()),
            },
        );
        let json = serde_json::to_value(&chunk).unwrap();
        assert_eq!(
            json,
            json!({
                "run_id": RunId::from_u128(7), "kind": "MessageChunk", "type": "message",
                "subtype": "chunk",
                "content": {"text": "Sun", "todo_id": "todo_001", "agent": "weather"},
            })
        );
        assert_eq!(serde_json::from_value::<ChunkData>(json).unwrap(), chunk);
        assert_eq!(chunk.name(), "message.chunk");
        let reasoning = ChunkData::new(
            RunId::from_u128(7),
            ChunkType::Reasoning,
            ChunkContent {
                text: "hm".into(),
                ..ChunkContent::default()
            },
        );
        assert_eq!(reasoning.name(), "reasoning.chunk");
        let json = serde_json::to_value(&reasoning).unwrap();
        assert_eq!(
            (&json["kind"], &json["type"], &json["content"]),
            (
                &json!("ReasoningChunk"),
                &json!("reasoning"),
                &json!({"text": "hm"})
            )
        );
        // A stored event's data is not a chunk, nor the other way round.
        let event = serde_json::to_value(event_data(&envelope(
            0,
            Event::Reasoning {
                message: "m".into(),
            },
        )))
        .unwrap();
        assert!(serde_json::from_value::<ChunkData>(event).is_err());
        assert!(
            serde_json::from_value::<EventData>(serde_json::to_value(&reasoning).unwrap()).is_err()
        );
    }

    #[test]
    fn event_data_is_the_stream_shape_and_gives_the_event_back() {
        let data = event_data(&envelope(
            3,
            Event::Reasoning {
                message: "m".into(),
            },
        ));
        assert_eq!(
            serde_json::to_value(&data).unwrap(),
            json!({
                "run_id": RunId::from_u128(7), "seq": 3, "offset": 43,
                "at": "2025-10-05T10:00:00.000000Z", "kind": "Reasoning",
                "type": "reasoning", "subtype": "chunk", "content": {"message": "m"},
            })
        );
        for (seq, e) in sample_events().into_iter().enumerate() {
            let data = event_data(&envelope(seq as u64, e.clone()));
            let back: EventData =
                serde_json::from_str(&serde_json::to_string(&data).unwrap()).unwrap();
            assert_eq!(back, data);
            assert_eq!(back.event().unwrap(), e, "{}", e.kind());
        }
        // What a stream adds to approval events does not stop the event from decoding.
        let asked = sample_events()
            .into_iter()
            .find(|e| matches!(e, Event::ApprovalRequested { .. }))
            .unwrap();
        let mut data = event_data(&envelope(0, asked));
        data.content["approval_required"] = json!(true);
        assert!(data.event().is_ok(), "{data:?}");
    }
}
