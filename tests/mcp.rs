//! MCP servers' tools as the engine's tools, against real servers (`tests/mcp/server.py` on the
//! official Python SDK) over stdio and streamable HTTP.

use std::path::Path;

use chronicle_engine::tools::{ToolContext, ToolRegistry, Workspace};
use serde_json::json;

use crate::mcp_support::{self, HttpServer, count};

async fn smoke(registry: &ToolRegistry, dir: &Path) {
    let ctx = ToolContext::detached(Workspace::at(dir.join("ws")));
    let echo = registry.get("t_echo").expect("listed");
    let out = echo.call(&ctx, json!({"text": "hi"})).await.unwrap();
    assert_eq!(out, json!({"result": "hi"}));
    let add = registry.get("t_add").unwrap();
    assert_eq!(
        add.call(&ctx, json!({"a": 2, "b": 3})).await.unwrap(),
        json!({"result": 5})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let mut registry = ToolRegistry::builtin();
    let server = chronicle_mcp::connect(&mcp_support::stdio("t", &log), &mut registry)
        .await
        .unwrap();
    smoke(&registry, dir.path()).await;
    assert_eq!(count(&log, "echo"), 1);
    use chronicle_engine::tools::ToolSource;
    server.stop().await;

    let http = HttpServer::start(&log, 0, None);
    let mut registry = ToolRegistry::builtin();
    let _server = chronicle_mcp::connect(&mcp_support::http("t", &http.url()), &mut registry)
        .await
        .unwrap();
    smoke(&registry, dir.path()).await;
    assert_eq!(count(&log, "echo"), 2);
}

/// The data domain's shape: a session-scoped server with no prefix. Each conversation gets its
/// own process, in its own workspace; an idle one is stopped (and reaped), and the next call
/// starts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_scoped_server_runs_per_workspace_and_stops_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let config = chronicle_mcp::McpServerConfig {
        prefix: Some(String::new()),
        scope: chronicle_mcp::Scope::Session,
        idle_ms: Some(300),
        ..mcp_support::stdio("data", &log)
    };
    let mut registry = ToolRegistry::builtin();
    let server = chronicle_mcp::connect(&config, &mut registry)
        .await
        .unwrap();
    assert!(server.tool_names().contains(&"write_note".to_owned()));
    assert!(registry.get("where").is_some() && registry.get("data_where").is_none());
    assert!(
        server.pids().await.is_empty(),
        "the listing process was stopped"
    );

    let ws = |name: &str| Workspace::at(dir.path().join("workspaces").join(name));
    let where_ = registry.get("where").unwrap();
    let mut pids = Vec::new();
    for name in ["a", "b"] {
        let ctx = ToolContext::detached(ws(name));
        let at = where_.call(&ctx, json!({})).await.unwrap();
        let cwd = std::path::absolute(ws(name).root()).unwrap();
        assert_eq!(
            at["cwd"],
            json!(cwd.to_string_lossy()),
            "{name} runs in its workspace"
        );
        pids.push(at["pid"].as_u64().unwrap() as u32);
    }
    assert_ne!(pids[0], pids[1], "one process per conversation");
    let note = registry.get("write_note").unwrap();
    note.call(
        &ToolContext::detached(ws("a")),
        json!({"name": "n.txt", "text": "hello"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws("a").root().join("n.txt")).unwrap(),
        "hello"
    );
    for pid in &pids {
        mcp_support::wait_gone(*pid).await;
    }
    assert!(server.pids().await.is_empty(), "idle processes are stopped");
    let again = where_
        .call(&ToolContext::detached(ws("a")), json!({}))
        .await
        .unwrap();
    let pid = again["pid"].as_u64().unwrap() as u32;
    assert!(!pids.contains(&pid), "a new process");
    use chronicle_engine::tools::ToolSource;
    server.stop().await;
    mcp_support::wait_gone(pid).await;
}
