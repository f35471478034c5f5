//! The OpenAPI document (`GET /openapi.json`), generated from the handlers' `#[utoipa::path]`
//! annotations and made exact for the server that serves it:
//!
//! - every status a route can answer is declared, errors with the one error body; the ones many
//!   routes share are the reusable responses below;
//! - unsigned integers are declared by their real range (`0..=2^64-1`, `0..=2^32-1`), not as
//!   `int64` / `int32`, whose ranges are signed;
//! - the bearer requirement and 401 are declared only when the server has tokens (without them
//!   every request is `local` and nothing is ever refused for want of a token);
//! - a fixed plan's `agent_name` and agent mode's `agent` list the agents this server has, and a
//!   `/log` page's `limit` its configured maximum.

use chronicle_wire::{ChatCommand, ChatTurn, ChatWaiting, ErrorBody, Health};
use serde_json::{Value, json};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{OpenApi, PartialSchema, ToResponse, ToSchema};

use crate::state::AppState;
use crate::{audit, auth, langgraph, memory, rest, runs, sessions, sse, ws};

#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "Chronicle", description = "Event-sourced workflow engine for LLM supervisor workflows"),
    paths(
        rest::chat, rest::session, rest::resume, rest::session_checkpoints,
        rest::start_run, rest::status, rest::approvals, rest::approval, rest::decide,
        rest::command, rest::todos, rest::state, rest::log, rest::checkpoints, rest::restore, rest::cancel,
        runs::list, sessions::list, sessions::get, sessions::delete, sse::run_events, sse::all_events, audit::inbox, audit::export, ws::handler,
        auth::issue_ticket, rest::healthz, rest::metrics, openapi,
        memory::list, memory::forget, memory::forget_all,
        langgraph::info::info, langgraph::assistants::search, langgraph::assistants::get_assistant,
        langgraph::assistants::graph, langgraph::assistants::schemas,
        langgraph::threads::create, langgraph::threads::search, langgraph::threads::get,
        langgraph::threads::delete, langgraph::threads::state,
        langgraph::threads::state_at_checkpoint, langgraph::threads::state_at_checkpoint_post,
        langgraph::threads::history, langgraph::threads::copy, langgraph::threads::update_state,
        langgraph::runs::create_on_thread, langgraph::runs::stream_on_thread,
        langgraph::runs::wait_on_thread, langgraph::runs::create_stateless,
        langgraph::runs::stream_stateless, langgraph::runs::wait_stateless, langgraph::runs::list,
        langgraph::runs::get, langgraph::runs::delete, langgraph::runs::join,
        langgraph::runs::join_stream, langgraph::runs::cancel, langgraph::runs::cancel_many,
    ),
    components(
        schemas(chronicle_wire::ErrorBody, chronicle_wire::EventData, chronicle_wire::langgraph::Detail),
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

/// The document this server serves (see the module's rules).
pub fn document(st: &AppState) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
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

#[utoipa::path(get, path = "/openapi.json", tag = "ops",
    responses(
        (status = 200, description = "This document (OpenAPI 3.1)", body = Object),
        (status = 400, description = "A `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 403, response = Forbidden),
    ))]
pub(crate) async fn openapi(
    axum::extract::State(st): axum::extract::State<AppState>,
) -> axum::Json<Value> {
    axum::Json(document(&st))
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

/// What any request can be answered before its handler runs: 400 for a `Host` that names another
/// server, 403 for a page of an origin the server does not allow, 503 when the server holds as
/// many connections as it may; and, for a request with a body, 408 when the body is too slow.
fn answers_of_every_route(doc: &mut Value) {
    let response = |name: &str| json!({"$ref": format!("#/components/responses/{name}")});
    for op in operations(doc) {
        let has_body = op.contains_key("requestBody");
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        for (status, name) in [("400", "BadHost"), ("403", "Forbidden"), ("503", "Busy")] {
            responses.entry(status).or_insert_with(|| response(name));
        }
        if has_body {
            responses
                .entry("408")
                .or_insert_with(|| response("RequestTimeout"));
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
        let name = match crate::langgraph::is_route(path) {
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
    doc.get_mut("paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
        .filter_map(Value::as_object_mut)
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

// ------------------------------------------------------------------ parameters

/// A session (thread) id in a path or a query: 1..=64 characters without NUL.
pub(crate) struct ThreadId;

impl PartialSchema for ThreadId {
    fn schema() -> RefOr<Schema> {
        chronicle_wire::openapi::session_id().into()
    }
}

impl ToSchema for ThreadId {}

/// The sessions listing's `cursor`: opaque, as a page's `next_cursor` gives it.
pub(crate) struct SessionsCursor;

impl PartialSchema for SessionsCursor {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9a-f]{16}([0-9a-f]{2})+$"))
            .description(Some("A page's `next_cursor`, unchanged"))
            .into()
    }
}

impl ToSchema for SessionsCursor {}

/// The inbox's `older_than`: a duration or an instant.
pub(crate) struct OlderThan;

impl PartialSchema for OlderThan {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^[0-9]{1,18}(ms|s|m|h|d)$"))
                    .description(Some("A duration: `250ms`, `30s`, `5m`, `2h`, `1d`")),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
                    .description(Some("An RFC 3339 instant")),
            )
            .into()
    }
}

impl ToSchema for OlderThan {}

/// The audit export's `format`.
pub(crate) struct ExportFormat;

impl PartialSchema for ExportFormat {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["jsonl", "csv"]))
            .into()
    }
}

