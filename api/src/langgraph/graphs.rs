//! The graphs this server runs, as LangGraph's assistants: the supervisor workflow (`graph_id`
//! `supervisor`) and one per registered agent, which can drive a whole run by itself (agent
//! mode; its `graph_id` is its name). They are the server's own, made at its start: ids are
//! UUIDv5 of the graph id, so a client may keep one across restarts and servers.

use chronicle_wire::langgraph::Assistant;
use serde_json::{Map, json};

use super::views::assistant_id;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The graph id of Chronicle's supervisor workflow.
pub const SUPERVISOR: &str = "supervisor";
/// The supervisor workflow's steps, in order.
pub(crate) const SUPERVISOR_NODES: [&str; 7] = [
    "initialize",
    "analyze_intent",
    "build_plan",
    "execute_todo",
    "evaluate",
    "aggregate",
    "generate_response",
];
/// The supervisor workflow's edges: (from, to, conditional).
pub(crate) const SUPERVISOR_EDGES: [(&str, &str, bool); 9] = [
    ("__start__", "initialize", false),
    ("initialize", "analyze_intent", false),
    ("analyze_intent", "build_plan", false),
    ("build_plan", "execute_todo", true),
    ("build_plan", "aggregate", true),
    ("execute_todo", "evaluate", false),
    ("evaluate", "execute_todo", true),
    ("evaluate", "aggregate", true),
    ("aggregate", "generate_response", false),
];

fn assistant(st: &AppState, graph_id: &str, description: &str) -> Assistant {
    let started = st.started_at.to_string();
    Assistant {
        assistant_id: assistant_id(graph_id).to_string(),
        graph_id: graph_id.to_owned(),
        config: Map::new(),
        context: Map::new(),
        metadata: [("created_by".to_owned(), json!("system"))]
            .into_iter()
            .collect(),
        name: graph_id.to_owned(),
        description: Some(description.to_owned()),
        version: 1,
        created_at: started.clone(),
        updated_at: started,
    }
}

/// Every assistant of this server: the supervisor first, then the agents by name (an agent
/// named like the supervisor graph has none: the graph id is taken).
pub(crate) fn all(st: &AppState) -> Vec<Assistant> {
    let settings = st.engine.settings();
    let agents = settings.registry.infos().filter(|a| a.name != SUPERVISOR);
    std::iter::once(assistant(
        st,
        SUPERVISOR,
        "The supervisor workflow: analyse the query, plan it into TODOs, run them with agents (with human approval where the policy asks), evaluate, aggregate and answer",
    ))
    .chain(agents.map(|a| assistant(st, &a.name, &a.purpose)))
    .collect()
}

/// The assistant `id` names: its UUID or its graph id.
pub(crate) fn find(st: &AppState, id: &str) -> ApiResult<Assistant> {
    all(st)
        .into_iter()
        .find(|a| a.assistant_id.eq_ignore_ascii_case(id) || a.graph_id == id)
        .ok_or_else(|| ApiError::not_found(format!("assistant {id:?} not found")))
}
