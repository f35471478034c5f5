//! `llm` agents: an agent whose work is a tool-calling loop over an OpenAI-compatible model (the
//! deepagents way). The model answers with tool calls, the host runs them (recorded, gated,
//! sandboxed: the agent's `ToolHandle`), their results go back to the model, and so on until
//! the model answers without a tool call; that answer is the agent's.
//!
//! Every model call goes through the run too ([`ToolHandle::complete`](crate::tools::ToolHandle)),
//! so it is recorded and a re-execution of the attempt is answered from the log. For that the
//! conversation is built only from what is recorded: the configured prompt, the TODO's query
//! and input, and the answers the host gave.

use serde_json::{Value, json};

use super::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput};
use crate::plugin::chunks::ChunkSink;
use crate::plugin::llm::{ChatRequest, Message, ToolCall, ToolSpec, context};
use crate::plugin::tools::{ToolError, ToolRegistry};

/// The most turns (model calls) one attempt may take, whatever a config asks for.
pub const MAX_TURNS_MAX: u32 = 200;
/// The turns an agent gets when its config names none.
pub const MAX_TURNS_DEFAULT: u32 = 20;
/// The most tool calls one attempt may make, whatever a config asks for.
pub const MAX_TOOL_CALLS_MAX: u32 = 2_000;
/// The tool calls an agent gets when its config names none: enough for every turn to call a
/// few tools.
pub const TOOL_CALLS_PER_TURN_DEFAULT: u32 = 5;

/// The context budget an agent gets when its config names none.
pub const CONTEXT_BUDGET_TOKENS_DEFAULT: usize = 100_000;
/// The smallest budget a config may name: a summary and a few turns must fit.
pub const CONTEXT_BUDGET_TOKENS_MIN: usize = 1_000;
/// Messages kept as they are at least when the older turns are summarised (the last call and
/// its result); more are kept while they fit in half the budget.
const KEPT_RECENT_MESSAGES: usize = 2;

/// What the engine adds after an agent's own prompt: how it works inside a run.
const RUNTIME_PROMPT: &str = "You work by calling the tools you are given. Files live under /workspace/ (every path starts with /workspace/). A person may have to approve some calls: a rejected call is not made, so do not ask for it again. When the task is done, answer without calling a tool; that answer is your result.";

/// How a person's feedback to the agent's TODO is put to the model, as a user message after the
/// task.
pub const FEEDBACK_PREFIX: &str = "A person reviewed this step before it ran and said: ";

/// What an `llm` agent is, as a config declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmAgentConfig {
    pub info: AgentInfo,
    pub system_prompt: String,
    /// The tools the model may call: names, each one the registry holds, or patterns with `*`
    /// (`"duckdb_*"`), each matching at least one tool when the config is checked. Both are
    /// looked up again at every turn, so tools a source (an MCP server) adds or drops meanwhile
    /// are seen: a pattern then names what it matches (possibly nothing), and a name the
    /// registry no longer holds is left out.
    pub tools: Vec<String>,
    pub max_turns: u32,
    pub max_tool_calls: u32,
    /// The model, when not the configured default.
    pub model: Option<String>,
    /// The conversation's budget in (estimated) tokens: past it, the older turns are summarised
    /// by a model call of their own and replaced by the summary.
    pub context_budget_tokens: usize,
}

/// Why an `llm` agent's config is refused; each names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LlmAgentError {
    #[error("`tools`: unknown tool {tool:?}; known: {}", known.join(", "))]
    UnknownTool { tool: String, known: Vec<String> },
    #[error("`tools` names {0:?} twice")]
    DuplicateTool(String),
    #[error("`tools`: pattern {pattern:?} matches no tool; known: {}", known.join(", "))]
    NoMatch { pattern: String, known: Vec<String> },
    #[error("`max_turns` {0} is outside 1..={MAX_TURNS_MAX}")]
    MaxTurns(u32),
    #[error("`max_tool_calls` {0} is outside 1..={MAX_TOOL_CALLS_MAX}")]
    MaxToolCalls(u32),
    #[error("the system prompt is empty")]
    EmptyPrompt,
    #[error("`model` is empty")]
    EmptyModel,
    #[error("`context_budget_tokens` {0} is under {CONTEXT_BUDGET_TOKENS_MIN}")]
    ContextBudget(usize),
}

/// An agent whose work is a tool-calling loop over the model.
#[derive(Clone, Debug)]
pub struct LlmAgent {
    config: LlmAgentConfig,
    /// Where the declared tools are looked up at each turn. A clone shares the registry's
    /// sources, so it sees their tools as they are then.
    tools: ToolRegistry,
}

