//! The state types the projections fold into, with the field names of the LangGraph supervisor
//! Chronicle re-builds: its `MainSupervisorState` (here `SupervisorState`), `PlanningState`,
//! `ExecutionStepState`, the team states, and `SupervisorTodo` with its statuses, priorities and
//! the one table of legal transitions.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Actor, ApprovalId, CheckpointId, Hash, ParentLink, Payload, Phase, RunConfig, SessionId,
    Source, Timestamp, TodoId, TokenUsage, ToolCallId,
};

/// The metadata key of a TODO an agent planned (`write_todos` in agent mode): the id of the TODO
/// whose agent planned it. Such a TODO is the agent's plan, shown and edited like any other, but
/// the engine neither starts it nor waits for it.
pub const PLANNED_BY: &str = "planned_by";

/// A TODO's status; `TodoStatus::can_transition_to` is the one table of legal transitions.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    #[default]
    Pending,
    InProgress,
    Completed,
    Failed,
    Skipped,
    Blocked,
    WaitingApproval,
}

impl TodoStatus {
    pub const ALL: [TodoStatus; 7] = [
        TodoStatus::Pending,
        TodoStatus::InProgress,
        TodoStatus::Completed,
        TodoStatus::Failed,
        TodoStatus::Skipped,
        TodoStatus::Blocked,
        TodoStatus::WaitingApproval,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
            TodoStatus::Failed => "failed",
            TodoStatus::Skipped => "skipped",
            TodoStatus::Blocked => "blocked",
            TodoStatus::WaitingApproval => "waiting_approval",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The one table of legal TODO transitions. Everything else is refused by the
    /// engine with an error naming both states.
    ///
    /// - `completed` and `skipped` are final: a skipped (or rejected) TODO is never retried.
    /// - `failed → pending` is a retry; `failed → skipped` drops an optional TODO.
    /// - `in_progress → in_progress` is not listed: a re-run after a crash is a new attempt
    ///   recorded by `AgentStarted`, not a transition.
    pub fn can_transition_to(self, to: TodoStatus) -> bool {
        use TodoStatus::*;
        matches!(
            (self, to),
            (
                Pending,
                InProgress | WaitingApproval | Skipped | Blocked | Completed | Failed
            ) | (WaitingApproval, InProgress | Pending | Skipped | Blocked)
                | (InProgress, Completed | Failed | Skipped | Pending)
                | (Failed, Pending | Skipped | Blocked)
                | (Blocked, Pending | Skipped)
        )
    }

    /// No further transition is possible.
    pub fn is_final(self) -> bool {
        matches!(self, TodoStatus::Completed | TodoStatus::Skipped)
    }
}

impl fmt::Display for TodoStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A TODO's priority.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TodoPriority {
    Critical,
    High,
    #[default]
    Medium,
    Low,
}

impl TodoPriority {
    /// The plan → TODO converter's priorities: 0 → high, 1 → medium, else low.
    pub fn from_plan_priority(p: u32) -> Self {
        match p {
            0 => TodoPriority::High,
            1 => TodoPriority::Medium,
            _ => TodoPriority::Low,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            TodoPriority::Critical => "critical",
            TodoPriority::High => "high",
            TodoPriority::Medium => "medium",
            TodoPriority::Low => "low",
        }
    }
}

/// One TODO of a run's plan: the agent that carries it out, its status and timing, its
/// retries and its latest approval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct SupervisorTodo {
    pub id: TodoId,
    pub name: String,
    pub description: String,
    pub agent_name: String,
    pub agent_purpose: String,
    /// The team and the HITL category the agent declared when the TODO was added (empty in
    /// logs written before agents declared them).
    pub team: String,
    pub category: String,
    pub expected_output: String,
    pub status: TodoStatus,
    pub priority: TodoPriority,
    pub dependencies: Vec<TodoId>,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    /// Seconds between `started_at` and `completed_at`.
    pub duration: Option<f64>,
    /// `timeout`, `optional`, `input_mapping`, `original_priority` (from a plan) or
    /// `added_by`, `manual` (from `/todo add`).
    pub metadata: BTreeMap<String, Value>,
    pub error: Option<String>,
    pub retry_count: u32,
    pub max_retries: u32,
    /// The input the agent runs with: the plan's, or a human's edited args.
    pub effective_input: Option<Value>,
    /// Agent attempts started so far (retries and re-runs after a crash both count).
    pub attempts: u32,
    /// The TODO's latest approval on the effective history, and its status there (a restore
    /// brings back the status as it was at the restored point).
    pub approval_id: Option<ApprovalId>,
    pub approval_status: Option<crate::ApprovalStatus>,
}

