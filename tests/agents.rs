//! Scripted test agents: each records what it was asked and answers from a script, so engine
//! tests can shape failures, retries and concurrency without timing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use chronicle_schemas::PlanStep;
use serde_json::{Value, json};

/// Answers each call with the next scripted outcome (then succeeds), recording every input.
pub struct Scripted {
    pub info: AgentInfo,
    script: Mutex<VecDeque<Result<Value, AgentError>>>,
    pub calls: Mutex<Vec<(u32, Value)>>,
    /// Calls wait here first when set (concurrency tests).
    pub barrier: Option<Arc<tokio::sync::Barrier>>,
}

impl Scripted {
    pub fn new(name: &str) -> Arc<Self> {
        Self::with(name, "general", vec![], None)
    }
    pub fn with(
        name: &str,
        category: &str,
        script: Vec<Result<Value, AgentError>>,
        barrier: Option<Arc<tokio::sync::Barrier>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            info: AgentInfo::new(name, "test", "scripted test agent").with_category(category),
            script: Mutex::new(script.into()),
            calls: Mutex::new(vec![]),
            barrier,
        })
    }
    pub fn calls(&self) -> Vec<(u32, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Agent for Scripted {
    fn info(&self) -> &AgentInfo {
        &self.info
    }
    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        self.calls
            .lock()
            .unwrap()
            .push((ctx.attempt, input.clone()));
        if let Some(b) = &self.barrier {
            b.wait().await;
        }
        let next = self.script.lock().unwrap().pop_front();
        match next {
            Some(Ok(v)) => Ok(AgentOutput { result: v }),
            Some(Err(e)) => Err(e),
            None => Ok(AgentOutput {
                result: json!({"agent": self.info.name, "attempt": ctx.attempt, "input": input}),
            }),
        }
    }
}

pub fn registry(agents: &[Arc<Scripted>]) -> Registry {
    let mut r = Registry::empty();
    for a in agents {
        r.register(a.clone());
    }
    r
}

pub fn step(agent: &str, deps: &[&str], optional: bool, retries: u32) -> PlanStep {
    PlanStep {
        agent_name: agent.into(),
        team: "test".into(),
        dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
        input_mapping: json!({"purpose": format!("{agent} 작업"), "n": 1}),
        timeout: 30,
        retry_count: retries,
        optional,
        ..PlanStep::default()
    }
}
