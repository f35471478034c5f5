//! The three mock agents. Each returns a small fixed result shaped by the query and its TODO,
//! with no model and no I/O, exactly as the Restate and LangGraph implementations of the
//! benchmark workflow do (the same fields, the same texts, the same digest), so every system
//! stores the same bytes per step.

use std::sync::Arc;

use chronicle_engine::agents::{
    Agent, AgentContext, AgentError, AgentInfo, AgentOutput, RoutingHints,
};
use serde_json::{Value, json};
use sha1::{Digest, Sha1};

use crate::rules::{AGENTS, Role, prefix};

/// Set to a number of milliseconds, each agent waits that long before it answers, as one that
/// asks a model would: the work of a run is then bound by waiting, not by the engine (what the
/// cluster section of `chronicle bench` measures beside the engine's own work).
pub const AGENT_DELAY_ENV: &str = "CHRONICLE_BENCH_AGENT_DELAY_MS";

/// One mock agent: what it declares, and the function that makes its result.
#[derive(Debug)]
pub struct MockAgent {
    info: AgentInfo,
    work: fn(&AgentContext) -> Value,
    delay: std::time::Duration,
}

impl MockAgent {
    fn new(role: &Role, work: fn(&AgentContext) -> Value) -> Self {
        let hints = RoutingHints {
            keywords: role.keywords.iter().map(|k| (*k).to_owned()).collect(),
            examples: vec![],
        };
        let info = AgentInfo::new(role.name, role.team, role.purpose).with_hints(hints);
        let delay_ms = std::env::var(AGENT_DELAY_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        MockAgent {
            info,
            work,
            delay: std::time::Duration::from_millis(delay_ms),
        }
    }
}

#[async_trait::async_trait]
impl Agent for MockAgent {
    fn info(&self) -> &AgentInfo {
        &self.info
    }

    /// It returns a fixed result computed from its context.
    fn acts_outside(&self) -> bool {
        false
    }

    async fn run(&self, ctx: &AgentContext, _input: Value) -> Result<AgentOutput, AgentError> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        Ok(AgentOutput {
            result: (self.work)(ctx),
        })
    }
}

/// The domain's agents: search, analysis and document.
pub fn agents() -> Vec<Arc<MockAgent>> {
    let works: [fn(&AgentContext) -> Value; 3] = [search, analysis, document];
    AGENTS
        .iter()
        .zip(works)
        .map(|(role, work)| Arc::new(MockAgent::new(role, work)))
        .collect()
}

/// The first 8 hex digits of the SHA-1 of `parts` joined by `|`: the search agent's source
/// names, the same in every implementation of the workflow.
fn digest(parts: &[&str]) -> String {
    let sum = Sha1::digest(parts.join("|").as_bytes());
    hex::encode(&sum[..4])
}

/// Three links named by the query and the TODO, and a summary.
fn search(ctx: &AgentContext) -> Value {
    let h = digest(&["search", &ctx.query, ctx.todo_id.as_str()]);
    json!({
        "agent": AGENTS[0].name,
        "sources": (0..3).map(|i| format!("https://example.org/{h}/{i}")).collect::<Vec<_>>(),
        "summary": format!("found 3 sources for: {}", prefix(&ctx.query, 60)),
    })
}

/// Two insights on the query, the TODOs it depends on, and a confidence.
fn analysis(ctx: &AgentContext) -> Value {
    let insights: Vec<String> = (0..2)
        .map(|i| format!("insight {i} on {}", prefix(&ctx.query, 30)))
        .collect();
    json!({
        "agent": AGENTS[1].name,
        "insights": insights,
        "inputs": previous_todo(ctx.todo_id.as_str()).into_iter().collect::<Vec<_>>(),
        "confidence": 0.87,
    })
}

/// A short report naming how many results came before it, and its sections.
fn document(ctx: &AgentContext) -> Value {
    json!({
        "agent": AGENTS[2].name,
        "document": format!(
            "# Report\n\n{}\n\nBased on {} prior results.",
            prefix(&ctx.query, 80),
            ctx.team_results.len()
        ),
        "sections": ["summary", "findings", "recommendations"],
    })
}

/// The TODO a TODO depends on: every planned TODO depends on the one numbered before it
/// (`todo_002` on `todo_001`), the first on none.
fn previous_todo(todo: &str) -> Option<String> {
    let n: u32 = todo.strip_prefix("todo_")?.parse().ok()?;
    (n > 1).then(|| format!("todo_{:03}", n - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_todo_depends_on_the_one_before() {
        assert_eq!(previous_todo("todo_001"), None);
        assert_eq!(previous_todo("todo_002").as_deref(), Some("todo_001"));
        assert_eq!(previous_todo("todo_010").as_deref(), Some("todo_009"));
        assert_eq!(previous_todo("other"), None);
    }

    /// The digest is the other implementations' (SHA-1, first 8 hex digits).
    #[test]
    fn the_digest_is_sha1_of_the_joined_parts() {
        assert_eq!(digest(&["abc"]), "a9993e36");
    }
}
