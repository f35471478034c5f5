//! The generic planner's prompts: plain English, about whatever agents are registered. A model
//! sees each agent's name, team, purpose and routing hints — what the agents declare — and
//! never a word about any particular domain.

use chronicle_engine::agents::{AgentInfo, Registry};
use chronicle_engine::{AgentResult, Intent};
use serde_json::Value;

use crate::compose::cut_chars as chars;

pub(crate) const INTENT_SYSTEM: &str = "You decide which of the available agents can answer a user's request. Answer with one JSON object and nothing else.";
pub(crate) const PLAN_SYSTEM: &str = "You plan which agents run, and in which order, to answer a user's request. Answer with one JSON object and nothing else.";
pub(crate) const EVALUATION_SYSTEM: &str = "You judge whether agents' replies answer a user's request. Answer with one JSON object and nothing else.";
pub(crate) const RESPONSE_SYSTEM: &str = "You write the final answer to a user's request from agents' replies, using only what the replies say. Answer with one JSON object and nothing else.";

/// Agents shown to the model, and what of each: a prompt must stay small whatever the registry
/// holds.
const AGENTS_SHOWN_MAX: usize = 50;
const PURPOSE_CHARS_MAX: usize = 200;
const HINTS_SHOWN_MAX: usize = 10;
/// Characters of one agent's reply shown to the model.
const REPLY_CHARS_MAX: usize = 4_000;

/// The agents, one block each.
fn agents_block(agents: &Registry) -> String {
    let mut out = String::from("Agents:");
    let infos: Vec<&AgentInfo> = agents.infos().collect();
    for info in infos.iter().take(AGENTS_SHOWN_MAX) {
        out.push_str(&format!(
            "\n- {} (team {}): {}",
            info.name,
            info.team,
            chars(&info.purpose, PURPOSE_CHARS_MAX)
        ));
        let keywords: Vec<&str> = info
            .hints
            .keywords
            .iter()
            .take(HINTS_SHOWN_MAX)
            .map(String::as_str)
            .collect();
        if !keywords.is_empty() {
            out.push_str(&format!("\n  keywords: {}", keywords.join(", ")));
        }
        let examples: Vec<String> = info
            .hints
            .examples
            .iter()
            .take(HINTS_SHOWN_MAX)
            .map(|e| format!("{e:?}"))
            .collect();
        if !examples.is_empty() {
            out.push_str(&format!("\n  examples: {}", examples.join("; ")));
        }
    }
    if infos.len() > AGENTS_SHOWN_MAX {
        out.push_str(&format!(
            "\n(and {} more not shown)",
            infos.len() - AGENTS_SHOWN_MAX
        ));
    }
    if infos.is_empty() {
        out.push_str(" none");
    }
    out
}

pub(crate) fn intent(agents: &Registry, query: &str) -> String {
    format!(
        r#"{agents}

Request: {query}

Which agents can answer the request? Reply with JSON:
{{"agents": [{{"name": "<agent name from the list>", "score": <0 to 1, how well it fits>}}], "keywords": ["<words of the request that decided it>"], "confidence": <0 to 1>}}
List the fitting agents best first, and an empty list when none fits."#,
        agents = agents_block(agents)
    )
}

pub(crate) fn plan(agents: &Registry, query: &str, intent: &Intent) -> String {
    let chosen: Vec<&str> = intent.entities["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["name"].as_str())
        .collect();
    let chosen = if chosen.is_empty() {
        "none".to_owned()
    } else {
        chosen.join(", ")
    };
    format!(
        r#"{agents}

Request: {query}
Agents that fit, as analysed: {chosen}

Plan the agents to run, in order; each agent sees the replies of the agents before it. Reply with JSON:
{{"agents": [{{"name": "<agent name from the list>", "task": "<what it should do for this request>"}}]}}
Use only agents from the list, each at most once."#,
        agents = agents_block(agents)
    )
}

/// The run's outcomes, one line each.
fn replies_block(results: &[AgentResult]) -> String {
    let mut out = String::from("Replies:");
    for r in results {
        let what = match (&r.result, &r.error) {
            (Some(v), _) => format!("replied: {}", chars(&v.to_string(), REPLY_CHARS_MAX)),
            (None, Some(e)) => format!("failed: {}", chars(e, REPLY_CHARS_MAX)),
            (None, None) => "did not reply".to_owned(),
        };
        out.push_str(&format!("\n- {}: {what}", r.agent));
    }
    out
}

pub(crate) fn evaluation(agents: &Registry, query: &str, results: &[AgentResult]) -> String {
    format!(
        r#"{agents}

Request: {query}

{replies}

Do the replies answer the request? Reply with JSON:
{{"quality_score": <0 to 1>, "completeness": <0 to 1>, "needs_retry": <true or false>, "retry_agents": ["<agent to run again>"], "add_agents": ["<agent from the list that has not run and is still needed>"], "feedback": "<one sentence>"}}
Leave add_agents empty unless the replies miss something another agent can find."#,
        agents = agents_block(agents),
        replies = replies_block(results)
    )
}

pub(crate) fn response(query: &str, results: &[AgentResult], draft: &Value) -> String {
    format!(
        r#"Request: {query}

{replies}

Draft answer:
{draft}

Write the answer to the request, in the request's language, using only facts from the replies. Reply with JSON:
{{"answer": "<the answer>"}}"#,
        replies = replies_block(results),
        draft = draft["answer"].as_str().unwrap_or_default()
    )
}
