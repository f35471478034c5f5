//! The OpenAPI document (`GET /openapi.json`). Each route's entry comes from its handler's
//! `#[utoipa::path]`, gathered with the route itself (see [`crate::router`]); this module holds
//! what the document has besides (its title, the reusable responses, the bearer scheme) and makes
//! it exact for the server that serves it:
//!
//! - every status a route can answer is declared, errors with the one error body: a handler's
//!   own by its annotation and its error set ([`crate::refusals`]), what the router answers
//!   before any handler runs by [`answers_of_every_route`];
//! - unsigned integers are declared by their real range (`0..=2^64-1`, `0..=2^32-1`), not as
//!   `int64` / `int32`, whose ranges are signed;
//! - the bearer requirement and 401 are declared only when the server has tokens (without them
//!   every request is `local` and nothing is ever refused for want of a token);
//! - a fixed plan's `agent_name` and agent mode's `agent` list the agents this server has, and a
//!   `/log` page's `limit` its configured maximum.

use std::sync::Arc;

use serde_json::{Value, json};
use utoipa::OpenApi;

use crate::refusals::{
    BadHost, Busy, Forbidden, InsufficientStorage, Internal, LgBadBody, LgBadHost, LgBusy,
    LgForbidden, LgInsufficientStorage, LgInternal, LgPayloadTooLarge, LgRequestTimeout,
    LgRunConflict, LgRunNotFound, LgRunNotStarted, LgRunRefused, LgThreadNotFound, LgTooManyWrites,
    LgUnauthorized, LgUnsupportedMediaType, PayloadTooLarge, RequestTimeout, RunNotFound,
    StreamsUnavailable, TicketsUnavailable, TooManyWrites, Unauthorized, Unavailable,
    UnsupportedMediaType,
};
use crate::state::AppState;

/// What the document has besides the routes' entries.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "Chronicle", description = "Event-sourced workflow engine for LLM supervisor workflows"),
    components(
        schemas(chronicle_wire::ErrorBody, chronicle_wire::EventData, chronicle_wire::langgraph::Detail, chronicle_wire::Order),
        responses(
            BadHost, Unauthorized, Forbidden, RunNotFound, RequestTimeout, PayloadTooLarge,
            UnsupportedMediaType, Internal, Unavailable, StreamsUnavailable, TicketsUnavailable,
            Busy, InsufficientStorage, TooManyWrites, LgTooManyWrites,
            LgBadHost, LgUnauthorized, LgForbidden, LgRequestTimeout, LgPayloadTooLarge,
            LgUnsupportedMediaType, LgBusy, LgInternal, LgInsufficientStorage,
            LgThreadNotFound, LgRunNotFound, LgBadBody, LgRunNotStarted, LgRunConflict,
            LgRunRefused,
        ),
    ),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
        if let Some(c) = openapi.components.as_mut() {
            c.add_security_scheme(
                "bearer",
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
        }
    }
}

/// The document as the routes make it, before [`document`] fits it to a server: handed to the
/// `/openapi.json` handler by the router that gathered it.
#[derive(Clone)]
pub struct Generated(pub Arc<utoipa::openapi::OpenApi>);

impl std::fmt::Debug for Generated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generated").finish_non_exhaustive()
    }
}

/// The document this server serves (see the module's rules).
pub fn document(st: &AppState, generated: &Generated) -> Value {
    let mut doc = serde_json::to_value(&*generated.0).unwrap_or_default();
    unsigned_ranges(&mut doc);
    bodies_required(&mut doc);
    parameters_not_null(&mut doc);
    link_field_names(&mut doc);
    server_sent_events(&mut doc);
    answers_of_every_route(&mut doc);
    if st.tokens.is_empty() {
        without_auth(&mut doc);
    } else if st.config.writes_per_principal_per_s > 0 {
        quota_on_writes(&mut doc);
    }
    let agents: Vec<String> = st
        .engine
        .settings()
        .registry
        .names()
        .map(str::to_owned)
        .collect();
    if let Some(name) = doc.pointer_mut("/components/schemas/PlanStepRequest/properties/agent_name")
    {
        name["enum"] = json!(agents);
    }
    if let Some(agent) = doc.pointer_mut("/components/schemas/RunRequest/properties/agent") {
        let mut names: Vec<Value> = agents.iter().map(|a| json!(a)).collect();
        names.push(Value::Null);
        agent["enum"] = Value::Array(names);
    }
    if let Some(params) = doc.pointer_mut("/paths/~1api~1v1~1agent~1{run_id}~1log/get/parameters")
        && let Some(limit) = params
            .as_array_mut()
            .and_then(|ps| ps.iter_mut().find(|p| p["name"] == "limit"))
    {
        limit["schema"]["maximum"] = json!(st.config.log_page_events_max);
    }
    doc
}