impl ToSchema for ExportFormat {}

// ------------------------------------------------------------------ bodies

fn schema_ref<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

/// What a chat turn answers with 200: the turn, or a command's outcome.
pub(crate) struct ChatAnswer;

impl PartialSchema for ChatAnswer {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(schema_ref::<ChatTurn>())
            .item(schema_ref::<ChatCommand>())
            .into()
    }
}

impl ToSchema for ChatAnswer {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<ChatTurn>(schemas);
        add::<ChatCommand>(schemas);
    }
}

/// What `/healthz` answers with 503: the health of a store that cannot append, or the error of a
/// connection over the cap.
pub(crate) struct HealthOrBusy;

impl PartialSchema for HealthOrBusy {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(schema_ref::<Health>())
            .item(schema_ref::<ErrorBody>())
            .into()
    }
}

impl ToSchema for HealthOrBusy {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<Health>(schemas);
        add::<ErrorBody>(schemas);
    }
}

/// A turn answered 409 because the run waits for a human: the error, the turn and the approvals.
pub(crate) struct WaitingForHuman;

impl PartialSchema for WaitingForHuman {
    fn schema() -> RefOr<Schema> {
        AllOfBuilder::new()
            .item(schema_ref::<ErrorBody>())
            .item(schema_ref::<ChatWaiting>())
            .into()
    }
}

impl ToSchema for WaitingForHuman {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<ErrorBody>(schemas);
        add::<ChatWaiting>(schemas);
    }
}

/// [`WaitingForHuman`], or a plain conflict.
pub(crate) struct WaitingForHumanOrConflict;

impl PartialSchema for WaitingForHumanOrConflict {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(WaitingForHuman::schema())
            .item(schema_ref::<ErrorBody>())
            .into()
    }
}

impl ToSchema for WaitingForHumanOrConflict {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        WaitingForHuman::schemas(schemas);
    }
}

fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

// ------------------------------------------------------------------ reusable responses

fn error(description: &str) -> ResponseBuilder {
    error_of("ErrorBody", description)
}

/// An error answer with the body schema called `body`.
fn error_of(body: &str, description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(body)))
            .build(),
    )
}

macro_rules! error_responses {
    ($($(#[$doc:meta])* $name:ident = $description:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<Response>) {
                (stringify!($name), error($description).build().into())
            }
        }
    )*};
}

error_responses! {
    /// 400, on every route that has no other.
    BadHost = "A `Host` header that names another server (`bad_host`)";
    /// 401, on every route that takes a principal.
    Unauthorized = "No bearer token, or an unknown one (`unauthorized`)";
    /// 403, on every route.
    Forbidden = "The request comes from a web page whose `Origin` the server does not allow (`forbidden_origin`)";
    /// 404 of a run route.
    RunNotFound = "No such run, another principal's, or a run of a deleted session (`not_found`: the same answer)";
    /// 408, on every route with a body.
    RequestTimeout = "The body did not arrive within the server's body-read timeout (`request_timeout`); the connection is closed";
    /// 413, on every route with a body.
    PayloadTooLarge = "The body is over the server's limit (256 KiB by default), or what the request would record is over an event's 64 KiB (`payload_too_large`); nothing was written";
    /// 415, on every route with a body.
    UnsupportedMediaType = "A request that changes state without `Content-Type: application/json` (`unsupported_media_type`)";
    /// 500, on every route that reads the store.
    Internal = "The log is damaged (`corrupt_log`, naming the offset: run `chronicle verify`), or an internal error (`internal_error`)";
    /// 507, on every route that appends.
    InsufficientStorage = "The disk is full (`insufficient_storage`): nothing was written; try again once space is freed";
}

/// The LangGraph routes' shared errors: the same refusals, with the `{"detail"}` body.
macro_rules! detail_responses {
    ($($(#[$doc:meta])* $name:ident = $description:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<Response>) {
                (stringify!($name), error_of("Detail", $description).build().into())
            }
        }
    )*};
}

