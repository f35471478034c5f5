//! `llm` agents for the tests, shared with the engine child process: agents declared in TOML
//! (`kind = "llm"`, the generic domain's config) over the scripted OpenAI-compatible model on
//! loopback (`chronicle_testkit::model`), never a real model.

use std::sync::Arc;

use chronicle_engine::Settings;
use chronicle_engine::llm::{LlmConfig, OpenAiCompat};
use chronicle_testkit::model::Reply;
use serde_json::{Value, json};

/// The scripted model's key: every request must carry it, and no event may.
pub const KEY: &str = "sk-llm-agents-5b1f9e2c7d";

/// The analyst of the agent-mode scenario, and two agents that delegate through `task`.
pub const AGENTS: &str = r#"
[[agent]]
name = "analyst"
kind = "llm"
purpose = "Analyses data in the workspace and writes reports"
system_prompt = "You are the analyst. Plan with write_todos, then write and check the report."
tools = ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "write_todos", "task"]
max_turns = 10

[[agent]]
name = "lead"
kind = "llm"
purpose = "Leads a task and delegates parts of it"
system_prompt = "You are the lead. Delegate with task."
tools = ["task", "write_todos"]
max_turns = 5

[[agent]]
name = "helper"
kind = "llm"
purpose = "Answers what the lead delegates"
system_prompt = "You are the helper. Answer briefly."
tools = ["read_file"]
max_turns = 3

[[agent]]
name = "reader"
kind = "llm"
purpose = "Reads large files, to fill its context"
system_prompt = "You are the reader. Read the data."
tools = ["read_file"]
max_turns = 8
context_budget_tokens = 1000

[[agent]]
name = "recurser"
kind = "llm"
purpose = "Delegates to itself, to find the depth limit"
system_prompt = "You are the recurser. Delegate to yourself."
tools = ["task"]
max_turns = 3
"#;

/// The generic domain with [`AGENTS`], asking the scripted model at `base_url`.
pub fn settings(base_url: &str) -> Settings {
    let mut s = chronicle_generic::settings();
    let config = LlmConfig {
        base_url: base_url.to_owned(),
        model: "test-model".into(),
        api_key: Some(KEY.into()),
        timeout_ms: 10_000,
    };
    s.llm = Some(Arc::new(OpenAiCompat::new(config).expect("client")));
    chronicle_generic::load_agents(&mut s.registry, AGENTS).expect("the llm agents load");
    s
}

/// Which turn of its agent's loop a request is: 1 + the model's answers it already holds.
pub fn turn_of(body: &Value) -> usize {
    1 + messages(body)
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// The agent a request comes from, by its system prompt (`You are the <name>.`).
pub fn agent_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .strip_prefix("You are the ")
        .and_then(|rest| rest.split('.').next())
        .unwrap_or_default()
        .to_owned()
}

pub fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The tool results of a request's last turn, in order.
pub fn last_results(body: &Value) -> Vec<String> {
    let msgs = messages(body);
    let last_answer = msgs
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .unwrap_or(0);
    msgs[last_answer..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A reply calling these tools.
pub fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::ToolCalls {
        content: None,
        calls: list
            .iter()
            .map(|(name, args)| ((*name).to_owned(), args.clone()))
            .collect(),
    }
}

/// The report the analyst writes.
pub const REPORT: &str = "# Sales\nsales rose 12% in March\n";
/// The analyst's final answer.
pub const ANSWER: &str = "The report is in /workspace/report.md: sales rose 12% in March.";

/// The analyst's four turns: plan three TODOs, write the report, read it back and update the
/// plan, answer.
pub fn analyst(body: &Value) -> Reply {
    match turn_of(body) {
        1 => calls(&[(
            "write_todos",
            json!({"todos": [
                {"content": "Read the data", "status": "in_progress"},
                {"content": "Write the report", "status": "pending"},
                {"content": "Check the report", "status": "pending"},
            ]}),
        )]),
        2 => calls(&[(
            "write_file",
            json!({"file_path": "/workspace/report.md", "content": REPORT}),
        )]),
        3 => calls(&[
            ("read_file", json!({"file_path": "/workspace/report.md"})),
            (
                "write_todos",
                json!({"todos": [
                    {"content": "Read the data", "status": "completed"},
                    {"content": "Write the report", "status": "completed"},
                    {"content": "Check the report", "status": "in_progress"},
                ]}),
            ),
        ]),
        _ => Reply::Content(ANSWER.into()),
    }
}
