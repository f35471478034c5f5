//! The bodies of the LangGraph Agent Server routes Chronicle serves at the root (`/info`,
//! `/assistants/...`), so that clients written for LangGraph (`langgraph-sdk`, agent-chat-ui) work
//! unchanged. Their field names and shapes are LangGraph's, not Chronicle's.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The error body of every LangGraph route: `{"detail": "..."}` (the SDK maps the status to a
/// typed exception and shows `detail`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Detail {
    pub detail: String,
}

/// `GET /info`: the server's version and what it supports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServerInfo {
    pub version: String,
    pub flags: ServerFlags,
}

/// Which optional LangGraph features this server has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServerFlags {
    pub assistants: bool,
    pub crons: bool,
    pub langsmith: bool,
}

/// A graph a client can run, with its configuration: Chronicle's supervisor workflow, or one
/// agent running a whole run by itself (agent mode).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Assistant {
    /// A UUID, stable for the graph: the same on every server.
    pub assistant_id: String,
    pub graph_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub config: Map<String, Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub context: Map<String, Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: Map<String, Value>,
    pub name: String,
    pub description: Option<String>,
    pub version: u32,
    /// RFC 3339: when this server started (the assistants are the server's own, made at start).
    pub created_at: String,
    pub updated_at: String,
}

/// The most assistants one `POST /assistants/search` page returns.
pub const ASSISTANTS_PAGE_MAX: u64 = 1000;
/// A page's size when the request names none.
pub const ASSISTANTS_PAGE_DEFAULT: u64 = 10;

/// `POST /assistants/search`: filters (all must hold) and a page. Other fields LangGraph clients
/// send (`sort_by`, `select`...) are ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistantSearch {
    /// Assistants of this graph only.
    #[serde(default)]
    pub graph_id: Option<String>,
    /// Assistants of this name only.
    #[serde(default)]
    pub name: Option<String>,
    /// Assistants whose metadata holds every one of these keys with the same value.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    /// The page's size (10 when absent).
    #[serde(default, deserialize_with = "crate::requests::integral::option_u64")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub limit: Option<u64>,
    /// How many matching assistants to skip.
    #[serde(default, deserialize_with = "crate::requests::integral::option_u64")]
    pub offset: Option<u64>,
}

/// `GET /assistants/{assistant_id}/graph`: the graph's nodes and edges.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistantGraph {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
}

/// One node: `__start__` and `__end__` are of type `schema`, the steps of type `runnable`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GraphNode {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The node's name.
    pub data: String,
}

/// One edge; `conditional` when the step after `source` depends on the state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GraphEdge {
    pub source: String,
    pub target: String,
    pub conditional: bool,
}

/// `GET /assistants/{assistant_id}/schemas`: JSON Schemas of what a run takes and gives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GraphSchemas {
    pub graph_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input_schema: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub output_schema: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub state_schema: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub config_schema: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub context_schema: Value,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_assistant_is_langgraphs_json() {
        let a = Assistant {
            assistant_id: "3dba61cc-373b-5094-96d6-8331cb40a952".into(),
            graph_id: "supervisor".into(),
            config: Map::new(),
            context: Map::new(),
            metadata: [("created_by".to_owned(), json!("system"))]
                .into_iter()
                .collect(),
            name: "supervisor".into(),
            description: None,
            version: 1,
            created_at: "2026-01-01T00:00:00.000000Z".into(),
            updated_at: "2026-01-01T00:00:00.000000Z".into(),
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(
            v,
            json!({
                "assistant_id": "3dba61cc-373b-5094-96d6-8331cb40a952", "graph_id": "supervisor",
                "config": {}, "context": {}, "metadata": {"created_by": "system"},
                "name": "supervisor", "description": null, "version": 1,
                "created_at": "2026-01-01T00:00:00.000000Z", "updated_at": "2026-01-01T00:00:00.000000Z",
            })
        );
        assert_eq!(serde_json::from_value::<Assistant>(v).unwrap(), a);
    }

    #[test]
    fn a_search_takes_what_the_sdk_sends() {
        // `10.0` is the integer 10; fields the server does not use are ignored.
        let q: AssistantSearch = serde_json::from_value(
            json!({"limit": 10.0, "offset": 0, "sort_by": "name", "metadata": {"a": 1}}),
        )
        .unwrap();
        assert_eq!((q.limit, q.offset, q.graph_id), (Some(10), Some(0), None));
        assert_eq!(q.metadata.unwrap()["a"], 1);
        for bad in [
            json!({"limit": "ten"}),
            json!({"offset": -1}),
            json!({"limit": 1.5}),
        ] {
            assert!(
                serde_json::from_value::<AssistantSearch>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }
}
