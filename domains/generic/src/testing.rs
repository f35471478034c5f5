//! Fixtures of the unit tests: a registry of three agents that declare hints in English and
//! Korean, and results as the engine hands them to a planner.

use std::sync::Arc;

use chronicle_engine::AgentResult;
use chronicle_engine::agents::{
    Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry, RoutingHints,
};
use chronicle_schemas::TodoId;
use serde_json::Value;

/// An agent that only declares itself; the planner tests never run it.
struct Declared(AgentInfo);

#[async_trait::async_trait]
impl Agent for Declared {
    fn info(&self) -> &AgentInfo {
        &self.0
    }
    async fn run(&self, _: &AgentContext, _: Value) -> Result<AgentOutput, AgentError> {
        Err(AgentError::fatal("not run in tests"))
    }
}

fn declared(
    name: &str,
    team: &str,
    purpose: &str,
    keywords: &[&str],
    examples: &[&str],
) -> Arc<dyn Agent> {
    let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
    Arc::new(Declared(AgentInfo::new(name, team, purpose).with_hints(
        RoutingHints {
            keywords: own(keywords),
            examples: own(examples),
        },
    )))
}

/// `weather`, `search` (team `research`) and `report` (team `writing`).
pub(crate) fn registry() -> Registry {
    let mut r = Registry::empty();
    r.register(declared(
        "weather",
        "weather",
        "Weather forecasts for a city and a day",
        &["weather", "forecast", "rain", "날씨", "기온"],
        &[
            "Will it be sunny in Busan this weekend?",
            "내일 부산 날씨 어때?",
        ],
    ));
    r.register(declared(
        "search",
        "research",
        "Finds documents on the web",
        &["search", "find", "검색", "찾아"],
        &["Look up recent articles about electric cars"],
    ));
    r.register(declared(
        "report",
        "writing",
        "Writes reports and summaries",
        &["report", "summary", "보고서", "요약"],
        &["Write a short memo on the findings"],
    ));
    r
}

/// An agent's latest outcome: a result, or none (set `error` for a failure).
pub(crate) fn result(agent: &str, result: Option<Value>) -> AgentResult {
    AgentResult {
        agent: agent.to_owned(),
        team: String::new(),
        todo_id: TodoId::default(),
        result,
        error: None,
    }
}
