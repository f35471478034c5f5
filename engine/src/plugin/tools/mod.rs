//! Tools: what agents call to act on the world, always through the run's tool host (the run
//! actor), never directly. Each call is recorded as `ToolCallRequested` / `ToolCallCompleted`;
//! gated calls wait for a human; a call repeated in the same attempt after a crash is answered
//! from the log. There is no shell tool.
//!
//! The registry holds the built-in tools and any [`ToolSource`]: a set of tools that can change
//! while the engine runs (an MCP server's, whose list the server may change), shared by every
//! clone of the registry.

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
pub(crate) use handle::CallHost;
pub use handle::{ModelReply, ToolHandle};
pub use task::Task;
pub(crate) use task::{ChildRequest, ChildRuns};
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
    /// Where a `task` call starts its child run and waits for it: the runtime's, lent for the
    /// call. `None` outside a run (unit tests of file tools).
    pub(crate) children: Option<Arc<dyn ChildRuns>>,
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
            children: None,
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
    /// names no tool list of its own (`hitl_tools`). By default `write_file`, `edit_file`, `task`
    /// and `dbt_*` are gated (`DEFAULT_HITL_TOOLS`).
    fn gated(&self) -> bool {
        false
    }
    /// What a human sees before deciding (the approval's `request_preview`: file path, line count,
    /// diff ...). Must not change anything.
    fn preview(&self, _ctx: &ToolContext, args: &Value) -> Value {
        json!({ "args": args })
    }
    /// How long one execution may take before the host records it as failed. `None` for tools
    /// bounded otherwise (`task` waits for a run with its own limits).
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(30))
    }
    /// Where the tool runs when it is not the engine's own (an MCP server's name): recorded with
    /// every call (`ToolCallRequested.server`).
    fn server(&self) -> Option<&str> {
        None
    }
    /// Checks a call's args before anything runs or a person is asked (a tool with an input
    /// schema checks them against it). The message names what is wrong; the host refuses the
    /// call with it, so the agent can correct itself.
    fn check(&self, _args: &Value) -> Result<(), String> {
        Ok(())
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String>;
}

/// Tools that can change while the engine runs, registered as one (an MCP server's tools, its
/// list refreshed when the server says it changed). Every clone of a [`ToolRegistry`] shares its
/// sources, so a refreshed list is what every agent sees at its next start.
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// What the source is called in logs and errors (an MCP server's name).
    fn name(&self) -> &str;
    /// The tools it holds now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// The tool it holds under `name`, if any.
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools().into_iter().find(|t| t.name() == name)
    }
    /// Stops what the source runs (its processes, its connections); the engine calls it when it
    /// stops. A call after it may start the source again.
    async fn stop(&self) {}
}

/// Why a tool or a source cannot be added: a name the registry holds already would make what an
/// agent calls ambiguous.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: tool {tool:?} is {holder} already")]
pub struct ToolClash {
    pub tool: String,
    /// The source that brought the tool.
    pub source_name: String,
    /// Who holds the name: `a built-in tool` or `a tool of <source>`.
    pub holder: String,
}