/// utoipa declares `u64` / `usize` as `int64` and `u32` as `int32` with `minimum: 0`: formats
/// whose ranges are signed, so a client would never send `2^63` (which the server takes) and
/// would send nothing it refuses only by chance. Each is declared by its real range instead.
fn unsigned_ranges(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let unsigned_max = match o.get("format").and_then(Value::as_str) {
                Some("int64") => Some(json!(u64::MAX)),
                Some("int32") => Some(json!(u32::MAX)),
                _ => None,
            };
            if let Some(max) = unsigned_max
                && o.get("minimum") == Some(&json!(0))
                && !o.contains_key("maximum")
            {
                o.remove("format");
                o.insert("maximum".into(), max);
            }
            o.values_mut().for_each(unsigned_ranges);
        }
        Value::Array(a) => a.iter_mut().for_each(unsigned_ranges),
        _ => {}
    }
}

/// Every route that takes a body needs one (a cancel's may be `null`, which is still a body):
/// utoipa marks an `Option` body as optional.
fn bodies_required(doc: &mut Value) {
    for op in operations(doc) {
        if let Some(body) = op.get_mut("requestBody").and_then(Value::as_object_mut) {
            body.insert("required".into(), Value::Bool(true));
        }
    }
}

/// A parameter is sent or not, never `null`: utoipa declares an `Option` parameter nullable, and
/// a client would then send the text `null`.
fn parameters_not_null(doc: &mut Value) {
    for op in operations(doc) {
        let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
            continue;
        };
        for schema in params.iter_mut().filter_map(|p| p.get_mut("schema")) {
            if let Some(types) = schema.get_mut("type").and_then(Value::as_array_mut) {
                types.retain(|t| t != "null");
                if let [one] = types.as_slice() {
                    let one = one.clone();
                    schema["type"] = one;
                }
            }
            if let Some(one_of) = schema.get_mut("oneOf").and_then(Value::as_array_mut) {
                one_of.retain(|s| s != &json!({"type": "null"}));
                if let [one] = one_of.as_slice() {
                    let one = one.clone();
                    *schema = one;
                }
            }
        }
    }
}

/// utoipa 5 writes a link's fields in snake case (`operation_id`); OpenAPI's are camel case.
fn link_field_names(doc: &mut Value) {
    for op in operations(doc) {
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        let links = responses
            .values_mut()
            .filter_map(|r| r.get_mut("links").and_then(Value::as_object_mut))
            .flat_map(|links| links.values_mut())
            .filter_map(Value::as_object_mut);
        for link in links {
            for (from, to) in [
                ("operation_id", "operationId"),
                ("operation_ref", "operationRef"),
                ("request_body", "requestBody"),
            ] {
                if let Some(v) = link.remove(from) {
                    link.insert(to.into(), v);
                }
            }
        }
    }
}

/// A `text/event-stream` answer is a sequence of events, each `{id, event, data}` with `data` the
/// JSON of an `EventData` (what clients and schemathesis check each event against); a LangGraph
/// run's are `{event, data, id?}` with `data` any JSON.
fn server_sent_events(doc: &mut Value) {
    for op in operations(doc) {
        let name = if op["tags"] == json!(["langgraph"]) {
            "LgServerSentEvent"
        } else {
            "ServerSentEvent"
        };
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        for stream in responses
            .values_mut()
            .filter_map(|r| r.pointer_mut("/content/text~1event-stream"))
        {
            stream["schema"] = json!({"$ref": format!("#/components/schemas/{name}")});
        }
    }
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.insert(
            "ServerSentEvent".into(),
            json!({
                "description": "One server-sent event (keep-alive comments aside)",
                "type": "object",
                "required": ["id", "event", "data"],
                "properties": {
                    "id": {"type": "string", "description": "The run's seq, or the global offset on the all-runs stream: the resume point for `Last-Event-ID`"},
                    "event": {"type": "string", "description": "The event's dotted name (`todo.status_changed`, `run.end`...)"},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {"$ref": "#/components/schemas/EventData"},
                    },
                },
            }),
        );
        schemas.insert(
            "LgServerSentEvent".into(),
            json!({
                "description": "One server-sent event of a LangGraph run (keep-alive comments aside)",
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "id": {"type": "string", "description": "The run's event seq, with `stream_resumable` and on a rejoin: the resume point for `Last-Event-ID`"},
                    "event": {"type": "string", "description": "`metadata`, `values`, `updates`, `messages`, `custom`, `debug`, `checkpoints` or `error`"},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                },
            }),
        );
    }
}

