//! Intent analysis, planning, evaluation and response formatting: an `LlmProvider` trait, an
//! OpenAI-compatible chat-completions client, and seed 002's rule-based fallbacks, used when no
//! provider is configured or a call fails or returns unparsable JSON.
//!
//! Every call is reported as an [`LlmCall`] that the run actor records as an `LlmCalled` event in
//! the same append as the node's result, so a replay or a recovery never calls the model again.

use chronicle_schemas::{Hash, PlanStep, Source, Strategy};
use serde_json::Value;

mod openai;
mod planner;
mod prompts;
pub mod rules;
#[cfg(test)]
mod test_server;

pub use openai::{DEFAULT_MODEL, DEFAULT_TIMEOUT_MS, LlmConfig, OPENAI_BASE_URL, OpenAiCompat};
pub use planner::Planner;

/// The analysed intent (seed 002 + seed 001's `analyzed_intent`).
#[derive(Clone, Debug, PartialEq)]
pub struct Intent {
    /// `search | analysis | comparison | recommendation | comprehensive | document`.
    pub intent_type: String,
    pub confidence: f64,
    pub keywords: Vec<String>,
    /// `region`, `property_type`, `deal_type`, `price_range`, `size_range`, `amounts` ...
    pub entities: Value,
    pub source: Source,
}

/// An execution plan (seed 000's `ExecutionPlan`), before it becomes TODOs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub strategy: Strategy,
    pub steps: Vec<PlanStep>,
    pub parallel_groups: Vec<Vec<String>>,
    /// Seconds.
    pub estimated_total_time: f64,
    pub source: Source,
}

/// Seed 002's evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluationOutcome {
    pub quality_score: f64,
    pub completeness: f64,
    pub needs_retry: bool,
    pub retry_agents: Vec<String>,
    pub feedback: String,
    pub source: Source,
}

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
