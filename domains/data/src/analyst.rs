//! The `analyst` agent: with a model, an `llm` agent over the data tools (the model writes the
//! SQL); without one, the schema questions of [`rules`](crate::rules) answered through the same
//! tools. Either way every call goes through the run's tool host, so it is recorded, gated and
//! answered from the log on a re-execution like any other.

use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, LlmAgent};
use chronicle_engine::tools::ToolError;
use serde_json::{Value, json};

use crate::rules::{CAN_ANSWER, Question};

/// The data analyst.
#[derive(Debug)]
pub struct Analyst {
    info: AgentInfo,
    /// The tool-calling loop over the model, when one is configured.
    model: Option<LlmAgent>,
}

impl Analyst {
    /// The analyst over `model` (the llm agent of the same name), or by rules without one.
    pub fn new(info: AgentInfo, model: Option<LlmAgent>) -> Self {
        Self { info, model }
    }

    /// Whether a model answers (else the rules do).
    pub fn has_model(&self) -> bool {
        self.model.is_some()
    }
}

#[async_trait::async_trait]
impl Agent for Analyst {
    fn info(&self) -> &AgentInfo {
        &self.info
    }

    /// Model and tool calls go through the run, which records them first.
    fn acts_outside(&self) -> bool {
        false
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        match &self.model {
            Some(agent) => agent.run(ctx, input).await,
            None => by_rules(ctx).await,
        }
    }
}

/// A schema question answered from the real result of the one tool call that answers it.
async fn by_rules(ctx: &AgentContext) -> Result<AgentOutput, AgentError> {
    let Some(question) = Question::parse(&ctx.query) else {
        return Ok(output(
            CAN_ANSWER.to_owned(),
            json!({ "rules": "no match" }),
        ));
    };
    let (tool, args) = question.call();
    match ctx.tools.call(tool, args.clone()).await {
        Ok(result) => {
            let result = json_of(result);
            let answer = question.answer(&result);
            Ok(output(
                answer,
                json!({ "tool": tool, "args": args, "result": result }),
            ))
        }
        // Outside a run, or the attempt is over: asking again cannot help.
        Err(ToolError::Refused(m)) if m.starts_with("no tool host") => Err(AgentError::fatal(
            format!("analyst: {tool}: {}", ToolError::Refused(m)),
        )),
        // A failed, rejected or refused call is the answer: the person sees why.
        Err(e) => Ok(output(
            format!("{tool} did not answer: {e}"),
            json!({ "tool": tool, "args": args, "error": e.to_string() }),
        )),
    }
}

/// A tool's answer as JSON: the data tools answer JSON text.
fn json_of(result: Value) -> Value {
    match result {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other => other,
    }
}

fn output(answer: String, data: Value) -> AgentOutput {
    AgentOutput {
        result: json!({ "answer": answer, "data": data }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outside_a_run_the_rules_fail_without_retrying() {
        let analyst = Analyst::new(AgentInfo::new("analyst", "data", "analyses"), None);
        let ctx = AgentContext {
            query: "what tables are there?".into(),
            ..AgentContext::default()
        };
        let err = analyst.run(&ctx, Value::Null).await.unwrap_err();
        assert!(!err.retryable);
        assert!(
            err.message
                .starts_with("analyst: list_tables: refused: no tool host"),
            "{}",
            err.message
        );
        let other = AgentContext {
            query: "How did sales go in March?".into(),
            ..AgentContext::default()
        };
        let out = analyst.run(&other, Value::Null).await.unwrap();
        assert_eq!(out.result["answer"], CAN_ANSWER);
    }

    #[test]
    fn tool_answers_are_read_as_json() {
        assert_eq!(json_of(json!("{\"a\":1}")), json!({"a": 1}));
        assert_eq!(json_of(json!("plain")), json!("plain"));
        assert_eq!(json_of(json!({"a": 1})), json!({"a": 1}));
    }
}
