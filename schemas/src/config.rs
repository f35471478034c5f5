//! The per-run configuration recorded in `RunStarted`: HITL policy, strategy, retries, limits.

use serde::{Deserialize, Serialize};

/// When a human must approve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HitlMode {
    /// Auto-approve everything.
    #[default]
    None,
    /// Before each TODO.
    EveryTodo,
    /// Before the TODOs of agents whose category is listed in `hitl_categories`.
    Categories,
    /// Before the tool calls listed in `hitl_tools` (`*` suffix = prefix match, e.g. `dbt_*`).
    Tools,
}

impl HitlMode {
    pub fn as_str(self) -> &'static str {
        match self {
            HitlMode::None => "none",
            HitlMode::EveryTodo => "every_todo",
            HitlMode::Categories => "categories",
            HitlMode::Tools => "tools",
        }
    }
}

/// How ready TODOs are scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    #[default]
    Sequential,
    Parallel,
    Dag,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Sequential => "sequential",
            Strategy::Parallel => "parallel",
            Strategy::Dag => "dag",
        }
    }
}

/// What an expired approval turns into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryAction {
    #[default]
    Reject,
    Approve,
}

/// The limits of one run; hitting one fails the run with a clear reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    pub max_steps: u32,
    pub agent_timeout_ms: u64,
    pub run_timeout_ms: u64,
    pub max_todos: u32,
    pub max_concurrency: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 200,
            agent_timeout_ms: 30_000,
            run_timeout_ms: 600_000,
            max_todos: 50,
            max_concurrency: 4,
        }
    }
}

/// The shortest approval timeout a run may ask for: a second, because a shorter one would
/// expire before a person could read the request.
pub const APPROVAL_TIMEOUT_MS_MIN: u64 = 1_000;
/// The longest approval timeout a run may ask for: 30 days. Longer is the same as none for a
/// person, and keeps expiry instants far from the timestamp's range.
pub const APPROVAL_TIMEOUT_MS_MAX: u64 = 30 * 24 * 60 * 60 * 1_000;

/// Everything that shapes one run, fixed at `RunStarted`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    pub hitl: HitlMode,
    pub hitl_categories: Vec<String>,
    pub hitl_tools: Vec<String>,
    /// Overrides the plan's strategy when set.
    pub strategy: Option<Strategy>,
    pub max_retries: u32,
    pub limits: Limits,
    /// How long an approval waits for a human before it expires, in
    /// [`APPROVAL_TIMEOUT_MS_MIN`]`..=`[`APPROVAL_TIMEOUT_MS_MAX`] (checked when a run starts);
    /// `None` waits forever.
    pub approval_timeout_ms: Option<u64>,
    pub on_expiry: ExpiryAction,
    pub agent_catalogue_version: String,
    /// A plan that came with the request: the engine executes it instead of planning.
    pub plan: Option<Vec<crate::PlanStep>>,
    /// Whose `/workspace/` the run's tools use, when not its own session's: a `task` sub-agent
    /// run works in its parent's workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_session: Option<crate::SessionId>,
    /// Agent mode: this agent drives the whole run (its one TODO; its `write_todos` is the run's
    /// TODO list, its answer the run's). `None`: the supervisor plans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// How many `task` calls deep below its root run this run is (0 for a root run).
    #[serde(skip_serializing_if = "is_zero")]
    pub subagent_depth: u32,
    /// What a rejected approval does: skip what it gated and carry on, or end the turn.
    #[serde(skip_serializing_if = "is_default")]
    pub on_reject: OnReject,
    /// How much of the session's earlier turns the run is given.
    #[serde(skip_serializing_if = "is_default")]
    pub context: ContextBudget,
    /// The earlier turn of its session the run follows: the run before it, unless the
    /// conversation was branched from an earlier turn or started over.
    #[serde(skip_serializing_if = "is_default")]
    pub follows: Follows,
}

/// Which earlier turn of its session a run follows. Its earlier turns (what it is given of the
/// conversation) are that turn and, in turn, the ones that turn follows, so a conversation can
/// branch: a client that edits an earlier question starts a run that follows the turn before
/// that question, and the turns after it are not this run's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Follows {
    /// The session's run before it (every run before branching existed follows this way).
    #[default]
    Previous,
    /// This earlier run of the same session.
    Turn(crate::RunId),
    /// None: the run starts the conversation over.
    Start,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// What a rejected approval does to the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnReject {
    /// The rejected TODO (or tool call) is skipped and the run carries on.
    #[default]
    Skip,
    /// The turn ends with a short answer saying what was rejected and why.
    EndTurn,
}

impl OnReject {
    pub fn as_str(self) -> &'static str {
        match self {
            OnReject::Skip => "skip",
            OnReject::EndTurn => "end_turn",
        }
    }
}

/// How much of the session's earlier turns a run is given: the newest `turns_max` turns whose
/// queries and answers fit in `bytes_max` bytes (an answer is cut to fit). Zero turns: none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ContextBudget {
    pub turns_max: u32,
    pub bytes_max: u32,
}

/// The most bytes of earlier turns a run may be given (events stay well under 64 KiB).
pub const CONTEXT_BYTES_MAX: u32 = 32 * 1024;

impl Default for ContextBudget {
    fn default() -> Self {
        ContextBudget {
            turns_max: 6,
            bytes_max: 8 * 1024,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
