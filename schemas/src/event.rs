//! Every `Event` variant a log can hold. Names are the contract: add fields (with serde defaults)
//! or new variants, never remove or re-type one, so old logs keep decoding.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    ApprovalId, CheckpointId, Decision, Hash, Memory, PriorTurn, RunConfig, RunId, SessionId,
    Strategy, Subject, SupervisorTodo, TodoId, TodoStatus, ToolCallId,
};

/// The phase the supervisor is in (its `current_phase`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Initialization,
    Planning,
    Executing,
    Aggregation,
    ResponseGeneration,
    Finished,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initialization => "initialization",
            Phase::Planning => "planning",
            Phase::Executing => "executing",
            Phase::Aggregation => "aggregation",
            Phase::ResponseGeneration => "response_generation",
            Phase::Finished => "finished",
        }
    }
}

/// Where an intent, plan or evaluation came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Llm,
    #[default]
    Rules,
    /// Supplied with the run's request (a caller-provided plan).
    Request,
}

/// Who did something: the engine, an authenticated principal, an agent (a model's own TODO
/// list), or a model's evaluation. Shown as `engine` / `user:<id>` / `agent:<name>` / `llm`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Actor {
    #[default]
    Engine,
    User(String),
    /// An agent acting on the run's TODO list (`write_todos` in agent mode).
    Agent(String),
    /// A model's evaluation adjusting the plan.
    Llm,
}

impl Actor {
    pub fn user(id: impl Into<String>) -> Self {
        Actor::User(id.into())
    }
    pub fn agent(name: impl Into<String>) -> Self {
        Actor::Agent(name.into())
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Engine => f.write_str("engine"),
            Actor::User(u) => write!(f, "user:{u}"),
            Actor::Agent(a) => write!(f, "agent:{a}"),
            Actor::Llm => f.write_str("llm"),
        }
    }
}

impl From<Actor> for String {
    fn from(a: Actor) -> String {
        a.to_string()
    }
}

impl TryFrom<String> for Actor {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s == "engine" {
            Ok(Actor::Engine)
        } else if s == "llm" {
            Ok(Actor::Llm)
        } else if let Some(u) = s.strip_prefix("user:") {
            Ok(Actor::User(u.to_owned()))
        } else if let Some(a) = s.strip_prefix("agent:") {
            Ok(Actor::Agent(a.to_owned()))
        } else {
            Err(format!(
                "actor must be `engine`, `user:<id>`, `agent:<name>` or `llm`, got {s:?}"
            ))
        }
    }
}

/// The owner of a run whose `RunStarted` names none (logs written before runs had owners): the
/// principal of a server without tokens, which owns everything there.
pub const OWNER_OF_OLD_RUNS: &str = "local";

/// A sub-agent run's origin: the parent run and the `task` tool call that started it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParentLink {
    pub run_id: RunId,
    pub tool_call_id: ToolCallId,
}

/// A large payload stored beside the log in `<data>/blobs/<hash>` (events stay under 64 KiB).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobRef {
    pub hash: Hash,
    pub bytes: u64,
}

/// A value carried by an event, either inline or by reference to a fsynced blob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    Inline(Value),
    Blob(BlobRef),
}

impl Payload {
    pub fn inline(&self) -> Option<&Value> {
        match self {
            Payload::Inline(v) => Some(v),
            Payload::Blob(_) => None,
        }
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Inline(Value::Null)
    }
}

/// Where an agent's model call sits in its attempt. Model calls and tool calls share one
/// numbering (the order the agent makes them), so a re-execution of the attempt finds each
/// recorded answer at the same position.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelTurn {
    pub todo_id: TodoId,
    pub attempt: u32,
    pub index: u32,
    /// How many of a person's changes to the agent's TODO list the model has been told of,
    /// this call's notice included.
    #[serde(default)]
    pub plan_edits_seen: u32,
}

/// A file whose text went into a model's prompt: where it came from and its content's hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadedFile {
    pub source: String,
    pub hash: Hash,
}

/// Token counts a model server reports for one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// One step of an execution plan, before the plan → TODO converter makes it a TODO.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanStep {
    pub agent_name: String,
    pub team: String,
    pub task: String,
    pub description: String,
    /// 0 → high, 1 → medium, else low.
    pub priority: u32,
    /// Agent names this step depends on.
    pub dependencies: Vec<String>,
    pub input_mapping: Value,
    /// Seconds.
    pub timeout: u64,
    /// Becomes the TODO's `max_retries`.
    pub retry_count: u32,
    pub optional: bool,
}

/// The longest query a run may be started with, in characters (as sent, surrounding whitespace
/// included). At most 32 KiB of UTF-8, so `RunStarted` stays well under an event's 64 KiB.
pub const QUERY_CHARS_MAX: usize = 8 * 1024;

