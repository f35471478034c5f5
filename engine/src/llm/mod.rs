//! Model access: an `LlmProvider` trait, an OpenAI-compatible chat-completions client, and
//! [`Llm`], the handle planners ask the model through. Every call is kept as an [`LlmCall`]
//! that the run actor records as an `LlmCalled` event in the same append as the node's result,
//! so a replay or a recovery never calls the model again.

use chronicle_schemas::Hash;

mod ask;
mod openai;
mod redact;

pub use ask::{Llm, json_object};
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
}

/// A chat model.
#[async_trait::async_trait]
pub trait LlmProvider: Send + Sync + 'static {
    fn model(&self) -> &str;
    /// One chat completion: a system and a user message in, the assistant's text out.
    async fn chat(&self, system: &str, user: &str) -> Result<String, LlmError>;
}