/// The tools agents may call, by name: tools registered one by one and the tools of the
/// registered [`ToolSource`]s, looked up in that order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
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

    /// Adds a source of tools. Refused, with nothing added, when one of its tools has the name of
    /// a tool the registry holds already (built in, registered, or another source's).
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) -> Result<(), ToolClash> {
        for tool in source.tools() {
            if let Some(holder) = self.holder(tool.name()) {
                return Err(ToolClash {
                    tool: tool.name().to_owned(),
                    source_name: source.name().to_owned(),
                    holder,
                });
            }
        }
        self.sources.push(source);
        Ok(())
    }

    /// Who holds `name`, as [`ToolClash::holder`] says it: `a built-in tool` for a tool
    /// registered one by one, else `a tool of <source>`.
    pub fn holder(&self, name: &str) -> Option<String> {
        if self.tools.contains_key(name) {
            return Some("a built-in tool".to_owned());
        }
        self.sources
            .iter()
            .find(|s| s.get(name).is_some())
            .map(|s| format!("a tool of {}", s.name()))
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(t) = self.tools.get(name) {
            return Some(t.clone());
        }
        self.sources.iter().find_map(|s| s.get(name))
    }

    /// Every tool's name, sorted, once.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.keys().cloned().collect();
        for s in &self.sources {
            names.extend(s.tools().iter().map(|t| t.name().to_owned()));
        }
        names.sort();
        names.dedup();
        names
    }

    /// The names of the tools `pattern` names: itself when it has no `*` (held or not), else the
    /// held names it matches (`*` stands for any run of characters), sorted.
    pub fn matching(&self, pattern: &str) -> Vec<String> {
        if !pattern.contains('*') {
            return vec![pattern.to_owned()];
        }
        self.names()
            .into_iter()
            .filter(|n| glob_matches(pattern, n))
            .collect()
    }

    /// How a model is shown the tool `name` (function calling), if the registry holds it.
    pub fn spec(&self, name: &str) -> Option<crate::plugin::llm::ToolSpec> {
        self.get(name).map(|t| crate::plugin::llm::ToolSpec {
            name: t.name().to_owned(),
            description: t.description().to_owned(),
            parameters: t.parameters(),
        })
    }

    /// Stops every source (the engine is stopping).
    pub async fn stop(&self) {
        for s in &self.sources {
            s.stop().await;
        }
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters (none included)
/// and every other character for itself.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole name
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_of_characters() {
        for (pattern, name, yes) in [
            ("duckdb_*", "duckdb_run_sql", true),
            ("duckdb_*", "duckdb_", true),
            ("duckdb_*", "dbt_run", false),
            ("*_sql", "duckdb_run_sql", true),
            ("*", "anything", true),
            ("d*_r*n", "dbt_run", true),
            ("d*_r*n", "dbt_runs", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob_matches(pattern, name), yes, "{pattern} vs {name}");
        }
    }

    #[derive(Debug)]
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "test"
        }
        async fn call(&self, _: &ToolContext, _: Value) -> Result<Value, String> {
            Ok(Value::Null)
        }
    }

    struct Source(&'static str, std::sync::Mutex<Vec<&'static str>>);

    impl ToolSource for Source {
        fn name(&self) -> &str {
            self.0
        }
        fn tools(&self) -> Vec<Arc<dyn Tool>> {
            let names = self.1.lock().unwrap().clone();
            names
                .into_iter()
                .map(|n| Arc::new(Named(n)) as Arc<dyn Tool>)
                .collect()
        }
    }

    #[test]
    fn sources_are_shared_by_clones_and_may_not_clash() {
        let mut r = ToolRegistry::builtin();
        let db = Arc::new(Source("db", vec!["db_query", "db_list"].into()));
        r.add_source(db.clone()).unwrap();
        let clone = r.clone();
        assert_eq!(clone.matching("db_*"), ["db_list", "db_query"]);
        db.1.lock().unwrap().push("db_drop");
        assert_eq!(clone.matching("db_*"), ["db_drop", "db_list", "db_query"]);
        assert!(clone.get("db_drop").is_some() && clone.get("db_gone").is_none());
        assert_eq!(clone.matching("nothing_*"), Vec::<String>::new());
        assert_eq!(clone.matching("ls"), ["ls"]);
        let clash = Source("files", vec!["ls"].into());
        assert_eq!(
            r.add_source(Arc::new(clash)).unwrap_err().to_string(),
            "files: tool \"ls\" is a built-in tool already"
        );
        let other = Source("db2", vec!["db_query"].into());
        assert_eq!(
            r.add_source(Arc::new(other)).unwrap_err().to_string(),
            "db2: tool \"db_query\" is a tool of db already"
        );
    }
}
