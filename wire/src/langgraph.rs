//! The JSON of the LangGraph Agent Server API subset Chronicle serves at the root, so that
//! `langgraph-sdk` and agent-chat-ui work unchanged: threads (Chronicle sessions), runs (one
//! turn each), checkpoints, interrupts (pending approvals), assistants and LangChain messages.
//!
//! Field names are LangGraph's, not Chronicle's; only the shapes live here (the views of
//! Chronicle state are built in the API crate).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a thread state sits: LangGraph names a checkpoint by thread, namespace (always `""`:
/// Chronicle has no subgraphs) and id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgCheckpoint))]
pub struct Checkpoint {
    pub checkpoint_id: String,
    pub thread_id: String,
    #[serde(default)]
    pub checkpoint_ns: String,
}

/// One pending interrupt: `id` is 32 lowercase hex digits, `value` what the client shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgInterrupt))]
pub struct Interrupt {
    pub id: String,
    pub value: Value,
}

/// A task of a thread state: the node that runs next, with its interrupts when it waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgTask))]
pub struct Task {
    pub id: String,
    pub name: String,
    pub path: Vec<Value>,
    pub error: Option<String>,
    pub interrupts: Vec<Interrupt>,
    pub checkpoint: Option<Checkpoint>,
    pub state: Option<Value>,
    pub result: Option<Value>,
}

/// A checkpoint's metadata. `source`: `input` (a run's first checkpoint), `loop` (a later
/// one), `fork` (the first after a restore), `update` (written by a state update).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgCheckpointMetadata))]
pub struct CheckpointMetadata {
    pub source: String,
    pub step: i64,
    pub parents: Map<String, Value>,
    pub run_id: String,
    pub graph_id: String,
    pub assistant_id: String,
    pub thread_id: String,
}

/// A thread at one checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgThreadState))]
pub struct ThreadState {
    pub values: Value,
    pub next: Vec<String>,
    pub tasks: Vec<Task>,
    pub metadata: CheckpointMetadata,
    pub created_at: String,
    pub checkpoint: Checkpoint,
    pub parent_checkpoint: Option<Checkpoint>,
    pub interrupts: Vec<Interrupt>,
}

/// A thread: a Chronicle session. `interrupts` maps a task id to its pending interrupts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgThread))]
pub struct Thread {
    pub thread_id: String,
    pub created_at: String,
    pub updated_at: String,
    pub state_updated_at: String,
    pub metadata: Map<String, Value>,
    pub status: String,
    pub config: Map<String, Value>,
    pub values: Value,
    pub error: Option<Value>,
    pub interrupts: BTreeMap<String, Vec<Interrupt>>,
}

/// A run: one Chronicle turn. `status`: pending | running | success | error | timeout |
/// interrupted (a run that pauses at an interrupt has ended `success`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgRun))]
pub struct Run {
    pub run_id: String,
    pub thread_id: String,
    pub assistant_id: String,
    pub created_at: String,
    pub updated_at: String,
    pub status: String,
    pub metadata: Map<String, Value>,
    pub kwargs: Map<String, Value>,
    pub multitask_strategy: String,
}

/// An assistant: the supervisor workflow, or one agent that runs on its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgAssistant))]
pub struct Assistant {
    pub assistant_id: String,
    pub graph_id: String,
    pub config: Map<String, Value>,
    pub context: Map<String, Value>,
    pub metadata: Map<String, Value>,
    pub name: String,
    pub description: Option<String>,
    pub version: u32,
    pub created_at: String,
    pub updated_at: String,
}

/// A tool call inside an `ai` message; `type` is always `tool_call`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgToolCall))]
pub struct ToolCall {
    pub name: String,
    pub args: Value,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// A LangChain message dict: `type` human | ai | tool | system. `tool_calls` only on `ai`,
/// `tool_call_id` and `status` only on `tool` messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgMessage))]
pub struct Message {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub content: Value,
    #[serde(default)]
    pub additional_kwargs: Map<String, Value>,
    #[serde(default)]
    pub response_metadata: Map<String, Value>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl Message {
    /// A message of `kind` with the common fields empty.
    pub fn new(kind: &str, id: String, content: Value) -> Self {
        Message {
            kind: kind.to_owned(),
            id,
            content,
            additional_kwargs: Map::new(),
            response_metadata: Map::new(),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_message_has_langchains_field_names_and_no_tool_calls() {
        let mut m = Message::new("tool", "m1".into(), json!("done"));
        m.tool_call_id = Some("c1".into());
        m.status = Some("success".into());
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"type": "tool", "id": "m1", "content": "done", "additional_kwargs": {},
                   "response_metadata": {}, "name": null, "tool_call_id": "c1", "status": "success"})
        );
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
    }

    #[test]
    fn an_ai_tool_call_is_typed_tool_call() {
        let mut m = Message::new("ai", "m2".into(), json!(""));
        m.tool_calls = Some(vec![ToolCall {
            name: "search_team".into(),
            args: json!({"q": 1}),
            id: "c1".into(),
            kind: "tool_call".into(),
        }]);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["tool_calls"],
            json!([{"name": "search_team", "args": {"q": 1}, "id": "c1", "type": "tool_call"}])
        );
        assert!(v.get("tool_call_id").is_none());
    }
}
