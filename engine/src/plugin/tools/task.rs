//! `task`: sub-agent delegation (deepagents' SubAgentMiddleware). A call starts a child run — its
//! own stream, linked to the parent by `RunStarted.parent` (run and tool call) — waits for it,
//! and returns its final response as the tool output.

use serde_json::{Value, json};

use super::{Tool, ToolContext};

/// `task {description, subagent_type?, input?}`: `description` becomes the child's query;
/// `subagent_type` names the one agent the child runs (with `input`), or, when absent, the child
/// plans for itself. The child works in the parent's workspace and inherits its HITL policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct Task;

#[async_trait::async_trait]
impl Tool for Task {
    fn name(&self) -> &str {
        "task"
    }

    fn description(&self) -> &str {
        "delegates a sub-task to a sub-agent run and returns its final response"
    }

    fn gated(&self) -> bool {
        true
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["description"], "properties": {
            "description": {"type": "string", "description": "the sub-task, as the sub-agent's request"},
            "subagent_type": {"type": "string", "description": "the agent to delegate to (default: the sub-run plans for itself)"},
            "input": {"type": "object", "description": "the sub-agent's input"},
        }})
    }

    fn preview(&self, _ctx: &ToolContext, args: &Value) -> Value {
        json!({
            "description": args.get("description"),
            "subagent_type": args.get("subagent_type"),
            "input": args.get("input"),
        })
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let children = ctx
            .children
            .as_ref()
            .ok_or("task needs a running engine to start its sub-agent run")?;
        let request = ChildRequest::parse(&args)?;
        children.run_child(ctx, request).await
    }
}

/// Where a `task` call's child run is started and awaited: the runtime lends it to the call in
/// its [`ToolContext`], so that the tool reaches nothing else of the engine.
#[async_trait::async_trait]
pub(crate) trait ChildRuns: Send + Sync + std::fmt::Debug + 'static {
    /// Starts the child run of the call `ctx` serves (once: a call executed again after a crash
    /// finds its child again), waits for it, and returns its final response, or why it did not
    /// finish.
    async fn run_child(&self, ctx: &ToolContext, req: ChildRequest) -> Result<Value, String>;
}

/// A validated `task` call.
#[derive(Debug)]
pub(crate) struct ChildRequest {
    pub description: String,
    pub agent: Option<String>,
    pub input: Value,
}

impl ChildRequest {
    fn parse(args: &Value) -> Result<Self, String> {
        let args = args
            .as_object()
            .ok_or("task needs a JSON object of arguments")?;
        let description = match args.get("description") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            _ => return Err("task needs `description` (a non-empty string)".into()),
        };
        let agent = match args.get("subagent_type") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(format!(
                    "task's `subagent_type` must be a string, got {other}"
                ));
            }
        };
        let input = match args.get("input") {
            None | Some(Value::Null) => json!({}),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(other) => {
                return Err(format!("task's `input` must be a JSON object, got {other}"));
            }
        };
        Ok(Self {
            description,
            agent,
            input,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_named() {
        let cases = [
            (json!([]), "task needs a JSON object of arguments"),
            (json!({}), "task needs `description` (a non-empty string)"),
            (
                json!({"description": "  "}),
                "task needs `description` (a non-empty string)",
            ),
            (
                json!({"description": "x", "subagent_type": 3}),
                "task's `subagent_type` must be a string, got 3",
            ),
            (
                json!({"description": "x", "input": "y"}),
                "task's `input` must be a JSON object, got \"y\"",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(ChildRequest::parse(&args).unwrap_err(), want, "{args}");
        }
        let ok = ChildRequest::parse(
            &json!({"description": " find it ", "subagent_type": "search_team"}),
        )
        .unwrap();
        assert_eq!(
            (ok.description.as_str(), ok.agent.as_deref()),
            ("find it", Some("search_team"))
        );
        assert_eq!(ok.input, json!({}));
    }
}
