//! Agents: the `Agent` trait, what an agent declares about itself (`AgentInfo`), and the
//! registry a run picks its agents from. The engine ships no agent: a domain registers its own
//! (built-in ones, `http` ones from a config file, LLM ones).
//!
//! Architecture Invariant: the engine never recognises an agent by its name. What it needs to
//! know — the team an agent belongs to, its HITL category, what it is for — the agent declares.

pub mod memory_files;
pub mod skills;

use std::collections::BTreeMap;
use std::sync::Arc;

mod llm;

pub use llm::{
    CONTEXT_BUDGET_TOKENS_DEFAULT, FEEDBACK_PREFIX, LlmAgent, LlmAgentConfig, LlmAgentError,
    MAX_TOOL_CALLS_MAX, MAX_TURNS_DEFAULT, MAX_TURNS_MAX, TOOL_CALLS_PER_TURN_DEFAULT,
};

use chronicle_schemas::{RunId, SessionId, TodoId};
use serde_json::Value;

/// What an agent declares about itself: plans, HITL policies, team states and routing read this,
/// never the agent's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentInfo {
    /// The agent's key in plans, TODOs and `/todo add <agent>`.
    pub name: String,
    /// One line saying what the agent is for; planners show it to a model.
    pub purpose: String,
    /// The team the agent works in (e.g. `search`); the run's team states are keyed by it.
    pub team: String,
    /// The HITL category: `contract`, `payment` and `sensitive` may need a human first under the
    /// `categories` policy; anything else (`general`) does not.
    pub category: String,
    /// Words and example requests that should route a query to this agent, in any language.
    pub hints: RoutingHints,
}

impl AgentInfo {
    /// An agent in `team` and category `general`, with no routing hints.
    pub fn new(name: &str, team: &str, purpose: &str) -> Self {
        Self {
            name: name.to_owned(),
            purpose: purpose.to_owned(),
            team: team.to_owned(),
            category: "general".to_owned(),
            hints: RoutingHints::default(),
        }
    }

    pub fn with_category(mut self, category: &str) -> Self {
        category.clone_into(&mut self.category);
        self
    }

    pub fn with_hints(mut self, hints: RoutingHints) -> Self {
        self.hints = hints;
        self
    }
}

/// What a rules planner matches a query against to pick an agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoutingHints {
    /// Words or phrases; a query containing one (case-insensitively) matches.
    pub keywords: Vec<String>,
    /// Whole example requests; a query sharing words with one matches more weakly.
    pub examples: Vec<String>,
}

/// What an agent knows about the run it works for. Built by the run actor from the projected
/// state; an agent never reads the store.
#[derive(Clone, Debug, Default)]
pub struct AgentContext {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub user_id: Option<String>,
    pub todo_id: TodoId,
    pub attempt: u32,
    /// The user's query.
    pub query: String,
    /// The analysed intent: `{intent_type, confidence, keywords, entities}`; what `entities`
    /// holds is the planner's business.
    pub intent: Value,
    /// Results of the TODOs completed so far, by agent name.
    pub team_results: BTreeMap<String, Value>,
    /// The agent's only way to call tools (each call is recorded; gated ones wait for a human).
    pub tools: crate::plugin::tools::ToolHandle,
    /// Where the agent sends a model answer's pieces as they arrive (live subscribers only).
    pub chunks: crate::plugin::chunks::ChunkSink,
    /// What the turn knows beyond its query: the session's earlier turns, the user's memory,
    /// a person's feedback.
    pub turn: TurnContext,
}

/// What a turn knows beyond its query, as recorded in the run (`SessionContextLoaded`,
/// `MemoryLoaded`, the decision that gave feedback).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnContext {
    /// The session's earlier turns, oldest first (within the run's context budget).
    pub history: Vec<chronicle_schemas::PriorTurn>,
    /// The user's long-term memory as the turn loaded it.
    pub memories: Vec<chronicle_schemas::Memory>,
    /// What a person answered to an approval of this TODO (`resume {response}`, an edit's
    /// `feedback`), for the agent to take into account.
    pub feedback: Option<String>,
}

impl TurnContext {
    /// The turn's context as the run's state records it.
    pub fn of(s: &chronicle_schemas::SupervisorState) -> TurnContext {
        let memories = s
            .loaded_memories
            .iter()
            .flatten()
            .filter_map(|m| serde_json::from_value(m.clone()).ok())
            .collect();
        TurnContext {
            history: s.session_context.clone(),
            memories,
            feedback: None,
        }
    }
}

