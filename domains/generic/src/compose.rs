//! The generic response composer: the run's answer from any agents' replies, read through the
//! agent reply contract (`AgentReply::read`), whatever the agents are.
//!
//! The response (`final_response`):
//!
//! ```json
//! {
//!   "answer": "Tomorrow in Seoul: sunny, 21°C",
//!   "insights": ["no rain expected"],
//!   "sources": ["Korea Meteorological Administration", {"title": "KMA", "url": "https://…"}],
//!   "agents": ["weather"],
//!   "metadata": {"intent_type": "general", "agents_used": ["weather"],
//!                "answer_from": "answer", "composed_by": "rules"}
//! }
//! ```
//!
//! - `answer`: the agents' `answer`s in plan order — one agent's answer is the answer, verbatim;
//!   several are joined by a blank line. With no answer, the `summary`s, the same way; then the
//!   `insights`, one per line; then a sentence naming the agents that sent only data. With no
//!   reply at all, a sentence saying no agent could answer, and what the available agents do.
//!   Replies with `status: "error"` are left out.
//! - `insights` and `sources`: every answering agent's, in plan order, each once.
//! - `agents`: the agents whose reply gave anything, in plan order.
//! - `metadata.agents_used`: every agent with a result; `answer_from`: `answer`, `summary`,
//!   `insights`, `data` or `none`; `composed_by`: `rules`, or `model` when a model phrased the
//!   answer (the rest stays the composer's).
//!
//! Each agent's full reply stays in the run's `team_results`; the response is bounded (it is
//! recorded in one event, and events are at most 64 KiB).

use chronicle_engine::agents::Registry;
use chronicle_engine::{AgentResult, Intent};
use chronicle_schemas::contract::AgentReply;
use serde_json::{Value, json};

/// Bytes of the answer kept; the rest is cut at a character boundary and marked `…`.
pub const ANSWER_BYTES_MAX: usize = 24 * 1024;
/// Insights kept, and characters of each.
const INSIGHTS_MAX: usize = 20;
const INSIGHT_CHARS_MAX: usize = 500;
/// Sources kept; a source longer than this as JSON is left out, not cut (a cut URL is wrong).
const SOURCES_MAX: usize = 20;
const SOURCE_BYTES_MAX: usize = 500;
/// Agents listed when none could answer, and characters of each purpose.
const AGENTS_LISTED_MAX: usize = 20;
const PURPOSE_CHARS_MAX: usize = 200;

/// What the answer text was made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AnswerFrom {
    Answer,
    Summary,
    Insights,
    Data,
    None,
}

impl AnswerFrom {
    fn as_str(self) -> &'static str {
        match self {
            AnswerFrom::Answer => "answer",
            AnswerFrom::Summary => "summary",
            AnswerFrom::Insights => "insights",
            AnswerFrom::Data => "data",
            AnswerFrom::None => "none",
        }
    }
}

/// The response for `results` (in plan order; see the module's rules).
pub fn compose(agents: &Registry, intent: &Intent, results: &[AgentResult]) -> Value {
    let replies: Vec<(&str, AgentReply)> = results
        .iter()
        .filter_map(|r| Some((r.agent.as_str(), AgentReply::read(r.result.as_ref()?))))
        .filter(|(_, reply)| !reply.is_error())
        .collect();
    let (answer, from) = answer_text(agents, &replies);
    let mut insights: Vec<String> = Vec::new();
    let mut sources: Vec<Value> = Vec::new();
    let mut contributed: Vec<&str> = Vec::new();
    for (agent, reply) in &replies {
        for insight in &reply.insights {
            let insight = cut_chars(insight.trim(), INSIGHT_CHARS_MAX);
            if !insight.is_empty() && !insights.contains(&insight) && insights.len() < INSIGHTS_MAX
            {
                insights.push(insight);
            }
        }
        for source in &reply.sources {
            let source = serde_json::to_value(source).unwrap_or(Value::Null);
            if source.to_string().len() <= SOURCE_BYTES_MAX
                && !sources.contains(&source)
                && sources.len() < SOURCES_MAX
            {
                sources.push(source);
            }
        }
        if gave_anything(reply) {
            contributed.push(agent);
        }
    }
    let used: Vec<&str> = results
        .iter()
        .filter(|r| r.result.is_some())
        .map(|r| r.agent.as_str())
        .collect();
    json!({
        "answer": cut_bytes(&answer, ANSWER_BYTES_MAX),
        "insights": insights,
        "sources": sources,
        "agents": contributed,
        "metadata": {
            "intent_type": intent.intent_type,
            "agents_used": used,
            "answer_from": from.as_str(),
            "composed_by": "rules",
        },
    })
}

