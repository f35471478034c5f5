//! An agent that takes a little while (so a kill lands mid-run), shared by the engine crash test
//! and its child process.

use std::time::Duration;

use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use serde_json::{Value, json};

pub struct Slow {
    pub info: AgentInfo,
    pub delay_ms: u64,
}

#[async_trait::async_trait]
impl Agent for Slow {
    fn info(&self) -> &AgentInfo {
        &self.info
    }
    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
        Ok(AgentOutput {
            result: json!({"agent": self.info.name, "todo": ctx.todo_id, "attempt": ctx.attempt, "input": input}),
        })
    }
}

pub fn slow_registry() -> Registry {
    let mut r = Registry::empty();
    for name in ["slow_a", "slow_b", "slow_c"] {
        r.register(std::sync::Arc::new(Slow {
            info: AgentInfo::new(name, "test", "waits, then answers"),
            delay_ms: 40,
        }));
    }
    r
}