detail_responses! {
    LgBadHost = "A `Host` header that names another server";
    LgUnauthorized = "No bearer token, or an unknown one";
    LgForbidden = "The request comes from a web page whose `Origin` the server does not allow";
    LgRequestTimeout = "The body did not arrive within the server's body-read timeout; the connection is closed";
    LgPayloadTooLarge = "The body is over the server's limit (256 KiB by default)";
    LgUnsupportedMediaType = "A request that changes state without `Content-Type: application/json`";
    LgInternal = "The log is damaged (run `chronicle verify`), or an internal error";
    LgInsufficientStorage = "The disk is full: nothing was written; try again once space is freed";
    LgThreadNotFound = "No thread has this id (or it is another principal's, or deleted)";
    LgBadBody = "Malformed JSON, or a `Host` header that names another server";
    LgRunNotStarted = "No thread has this id (and `if_not_exists` is not `create`), no assistant has this id or graph id, or a `checkpoint` names no checkpoint of the thread";
    LgRunConflict = "The thread is busy and `multitask_strategy` is `reject`; a `command` for a thread with no pending interrupt; a `checkpoint` inside an earlier turn (input goes after a turn's last checkpoint or from its first; without input only a turn's first checkpoint or one of the latest turn's is a place to run from); nothing was done";
    LgRunRefused = "An id that is not a UUID, a field of the wrong type, an unknown stream mode, input without a human message, a resume value that decides nothing pending, both `input` and a `command` (an empty `input` object is none), or a run with neither input, command nor an older checkpoint; nothing was done";
    LgRunNotFound = "No thread has this id, or the thread has no run with this id";
}

/// A LangGraph id in a path (thread, run, checkpoint): a UUID.
pub(crate) struct LgUuid;

impl utoipa::PartialSchema for LgUuid {
    fn schema() -> RefOr<utoipa::openapi::schema::Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::Custom("uuid".into())))
            .pattern(Some(chronicle_wire::langgraph::UUID_PATTERN))
            .into()
    }
}

impl ToSchema for LgUuid {}

/// 503 of a LangGraph route: the connection cap, with `Retry-After`.
pub(crate) struct LgBusy;

impl<'r> ToResponse<'r> for LgBusy {
    fn response() -> (&'r str, RefOr<Response>) {
        ("LgBusy", capped_of("Detail", &upper_first(BUSY)))
    }
}

const TOO_MANY_WRITES: &str = "The caller is over its quota of writes a second (`too_many_writes`, with `Retry-After`): nothing was done";

/// 429 of a state-changing route on a server with tokens.
pub(crate) struct TooManyWrites;

impl<'r> ToResponse<'r> for TooManyWrites {
    fn response() -> (&'r str, RefOr<Response>) {
        ("TooManyWrites", capped(TOO_MANY_WRITES))
    }
}

/// 429 of a state-changing LangGraph route on a server with tokens.
pub(crate) struct LgTooManyWrites;

impl<'r> ToResponse<'r> for LgTooManyWrites {
    fn response() -> (&'r str, RefOr<Response>) {
        ("LgTooManyWrites", capped_of("Detail", TOO_MANY_WRITES))
    }
}

/// A 503 that may carry `Retry-After` (a full cap is worth retrying).
fn capped(description: &str) -> RefOr<Response> {
    capped_of("ErrorBody", description)
}

/// [`capped`] with the body schema called `body`.
fn capped_of(body: &str, description: &str) -> RefOr<Response> {
    let retry_after = HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .description(Some(
            "With `too_many_connections`, `too_many_streams`, `too_many_tickets` or `too_many_writes`: seconds to wait before trying again",
        ))
        .build();
    error_of(body, description)
        .header("Retry-After", retry_after)
        .build()
        .into()
}

const BUSY: &str =
    "the server holds as many connections as it may (`too_many_connections`, with `Retry-After`)";
const STORE_UNAVAILABLE: &str = "the store cannot take the request (`storage_unavailable`: it stopped after a failed fsync, and the server exits so that a restart recovers), or the server is shutting down (`shutting_down`)";

macro_rules! capped_responses {
    ($($(#[$doc:meta])* $name:ident = $description:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<Response>) {
                (stringify!($name), capped(&$description))
            }
        }
    )*};
}

capped_responses! {
    /// 503 of a route that reads or writes the store.
    Unavailable = format!("{}; or {BUSY}", upper_first(STORE_UNAVAILABLE));
    /// 503 of a streaming route.
    StreamsUnavailable = format!(
        "The server streams as many streams as it may, in all or for this principal (`too_many_streams`, with `Retry-After`); {STORE_UNAVAILABLE}; or {BUSY}"
    );
    /// 503 of `POST /api/v1/stream-tickets`.
    TicketsUnavailable = format!(
        "As many tickets are outstanding as the server keeps (`too_many_tickets`, with `Retry-After`: tickets expire after a minute); or {BUSY}"
    );
    /// 503 of a route that touches nothing but the connection.
    Busy = upper_first(BUSY);
}

fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
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