impl LlmAgent {
    /// Checks `config` against the tools the engine has.
    pub fn new(config: LlmAgentConfig, tools: &ToolRegistry) -> Result<Self, LlmAgentError> {
        if !(1..=MAX_TURNS_MAX).contains(&config.max_turns) {
            return Err(LlmAgentError::MaxTurns(config.max_turns));
        }
        if !(1..=MAX_TOOL_CALLS_MAX).contains(&config.max_tool_calls) {
            return Err(LlmAgentError::MaxToolCalls(config.max_tool_calls));
        }
        if config.system_prompt.trim().is_empty() {
            return Err(LlmAgentError::EmptyPrompt);
        }
        if config.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(LlmAgentError::EmptyModel);
        }
        if config.context_budget_tokens < CONTEXT_BUDGET_TOKENS_MIN {
            return Err(LlmAgentError::ContextBudget(config.context_budget_tokens));
        }
        for (i, name) in config.tools.iter().enumerate() {
            if config.tools[..i].contains(name) {
                return Err(LlmAgentError::DuplicateTool(name.clone()));
            }
            let matched = tools.matching(name);
            if name.contains('*') && matched.is_empty() {
                return Err(LlmAgentError::NoMatch {
                    pattern: name.clone(),
                    known: tools.names(),
                });
            }
            if tools.get(name).is_none() && !name.contains('*') {
                return Err(LlmAgentError::UnknownTool {
                    tool: name.clone(),
                    known: tools.names(),
                });
            }
        }
        Ok(Self {
            config,
            tools: tools.clone(),
        })
    }

    /// The declared tools as the model is shown them now: each name and what each pattern
    /// matches, in the config's order, once each.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = Vec::new();
        for entry in &self.config.tools {
            for name in self.tools.matching(entry) {
                if specs.iter().any(|s| s.name == name) {
                    continue;
                }
                match self.tools.spec(&name) {
                    Some(spec) => specs.push(spec),
                    None => tracing::warn!(
                        agent = %self.config.info.name, tool = %name,
                        "a declared tool is gone (its server dropped it); the model is not shown it"
                    ),
                }
            }
        }
        specs
    }

    pub fn config(&self) -> &LlmAgentConfig {
        &self.config
    }

    fn fail(&self, retryable: bool, what: String) -> AgentError {
        AgentError {
            message: format!("llm agent `{}`: {what}", self.config.info.name),
            retryable,
        }
    }

    /// The conversation's start: the prompt, then the task (the query, and the TODO's input
    /// when it has one), then what a person said when letting the TODO run. The feedback comes
    /// from the recorded decision, so a re-execution opens with the same messages.
    fn opening(&self, ctx: &AgentContext, input: &Value) -> Vec<Message> {
        let mut task = ctx.query.clone();
        let has_input = match input {
            Value::Null => false,
            Value::Object(m) => !m.is_empty(),
            _ => true,
        };
        if has_input {
            task.push_str(&format!("\n\nInput: {input}"));
        }
        let mut messages = vec![Message::System {
            content: format!("{}\n\n{RUNTIME_PROMPT}", self.config.system_prompt.trim()),
        }];
        // The session's earlier turns, as the conversation they were.
        for earlier in &ctx.turn.history {
            messages.push(Message::User {
                content: earlier.query.clone(),
            });
            messages.push(Message::Assistant {
                content: Some(earlier.answer.clone()),
                tool_calls: Vec::new(),
            });
        }
        messages.push(Message::User { content: task });
        if let Some(feedback) = &ctx.turn.feedback {
            messages.push(Message::User {
                content: format!("{FEEDBACK_PREFIX}{feedback}"),
            });
        }
        messages
    }

    /// `request` with its older turns summarised: the summary is a model call of its own,
    /// recorded like every other (so a re-execution gets the same summary from the log).
    async fn compacted(
        &self,
        ctx: &AgentContext,
        request: &ChatRequest,
        c: context::Compaction,
        turn: u32,
    ) -> Result<ChatRequest, AgentError> {
        let summary = ctx
            .tools
            .complete(context::summary_request(request, c), &ChunkSink::default())
            .await
            .map_err(|e| match e {
                ToolError::Refused(_) => self.fail(false, format!("turn {turn}: {e}")),
                e => self.fail(true, format!("turn {turn}: the summary call {e}")),
            })?;
        let text = summary.response.content.unwrap_or_default();
        let mut compacted = context::apply(request, c, &text);
        // What the host told the model with the summary call is for the agent's next turn.
        if let Some(notice) = summary.notice {
            compacted.messages.push(Message::User { content: notice });
        }
        Ok(compacted)
    }

    /// One tool call of the model, through the host; its result as the model reads it (errors
    /// included: `rejected: …`, `refused: …`, `cancelled: …`).
    async fn call_tool(&self, ctx: &AgentContext, specs: &[ToolSpec], call: &ToolCall) -> String {
        if !specs.iter().any(|s| s.name == call.name) {
            let mine: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            return format!(
                "refused: {:?} is not one of your tools ({})",
                call.name,
                mine.join(", ")
            );
        }
        let args: Value = match serde_json::from_str(&call.arguments) {
            Ok(v @ Value::Object(_)) => v,
            Ok(other) => {
                return format!(
                    "refused: the arguments must be a JSON object, got {}",
                    super::json_type(&other)
                );
            }
            Err(e) => return format!("refused: the arguments are not JSON: {e}"),
        };
        match ctx.tools.call(&call.name, args).await {
            Ok(Value::String(s)) => s,
            Ok(v) => v.to_string(),
            Err(e) => e.to_string(),
        }
    }
}

