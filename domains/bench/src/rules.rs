//! The benchmark workflow's rules, pure functions of the query and the results: which agents a
//! query plans (a keyword table, the same as the Restate and LangGraph implementations use),
//! what the run aggregates and the answer's text.
//!
//! - **Plan**: the agents, in table order, of which a keyword occurs anywhere in the lowercased
//!   query; fewer than two give the default plan, search then analysis. The intent is
//!   [`INTENT_REPORT`] when the document agent is planned, else [`INTENT_ANALYSIS`].
//! - **Aggregate**: how many TODOs were planned, how many completed, how many were rejected, and
//!   the completed results per agent.
//! - **Answer**: `[<intent>] '<query, 60 chars>': <completed>/<planned> todos completed
//!   (<agent>=<n>, ...).`, agents by name.

use std::collections::BTreeMap;

use chronicle_engine::AgentResult;
use serde_json::{Value, json};

/// The benchmark's query: it plans all three agents.
pub const BENCH_QUERY: &str =
    "Research the latest listings in Gangnam, analyze the trends and write a short report";
/// The intent of a plan that ends with a document.
pub const INTENT_REPORT: &str = "research_and_report";
/// The intent of a plan without a document.
pub const INTENT_ANALYSIS: &str = "research_and_analysis";
/// How many characters of the query the answer repeats.
const ANSWER_QUERY_CHARS: usize = 60;

/// One agent of the workflow: what it declares, and the words that plan it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    pub name: &'static str,
    pub team: &'static str,
    pub purpose: &'static str,
    /// Lowercase; a query containing one anywhere (case-insensitively) plans the agent.
    pub keywords: &'static [&'static str],
}

/// The three agents, in the order a plan runs them.
pub const AGENTS: [Role; 3] = [
    Role {
        name: "search_team",
        team: "search",
        purpose: "Finds sources for the request (a mock: three fixed links)",
        keywords: &[
            "search", "find", "research", "look up", "collect", "gather", "latest",
        ],
    },
    Role {
        name: "analysis_team",
        team: "analysis",
        purpose: "Analyses what was found (a mock: two fixed insights)",
        keywords: &["analy", "compare", "evaluate", "trend", "assess", "insight"],
    },
    Role {
        name: "document_team",
        team: "document",
        purpose: "Writes the report (a mock: a fixed short document)",
        keywords: &["report", "document", "write", "summar", "draft", "memo"],
    },
];

/// What the rules plan for a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchPlan {
    /// [`INTENT_REPORT`] or [`INTENT_ANALYSIS`].
    pub intent: &'static str,
    /// The agents in the order they run, each after the one before.
    pub agents: Vec<&'static Role>,
    /// The keywords the query contains, in table order.
    pub keywords: Vec<&'static str>,
    /// Fewer than two agents matched, so the plan is the default one.
    pub by_default: bool,
}

/// The plan of `query` (see the module's rules).
pub fn plan_for_query(query: &str) -> BenchPlan {
    let q = query.to_lowercase();
    let found = |r: &Role| -> Vec<&'static str> {
        r.keywords
            .iter()
            .copied()
            .filter(|k| q.contains(k))
            .collect()
    };
    let keywords: Vec<&'static str> = AGENTS.iter().flat_map(found).collect();
    let mut agents: Vec<&'static Role> = AGENTS.iter().filter(|r| !found(r).is_empty()).collect();
    let by_default = agents.len() < 2;
    if by_default {
        agents = vec![&AGENTS[0], &AGENTS[1]];
    }
    let intent = if agents.iter().any(|r| r.name == AGENTS[2].name) {
        INTENT_REPORT
    } else {
        INTENT_ANALYSIS
    };
    BenchPlan {
        intent,
        agents,
        keywords,
        by_default,
    }
}

/// The run's aggregate: `todo_count` planned, `completed`, `rejected` and `by_agent` (completed
/// results per agent). Every TODO depends on the one before and the mock agents never fail, so a
/// planned TODO that did not complete was rejected, or waits behind the rejected one: at most
/// one was rejected.
pub fn aggregate(planned: usize, results: &[AgentResult]) -> Value {
    let completed: Vec<&AgentResult> = results.iter().filter(|r| r.result.is_some()).collect();
    let mut by_agent: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &completed {
        *by_agent.entry(r.agent.as_str()).or_default() += 1;
    }
    json!({
        "todo_count": planned,
        "completed": completed.len(),
        "rejected": usize::from(completed.len() < planned),
        "by_agent": by_agent,
    })
}

/// The answer's text from the intent, the query and the [`aggregate`].
pub fn answer_text(intent: &str, query: &str, aggregated: &Value) -> String {
    let parts: Vec<String> = aggregated["by_agent"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
        .unwrap_or_default();
    format!(
        "[{intent}] '{}': {}/{} todos completed ({}).",
        prefix(query, ANSWER_QUERY_CHARS),
        aggregated["completed"],
        aggregated["todo_count"],
        parts.join(", ")
    )
}

/// The first `chars` characters of `text`.
pub(crate) fn prefix(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(at, _)| &text[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &BenchPlan) -> Vec<&str> {
        p.agents.iter().map(|r| r.name).collect()
    }

    #[test]
    fn keywords_pick_agents_in_table_order_and_one_match_gives_the_default() {
        let p = plan_for_query(BENCH_QUERY);
        assert_eq!(names(&p), ["search_team", "analysis_team", "document_team"]);
        assert_eq!(p.intent, INTENT_REPORT);
        let p = plan_for_query("WRITE a memo, then COMPARE");
        assert_eq!(names(&p), ["analysis_team", "document_team"]);
        assert_eq!(p.intent, INTENT_REPORT);
        let p = plan_for_query("write something");
        assert_eq!(names(&p), ["search_team", "analysis_team"]);
        assert_eq!(p.intent, INTENT_ANALYSIS);
        assert_eq!(p.keywords, ["write"]);
    }

    #[test]
    fn prefix_counts_characters() {
        assert_eq!(prefix("강남구 아파트", 3), "강남구");
        assert_eq!(prefix("short", 60), "short");
    }
}
