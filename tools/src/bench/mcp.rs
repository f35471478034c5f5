//! MCP call overhead: a no-op tool of a real MCP server (the MCP tests' server on the official
//! Python SDK, from the venv `make data-venv` makes) called over stdio and over streamable HTTP,
//! beside a built-in tool (`ls` of an empty workspace), each by one agent back to back through
//! the run's tool host in `sync` durability (request → durable completion → answer); and the bare
//! round trip of the same no-op without the host, which is the MCP part of the overhead.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::tools::{ToolContext, ToolRegistry, ToolSource, Workspace};
use chronicle_engine::{Engine, Settings, StartRun};
use chronicle_mcp::McpServerConfig;
use chronicle_schemas::{HitlMode, PlanStep, RunConfig, RunStatus};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use super::report::Row;
use super::{Plan, ms, percentile, progress};

/// Calls one tool `calls` times back to back, timing each.
struct Caller {
    info: AgentInfo,
    tool: String,
    calls: usize,
    latencies_ms: Mutex<Vec<f64>>,
}

#[async_trait::async_trait]
impl Agent for Caller {
    fn info(&self) -> &AgentInfo {
        &self.info
    }
    async fn run(&self, ctx: &AgentContext, _input: Value) -> Result<AgentOutput, AgentError> {
        let mut lat = Vec::with_capacity(self.calls);
        for _ in 0..self.calls {
            let t0 = Instant::now();
            ctx.tools
                .call(&self.tool, json!({}))
                .await
                .map_err(|e| AgentError::fatal(e.to_string()))?;
            lat.push(ms(t0.elapsed()));
        }
        *self.latencies_ms.lock().unwrap_or_else(|e| e.into_inner()) = lat;
        Ok(AgentOutput {
            result: json!({"calls": self.calls}),
        })
    }
}

/// The venv's Python and the test server, when this is a checkout with `make data-venv` done.
fn server_files() -> Option<(PathBuf, PathBuf)> {
    let roots = [
        PathBuf::from("."),
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    ];
    roots.iter().find_map(|root| {
        let python = root.join("target/data-venv/bin/python");
        let server = root.join("tests/mcp/server.py");
        (python.exists() && server.exists()).then_some((python, server))
    })
}

/// The test server over streamable HTTP on a free port; killed when dropped.
struct HttpServer(Child, String);

