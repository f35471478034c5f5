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

pub fn slow_plan() -> Vec<chronicle_schemas::PlanStep> {
    ["slow_a", "slow_b", "slow_c"]
        .iter()
        .enumerate()
        .map(|(i, a)| chronicle_schemas::PlanStep {
            agent_name: (*a).into(),
            dependencies: if i == 0 {
                vec![]
            } else {
                vec![["slow_a", "slow_b"][i - 1].into()]
            },
            input_mapping: json!({"purpose": "slow"}),
            timeout: 30,
            retry_count: 1,
            ..Default::default()
        })
        .collect()
}
