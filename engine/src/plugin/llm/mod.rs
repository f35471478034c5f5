//! Model access: an `LlmProvider` trait, an OpenAI-compatible chat-completions client, and
//! [`Llm`], the handle planners ask the model through. Every call is kept as an [`LlmCall`]
//! that the run actor records as an `LlmCalled` event in the same append as the node's result,
//! so a replay or a recovery never calls the model again.

use chronicle_schemas::Hash;

mod answer;
mod ask;
pub mod chat;
pub mod context;
mod openai;
mod redact;

pub(crate) use ask::CALL_TIMEOUT_MS_MAX;
pub use ask::{Llm, Streamed, json_object};
pub use chat::{ChatRequest, ChatResponse, Delta, Message, OnDelta, ToolCall, ToolSpec, Usage};
pub use openai::{DEFAULT_MODEL, DEFAULT_TIMEOUT_MS, LlmConfig, OPENAI_BASE_URL, OpenAiCompat};
pub use redact::KEY_FRAGMENT_CHARS_MIN;

/// One model call, for the `LlmCalled` event. Never carries the API key.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmCall {
    pub purpose: String,
    pub model: String,
    pub prompt_hash: Hash,
    pub response: String,
    pub duration_ms: u64,
    pub error: Option<String>,
}

/// The hash an agent's model request is recorded and found again by: blake3 of the request's
/// JSON (the conversation, the tools, the model), whose maps serialize in key order.
pub fn request_hash(request: &ChatRequest) -> Hash {
    Hash::of_content(&serde_json::to_vec(request).unwrap_or_default())
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("llm request failed: {0}")]
    Http(String),
    #[error("llm returned status {0}")]
    Status(u16),
    #[error("llm response is not usable: {0}")]
    BadResponse(String),
    #[error("llm call timed out after {0} ms")]
    Timeout(u64),
    #[error("{0}")]
    Unsupported(String),
}

/// A chat model.
#[async_trait::async_trait]
pub trait LlmProvider: Send + Sync + 'static {
    fn model(&self) -> &str;
    /// One chat completion: a system and a user message in, the assistant's text out.
    async fn chat(&self, system: &str, user: &str) -> Result<String, LlmError>;

    /// `chat`, with the pieces of the answer (its text, and the model's reasoning when the
    /// server sends it) going to `on_delta` as they arrive. The default asks `chat` and sends
    /// the whole text once.
    async fn chat_streaming(
        &self,
        system: &str,
        user: &str,
        on_delta: &OnDelta<'_>,
    ) -> Result<String, LlmError> {
        let text = self.chat(system, user).await?;
        on_delta(Delta::Text(&text));
        Ok(text)
    }

    /// One chat completion of a whole conversation, with tools the model may call. Pieces of the
    /// answer go to `on_delta` as they arrive (a provider that cannot stream sends the whole
    /// text once). The default takes a system and a user message and no tools, through `chat`.
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: &OnDelta<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let (system, user) = match request.messages.as_slice() {
            [Message::System { content: s }, Message::User { content: u }]
                if request.tools.is_empty() =>
            {
                (s.as_str(), u.as_str())
            }
            _ => {
                return Err(LlmError::Unsupported(
                    "this model provider takes only a system and a user message, without tools"
                        .into(),
                ));
            }
        };
        let text = self.chat(system, user).await?;
        on_delta(Delta::Text(&text));
        Ok(ChatResponse {
            content: Some(text),
            ..ChatResponse::default()
        })
    }
}
