//! An agent that takes a little while (so a kill lands mid-run), shared by the engine crash test
//! and its child process.

use std::time::Duration;

use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentOutput, Registry};
use serde_json::{Value, json};

pub struct Slow {
    pub name: String,
    pub delay_ms: u64,
}

#[async_trait::async_trait]
impl Agent for Slow {
    fn name(&self) -> &str {
        &self.name
    }
    fn team(&self) -> &str {
        "test"
    }
    fn category(&self) -> &str {
        "general"
    }
    fn purpose(&self) -> &str {
        "waits, then answers"
    }
    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
        Ok(AgentOutput {
            result: json!({"agent": self.name, "todo": ctx.todo_id, "attempt": ctx.attempt, "input": input}),
        })
    }
}

pub fn slow_registry() -> Registry {
    let mut r = Registry::empty();
    for name in ["slow_a", "slow_b", "slow_c"] {
        r.register(std::sync::Arc::new(Slow {
            name: name.into(),
            delay_ms: 40,
        }));
    }
    r
}
