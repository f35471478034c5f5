//! The MCP tests' real servers: `tests/mcp/server.py` on the official MCP Python SDK, run by the
//! pinned venv `make data-venv` makes (`target/data-venv`), over stdio (the engine starts it) or
//! streamable HTTP (the test starts it). Each server appends every call it gets to a log file,
//! which is how a test counts what reached the server.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chronicle_mcp::McpServerConfig;
use serde_json::Value;

/// The venv's Python: the MCP SDK is pinned there.
pub fn python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/data-venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `make data-venv` (part of `make test-deps`)",
        p.display()
    );
    p
}

pub fn server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/server.py")
}

/// A stdio entry for the test server, logging its calls to `log`.
pub fn stdio(name: &str, log: &Path) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        command: Some(python().to_string_lossy().into_owned()),
        args: vec![server_py().to_string_lossy().into_owned(), "stdio".into()],
        env: [(
            "MCP_TEST_LOG".to_owned(),
            log.to_string_lossy().into_owned(),
        )]
        .into(),
        ..McpServerConfig::default()
    }
}

/// An HTTP entry for a server at `url`.
pub fn http(name: &str, url: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        url: Some(url.into()),
        ..McpServerConfig::default()
    }
}

/// The calls the server logged: `{tool, args, key, pid}` each.
pub fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// How many calls of `tool` the server logged.
pub fn count(log: &Path, tool: &str) -> usize {
    logged(log).iter().filter(|c| c["tool"] == tool).count()
}

/// A streamable-HTTP test server this test runs; killed when dropped.
pub struct HttpServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
    token: Option<String>,
}

impl HttpServer {
    /// Starts one on a free port (`port` 0) or on `port`, logging to `log`; with `token`,
    /// requests need `Authorization: Bearer <token>`.
    pub fn start(log: &Path, port: u16, token: Option<&str>) -> HttpServer {
        let mut cmd = Command::new(python());
        cmd.arg(server_py())
            .args(["http", &port.to_string()])
            .env("MCP_TEST_LOG", log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(t) = token {
            cmd.env("MCP_TEST_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("the server said {line:?}"))
            .parse()
            .unwrap();
        HttpServer {
            child,
            port,
            log: log.to_owned(),
            token: token.map(str::to_owned),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Waits for the process to end (after a tool killed it).
    pub fn wait_dead(&mut self) {
        self.child.wait().unwrap();
    }

    /// A new process on the same port.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = HttpServer::start(&self.log, self.port, self.token.as_deref());
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether process `pid` is gone: exited and reaped (a zombie is not gone).
pub fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits (bounded) until `pid` is gone.
pub async fn wait_gone(pid: u32) {
    for _ in 0..200 {
        if gone(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("process {pid} is still running");
}

/// How a test reaches the test server: the engine starts it (stdio), or the test runs it at a URL
/// (streamable HTTP).
#[derive(Clone, Debug)]
pub enum Via {
    Stdio,
    Http(String),
}

impl Via {
    /// The `[[mcp_server]]` table of server `t` (its calls logged to `log` when over stdio; an
    /// HTTP server logs where the test started it), with `extra` lines.
    pub fn entry(&self, log: &Path, extra: &str) -> String {
        let how = match self {
            Via::Stdio => format!(
                "command = {:?}\nargs = [{:?}, \"stdio\"]\nenv = {{ MCP_TEST_LOG = {:?} }}",
                python(),
                server_py(),
                log
            ),
            Via::Http(url) => format!("url = {url:?}"),
        };
        format!("[[mcp_server]]\nname = \"t\"\n{how}\n{extra}\n")
    }
}

/// The agent of the MCP tests: an `llm` agent that may call every tool of server `t`.
pub const AGENT: &str = r#"
[[agent]]
name = "operator"
kind = "llm"
purpose = "Uses the test server's tools"
system_prompt = "You are the operator. Use the tools."
tools = ["t_*", "write_todos"]
max_turns = 8
"#;

/// The generic domain asking the scripted model at `base_url`, with the MCP server of `entry`
/// started and [`AGENT`]; the servers it started come back too.
pub async fn settings(
    base_url: &str,
    entry: &str,
) -> (chronicle_engine::Settings, Vec<chronicle_mcp::McpServer>) {
    let mut s = chronicle_generic::settings();
    let config = chronicle_engine::llm::LlmConfig {
        base_url: base_url.to_owned(),
        model: "test-model".into(),
        api_key: Some(crate::llm_support::KEY.into()),
        timeout_ms: 10_000,
    };
    s.llm = Some(std::sync::Arc::new(
        chronicle_engine::llm::OpenAiCompat::new(config).expect("client"),
    ));
    let toml = format!("{entry}\n{AGENT}");
    let loaded =
        chronicle_generic::load_config_in(&mut s.registry, &mut s.tools, &toml, Path::new("."))
            .await
            .expect("the config loads");
    (s, loaded.servers)
}
