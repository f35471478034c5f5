//! One MCP tool as an engine [`Tool`]: the name, description and input schema the model sees,
//! whether it waits for a person, the check of its args against its input schema (before
//! anything is sent), and its result as the agent reads it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use chronicle_engine::tools::{Tool, ToolContext};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::server::Inner;

/// The longest description a model is shown of one tool: a server's text is sent with every
/// model call.
pub const TOOL_DESCRIPTION_CHARS_MAX: usize = 4096;
/// The longest error text of a call that is recorded and shown (an event is bounded).
pub const TOOL_ERROR_CHARS_MAX: usize = 4096;
/// Schema errors named in one refusal, at most.
const SCHEMA_ERRORS_SHOWN_MAX: usize = 3;
/// The host's own bound on a call is the time a (re)start may take, plus the server's
/// `timeout_ms`, plus the ping that follows a timeout, plus this: the call's own bounds (a
/// timeout cancels the request at the server and restarts a hung server) end it first.
const HOST_TIMEOUT_SLACK: Duration = Duration::from_secs(2);

/// A tool of an MCP server.
pub(crate) struct McpTool {
    /// What the model calls it: `<prefix>_<tool>`.
    pub name: String,
    /// What the server calls it.
    pub mcp_name: String,
    pub description: String,
    pub schema: Value,
    pub gated: bool,
    /// `None` when the server's schema could not be compiled (the args then go unchecked).
    pub validator: Option<Arc<jsonschema::Validator>>,
    pub server_name: String,
    pub timeout: Duration,
    pub server: Weak<Inner>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// Whether `name` can be a function name for the model (OpenAI's rule).
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max).collect();
    s.push_str(" …");
    s
}

impl McpTool {
    /// Checks `args` against the input schema; the message names each wrong field (its JSON
    /// pointer) with what is wrong.
    fn check_args(&self, args: &Value) -> Result<(), String> {
        if !args.is_object() {
            return Err("the arguments must be a JSON object".into());
        }
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let errors: Vec<String> = validator
            .iter_errors(args)
            .take(SCHEMA_ERRORS_SHOWN_MAX)
            .map(|e| {
                let at = e.instance_path().as_str().to_owned();
                let what = shorten(&e.to_string(), 200);
                if at.is_empty() {
                    what
                } else {
                    format!("`{at}`: {what}")
                }
            })
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the arguments do not match the tool's input schema: {}",
            errors.join("; ")
        ))
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        self.schema.clone()
    }
    fn gated(&self) -> bool {
        self.gated
    }
    fn preview(&self, _ctx: &ToolContext, args: &Value) -> Value {
        json!({
            "args": args,
            "server": self.server_name,
            "mcp_tool": self.mcp_name,
            // Not `description`: that key is what a call acts on (a `task`'s job), which an
            // approval's message names.
            "tool_description": self.description,
        })
    }
    fn timeout(&self) -> Option<Duration> {
        Some(
            Duration::from_millis(crate::instance::START_TIMEOUT_MS)
                + self.timeout
                + crate::instance::ping_bound(self.timeout)
                + HOST_TIMEOUT_SLACK,
        )
    }
    fn server(&self) -> Option<&str> {
        Some(&self.server_name)
    }
    fn check(&self, args: &Value) -> Result<(), String> {
        self.check_args(args)
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        // Again: args a person edited were not checked before.
        self.check_args(&args)?;
        let server = self
            .server
            .upgrade()
            .ok_or_else(|| format!("MCP server `{}` is no longer registered", self.server_name))?;
        let result = server.call(ctx, &self.mcp_name, args, self.timeout).await?;
        output(result)
    }
}

/// A call's result as the agent reads it: the structured content when there is some, else the
/// text (several texts joined by lines), else the content blocks as JSON; `isError` results are
/// errors with their text.
pub(crate) fn output(result: CallToolResult) -> Result<Value, String> {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        let text = if text.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            text
        };
        return Err(shorten(&text, TOOL_ERROR_CHARS_MAX));
    }
    if let Some(v) = result.structured_content {
        return Ok(v);
    }
    if texts.len() == result.content.len() {
        return Ok(if texts.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        });
    }
    serde_json::to_value(&result.content).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::json;

    use super::*;

    #[test]
    fn results_read_as_the_agent_reads_them() {
        let text = |t: &str| ContentBlock::text(t);
        assert_eq!(
            output(CallToolResult::success(vec![text("a"), text("b")])),
            Ok(json!("a\nb"))
        );
        assert_eq!(output(CallToolResult::success(vec![])), Ok(Value::Null));
        let structured = CallToolResult::structured(json!({"rows": 3}));
        assert_eq!(output(structured), Ok(json!({"rows": 3})));
        assert_eq!(
            output(CallToolResult::error(vec![text("no such table: sales")])),
            Err("no such table: sales".to_owned())
        );
        assert_eq!(
            output(CallToolResult::error(vec![])),
            Err("the tool reported an error".to_owned())
        );
        let long = "e".repeat(TOOL_ERROR_CHARS_MAX + 10);
        let err = output(CallToolResult::error(vec![text(&long)])).unwrap_err();
        assert_eq!(
            err.chars().count(),
            TOOL_ERROR_CHARS_MAX + 2,
            "cut, with a mark"
        );
    }

    #[test]
    fn names_a_model_can_call() {
        assert!(valid_name("duckdb_run_sql") && valid_name("a-b") && valid_name("X1"));
        for bad in ["", "a.b", "a b", "ünïcode", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