impl HttpServer {
    fn start(python: &Path, server: &Path) -> Result<HttpServer> {
        let mut child = Command::new(python)
            .arg(server)
            .args(["http", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the MCP test server over HTTP")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .with_context(|| format!("the MCP test server said {line:?}"))?;
        Ok(HttpServer(child, format!("http://127.0.0.1:{port}/mcp")))
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// p50 and p99 of `calls` calls of `tool` through the tool host of an engine on `dir`.
fn through_host(
    rt: &Runtime,
    dir: &Path,
    tools: &ToolRegistry,
    tool: &str,
    calls: usize,
) -> Result<(f64, f64)> {
    let caller = Arc::new(Caller {
        info: AgentInfo::new("bench_mcp_caller", "bench", "calls one tool back to back"),
        tool: tool.to_owned(),
        calls,
        latencies_ms: Mutex::new(Vec::new()),
    });
    let mut registry = Registry::empty();
    registry.register(caller.clone());
    let settings = Settings {
        registry,
        tools: tools.clone(),
        ..Settings::default()
    };
    let store = Store::open(dir, Options::default())
        .with_context(|| format!("opening a store in {}", dir.display()))?;
    let config = RunConfig {
        hitl: HitlMode::None,
        plan: Some(vec![PlanStep {
            agent_name: "bench_mcp_caller".into(),
            team: "bench".into(),
            timeout: 600,
            ..PlanStep::default()
        }]),
        ..RunConfig::default()
    };
    rt.block_on(async {
        let engine = Engine::open(store, settings).await?;
        let run = engine
            .start_run(StartRun {
                query: "mcp calls".into(),
                config: Some(config),
                ..StartRun::default()
            })
            .await?
            .run_id;
        let state = engine
            .wait_until(run, Duration::from_secs(600), |s| {
                s.supervisor.run_status.is_terminal()
            })
            .await?;
        // Not `engine.shutdown()`: that stops the MCP servers, which the next series reuses.
        if state.supervisor.run_status != RunStatus::Completed {
            bail!("the {tool} run ended {:?}", state.supervisor.error_log);
        }
        anyhow::Ok(())
    })?;
    let mut lat = std::mem::take(
        &mut *caller
            .latencies_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    Ok((percentile(&mut lat, 0.5), percentile(&mut lat, 0.99)))
}

/// p50 and p99 of `calls` bare calls of `tool` (no host, no log).
fn bare(
    rt: &Runtime,
    dir: &Path,
    tools: &ToolRegistry,
    tool: &str,
    calls: usize,
) -> Result<(f64, f64)> {
    let tool = tools.get(tool).with_context(|| format!("no tool {tool}"))?;
    let ctx = ToolContext::detached(Workspace::at(dir.join("bare")));
    let mut lat = Vec::with_capacity(calls);
    rt.block_on(async {
        for _ in 0..calls {
            let t0 = Instant::now();
            tool.call(&ctx, json!({}))
                .await
                .map_err(anyhow::Error::msg)?;
            lat.push(ms(t0.elapsed()));
        }
        anyhow::Ok(())
    })?;
    Ok((percentile(&mut lat, 0.5), percentile(&mut lat, 0.99)))
}

pub(super) fn section(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let calls = plan.mcp_calls;
    let Some((python, server)) = server_files() else {
        progress("mcp: skipped (no target/data-venv: run `make data-venv`)");
        return Ok(vec![
            Row::new(
                "mcp_call_p50_ms",
                "MCP no-op call through the tool host",
                f64::NAN,
                "ms",
            )
            .note("skipped: run `make data-venv` (the MCP SDK's venv)"),
        ]);
    };
    progress(&format!(
        "mcp: {calls} no-op calls over stdio and over HTTP, beside a built-in tool, through the tool host"
    ));
    let http = HttpServer::start(&python, &server)?;
    let stdio = McpServerConfig {
        name: "bench".into(),
        command: Some(python.to_string_lossy().into_owned()),
        args: vec![server.to_string_lossy().into_owned(), "stdio".into()],
        ..McpServerConfig::default()
    };
    let remote = McpServerConfig {
        name: "remote".into(),
        url: Some(http.1.clone()),
        ..McpServerConfig::default()
    };
    let mut tools = ToolRegistry::builtin();
    let servers = rt.block_on(chronicle_mcp::connect_all(&[stdio, remote], &mut tools))?;
    let dir = root.join("mcp");
    let measure = || -> Result<Vec<(f64, f64)>> {
        Ok(vec![
            through_host(rt, &dir.join("builtin"), &tools, "ls", calls)?,
            through_host(rt, &dir.join("stdio"), &tools, "bench_noop", calls)?,
            through_host(rt, &dir.join("http"), &tools, "remote_noop", calls)?,
            bare(rt, &dir, &tools, "bench_noop", calls)?,
            bare(rt, &dir, &tools, "remote_noop", calls)?,
        ])
    };
    let measured = measure();
    rt.block_on(async {
        for s in &servers {
            s.stop().await;
        }
    });
    let m = measured?;
    plan.discard(&dir);
    let row = |id: &str, metric: &str, (p50, p99): (f64, f64)| {
        Row::new(id, metric, p50, "ms").note(format!("p99 {p99:.2} ms"))
    };
    Ok(vec![
        row(
            "mcp_builtin_call_p50_ms",
            "built-in tool call (ls) through the host: request → durable completion → answer",
            m[0],
        ),
        row(
            "mcp_stdio_call_p50_ms",
            "MCP no-op call over stdio through the host",
            m[1],
        ),
        row(
            "mcp_http_call_p50_ms",
            "MCP no-op call over streamable HTTP through the host",
            m[2],
        ),
        row(
            "mcp_stdio_roundtrip_p50_ms",
            "the same no-op over stdio without the host (the MCP part)",
            m[3],
        ),
        row(
            "mcp_http_roundtrip_p50_ms",
            "the same no-op over streamable HTTP without the host",
            m[4],
        ),
    ])
}