/// Everything that can happen to a run. Externally tagged in msgpack: `{"TodoAdded": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    RunStarted {
        session_id: SessionId,
        #[serde(default)]
        user_id: Option<String>,
        request_id: String,
        query: String,
        #[serde(default)]
        config: RunConfig,
        #[serde(default)]
        parent: Option<ParentLink>,
        /// The principal the run (and its session) belongs to. Logs written before runs had
        /// owners have none: such runs belong to `local`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        /// The W3C `traceparent` of the caller's trace the run is part of (`00-<trace id>-<span
        /// id>-<flags>`), when the request that started it carried one; a sub-agent run names
        /// its parent's `task` call. Its trace's spans are derived from it and the run id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<String>,
    },
    PhaseChanged {
        phase: Phase,
    },
    IntentAnalyzed {
        intent_type: String,
        confidence: f64,
        #[serde(default)]
        keywords: Vec<String>,
        #[serde(default)]
        entities: Value,
        source: Source,
    },
    PlanCreated {
        strategy: Strategy,
        steps: Vec<PlanStep>,
        #[serde(default)]
        parallel_groups: Vec<Vec<String>>,
        estimated_total_time: f64,
        #[serde(default)]
        available_agents: Vec<String>,
        #[serde(default)]
        available_teams: Vec<String>,
        #[serde(default)]
        source: Source,
    },
    TodoAdded {
        todo: SupervisorTodo,
        added_by: Actor,
    },
    TodoStatusChanged {
        todo_id: TodoId,
        from: TodoStatus,
        to: TodoStatus,
        #[serde(default)]
        reason: Option<String>,
        attempt: u32,
        by: Actor,
    },
    ApprovalRequested {
        approval_id: ApprovalId,
        subject: Subject,
        tool_name: String,
        #[serde(default)]
        args: Value,
        #[serde(default)]
        preview: Value,
        policy: String,
        message: String,
        /// Set when the request carries an expiry (`approval_timeout`).
        #[serde(default)]
        expires_at: Option<crate::Timestamp>,
        /// A request asked again after a restore names the id it replaces (which is cancelled).
        #[serde(default)]
        supersedes: Option<ApprovalId>,
    },
    ApprovalDecided {
        approval_id: ApprovalId,
        decision: Decision,
        #[serde(default)]
        edited_args: Option<Value>,
        decided_by: String,
        #[serde(default)]
        comment: Option<String>,
    },
    ApprovalExpired {
        approval_id: ApprovalId,
        on_expiry: Decision,
    },
    AgentStarted {
        todo_id: TodoId,
        agent: String,
        attempt: u32,
        #[serde(default)]
        input: Value,
    },
    AgentCompleted {
        todo_id: TodoId,
        agent: String,
        attempt: u32,
        result: Payload,
        duration_ms: u64,
    },
    AgentFailed {
        todo_id: TodoId,
        agent: String,
        attempt: u32,
        error: String,
        retryable: bool,
    },
    ToolCallRequested {
        tool_call_id: ToolCallId,
        todo_id: TodoId,
        tool: String,
        #[serde(default)]
        args: Value,
        attempt: u32,
        /// Position of the call inside the attempt (durable re-execution matches on it).
        #[serde(default)]
        index: u32,
        /// Where the tool runs when it is not the engine's own: the MCP server's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    ToolCallCompleted {
        tool_call_id: ToolCallId,
        #[serde(default)]
        output: Option<Payload>,
        #[serde(default)]
        error: Option<String>,
        duration_ms: u64,
    },
    /// A model call. A planner's: `response` is the answer's text. An agent's (a turn of its
    /// tool-calling loop, `turn` set): `prompt_hash` is the hash of the whole request
    /// (conversation, tools, model), and `response` the whole answer — `{content, reasoning,
    /// tool_calls: [{id, name, arguments}], finish_reason}` — inline or in a blob.
    LlmCalled {
        purpose: String,
        model: String,
        prompt_hash: Hash,
        response: Payload,
        duration_ms: u64,
        #[serde(default)]
        error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<ModelTurn>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<TokenUsage>,
        /// What the host added to the conversation before the call (a person's changes to the
        /// agent's TODO list), so a re-execution adds the same.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notice: Option<String>,
        /// The memory files and skills the host put into the system prompt, by hash (their
        /// text is in the workspace or the server's directories, not in the log).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        loaded: Vec<LoadedFile>,
    },
    EvaluationRecorded {
        quality_score: f64,
        completeness: f64,
        needs_retry: bool,
        #[serde(default)]
        retry_agents: Vec<String>,
        #[serde(default)]
        feedback: String,
        source: Source,
        /// Agents the evaluation adds to the plan (a model judging that more is needed, such as
        /// another search); each becomes a TODO added by `llm`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        add_agents: Vec<String>,
    },
    ResultsAggregated {
        aggregated: Value,
    },
    ResponseGenerated {
        final_response: Value,
    },
    CheckpointSaved {
        checkpoint_id: CheckpointId,
        node: String,
        todos_completed: u32,
    },
    CommandReceived {
        command: String,
        by: Actor,
        #[serde(default)]
        accepted: bool,
        /// The plain words a person typed, when `command` is what they were interpreted as
        /// ("분석도 추가해줘" → `/todo add analysis_team`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        said: Option<String>,
    },
    RunInterrupted {
        reason: String,
        #[serde(default)]
        approval_id: Option<ApprovalId>,
    },
    RunResumed {
        by: Actor,
    },
    RunRestored {
        checkpoint_id: CheckpointId,
        to_seq: u64,
        by: Actor,
    },
    Reasoning {
        message: String,
    },
    RunCompleted {
        total_execution_time_ms: u64,
    },
    RunFailed {
        error: String,
    },
    RunCancelled {
        by: Actor,
        #[serde(default)]
        reason: Option<String>,
    },
    /// The session's earlier turns this turn was given (newest kept within the run's context
    /// budget), with how many older ones the budget left out.
    SessionContextLoaded {
        turns: Vec<PriorTurn>,
        #[serde(default)]
        omitted: u32,
    },
    /// The user's long-term memory as this turn loaded it (deleted items are not loaded).
    MemoryLoaded {
        user_id: String,
        memories: Vec<Memory>,
    },
    /// An item the turn saved to its user's long-term memory.
    MemorySaved {
        memory: Memory,
    },
    /// An item of long-term memory (saved by this run) is deleted: later turns no longer load it.
    MemoryDeleted {
        memory_id: String,
        by: Actor,
    },
    /// The session this run belongs to is deleted: it disappears from every read. Its events stay
    /// in the log (the chain and the audit trail are kept).
    SessionDeleted {
        by: Actor,
    },
    /// A person sets values on the run's state (the LangGraph `update_state`), followed in the
    /// same append by the `CheckpointSaved` it makes. Key by key: a later update replaces a key,
    /// JSON `null` removes it. Nothing in the workflow reads them; they are shown with the state.
    /// Allowed on a run that waits for a human or has ended (also after its terminal event).
    ValuesUpdated {
        values: serde_json::Map<String, Value>,
        /// The node the update is recorded as (LangGraph's `as_node`); its checkpoint's node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        as_node: Option<String>,
        by: Actor,
    },
}

