//! Tools: what agents call to act on the world, always through the run's tool host (the run
//! actor), never directly. Each call is recorded as `ToolCallRequested` / `ToolCallCompleted`;
//! gated calls wait for a human; a call repeated in the same attempt after a crash is answered
//! from the log. There is no shell tool.

use std::collections::BTreeMap;
use std::sync::Arc;

use chronicle_schemas::{RunConfig, RunId, SessionId, TodoId, ToolCallId};
use serde_json::{Value, json};
use std::time::Duration;

mod error;
mod fs;
mod handle;
mod task;
mod todos;
mod workspace;

pub use error::ToolError;
pub use fs::{EditFile, Glob, Grep, Ls, ReadFile, WriteFile};
pub(crate) use handle::{ModelCallMsg, ToolCallMsg, ToolHost};
pub use handle::{ModelReply, ToolHandle};
pub(crate) use task::ChildRequest;
pub use task::Task;
pub use todos::{TODO_CONTENT_CHARS_MAX, TodoItem, WRITE_TODOS, WriteTodos};
pub use workspace::{PATH_CHARS_MAX, Workspace, WorkspaceError};

/// What a tool knows about the call it serves.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub todo_id: TodoId,
    pub attempt: u32,
    /// Position of the call inside the attempt.
    pub index: u32,
    pub tool_call_id: ToolCallId,
    /// `run_id/todo_id/attempt/index`: the same for every execution of one call (a call whose
    /// completion was not recorded is executed again after a crash: at-least-once).
    pub idempotency_key: String,
    /// The session's `/workspace/`.
    pub workspace: Workspace,
    /// The calling run's config (a `task` child inherits it).
    pub config: RunConfig,
    /// The engine's shared parts, for tools that start runs (`task`). `None` in unit tests of
    /// file tools.
    pub(crate) shared: Option<std::sync::Arc<crate::shared::Shared>>,
}

impl ToolContext {
    /// A context for calling a tool outside a run (unit tests, tools that only need a workspace).
    pub fn detached(workspace: Workspace) -> Self {
        Self {
            run_id: RunId::default(),
            session_id: SessionId::default(),
            todo_id: TodoId::default(),
            attempt: 1,
            index: 0,
            tool_call_id: ToolCallId::default(),
            idempotency_key: String::new(),
            workspace,
            config: RunConfig::default(),
            shared: None,
        }
    }
}

/// One tool. `call` returns the output (recorded in `ToolCallCompleted`) or an error message
/// (recorded too, and handed to the agent as [`ToolError::Failed`]).
#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    fn name(&self) -> &str;
    /// One line for agents and `/help`; a model is shown it.
    fn description(&self) -> &str;
    /// The JSON Schema of the call's arguments, as a model is shown it (function calling).
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    /// Whether a run under HITL policy `tools` asks a human before this tool runs, when the run
    /// names no tool list of its own (`hitl_tools`). Seed 003: `write_file`, `edit_file`, `task`
    /// and `dbt_*` are gated.
    fn gated(&self) -> bool {
        false
    }
    /// What a human sees before deciding (seed 003's `request_preview`: file path, line count,
    /// diff ...). Must not change anything.
    fn preview(&self, _ctx: &ToolContext, args: &Value) -> Value {
        json!({ "args": args })
    }
    /// How long one execution may take before the host records it as failed. `None` for tools
    /// bounded otherwise (`task` waits for a run with its own limits).
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(30))
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String>;
}

/// The tools agents may call, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in tools: the workspace file tools (`ls`, `read_file`, `write_file`,
    /// `edit_file`, `glob`, `grep`), `task` (sub-agent delegation) and `write_todos` (an agent's
    /// TODO list).
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        let tools: [Arc<dyn Tool>; 8] = [
            Arc::new(Ls),
            Arc::new(ReadFile),
            Arc::new(WriteFile),
            Arc::new(EditFile),
            Arc::new(Glob),
            Arc::new(Grep),
            Arc::new(Task),
            Arc::new(WriteTodos),
        ];
        for t in tools {
            r.register(t);
        }
        r
    }

    /// Adds or replaces a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_owned(), tool);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// How a model is shown the tool `name` (function calling), if the registry holds it.
    pub fn spec(&self, name: &str) -> Option<crate::llm::ToolSpec> {
        self.get(name).map(|t| crate::llm::ToolSpec {
            name: t.name().to_owned(),
            description: t.description().to_owned(),
            parameters: t.parameters(),
        })
    }
}
