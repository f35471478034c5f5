//! The agent contract, version 1: what an agent is sent when a TODO runs ([`AgentRequest`]) and
//! what its reply may say ([`AgentReply`]). Every agent speaks it — built-in, `http` (the
//! request is the POST body, the reply the response body) or a model — so that any response
//! composer can build an answer from any agent's reply.
//!
//! The JSON Schemas of both are committed beside this crate (`schemas/contract/`), generated
//! from these types; a test fails when they drift. A change that is not backwards compatible is
//! a new version, never an edit of this one.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The contract's name and version, sent in every request as `contract`.
pub const AGENT_CONTRACT: &str = "chronicle.agent.v1";

/// What an agent is sent when a TODO runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Chronicle agent request, v1")]
pub struct AgentRequest {
    /// Always `chronicle.agent.v1`.
    pub contract: String,
    /// The agent's own name, as the plan names it.
    pub agent: String,
    /// The run (a UUID), the session it belongs to and the user who asked, when known.
    pub run_id: String,
    pub session_id: String,
    #[serde(default)]
    pub user_id: Option<String>,
    /// The TODO this call works for, and which attempt of it (1 on the first run; a retry
    /// counts up; a re-run after a crash repeats the number).
    pub todo_id: String,
    pub attempt: u32,
    /// The user's request, as typed.
    pub query: String,
    /// The analysed intent: `{intent_type, confidence, keywords, entities}`.
    #[serde(default)]
    pub intent: Value,
    /// The TODO's input: the plan's `input_mapping`, or the args a person edited it to.
    #[serde(default)]
    pub input: Value,
    /// The replies of the agents that completed before this one, by agent name.
    #[serde(default)]
    pub team_results: BTreeMap<String, Value>,
    /// The session's earlier turns, oldest first, within the run's context budget: a follow-up
    /// ("and in Seocho?") is read against them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryTurn>,
    /// What the engine remembers of the user (facts and preferences from earlier sessions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memories: Vec<RememberedItem>,
    /// What a person answered when this TODO waited for approval (a region, a focus ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

/// An earlier turn of the session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryTurn {
    /// The earlier turn's run.
    pub run_id: String,
    pub query: String,
    /// Its final answer as text (possibly cut short); empty when it had none.
    pub answer: String,
}

/// One item of the user's long-term memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RememberedItem {
    /// `fact` or `preference`.
    pub kind: String,
    /// What it is about (`deal_type`, ...).
    pub key: String,
    /// The value rules use (`"jeonse"`).
    #[serde(default)]
    pub value: Value,
    /// The item in words.
    pub text: String,
}

impl HistoryTurn {
    pub fn of(t: &crate::PriorTurn) -> Self {
        HistoryTurn {
            run_id: t.run_id.to_string(),
            query: t.query.clone(),
            answer: t.answer.clone(),
        }
    }
}

impl RememberedItem {
    pub fn of(m: &crate::Memory) -> Self {
        RememberedItem {
            kind: match m.kind {
                crate::MemoryKind::Fact => "fact",
                crate::MemoryKind::Preference => "preference",
            }
            .to_owned(),
            key: m.key.clone(),
            value: m.value.clone(),
            text: m.text.clone(),
        }
    }
}

/// What an agent replies. Every field is optional; an agent says what it has. Other fields are
/// allowed and kept (they show in the run's `team_results`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Chronicle agent reply, v1")]
pub struct AgentReply {
    /// `success` (the default when absent) or `error` (the agent worked but has nothing to
    /// say; a failure is better an HTTP error status, which the engine may retry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Text that answers the user's request by itself. When one agent of a run gives an
    /// answer, it is the run's answer; several are joined in plan order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// One or two sentences on what the agent found; used when no agent answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Short findings worth showing beside the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insights: Vec<String>,
    /// The agent's structured result, for later agents and for clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Where the information came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
    /// Anything else the agent sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Map<String, Value>,
}

/// One source of an agent's reply: a plain description, or a title and a link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SourceRef {
    Text(String),
    Link {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
}

impl AgentReply {
    /// The reply of a result value, leniently: a value that is not an object, or has fields of
    /// other types than the contract's, gives what can be read (an object's other fields land in
    /// `extra`; a mistyped contract field is dropped).
    pub fn read(result: &Value) -> AgentReply {
        let Value::Object(map) = result else {
            return AgentReply {
                data: (!result.is_null()).then(|| result.clone()),
                ..AgentReply::default()
            };
        };
        if let Ok(reply) = serde_json::from_value::<AgentReply>(result.clone()) {
            return reply;
        }
        let mut reply = AgentReply::default();
        let text = |k: &str| map.get(k).and_then(Value::as_str).map(str::to_owned);
        reply.status = text("status");
        reply.answer = text("answer");
        reply.summary = text("summary");
        reply.insights = map
            .get("insights")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        reply.data = map.get("data").cloned();
        reply.sources = map
            .get("sources")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        reply
    }

    /// The agent says it has nothing (`status: "error"`).
    pub fn is_error(&self) -> bool {
        self.status.as_deref() == Some("error")
    }
}

/// The committed JSON Schemas, by file name: what the docs publish.
pub fn json_schemas() -> [(&'static str, Value); 2] {
    let to_value = |s: schemars::Schema| serde_json::to_value(s).unwrap_or(Value::Null);
    [
        (
            "agent-request.v1.schema.json",
            to_value(schemars::schema_for!(AgentRequest)),
        ),
        (
            "agent-reply.v1.schema.json",
            to_value(schemars::schema_for!(AgentReply)),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn replies_read_leniently() {
        let r = AgentReply::read(&json!({
            "answer": "Sunny, 21°C",
            "insights": ["no rain"],
            "sources": ["met office", {"title": "KMA", "url": "https://kma.example"}],
            "city": "Seoul",
        }));
        assert_eq!(r.answer.as_deref(), Some("Sunny, 21°C"));
        assert_eq!(r.insights, ["no rain"]);
        assert_eq!(r.sources.len(), 2);
        assert_eq!(r.extra["city"], "Seoul");
        // A mistyped field is dropped, the rest kept.
        let r = AgentReply::read(&json!({"answer": 3, "summary": "s", "insights": ["a", 1]}));
        assert_eq!((r.answer, r.summary.as_deref()), (None, Some("s")));
        assert_eq!(r.insights, ["a"]);
        // A bare value is data.
        assert_eq!(AgentReply::read(&json!([1, 2])).data, Some(json!([1, 2])));
        assert!(AgentReply::read(&json!({"status": "error"})).is_error());
    }

    /// The published schemas are generated from the types; re-bless with
    /// `CHRONICLE_BLESS=1 cargo test -p chronicle-schemas`.
    #[test]
    fn the_committed_json_schemas_match_the_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contract");
        for (name, schema) in json_schemas() {
            let path = dir.join(name);
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            if std::env::var_os("CHRONICLE_BLESS").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(committed, text, "{name} drifted from the types");
        }
    }
}
