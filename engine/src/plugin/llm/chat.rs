//! A conversation with a model that may call tools: the messages, the tools it is offered, and
//! what it answers ([`LlmProvider::complete`](super::LlmProvider::complete)). They follow
//! OpenAI's chat completions with function calling (a tool call is flattened to `{id, name,
//! arguments}`; the client maps it to the wire's `{id, type, function}`), and serialize as they
//! are recorded in events.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    /// The model's turn: text, tool calls, or both.
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result, answering the assistant's call `tool_call_id`.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A tool call the model asked for. `arguments` is the JSON text the model wrote (it may not
/// parse: the caller answers such a call with an error result).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool offered to the model: its name, what it does, and its arguments' JSON Schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One request: the conversation so far and the tools the model may call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Overrides the provider's model for this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
}

/// What the model answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    #[serde(default)]
    pub content: Option<String>,
    /// The model's reasoning, when the server sends it apart from the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

impl ChatResponse {
    /// The assistant message this answer adds to the conversation.
    pub fn message(&self) -> Message {
        Message::Assistant {
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
        }
    }
}

/// Token counts as the server reports them (recorded with an agent's model call).
pub use chronicle_schemas::TokenUsage as Usage;

/// What takes the pieces of an answer as they arrive.
pub type OnDelta<'a> = dyn for<'d> Fn(Delta<'d>) + Send + Sync + 'a;

/// A piece of an answer as it arrives, before the whole answer is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta<'a> {
    Text(&'a str),
    Reasoning(&'a str),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialize_as_chat_completions_messages() {
        let messages = vec![
            Message::System {
                content: "s".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "[]".into(),
            },
        ];
        let v = serde_json::to_value(&messages).unwrap();
        assert_eq!(
            v,
            json!([
                {"role": "system", "content": "s"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "[]"},
            ])
        );
        let back: Vec<Message> = serde_json::from_value(v).unwrap();
        assert_eq!(back, messages);
    }
}
