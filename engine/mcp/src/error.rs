//! Why an MCP server entry cannot be used: every message names the server (or the bad name) and
//! the reason, because `chronicle serve` stops at start with it.

use std::path::PathBuf;

/// A problem with an `[[mcp_server]]` entry or with starting its server. Nothing of the entry is
/// registered when any is found.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("mcp_server name {name:?} must be 1-64 characters of a-z, 0-9, `_` or `-`")]
    BadName { name: String },
    #[error(
        "mcp_server `{server}`: prefix {prefix:?} must be 0-64 characters of a-z, 0-9, `_` or `-`"
    )]
    BadPrefix { server: String, prefix: String },
    #[error("mcp_server `{server}` is declared twice")]
    Duplicate { server: String },
    #[error("mcp_server `{server}` needs `command` (stdio) or `url` (streamable HTTP)")]
    NoTransport { server: String },
    #[error("mcp_server `{server}`: give `command` or `url`, not both")]
    TwoTransports { server: String },
    #[error("mcp_server `{server}`: `{field}` is not a field of {transport} servers")]
    NotForTransport {
        server: String,
        field: &'static str,
        transport: &'static str,
    },
    #[error("mcp_server `{server}`: `{field}` is not a field of this scope")]
    NotForScope { server: String, field: &'static str },
    #[error(
        "mcp_server `{server}`: scope \"session\" needs a `command` (a process per conversation)"
    )]
    SessionNeedsCommand { server: String },
    #[error("mcp_server `{server}`: url {url:?} is not an http(s) URL: {reason}")]
    BadUrl {
        server: String,
        url: String,
        reason: String,
    },
    #[error("mcp_server `{server}`: header {header:?} cannot be sent: {reason}")]
    BadHeader {
        server: String,
        header: String,
        reason: String,
    },
    #[error(
        "mcp_server `{server}`: {field} names the environment variable {var}, which is not set"
    )]
    MissingEnv {
        server: String,
        field: String,
        var: String,
    },
    #[error("mcp_server `{server}`: {field} has a `${{` without its `}}`")]
    BadTemplate { server: String, field: String },
    #[error("mcp_server `{server}`: cwd {} is not a directory", cwd.display())]
    BadCwd { server: String, cwd: PathBuf },
    #[error("mcp_server `{server}`: timeout_ms {timeout_ms} is outside 1..={max}", max = crate::CALL_TIMEOUT_MS_MAX)]
    BadTimeout { server: String, timeout_ms: u64 },
    #[error("mcp_server `{server}`: idle_ms {idle_ms} is outside 1..={max}", max = crate::IDLE_MS_MAX)]
    BadIdle { server: String, idle_ms: u64 },
    #[error("mcp_server `{server}`: cannot start: {reason}")]
    Start { server: String, reason: StartError },
    #[error("mcp_server `{server}`: tools/list failed: {reason}")]
    List { server: String, reason: String },
    #[error("mcp_server `{server}` lists two tools named {tool:?}")]
    DuplicateTool { server: String, tool: String },
    #[error(
        "mcp_server `{server}`: tool {tool:?} would be called {name:?}, which is not 1-64 characters of a-z, A-Z, 0-9, `_` or `-` (set `prefix`)"
    )]
    BadToolName {
        server: String,
        tool: String,
        name: String,
    },
    #[error("mcp_server `{server}`: `gated` names {tool:?}, which the server does not list; it lists: {}", known.join(", "))]
    UnknownGated {
        server: String,
        tool: String,
        known: Vec<String>,
    },
    #[error("mcp_server `{server}`: tool {tool:?} is {holder} already")]
    Clash {
        server: String,
        tool: String,
        holder: String,
    },
}

/// Why a server's process or connection could not be started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("command {command:?} not found")]
    CommandNotFound { command: String },
    #[error("command {command:?} could not be started: {message}")]
    Spawn { command: String, message: String },
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("no MCP handshake within {0} ms")]
    Timeout(u64),
}