impl SupervisorTodo {
    /// The input its agent runs with: the edited args of an `edit` approval, else the plan's
    /// input mapping, else `{}`.
    pub fn input(&self) -> Value {
        self.effective_input
            .clone()
            .or_else(|| self.metadata.get("input_mapping").cloned())
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    }

    /// A TODO may start once every dependency is completed.
    pub fn can_start(&self, mut is_completed: impl FnMut(&TodoId) -> bool) -> bool {
        self.dependencies.iter().all(&mut is_completed)
    }
    pub fn is_optional(&self) -> bool {
        self.metadata
            .get("optional")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
    /// The TODO whose agent planned this one (see [`PLANNED_BY`]); `None` for the supervisor's
    /// own TODOs.
    pub fn planned_by(&self) -> Option<&str> {
        self.metadata.get(PLANNED_BY).and_then(Value::as_str)
    }
}

/// The TODO as a progress UI sees it: one step of the plan, with its progress and result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecutionStepState {
    pub step_id: String,
    pub step_type: String,
    pub agent_name: String,
    pub team: String,
    pub task: String,
    pub description: String,
    /// `pending | in_progress | completed | failed | skipped` (a `blocked` TODO shows as
    /// `skipped`, a `waiting_approval` one as `pending`).
    pub status: String,
    pub progress_percentage: u8,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    /// The agent's result; a snapshot keeps it as bytes until it is read.
    pub result: Option<crate::LazyValue>,
    pub error: Option<String>,
    /// The TODO this step mirrors.
    pub todo_id: TodoId,
    pub priority: TodoPriority,
    pub dependencies: Vec<TodoId>,
}

/// What planning decided: the analysed intent, the agents it could use, the TODOs and their
/// progress, and the strategy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanningState {
    pub raw_query: String,
    pub analyzed_intent: Value,
    pub intent_confidence: f64,
    pub intent_source: Option<Source>,
    pub available_agents: Vec<String>,
    pub available_teams: Vec<String>,
    pub todos: Vec<SupervisorTodo>,
    pub completed_todo_ids: Vec<TodoId>,
    pub failed_todo_ids: Vec<TodoId>,
    pub skipped_todo_ids: Vec<TodoId>,
    pub current_todo_id: Option<TodoId>,
    pub execution_steps: Vec<ExecutionStepState>,
    pub execution_strategy: String,
    pub parallel_groups: Option<Vec<Vec<String>>>,
    pub plan_validated: bool,
    pub validation_errors: Vec<String>,
    pub estimated_total_time: f64,
}

impl PlanningState {
    pub fn todo(&self, id: &TodoId) -> Option<&SupervisorTodo> {
        self.todos.iter().find(|t| &t.id == id)
    }
    pub fn todo_mut(&mut self, id: &TodoId) -> Option<&mut SupervisorTodo> {
        self.todos.iter_mut().find(|t| &t.id == id)
    }
}

/// One team's progress in the run, for every team an agent declares (the search, analysis and
/// document teams also fill their detailed states).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TeamState {
    pub team_name: String,
    /// `in_progress | completed | failed`, of the team's latest agent run.
    pub status: String,
    /// The team's agents that ran, in the order they first started.
    pub agents: Vec<String>,
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    pub error: Option<String>,
}

