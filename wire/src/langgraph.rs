//! The JSON of the LangGraph Agent Server API subset Chronicle serves at the root, so that
//! `langgraph-sdk` and agent-chat-ui work unchanged: threads (Chronicle sessions), runs (one
//! turn each), checkpoints, interrupts (pending approvals), assistants and LangChain messages.
//!
//! Field names are LangGraph's, not Chronicle's; only the shapes live here (the views of
//! Chronicle state are built in the API crate).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a thread state sits: LangGraph names a checkpoint by thread, namespace (always `""`:
/// Chronicle has no subgraphs) and id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgCheckpoint))]
pub struct Checkpoint {
    pub checkpoint_id: String,
    pub thread_id: String,
    #[serde(default)]
    pub checkpoint_ns: String,
}

/// One pending interrupt: `id` is 32 lowercase hex digits, `value` what the client shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgInterrupt))]
pub struct Interrupt {
    pub id: String,
    pub value: Value,
}

/// A task of a thread state: the node that runs next, with its interrupts when it waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgTask))]
pub struct Task {
    pub id: String,
    pub name: String,
    pub path: Vec<Value>,
    pub error: Option<String>,
    pub interrupts: Vec<Interrupt>,
    pub checkpoint: Option<Checkpoint>,
    pub state: Option<Value>,
    pub result: Option<Value>,
}

/// A checkpoint's metadata. `source`: `input` (a turn's first checkpoint, shown as the thread
/// before its question), `loop` (a later one), `fork` (the first shown after a restore),
/// `update` (written by a state update).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgCheckpointMetadata))]
pub struct CheckpointMetadata {
    pub source: String,
    pub step: i64,
    pub parents: Map<String, Value>,
    pub run_id: String,
    pub graph_id: String,
    pub assistant_id: String,
    pub thread_id: String,
}

/// A thread at one checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgThreadState))]
pub struct ThreadState {
    pub values: Value,
    pub next: Vec<String>,
    pub tasks: Vec<Task>,
    pub metadata: CheckpointMetadata,
    pub created_at: String,
    pub checkpoint: Checkpoint,
    pub parent_checkpoint: Option<Checkpoint>,
    pub interrupts: Vec<Interrupt>,
}

/// A thread: a Chronicle session. `interrupts` maps a task id to its pending interrupts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgThread))]
pub struct Thread {
    pub thread_id: String,
    pub created_at: String,
    pub updated_at: String,
    pub state_updated_at: String,
    pub metadata: Map<String, Value>,
    pub status: String,
    pub config: Map<String, Value>,
    pub values: Value,
    pub error: Option<Value>,
    pub interrupts: BTreeMap<String, Vec<Interrupt>>,
}

/// A run: one Chronicle turn. `status`: pending | running | success | error | timeout |
/// interrupted (a run that pauses at an interrupt has ended `success`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgRun))]
pub struct Run {
    pub run_id: String,
    pub thread_id: String,
    pub assistant_id: String,
    pub created_at: String,
    pub updated_at: String,
    pub status: String,
    pub metadata: Map<String, Value>,
    pub kwargs: Map<String, Value>,
    pub multitask_strategy: String,
}

/// A tool call inside an `ai` message; `type` is always `tool_call`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgToolCall))]
pub struct ToolCall {
    pub name: String,
    pub args: Value,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// A LangChain message dict: `type` human | ai | tool | system. `tool_calls` only on `ai`,
/// `tool_call_id` and `status` only on `tool` messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = LgMessage))]
pub struct Message {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub content: Value,
    #[serde(default)]
    pub additional_kwargs: Map<String, Value>,
    #[serde(default)]
    pub response_metadata: Map<String, Value>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl Message {
    /// A message of `kind` with the common fields empty.
    pub fn new(kind: &str, id: String, content: Value) -> Self {
        Message {
            kind: kind.to_owned(),
            id,
            content,
            additional_kwargs: Map::new(),
            response_metadata: Map::new(),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            status: None,
        }
    }
}

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

/// What a LangGraph id in a path or a body is (the hyphenated form).
pub const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// `POST /threads`: a new thread (a Chronicle session with no turn yet).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ThreadCreate {
    /// The thread's id, a UUID (a new one when absent).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = "uuid",
            pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        )
    )]
    pub thread_id: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    /// What an existing `thread_id` does: `raise` (409, the default) or `do_nothing` (the
    /// existing thread is returned).
    #[serde(default)]
    pub if_exists: Option<IfExists>,
}

/// What creating a thread whose id exists does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IfExists {
    Raise,
    DoNothing,
}

/// The most threads, runs or history entries one page returns.
pub const PAGE_MAX: u64 = 1000;