/// The answer text and what it was made of.
fn answer_text(agents: &Registry, replies: &[(&str, AgentReply)]) -> (String, AnswerFrom) {
    let texts = |field: fn(&AgentReply) -> Option<&String>| -> Vec<&str> {
        replies
            .iter()
            .filter_map(|(_, r)| field(r).map(String::as_str))
            .filter(|t| !t.trim().is_empty())
            .collect()
    };
    let answers = texts(|r| r.answer.as_ref());
    if !answers.is_empty() {
        return (answers.join("\n\n"), AnswerFrom::Answer);
    }
    let summaries = texts(|r| r.summary.as_ref());
    if !summaries.is_empty() {
        return (summaries.join("\n\n"), AnswerFrom::Summary);
    }
    let insights: Vec<&str> = replies
        .iter()
        .flat_map(|(_, r)| r.insights.iter().map(String::as_str))
        .filter(|t| !t.trim().is_empty())
        .collect();
    if !insights.is_empty() {
        return (insights.join("\n"), AnswerFrom::Insights);
    }
    let with_data: Vec<&str> = replies
        .iter()
        .filter(|(_, r)| has_data(r))
        .map(|(a, _)| *a)
        .collect();
    if !with_data.is_empty() {
        let text = format!(
            "{} replied with data and no text; the data is in the run's results.",
            with_data.join(", ")
        );
        return (text, AnswerFrom::Data);
    }
    (no_answer(agents), AnswerFrom::None)
}

/// No agent could answer: say so, and what the available agents do.
pub(crate) fn no_answer(agents: &Registry) -> String {
    let mut text = String::from("No agent could answer this request.");
    if agents.is_empty() {
        text.push_str(" No agent is registered.");
        return text;
    }
    text.push_str("\n\nThe available agents:");
    let infos: Vec<_> = agents.infos().collect();
    for info in infos.iter().take(AGENTS_LISTED_MAX) {
        let purpose = cut_chars(info.purpose.trim(), PURPOSE_CHARS_MAX);
        text.push_str(&format!("\n- {}: {purpose}", info.name));
    }
    if infos.len() > AGENTS_LISTED_MAX {
        text.push_str(&format!("\n… and {} more", infos.len() - AGENTS_LISTED_MAX));
    }
    text
}

fn gave_anything(r: &AgentReply) -> bool {
    let text = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.trim().is_empty());
    text(&r.answer)
        || text(&r.summary)
        || !r.insights.is_empty()
        || !r.sources.is_empty()
        || has_data(r)
}

/// `data`, or fields outside the contract (a reply that predates it, or says more).
fn has_data(r: &AgentReply) -> bool {
    r.data.as_ref().is_some_and(|d| !d.is_null()) || !r.extra.is_empty()
}