/// The search team's state (the parts a result carries; all optional on input).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchTeamState {
    pub team_name: String,
    pub status: String,
    pub shared_context: Value,
    pub keywords: Option<Value>,
    pub search_scope: Vec<String>,
    pub filters: Value,
    pub legal_results: Vec<Value>,
    pub real_estate_results: Vec<Value>,
    pub property_search_results: Vec<Value>,
    pub loan_results: Vec<Value>,
    pub aggregated_results: Value,
    pub total_results: u64,
    pub search_time: f64,
    pub sources_used: Vec<String>,
    pub search_progress: BTreeMap<String, String>,
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    pub error: Option<String>,
    pub current_search: Option<String>,
    pub execution_strategy: Option<String>,
}

/// The analysis team's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnalysisTeamState {
    pub team_name: String,
    pub status: String,
    pub shared_context: Value,
    pub analysis_type: String,
    pub input_data: Value,
    pub raw_analysis: Value,
    pub metrics: BTreeMap<String, f64>,
    pub insights: Vec<String>,
    pub report: Value,
    pub visualization_data: Option<Value>,
    pub recommendations: Vec<String>,
    pub confidence_score: f64,
    pub analysis_progress: BTreeMap<String, String>,
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    pub analysis_time: Option<f64>,
    pub error: Option<String>,
}

/// The document team's state: the document being generated and its review.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DocumentTeamState {
    pub team_name: String,
    pub status: String,
    pub shared_context: Value,
    pub document_type: String,
    pub template: Option<Value>,
    pub document_content: Option<Value>,
    pub generation_progress: BTreeMap<String, String>,
    pub review_needed: bool,
    pub review_result: Option<Value>,
    pub final_document: Option<String>,
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    pub generation_time: Option<f64>,
    pub review_time: Option<f64>,
    pub error: Option<String>,
}

/// The evaluation of a round's results: their quality, and whether to retry or add agents.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Evaluation {
    pub quality_score: f64,
    pub completeness: f64,
    pub needs_retry: bool,
    pub retry_agents: Vec<String>,
    pub feedback: String,
    pub source: Source,
    /// Agents the evaluation adds to the plan.
    pub add_agents: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    #[default]
    Requested,
    Completed,
    Failed,
}

/// One tool call as the run sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCallState {
    pub tool_call_id: ToolCallId,
    pub todo_id: TodoId,
    pub tool: String,
    pub args: Value,
    pub attempt: u32,
    pub index: u32,
    pub status: ToolCallStatus,
    pub output: Option<Payload>,
    pub error: Option<String>,
    pub duration_ms: Option<u64>,
    /// Set when the call was gated: its latest approval on the effective history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<crate::ApprovalId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_status: Option<crate::ApprovalStatus>,
    /// What the call runs with once a human approved it (`edit`: the edited args).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_args: Option<Value>,
}

/// One model call of an agent (a turn of its tool-calling loop), as recorded in `LlmCalled`: what
/// a re-execution of the attempt is answered with at the same position.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelTurnState {
    pub todo_id: TodoId,
    pub attempt: u32,
    pub index: u32,
    /// The hash of the request as the agent made it.
    pub prompt_hash: Hash,
    pub model: String,
    /// The whole answer (`{content, reasoning, tool_calls, finish_reason}`).
    pub response: Payload,
    pub error: Option<String>,
    pub notice: Option<String>,
    pub usage: Option<TokenUsage>,
    pub duration_ms: u64,
}

/// A person's change to a TODO an agent planned, which the agent is told of on its next turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanEdit {
    pub todo_id: TodoId,
    pub from: TodoStatus,
    pub to: TodoStatus,
    pub by: Actor,
    pub reason: Option<String>,
}

/// Where an agent's latest start of an attempt began numbering its calls: positions before
/// `first_index` were recorded by an earlier start of the same attempt (before a crash or a
/// restore). A tool call the model asked for in such a turn and that has no record was never
/// made: the host answers it as cancelled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentStart {
    pub todo_id: TodoId,
    pub attempt: u32,
    pub first_index: u32,
    /// The input the agent started with (what people chose for the steps before it included),
    /// which can differ from the plan's.
    pub input: Value,
}