/// An agent's successful result; recorded in `AgentCompleted`. It should follow the agent reply
/// contract (`chronicle_schemas::contract::AgentReply`): `answer`, `summary`, `insights`, `data`,
/// `sources`, so that any response composer can use it.
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
        Self {
            message: message.into(),
            retryable: true,
        }
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
        }
    }
}

/// One agent. `run` gets the context and the TODO's effective input (the plan's `input_mapping`,
/// or a human's edited args).
#[async_trait::async_trait]
pub trait Agent: Send + Sync + 'static {
    fn info(&self) -> &AgentInfo;

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError>;

    /// Whether the agent may act outside the engine by itself (an HTTP request, a file, a
    /// message): then it starts only once the record of its start is durable. An agent that
    /// only computes from its input, or acts only through its context (tool calls and model
    /// calls go through the run, which records them durably first), returns `false` and starts
    /// at once; a crash before its start is durable re-runs it, with nothing outside repeated.
    fn acts_outside(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        &self.info().name
    }
    fn team(&self) -> &str {
        &self.info().team
    }
    fn category(&self) -> &str {
        &self.info().category
    }
    fn purpose(&self) -> &str {
        &self.info().purpose
    }
}

/// A name the registry refused, with the names it knows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent {name:?}; known: {}", known.join(", "))]
pub struct UnknownAgent {
    pub name: String,
    pub known: Vec<String>,
}

/// An agent the registry already holds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("agent `{0}` is already registered")]
pub struct AlreadyRegistered(pub String);

/// The agents a run may use, by name. Empty until a domain registers its agents.
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

    /// Adds agents, refusing all of them when one's name is taken: silently replacing an agent
    /// would change what a plan means.
    pub fn add_new(
        &mut self,
        agents: impl IntoIterator<Item = Arc<dyn Agent>>,
    ) -> Result<usize, AlreadyRegistered> {
        let agents: Vec<Arc<dyn Agent>> = agents.into_iter().collect();
        if let Some(a) = agents.iter().find(|a| self.agents.contains_key(a.name())) {
            return Err(AlreadyRegistered(a.name().to_owned()));
        }
        let n = agents.len();
        for a in agents {
            self.register(a);
        }
        Ok(n)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Agent>> {
        self.agents.get(name)
    }

    /// The agent called `name`, or an error naming the known ones.
    pub fn find(&self, name: &str) -> Result<&Arc<dyn Agent>, UnknownAgent> {
        self.get(name).ok_or_else(|| UnknownAgent {
            name: name.to_owned(),
            known: self.names().map(str::to_owned).collect(),
        })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    /// What every agent declares, in name order.
    pub fn infos(&self) -> impl Iterator<Item = &AgentInfo> {
        self.agents.values().map(|a| a.info())
    }

    /// The teams the agents declare, each once, in name order of their first agent.
    pub fn teams(&self) -> Vec<String> {
        let mut teams: Vec<String> = Vec::new();
        for info in self.infos() {
            if !teams.contains(&info.team) {
                teams.push(info.team.clone());
            }
        }
        teams
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

/// A JSON value's kind, for error messages (`an array`, `a string`).
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(AgentInfo);

    #[async_trait::async_trait]
    impl Agent for Named {
        fn info(&self) -> &AgentInfo {
            &self.0
        }
        async fn run(&self, _: &AgentContext, _: Value) -> Result<AgentOutput, AgentError> {
            Ok(AgentOutput {
                result: Value::Null,
            })
        }
    }

    fn agent(name: &str, team: &str) -> Arc<dyn Agent> {
        Arc::new(Named(AgentInfo::new(name, team, "p")))
    }

    #[test]
    fn the_engine_ships_no_agent_and_a_taken_name_is_refused_whole() {
        let mut r = Registry::empty();
        assert!(r.is_empty());
        assert_eq!(
            r.add_new([agent("a", "x"), agent("b", "y"), agent("c", "x")]),
            Ok(3)
        );
        assert_eq!(r.teams(), ["x", "y"]);
        assert_eq!(
            r.add_new([agent("d", "z"), agent("b", "z")]),
            Err(AlreadyRegistered("b".into()))
        );
        assert!(r.get("d").is_none(), "nothing of a refused batch is added");
        let err = r.find("nope").err().unwrap();
        assert_eq!(err.to_string(), "unknown agent \"nope\"; known: a, b, c");
    }
}