/// At most `max` characters, `…` marking a cut.
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// At most `max` bytes (plus the `…` marking a cut), cut at a character boundary.
pub(crate) fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::intent_for;
    use crate::testing::{registry, result};

    fn composed(results: &[AgentResult]) -> Value {
        compose(&registry(), &intent_for(&[]), results)
    }

    #[test]
    fn one_answer_is_the_answer_verbatim() {
        let out = composed(&[result(
            "weather",
            Some(json!({
                "answer": "  Tomorrow in Seoul: sunny, 21°C\n",
                "summary": "sunny",
                "insights": ["no rain", "no rain"],
                "sources": ["KMA", {"title": "KMA", "url": "https://kma.example"}],
                "data": {"temp_c": 21},
            })),
        )]);
        assert_eq!(
            out,
            json!({
                "answer": "  Tomorrow in Seoul: sunny, 21°C\n",
                "insights": ["no rain"],
                "sources": ["KMA", {"title": "KMA", "url": "https://kma.example"}],
                "agents": ["weather"],
                "metadata": {"intent_type": "general", "agents_used": ["weather"],
                             "answer_from": "answer", "composed_by": "rules"},
            })
        );
    }

    #[test]
    fn precedence_answers_then_summaries_then_insights_then_data() {
        let answer = |a: &str, t: &str| result(a, Some(json!({"answer": t})));
        let summary = |a: &str, t: &str| result(a, Some(json!({"summary": t})));
        let out = composed(&[
            answer("search", "found 3 articles"),
            summary("weather", "sunny"),
            answer("report", "the memo"),
        ]);
        assert_eq!(out["answer"], "found 3 articles\n\nthe memo");
        assert_eq!(out["agents"], json!(["search", "weather", "report"]));

        let out = composed(&[summary("search", "3 hits"), summary("report", "1 memo")]);
        assert_eq!(
            (&out["answer"], &out["metadata"]["answer_from"]),
            (&json!("3 hits\n\n1 memo"), &json!("summary"))
        );

        let out = composed(&[result("search", Some(json!({"insights": ["a", "b"]})))]);
        assert_eq!(
            (&out["answer"], &out["metadata"]["answer_from"]),
            (&json!("a\nb"), &json!("insights"))
        );

        let out = composed(&[result("search", Some(json!({"hits": 3})))]);
        assert_eq!(
            out["answer"],
            "search replied with data and no text; the data is in the run's results."
        );
        // A bare value is the agent's data too.
        let out = composed(&[result("search", Some(json!([1, 2])))]);
        assert_eq!(out["metadata"]["answer_from"], "data");
    }

    #[test]
    fn no_reply_says_so_and_lists_what_the_agents_do() {
        let out = composed(&[]);
        assert_eq!(
            out["answer"],
            "No agent could answer this request.\n\nThe available agents:\n\
             - report: Writes reports and summaries\n\
             - search: Finds documents on the web\n\
             - weather: Weather forecasts for a city and a day"
        );
        assert_eq!(out["agents"], json!([]));
        assert_eq!(out["metadata"]["answer_from"], "none");
        // An error reply is no answer.
        let out = composed(&[result(
            "search",
            Some(json!({"status": "error", "answer": "oops"})),
        )]);
        assert_eq!(out["metadata"]["answer_from"], "none");
        assert_eq!(out["metadata"]["agents_used"], json!(["search"]));
        let out = compose(&Registry::empty(), &intent_for(&[]), &[]);
        assert_eq!(
            out["answer"],
            "No agent could answer this request. No agent is registered."
        );
    }

    #[test]
    fn the_response_is_bounded() {
        let long = "가".repeat(ANSWER_BYTES_MAX);
        let many: Vec<String> = (0..50).map(|i| format!("insight {i}")).collect();
        let out = composed(&[result(
            "search",
            Some(json!({
                "answer": long,
                "insights": many,
                "sources": ["ok", {"url": format!("https://x.example/{}", "a".repeat(600))}],
            })),
        )]);
        let answer = out["answer"].as_str().unwrap();
        assert!(answer.len() <= ANSWER_BYTES_MAX + '…'.len_utf8());
        assert!(answer.ends_with('…'));
        assert_eq!(out["insights"].as_array().unwrap().len(), INSIGHTS_MAX);
        assert_eq!(out["sources"], json!(["ok"]));
    }
}