/// The most JSON values (each object, array and scalar counts one) a containment filter
/// (`metadata`, `values`) may hold: a thread is matched against each of them, so a filter's
/// cost is bounded by its size times the thread's, far below what a request body could carry.
pub const FILTER_VALUES_MAX: usize = 256;

/// How deep a containment filter may nest (the filter object itself is depth 1).
pub const FILTER_DEPTH_MAX: usize = 8;

/// The most bytes of keys and strings a containment filter may hold.
pub const FILTER_BYTES_MAX: usize = 16 * 1024;

/// The most bytes of JSON one history answer holds: it stops before the state that would take
/// it past this (it always holds one, however large), and the client pages on with `before`.
/// A history request builds its states one at a time, so it holds at most this plus one state.
pub const HISTORY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// `POST /threads/search`: filters (all must hold) and a page, newest `updated_at` first unless
/// `sort_by` / `sort_order` say otherwise.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ThreadSearch {
    /// Threads whose metadata contains this JSON.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    /// Threads whose values contain this JSON.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub values: Option<Map<String, Value>>,
    /// Threads with one of these ids.
    #[serde(default)]
    pub ids: Option<Vec<String>>,
    #[serde(default)]
    pub status: Option<ThreadStatus>,
    #[serde(default, deserialize_with = "crate::requests::integral::option_u64")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub limit: Option<u64>,
    #[serde(default, deserialize_with = "crate::requests::integral::option_u64")]
    pub offset: Option<u64>,
    #[serde(default)]
    pub sort_by: Option<ThreadSort>,
    #[serde(default)]
    pub sort_order: Option<SortOrder>,
}

/// A thread's status: `busy` while a run works, `interrupted` while one waits for a human,
/// `error` when the last one failed, else `idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    Idle,
    Busy,
    Interrupted,
    Error,
}

impl ThreadStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Busy => "busy",
            ThreadStatus::Interrupted => "interrupted",
            ThreadStatus::Error => "error",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ThreadSort {
    ThreadId,
    Status,
    CreatedAt,
    UpdatedAt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    Asc,
    Desc,
}

/// `POST /threads/{thread_id}/history`: one page of the thread's checkpoints a client is shown,
/// newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryRequest {
    /// The page's size (10 when absent).
    #[serde(default, deserialize_with = "crate::requests::integral::option_u64")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub limit: Option<u64>,
    /// Only checkpoints older than this one: its id, a checkpoint object, or
    /// `{"configurable": {"checkpoint_id"}}` (anything that names no id sets no bound).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub before: Option<Value>,
    /// Only checkpoints whose metadata contains this JSON.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    /// Accepted for compatibility: the thread has one namespace.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub checkpoint: Option<Value>,
}

/// `POST /threads/{thread_id}/state/checkpoint`: the state at a checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateAtRequest {
    pub checkpoint: CheckpointRef,
}

/// A checkpoint named in a request: its id (the thread and namespace are the path's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckpointRef {
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = "uuid",
            pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        )
    )]
    pub checkpoint_id: String,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub checkpoint_ns: Option<String>,
}

/// `POST /threads/{thread_id}/state`: values set on the thread's latest turn, recorded as an
/// event by the caller with a new checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateUpdate {
    /// The values: keys that are not the workflow's own (those change through commands); a
    /// `null` removes a key set before.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub values: Map<String, Value>,
    /// The node the update is written as (`update` when absent).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = "^(initialize|analyze_intent|build_plan|execute_todo|evaluate|aggregate|generate_response)$"
        )
    )]
    pub as_node: Option<String>,
    /// Accepted when it names the thread's head (updates go to the latest state); anything
    /// that names no checkpoint id is no check.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub checkpoint: Option<Value>,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = "uuid",
            pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        )
    )]
    pub checkpoint_id: Option<String>,
}

/// The answer to a state update: the checkpoint it made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateUpdated {
    pub checkpoint: Checkpoint,
}

/// What a run asks of a thread that is busy: `reject` (409), `enqueue` (wait for the current
/// run to settle, the default), `interrupt` or `rollback` (cancel it first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MultitaskStrategy {
    Reject,
    #[default]
    Enqueue,
    Interrupt,
    Rollback,
}

impl MultitaskStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            MultitaskStrategy::Reject => "reject",
            MultitaskStrategy::Enqueue => "enqueue",
            MultitaskStrategy::Interrupt => "interrupt",
            MultitaskStrategy::Rollback => "rollback",
        }
    }
}

/// What a run on an unknown thread does: `reject` (404, the default) or `create` it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IfNotExists {
    Reject,
    Create,
}

