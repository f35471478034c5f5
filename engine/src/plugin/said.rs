//! Plain words said to a run that waits for a human, read as the slash command they mean: by the
//! model when one is configured (what it is told, `SYSTEM` and `prompt`, and how its answer
//! is read, `parse_answer`), by the domain's rules otherwise ([`crate::Planner::interpret`],
//! whose default is [`by_words`]). The run's actor asks them in that order, carries out what the
//! words were read as like a typed command and records it with the words
//! (`CommandReceived.said`).

use chronicle_projections::RunState;
use serde_json::Value;

use crate::commands::{self, Command};
use crate::plugin::agents::Registry;

/// Words that approve what the run waits for.
const APPROVE: [&str; 11] = [
    "yes", "y", "ok", "okay", "approve", "approved", "go", "go ahead", "proceed", "lgtm", "sure",
];
/// Words that reject it.
const REJECT: [&str; 7] = ["no", "n", "reject", "rejected", "stop", "deny", "don't"];
/// Words that ask for one more agent.
const ADD: [&str; 3] = ["add", "also", "include"];

/// `said` lowercased, without surrounding punctuation and spaces.
pub fn normalized(said: &str) -> String {
    said.trim()
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace() || c == '~')
        .to_lowercase()
}

/// The engine's own reading, in English: an approval word approves, a rejection word rejects,
/// "add" (or "also", "include") with a registered agent's name adds a TODO for that agent.
pub fn by_words(said: &str, agents: &Registry) -> Option<String> {
    let words = normalized(said);
    if APPROVE.contains(&words.as_str()) {
        return Some("/todo approve".into());
    }
    if REJECT.contains(&words.as_str()) {
        return Some("/todo reject".into());
    }
    let asks_to_add = words
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| ADD.contains(&w));
    if asks_to_add {
        return agent_named(&words, agents).map(|a| format!("/todo add {a}"));
    }
    None
}

/// The registered agent `words` name: its name, or its name with spaces for underscores
/// ("market analysis" for `market_analysis`); the longest such name wins.
pub fn agent_named(words: &str, agents: &Registry) -> Option<String> {
    agents
        .names()
        .filter(|name| {
            let spaced = name.replace('_', " ");
            words.contains(*name) || words.contains(&spaced)
        })
        .max_by_key(|name| name.len())
        .map(str::to_owned)
}

pub(crate) const SYSTEM: &str = "\
A workflow run waits for a person. Read what the person said and answer with the one slash \
command it means, as a JSON object {\"command\": \"/todo ...\"}, or {\"command\": null} when it \
means none of them. Commands: /todo approve [<approval_id>|<todo_id>|all]; /todo reject [<id>] \
[reason]; /todo skip <todo_id> [reason]; /todo add <agent> [after <todo_id>]; /todos; \
/checkpoint list. Use only agents from the list you are given.";

/// What the model is told of the waiting run and the person's words.
pub(crate) fn prompt(said: &str, state: &RunState, agents: &Registry) -> String {
    let mut p = String::from("The run waits for these approvals:\n");
    for a in state.approvals.pending() {
        p.push_str(&format!(
            "- {} ({}): {}\n",
            a.approval_id, a.tool_name, a.message
        ));
    }
    p.push_str("Its TODOs:\n");
    for t in state
        .supervisor
        .planning_state
        .iter()
        .flat_map(|p| &p.todos)
    {
        p.push_str(&format!("- {} {} ({:?})\n", t.id, t.agent_name, t.status));
    }
    p.push_str("Agents that can be added:\n");
    for info in agents.infos() {
        p.push_str(&format!("- {}: {}\n", info.name, info.purpose));
    }
    p.push_str(&format!("\nThe person said: {said}\n"));
    p
}

/// The command in the model's answer: one the run's grammar accepts, or `None` (the model said
/// none, or wrote something unusable).
pub(crate) fn parse_answer(text: &str) -> Result<Option<String>, String> {
    let answer = crate::plugin::llm::json_object(text)?;
    match answer.get("command") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => match commands::parse(c) {
            Ok(Command::Help) => Ok(None),
            Ok(_) => Ok(Some(c.trim().to_owned())),
            Err(e) => Err(format!("not a command: {e}")),
        },
        Some(other) => Err(format!("`command` must be a string or null, got {other}")),
    }
}