impl Event {
    /// The variant's name, as stored (`TodoAdded`).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "RunStarted",
            Event::PhaseChanged { .. } => "PhaseChanged",
            Event::IntentAnalyzed { .. } => "IntentAnalyzed",
            Event::PlanCreated { .. } => "PlanCreated",
            Event::TodoAdded { .. } => "TodoAdded",
            Event::TodoStatusChanged { .. } => "TodoStatusChanged",
            Event::ApprovalRequested { .. } => "ApprovalRequested",
            Event::ApprovalDecided { .. } => "ApprovalDecided",
            Event::ApprovalExpired { .. } => "ApprovalExpired",
            Event::AgentStarted { .. } => "AgentStarted",
            Event::AgentCompleted { .. } => "AgentCompleted",
            Event::AgentFailed { .. } => "AgentFailed",
            Event::ToolCallRequested { .. } => "ToolCallRequested",
            Event::ToolCallCompleted { .. } => "ToolCallCompleted",
            Event::LlmCalled { .. } => "LlmCalled",
            Event::EvaluationRecorded { .. } => "EvaluationRecorded",
            Event::ResultsAggregated { .. } => "ResultsAggregated",
            Event::ResponseGenerated { .. } => "ResponseGenerated",
            Event::CheckpointSaved { .. } => "CheckpointSaved",
            Event::CommandReceived { .. } => "CommandReceived",
            Event::RunInterrupted { .. } => "RunInterrupted",
            Event::RunResumed { .. } => "RunResumed",
            Event::RunRestored { .. } => "RunRestored",
            Event::Reasoning { .. } => "Reasoning",
            Event::RunCompleted { .. } => "RunCompleted",
            Event::RunFailed { .. } => "RunFailed",
            Event::RunCancelled { .. } => "RunCancelled",
            Event::SessionContextLoaded { .. } => "SessionContextLoaded",
            Event::MemoryLoaded { .. } => "MemoryLoaded",
            Event::MemorySaved { .. } => "MemorySaved",
            Event::MemoryDeleted { .. } => "MemoryDeleted",
            Event::SessionDeleted { .. } => "SessionDeleted",
            Event::ValuesUpdated { .. } => "ValuesUpdated",
        }
    }

    /// Completed, failed or cancelled: nothing follows unless the run is restored.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Event::RunCompleted { .. } | Event::RunFailed { .. } | Event::RunCancelled { .. }
        )
    }
}
