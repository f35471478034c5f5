//! Agents: the `Agent` trait, the registry, the built-in real-estate agents working on a bundled
//! dataset, and `http` agents configured in TOML.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chronicle_schemas::{RunId, SessionId, TodoId};
use serde_json::{Value, json};

mod analysis;
mod data;
mod document;
mod filters;
mod http;
mod market;
mod parse;
mod search;

pub use analysis::AnalysisTeam;
pub use document::DocumentTeam;
pub(crate) use filters::json_type;
pub use http::{
    CATEGORIES, ConfigError, HTTP_AGENT_RESPONSE_BYTES_MAX, HTTP_AGENT_TIMEOUT_MS_DEFAULT,
    HTTP_AGENT_TIMEOUT_MS_MAX, HttpAgent,
};
pub use market::{InvestmentAdvisor, MarketAnalysis, RegionComparison};
pub use search::{PropertySearch, SearchTeam};

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
    /// The agent's only way to call tools (each call is recorded; gated ones wait for a human).
    pub tools: crate::tools::ToolHandle,
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

    /// The built-in agents: seed 001's teams (`search_team`, `analysis_team`, `document_team`)
    /// and seed 002's agents (`property_search`, `market_analysis`, `region_comparison`,
    /// `investment_advisor`), all answering deterministically from the bundled dataset.
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        let agents: [Arc<dyn Agent>; 7] = [
            Arc::new(SearchTeam),
            Arc::new(AnalysisTeam),
            Arc::new(DocumentTeam),
            Arc::new(PropertySearch),
            Arc::new(MarketAnalysis),
            Arc::new(RegionComparison),
            Arc::new(InvestmentAdvisor),
        ];
        for a in agents {
            r.register(a);
        }
        r
    }

    /// Adds the `http` agents of a TOML config (`[[agent]]` tables with `name`, `url`, and
    /// optional `timeout_ms`, `category`, `team`, `purpose`). All or nothing: on any error no
    /// agent is added. A name already registered is an error, because silently replacing a
    /// built-in would change what a plan means. Returns how many agents were added.
    pub fn load_http_agents(&mut self, toml_text: &str) -> Result<usize, ConfigError> {
        let agents = http::parse_config(toml_text)?;
        if let Some(a) = agents.iter().find(|a| self.agents.contains_key(a.name())) {
            return Err(ConfigError::AlreadyRegistered {
                name: a.name().to_owned(),
            });
        }
        let n = agents.len();
        for a in agents {
            self.register(Arc::new(a));
        }
        Ok(n)
    }

    /// [`Registry::load_http_agents`] from a file.
    pub fn load_http_agents_file(&mut self, path: impl AsRef<Path>) -> Result<usize, ConfigError> {
        let text = http::read_config(path.as_ref())?;
        self.load_http_agents(&text)
    }
}

/// seed 002's agent result: `{status: "success", agent, data, insights, params}`.
pub(crate) fn seed_result(agent: &str, data: Value, insights: Vec<String>, params: Value) -> Value {
    json!({
        "status": "success",
        "agent": agent,
        "data": data,
        "insights": insights,
        "params": params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_registry_lists_the_seed_agents() {
        let r = Registry::builtin();
        let names: Vec<&str> = r.names().collect();
        assert_eq!(
            names,
            vec![
                "analysis_team",
                "document_team",
                "investment_advisor",
                "market_analysis",
                "property_search",
                "region_comparison",
                "search_team",
            ]
        );
        let meta = |n: &str| {
            let a = r.get(n).unwrap();
            (a.team().to_owned(), a.category().to_owned())
        };
        assert_eq!(meta("search_team"), ("search".into(), "general".into()));
        assert_eq!(meta("analysis_team"), ("analysis".into(), "general".into()));
        assert_eq!(
            meta("document_team"),
            ("document".into(), "contract".into())
        );
        assert_eq!(meta("property_search"), ("search".into(), "general".into()));
        assert_eq!(
            meta("investment_advisor"),
            ("analysis".into(), "general".into())
        );
        assert!(r.names().all(|n| !r.get(n).unwrap().purpose().is_empty()));
    }

    /// Same input, same output: replays and recoveries re-run agents and must get what the log
    /// recorded.
    #[tokio::test]
    async fn builtin_agents_are_deterministic() {
        let r = Registry::builtin();
        let queries = [
            "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘",
            "강남역 근처 30평대 아파트 매매 시세 알려줘",
            "Compare Gangnam and Mapo apartments for sale",
            "Draft a lease contract: landlord Kim Minsu, tenant John Smith, deposit 500 million won",
            "송파 빌라 투자해도 될까?",
        ];
        for q in queries {
            let mut ctx = AgentContext {
                query: q.into(),
                ..AgentContext::default()
            };
            for name in r.names() {
                let agent = r.get(name).unwrap();
                let a = agent.run(&ctx, Value::Null).await.unwrap();
                let b = agent.run(&ctx, Value::Null).await.unwrap();
                assert_eq!(a, b, "{name} on {q}");
                // Later agents see earlier results, as in a run.
                ctx.team_results.insert(name.to_owned(), a.result);
            }
        }
    }

    #[tokio::test]
    async fn builtin_agents_refuse_non_object_input() {
        let r = Registry::builtin();
        let ctx = AgentContext::default();
        for name in r.names() {
            let err = r
                .get(name)
                .unwrap()
                .run(&ctx, json!([1, 2]))
                .await
                .unwrap_err();
            assert_eq!(
                err,
                AgentError::fatal("agent input must be a JSON object, got an array"),
                "{name}"
            );
        }
    }
}