#[async_trait::async_trait]
impl Agent for LlmAgent {
    /// Model and tool calls go through the run, which records them first.
    fn acts_outside(&self) -> bool {
        false
    }
    fn info(&self) -> &AgentInfo {
        &self.config.info
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let mut messages = self.opening(ctx, &input);
        let mut calls_made: u32 = 0;
        for turn in 1..=self.config.max_turns {
            // Looked up at every turn: a tool a server added (its list changed, maybe because
            // of the last call) is offered from the next turn on.
            let specs = self.specs();
            let mut request = ChatRequest {
                model: self.config.model.clone(),
                messages: messages.clone(),
                tools: specs.clone(),
            };
            if let Some(c) = context::plan(
                &request,
                self.config.context_budget_tokens,
                KEPT_RECENT_MESSAGES,
            ) {
                request = self.compacted(ctx, &request, c, turn).await?;
                messages.clone_from(&request.messages);
            }
            let reply = ctx
                .tools
                .complete(request, &ctx.chunks)
                .await
                .map_err(|e| match e {
                    // No model, or the attempt is over: asking again cannot help.
                    ToolError::Refused(_) => self.fail(false, format!("turn {turn}: {e}")),
                    e => self.fail(true, format!("turn {turn}: the model call {e}")),
                })?;
            if let Some(notice) = reply.notice {
                messages.push(Message::User { content: notice });
            }
            let response = reply.response;
            messages.push(response.message());
            if response.tool_calls.is_empty() {
                return Ok(AgentOutput {
                    result: json!({
                        "answer": response.content.unwrap_or_default(),
                        "data": {"turns": turn, "tool_calls": calls_made},
                    }),
                });
            }
            for call in &response.tool_calls {
                calls_made += 1;
                if calls_made > self.config.max_tool_calls {
                    return Err(self.fail(
                        false,
                        format!(
                            "the model asked for more than its tool-call budget of {} calls (max_tool_calls)",
                            self.config.max_tool_calls
                        ),
                    ));
                }
                let content = self.call_tool(ctx, &specs, call).await;
                messages.push(Message::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                });
            }
        }
        Err(self.fail(
            false,
            format!(
                "no final answer after {} turns (max_turns): the model kept calling tools",
                self.config.max_turns
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tools: &[&str]) -> LlmAgentConfig {
        LlmAgentConfig {
            info: AgentInfo::new("analyst", "analysis", "analyses"),
            system_prompt: "You analyse.".into(),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            max_turns: 4,
            max_tool_calls: 8,
            model: None,
            context_budget_tokens: CONTEXT_BUDGET_TOKENS_DEFAULT,
        }
    }

    #[test]
    fn configs_are_checked_against_the_tools() {
        let tools = ToolRegistry::builtin();
        let agent = LlmAgent::new(config(&["ls", "write_todos"]), &tools).unwrap();
        assert_eq!(agent.specs().len(), 2);
        assert_eq!(agent.specs()[1].parameters["required"], json!(["todos"]));
        let globbed = LlmAgent::new(config(&["write_*", "*_file", "ls"]), &tools).unwrap();
        let names: Vec<String> = globbed.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["write_file", "write_todos", "edit_file", "read_file", "ls"],
            "each pattern's matches in order, each tool once"
        );
        let err = |c: LlmAgentConfig| LlmAgent::new(c, &tools).unwrap_err().to_string();
        assert!(
            err(config(&["ls", "shell"])).starts_with("`tools`: unknown tool \"shell\"; known: "),
            "{}",
            err(config(&["shell"]))
        );
        assert_eq!(err(config(&["ls", "ls"])), "`tools` names \"ls\" twice");
        assert!(
            err(config(&["duckdb_*"]))
                .starts_with("`tools`: pattern \"duckdb_*\" matches no tool; known: edit_file, "),
            "{}",
            err(config(&["duckdb_*"]))
        );
        assert_eq!(
            err(LlmAgentConfig {
                max_turns: 0,
                ..config(&[])
            }),
            "`max_turns` 0 is outside 1..=200"
        );
        assert_eq!(
            err(LlmAgentConfig {
                system_prompt: " ".into(),
                ..config(&[])
            }),
            "the system prompt is empty"
        );
    }

    #[tokio::test]
    async fn outside_a_run_the_agent_fails_without_retrying() {
        let agent = LlmAgent::new(config(&["ls"]), &ToolRegistry::builtin()).unwrap();
        let err = agent
            .run(&AgentContext::default(), Value::Null)
            .await
            .unwrap_err();
        assert!(!err.retryable);
        assert!(
            err.message
                .starts_with("llm agent `analyst`: turn 1: refused: "),
            "{}",
            err.message
        );
    }
}