/// A stream mode a run may be watched in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum StreamMode {
    Values,
    Updates,
    Messages,
    MessagesTuple,
    Custom,
    Debug,
    Tasks,
    Checkpoints,
    Events,
}

/// `stream_mode`: one mode or a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum StreamModes {
    One(StreamMode),
    Many(Vec<StreamMode>),
}

impl StreamModes {
    pub fn list(&self) -> Vec<StreamMode> {
        match self {
            StreamModes::One(m) => vec![*m],
            StreamModes::Many(ms) => ms.clone(),
        }
    }
}

/// `command`: what a run does to a thread that waits (instead of, or besides, new input).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCommand {
    /// Decides the pending interrupts: `"approve"`, `"reject"`, `{decisions: [...]}`, or
    /// `{<interrupt id>: <one of those>}` for each.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub resume: Option<Value>,
    /// Values to set first (as `POST /threads/{thread_id}/state` does).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub update: Option<Value>,
    /// `"__end__"` ends the waiting turn.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub goto: Option<Value>,
}

/// A run: `POST /threads/{thread_id}/runs[/stream|/wait]` and `POST /runs[/stream|/wait]`.
/// Fields LangGraph clients send that change nothing here (`after_seconds`, `webhook`,
/// `feedback_keys`, `durability`, `interrupt_before`...) are accepted and ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCreate {
    /// The assistant: its UUID or its graph id.
    pub assistant_id: String,
    /// `{messages: [...]}` (the last human message is the query) or `{query}`; an empty object
    /// is no input (what a client sends beside a `command`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub input: Option<Value>,
    #[serde(default)]
    pub command: Option<RunCommand>,
    /// `configurable` may set the run's `hitl`, `user_id`, `on_reject`, `strategy` and
    /// `approval_timeout_ms`; so may `context`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub config: Option<Map<String, Value>>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub context: Option<Map<String, Value>>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub stream_mode: Option<StreamModes>,
    #[serde(default)]
    pub stream_subgraphs: Option<bool>,
    /// Events carry `id:` (the run's seq) so a client can rejoin with `Last-Event-ID`.
    #[serde(default)]
    pub stream_resumable: Option<bool>,
    /// `cancel` or `continue` (the run goes on when the client leaves: the default here).
    #[serde(default)]
    pub on_disconnect: Option<String>,
    /// Run from this checkpoint. With input: the thread's head or a turn's last checkpoint (a
    /// new turn after that turn), or a turn's first (a new turn in place of its question: the
    /// conversation branches). Without input: one of the latest turn's (it goes back there and
    /// on), or an earlier turn's first (its question asked again, on a branch).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub checkpoint: Option<Value>,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = "uuid",
            pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        )
    )]
    pub checkpoint_id: Option<String>,
    #[serde(default)]
    pub multitask_strategy: Option<MultitaskStrategy>,
    #[serde(default)]
    pub if_not_exists: Option<IfNotExists>,
    /// For `POST /runs...`: the thread (a new one when absent).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = "uuid",
            pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        )
    )]
    pub thread_id: Option<String>,
}

/// `POST /runs/cancel`: cancel every pending or running run that matches: these runs of a
/// thread, every run of a thread, or (with `status`) every run of the caller's threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunsCancel {
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = "uuid",
            pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        )
    )]
    pub thread_id: Option<String>,
    /// Only these runs of `thread_id`.
    #[serde(default)]
    pub run_ids: Option<Vec<String>>,
    /// `pending`, `running` or `all` (both).
    #[serde(default)]
    pub status: Option<CancelStatus>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CancelStatus {
    Pending,
    Running,
    All,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_message_has_langchains_field_names_and_no_tool_calls() {
        let mut m = Message::new("tool", "m1".into(), json!("done"));
        m.tool_call_id = Some("c1".into());
        m.status = Some("success".into());
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"type": "tool", "id": "m1", "content": "done", "additional_kwargs": {},
                   "response_metadata": {}, "name": null, "tool_call_id": "c1", "status": "success"})
        );
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
    }

    #[test]
    fn an_ai_tool_call_is_typed_tool_call() {
        let mut m = Message::new("ai", "m2".into(), json!(""));
        m.tool_calls = Some(vec![ToolCall {
            name: "search_team".into(),
            args: json!({"q": 1}),
            id: "c1".into(),
            kind: "tool_call".into(),
        }]);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["tool_calls"],
            json!([{"name": "search_team", "args": {"q": 1}, "id": "c1", "type": "tool_call"}])
        );
        assert!(v.get("tool_call_id").is_none());
    }

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