/// The run's lifecycle as the API reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    #[default]
    Running,
    WaitingForApproval,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Running,
        RunStatus::WaitingForApproval,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::WaitingForApproval => "waiting_for_approval",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// The whole run as the supervisor sees it: every field of the LangGraph supervisor's
/// `MainSupervisorState`, plus the human-in-the-loop fields (`approval_status`,
/// `approval_message`, `pending_approval_ids`, `restored_from`) and the engine's bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SupervisorState {
    // Core.
    pub query: String,
    pub session_id: SessionId,
    pub request_id: String,
    pub user_id: Option<String>,
    /// The principal the run belongs to ([`crate::OWNER_OF_OLD_RUNS`] for runs logged before
    /// runs had owners).
    pub owner: String,
    /// The caller's W3C `traceparent` the run started under, when there was one: the run's
    /// trace continues the caller's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    // Planning.
    pub planning_state: Option<PlanningState>,
    pub execution_plan: Option<Value>,
    // Team states.
    pub search_team_state: Option<SearchTeamState>,
    pub document_team_state: Option<DocumentTeamState>,
    pub analysis_team_state: Option<AnalysisTeamState>,
    /// Every team that worked in the run, keyed by the team its agents declare.
    pub teams: BTreeMap<String, TeamState>,
    // Execution tracking.
    pub current_phase: Phase,
    pub active_teams: Vec<String>,
    pub completed_teams: Vec<String>,
    pub failed_teams: Vec<String>,
    // Results.
    pub team_results: BTreeMap<String, Value>,
    pub aggregated_results: BTreeMap<String, Value>,
    pub final_response: Option<Value>,
    // Timing.
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    /// Seconds.
    pub total_execution_time: Option<f64>,
    // Long-term memory: what the turn loaded (`MemoryLoaded`), preferences by key, and when.
    pub loaded_memories: Option<Vec<Value>>,
    pub user_preferences: Option<Value>,
    pub memory_load_time: Option<String>,
    /// The session's earlier turns the run was given (`SessionContextLoaded`), oldest first.
    pub session_context: Vec<crate::PriorTurn>,
    /// Items the run saved to its user's long-term memory, minus those deleted since.
    pub saved_memories: Vec<crate::Memory>,
    /// The session was deleted (`SessionDeleted`): reads no longer show it.
    pub session_deleted: bool,
    // Errors.
    pub error_log: Vec<String>,
    /// `initialized | processing | completed | error | cancelled`.
    pub status: String,
    // Human in the loop: the pending approvals, and the checkpoint a restore went back to.
    /// `waiting | approved | rejected | edited | expired | completed`.
    pub approval_status: Option<String>,
    pub approval_message: Option<String>,
    pub pending_approval_ids: Vec<ApprovalId>,
    pub restored_from: Option<CheckpointId>,
    // Engine bookkeeping.
    pub run_status: RunStatus,
    pub config: RunConfig,
    pub parent: Option<ParentLink>,
    pub evaluation: Option<Evaluation>,
    /// `EvaluationRecorded` events on the effective history.
    pub evaluation_rounds: u32,
    pub tool_calls: Vec<ToolCallState>,
    /// Agents' model calls (their tool-calling loops' turns), in the order recorded.
    pub model_turns: Vec<ModelTurnState>,
    /// A person's changes to TODOs an agent planned, oldest first, and how many of them the
    /// planning agent has been told of.
    pub plan_edits: Vec<PlanEdit>,
    pub plan_edits_told: u32,
    /// Each TODO's latest agent start (see [`AgentStart`]).
    pub agent_starts: Vec<AgentStart>,
    pub last_checkpoint_id: Option<CheckpointId>,
    pub last_reasoning: Option<String>,
    pub interrupt_reason: Option<String>,
    pub llm_calls: u32,
    pub commands_received: u32,
    /// Values a person set on the run (`ValuesUpdated`), merged key by key: a later update
    /// replaces a key, `null` removes it. The workflow never reads them; they are shown. Left
    /// out when empty, so states without any serialize as before.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub values: serde_json::Map<String, Value>,
}