/// What the router answers before a handler runs, declared on every route in the shape of its
/// API (a LangGraph route's `{"detail"}`, else the error body) unless the route declares an
/// answer of its own for the status: 400 for a `Host` that names another server (on a LangGraph
/// route with a body, or malformed JSON), 403 for a page of an origin the server does not allow,
/// 503 when the server holds as many connections as it may; 401 on a route that needs a token;
/// and, for a request with a body, 408 when the body is too slow, 413 when it is too large and
/// 415 when it is not JSON.
fn answers_of_every_route(doc: &mut Value) {
    for (path, op) in operations_of_paths(doc) {
        let langgraph = crate::langgraph::detail::is_route(path);
        let has_body = op.contains_key("requestBody");
        let mut answers = vec![
            (
                "400",
                if langgraph && has_body {
                    "BadBody"
                } else {
                    "BadHost"
                },
            ),
            ("403", "Forbidden"),
            ("503", "Busy"),
        ];
        if op.contains_key("security") {
            answers.push(("401", "Unauthorized"));
        }
        if has_body {
            answers.extend([
                ("408", "RequestTimeout"),
                ("413", "PayloadTooLarge"),
                ("415", "UnsupportedMediaType"),
            ]);
        }
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        for (status, name) in answers {
            let name = if langgraph {
                format!("Lg{name}")
            } else {
                name.to_owned()
            };
            responses
                .entry(status)
                .or_insert_with(|| json!({"$ref": format!("#/components/responses/{name}")}));
        }
    }
}

/// A server with tokens answers an ordinary principal's write over its quota 429, before its
/// handler runs (a server without tokens has only `local`, an admin, whom no quota limits).
fn quota_on_writes(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        if path == "/api/v1/stream-tickets" {
            continue;
        }
        let name = match crate::langgraph::detail::is_route(path) {
            true => "LgTooManyWrites",
            false => "TooManyWrites",
        };
        for method in ["post", "put", "patch", "delete"] {
            if let Some(responses) = item
                .pointer_mut(&format!("/{method}/responses"))
                .and_then(Value::as_object_mut)
            {
                responses.insert(
                    "429".into(),
                    json!({"$ref": format!("#/components/responses/{name}")}),
                );
            }
        }
    }
}

/// Every operation of the document.
fn operations(doc: &mut Value) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    operations_of_paths(doc).map(|(_, op)| op)
}

/// Every operation of the document, with its path.
fn operations_of_paths(
    doc: &mut Value,
) -> impl Iterator<Item = (&str, &mut serde_json::Map<String, Value>)> {
    doc.get_mut("paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.iter_mut())
        .filter_map(|(path, item)| Some((path.as_str(), item.as_object_mut()?)))
        .flat_map(|(path, item)| {
            item.values_mut()
                .filter_map(Value::as_object_mut)
                .map(move |op| (path, op))
        })
}

/// A server without tokens answers every request as `local`: no operation needs a token and none
/// answers 401.
fn without_auth(doc: &mut Value) {
    for op in operations(doc) {
        op.remove("security");
        if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
            responses.remove("401");
        }
    }
    if let Some(components) = doc.get_mut("components").and_then(Value::as_object_mut) {
        components.remove("securitySchemes");
        if let Some(responses) = components
            .get_mut("responses")
            .and_then(Value::as_object_mut)
        {
            responses.remove("Unauthorized");
            responses.remove("LgUnauthorized");
            responses.remove("TooManyWrites");
            responses.remove("LgTooManyWrites");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_integers_get_their_real_range() {
        let mut v = json!({
            "a": {"type": "integer", "format": "int64", "minimum": 0},
            "b": {"type": ["integer", "null"], "format": "int32", "minimum": 0},
            "c": {"type": "integer", "format": "int64"},
            "d": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 10},
            "e": [{"type": "integer", "format": "int64", "minimum": 1}],
        });
        unsigned_ranges(&mut v);
        assert_eq!(
            v,
            json!({
                "a": {"type": "integer", "minimum": 0, "maximum": 18_446_744_073_709_551_615_u64},
                "b": {"type": ["integer", "null"], "minimum": 0, "maximum": 4_294_967_295_u32},
                "c": {"type": "integer", "format": "int64"},
                "d": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 10},
                "e": [{"type": "integer", "format": "int64", "minimum": 1}],
            })
        );
    }
}
