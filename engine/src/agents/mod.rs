//! Agents: the `Agent` trait, the registry, the built-in real-estate agents working on a bundled
//! dataset, and `http` agents configured in TOML.

use std::collections::BTreeMap;
use std::sync::Arc;

use chronicle_schemas::{RunId, SessionId, TodoId};
use serde_json::Value;

/// What an agent knows about the run it works for. Built by the run actor from the projected
/// state; an agent never reads the store.
#[derive(Clone, Debug, Default)]
pub struct AgentContext {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub todo_id: TodoId,
    pub attempt: u32,
    /// The user's query.
    pub query: String,
    /// The analysed intent: `{intent_type, confidence, keywords, entities}` (entities may carry
    /// `region`, `property_type`, `deal_type`, `size_range`, `amounts` ...).
    pub intent: Value,
    /// Results of the TODOs completed so far, by agent name (e.g. `search_team` → its result).
    pub team_results: BTreeMap<String, Value>,
}

/// An agent's successful result; recorded in `AgentCompleted`.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentOutput {
    pub result: Value,
}

/// An agent's failure; recorded in `AgentFailed`. `retryable` decides whether the engine may try
/// again (timeouts, 5xx) or not (bad input, 4xx).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AgentError {
    pub message: String,
    pub retryable: bool,
}

impl AgentError {
    pub fn retryable(message: impl Into<String>) -> Self {
        Self { message: message.into(), retryable: true }
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        Self { message: message.into(), retryable: false }
    }
}

/// One agent. `run` gets the context and the TODO's effective input (the plan's `input_mapping`,
/// or a human's edited args).
#[async_trait::async_trait]
pub trait Agent: Send + Sync + 'static {
    fn name(&self) -> &str;
    /// `search`, `analysis`, `document`, ... (seed 001's team names).
    fn team(&self) -> &str;
    /// HITL category (seed 004): `contract`, `payment`, `sensitive`, or `general`.
    fn category(&self) -> &str;
    /// One line for plans and `/help`.
    fn purpose(&self) -> &str;
    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError>;
}

/// The agents a run may use, by name.
#[derive(Clone, Default)]
pub struct Registry {
    agents: BTreeMap<String, Arc<dyn Agent>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.agents.keys()).finish()
    }
}

impl Registry {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Adds or replaces an agent.
    pub fn register(&mut self, agent: Arc<dyn Agent>) {
        self.agents.insert(agent.name().to_owned(), agent);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Agent>> {
        self.agents.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }
}
