//! Test agents and tools for the tool-host tests, shared with the engine child process.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use std::sync::LazyLock;

use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use chronicle_engine::tools::{Tool, ToolContext, ToolRegistry, WriteFile};
use chronicle_schemas::PlanStep;
use serde_json::{Value, json};

/// Makes the tool calls its input lists (`{"calls": [{"tool", "args"}]}`), in order, and answers
/// with what each returned: `{"answers": [{"ok": output} | {"error": text}]}`. With `hang_after`
/// it prints `HANGING` after that many answers and waits to be killed.
pub struct ToolRunner {
    pub hang_after: Option<usize>,
}

#[async_trait::async_trait]
impl Agent for ToolRunner {
    fn info(&self) -> &AgentInfo {
        static INFO: LazyLock<AgentInfo> = LazyLock::new(|| {
            AgentInfo::new("tool_runner", "test", "calls the tools it is told to")
        });
        &INFO
    }
    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let calls = input["calls"].as_array().cloned().unwrap_or_default();
        let mut answers = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            if self.hang_after == Some(i) {
                println!("HANGING");
                std::io::stdout().flush().unwrap();
                std::future::pending::<()>().await;
            }
            let tool = c["tool"].as_str().unwrap_or_default();
            answers.push(match ctx.tools.call(tool, c["args"].clone()).await {
                Ok(v) => json!({"ok": v}),
                Err(e) => json!({"error": e.to_string()}),
            });
        }
        Ok(AgentOutput {
            result: json!({"answers": answers}),
        })
    }
}

/// The agent a `task` call delegates to. With `hang` it prints `CHILD_STARTED` and waits to be
/// killed.
pub struct SubWorker {
    pub hang: bool,
}

#[async_trait::async_trait]
impl Agent for SubWorker {
    fn info(&self) -> &AgentInfo {
        static INFO: LazyLock<AgentInfo> =
            LazyLock::new(|| AgentInfo::new("sub_worker", "test", "answers a delegated sub-task"));
        &INFO
    }
    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        if self.hang {
            println!("CHILD_STARTED {}", ctx.run_id);
            std::io::stdout().flush().unwrap();
            std::future::pending::<()>().await;
        }
        Ok(AgentOutput {
            result: json!({"answer": format!("sub-task done: {}", ctx.query), "input": input}),
        })
    }
}

/// `write_file` that first appends the call's idempotency key to `log` (outside the
/// workspace): one line per real execution.
pub struct CountingWrite {
    pub log: PathBuf,
}

#[async_trait::async_trait]
impl Tool for CountingWrite {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "write_file, counting executions"
    }
    fn gated(&self) -> bool {
        true
    }
    fn preview(&self, ctx: &ToolContext, args: &Value) -> Value {
        WriteFile.preview(ctx, args)
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| e.to_string())?;
        writeln!(f, "{}", ctx.idempotency_key).map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())?;
        WriteFile.call(ctx, args).await
    }
}

pub fn registry(hang_after: Option<usize>, sub_hangs: bool) -> Registry {
    let mut r = Registry::empty();
    r.register(Arc::new(ToolRunner { hang_after }));
    r.register(Arc::new(SubWorker { hang: sub_hangs }));
    r
}

/// The built-in tools, with `write_file` counting its executions into `log`.
pub fn counting_tools(log: PathBuf) -> ToolRegistry {
    let mut t = ToolRegistry::builtin();
    t.register(Arc::new(CountingWrite { log }));
    t
}

/// A one-TODO plan: `tool_runner` making `calls`.
pub fn runner_plan(calls: Value) -> Vec<PlanStep> {
    vec![PlanStep {
        agent_name: "tool_runner".into(),
        team: "test".into(),
        input_mapping: json!({ "calls": calls }),
        timeout: 30,
        ..PlanStep::default()
    }]
}

pub fn write(path: &str, content: &str) -> Value {
    json!({"tool": "write_file", "args": {"file_path": path, "content": content}})
}
