//! The assistants' routes: search, one assistant, its graph and its schemas (the assistants
//! themselves are the server's graphs, see [`super::graphs`]).

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use chronicle_wire::langgraph::{
    Assistant, AssistantGraph, AssistantSearch, Detail, GraphEdge, GraphNode, GraphSchemas,
};
use serde_json::json;

use super::graphs::{SUPERVISOR, SUPERVISOR_EDGES, SUPERVISOR_NODES, all, find};
use super::request::{page_limit, paged};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json as Body, Path, Query};
use crate::state::AppState;

fn matches(a: &Assistant, q: &AssistantSearch) -> bool {
    q.graph_id.as_ref().is_none_or(|g| *g == a.graph_id)
        && q.name.as_ref().is_none_or(|n| *n == a.name)
        && q.metadata
            .iter()
            .flatten()
            .all(|(k, v)| a.metadata.get(k) == Some(v))
}

#[utoipa::path(post, path = "/assistants/search", operation_id = "search_assistants", tag = "langgraph", request_body = AssistantSearch, security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the assistants that match every filter given: the supervisor workflow first, then one per agent by name", body = Vec<Assistant>,
            headers(
                ("X-Pagination-Total" = u64, description = "How many assistants match, over all pages"),
                ("X-Pagination-Next" = u64, description = "The `offset` of the next page, when there is one"),
            )),
        (status = 400, description = "Malformed JSON, or a `Host` header that names another server", body = Detail),
        (status = 422, description = "A field of the wrong type, or a `limit` outside 1..=1000", body = Detail),
    ))]
pub(crate) async fn search(
    State(st): State<AppState>,
    _who: Principal,
    Body(q): Body<AssistantSearch>,
) -> ApiResult<Response> {
    let limit = page_limit(q.limit)?;
    let found: Vec<Assistant> = all(&st).into_iter().filter(|a| matches(a, &q)).collect();
    Ok(paged(found, q.offset, limit))
}

#[utoipa::path(get, path = "/assistants/{assistant_id}", operation_id = "get_assistant", tag = "langgraph", security(("bearer" = [])),
    params(("assistant_id" = String, Path, description = "The assistant's UUID, or its graph id")),
    responses(
        (status = 200, description = "The assistant", body = Assistant),
        (status = 404, description = "No assistant has this id or graph id", body = Detail),
    ))]
pub(crate) async fn get_assistant(
    State(st): State<AppState>,
    _who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<Assistant>> {
    find(&st, &id).map(Json)
}

/// `?xray=`: how deep to draw subgraphs. There are none; it is checked and ignored.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct GraphQuery {
    /// `true`, `false`, or a depth (subgraphs are not drawn: the graph has none).
    #[param(value_type = Option<String>, pattern = "^(true|false|[0-9]{1,9})$")]
    xray: Option<String>,
}

#[utoipa::path(get, path = "/assistants/{assistant_id}/graph", operation_id = "get_assistant_graph", tag = "langgraph", security(("bearer" = [])),
    params(("assistant_id" = String, Path, description = "The assistant's UUID, or its graph id"), GraphQuery),
    responses(
        (status = 200, description = "The graph's nodes and edges", body = AssistantGraph),
        (status = 400, description = "An `xray` that is neither a boolean nor a depth, or a `Host` header that names another server", body = Detail),
        (status = 404, description = "No assistant has this id or graph id", body = Detail),
    ))]
pub(crate) async fn graph(
    State(st): State<AppState>,
    _who: Principal,
    Path(id): Path<String>,
    Query(q): Query<GraphQuery>,
) -> ApiResult<Json<AssistantGraph>> {
    if let Some(x) = q.xray
        && !(x == "true"
            || x == "false"
            || (x.len() <= 9 && x.bytes().all(|b| b.is_ascii_digit()) && !x.is_empty()))
    {
        return Err(ApiError::bad_request(format!(
            "xray must be true, false or a depth, got {x:?}"
        )));
    }
    let a = find(&st, &id)?;
    Ok(Json(if a.graph_id == SUPERVISOR {
        drawn(&SUPERVISOR_NODES, &SUPERVISOR_EDGES)
    } else {
        let one = [a.graph_id.as_str()];
        let edges = [("__start__", one[0], false)];
        drawn(&one, &edges)
    }))
}

/// The graph of `steps` and `edges`, with `__start__` and an edge from the last step to `__end__`.
fn drawn(steps: &[&str], edges: &[(&str, &str, bool)]) -> AssistantGraph {
    let node = |id: &str, kind: &str| GraphNode {
        id: id.to_owned(),
        kind: kind.to_owned(),
        data: id.to_owned(),
    };
    let edge = |&(source, target, conditional): &(&str, &str, bool)| GraphEdge {
        source: source.to_owned(),
        target: target.to_owned(),
        conditional,
    };
    let last = steps.last().copied().unwrap_or("__start__");
    AssistantGraph {
        nodes: std::iter::once(node("__start__", "schema"))
            .chain(steps.iter().map(|s| node(s, "runnable")))
            .chain(std::iter::once(node("__end__", "schema")))
            .collect(),
        edges: edges
            .iter()
            .chain(std::iter::once(&(last, "__end__", false)))
            .map(edge)
            .collect(),
    }
}

#[utoipa::path(get, path = "/assistants/{assistant_id}/schemas", operation_id = "get_assistant_schemas", tag = "langgraph", security(("bearer" = [])),
    params(("assistant_id" = String, Path, description = "The assistant's UUID, or its graph id")),
    responses(
        (status = 200, description = "JSON Schemas of the graph's input, output, state, config and context", body = GraphSchemas),
        (status = 404, description = "No assistant has this id or graph id", body = Detail),
    ))]
pub(crate) async fn schemas(
    State(st): State<AppState>,
    _who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<GraphSchemas>> {
    let a = find(&st, &id)?;
    let messages = json!({
        "type": "array",
        "description": "The conversation: LangChain messages (`human`, `ai`, `tool`, `system`)",
        "items": {"type": "object", "required": ["type", "content"], "properties": {
            "type": {"type": "string"}, "content": {}, "id": {"type": "string"},
        }},
    });
    let state = json!({
        "title": a.graph_id, "type": "object",
        "properties": {"messages": messages},
    });
    let object = |title: &str| json!({"title": title, "type": "object", "properties": {}});
    Ok(Json(GraphSchemas {
        graph_id: a.graph_id.clone(),
        input_schema: state.clone(),
        output_schema: state.clone(),
        state_schema: state,
        config_schema: object("Config"),
        context_schema: object("Context"),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::views::assistant_id;
    use super::*;

    #[test]
    fn the_supervisor_id_is_langgraphs() {
        // Python: uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "supervisor").
        assert_eq!(
            assistant_id(SUPERVISOR).to_string(),
            "3dba61cc-373b-5094-96d6-8331cb40a952"
        );
    }

    #[test]
    fn a_graph_ends() {
        let g = drawn(&SUPERVISOR_NODES, &SUPERVISOR_EDGES);
        assert_eq!(g.nodes.len(), 9);
        assert_eq!(g.edges.last().unwrap().target, "__end__");
        let _: serde_json::Value = serde_json::to_value(&g).unwrap();
    }
}
