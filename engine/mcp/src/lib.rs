//! Chronicle's MCP client: any Model Context Protocol server's tools as the engine's tools. A
//! server is a child process spoken to over stdio or a streamable-HTTP endpoint; the protocol is
//! the official Rust SDK's (`rmcp`). Its tools are registered as one
//! [`ToolSource`](chronicle_engine::tools::ToolSource), named `<prefix>_<tool>`, so every call
//! goes through the engine's tool host like a built-in tool's: recorded with its args, result,
//! error, duration and server, gated under the HITL `tools` policy (also when the server
//! annotates the tool `destructiveHint: true`, or the entry lists it under `gated`), answered
//! from the log on re-execution, its large results offloaded to the workspace.
//!
//! Around each call: its args are checked against the tool's input schema before anything is
//! sent; it has a timeout (which cancels it at the server); a server that exits, or hangs (no
//! answer to a ping after a timeout), fails the call in flight with a clear error and is
//! restarted with backoff. A stdio server's stderr goes to the log, and its process group is
//! reaped when the engine stops, or when a conversation's server has been idle.
//!
//! Architecture Invariant: the engine knows nothing of MCP. This crate depends on the engine and
//! plugs in through its `Tool` and `ToolSource` traits; nothing here records events itself.

mod config;
mod conn;
mod error;
mod handler;
mod instance;
mod server;
mod tool;

pub use config::{
    CALL_TIMEOUT_MS_DEFAULT, CALL_TIMEOUT_MS_MAX, IDLE_MS_DEFAULT, IDLE_MS_MAX, INHERITED_ENV,
    McpServerConfig, Scope,
};
pub use error::{Error, StartError};
pub use instance::{RESTART_BACKOFF_MS_MAX, RESTART_BACKOFF_MS_MIN, START_TIMEOUT_MS};
pub use server::{IDEMPOTENCY_META_KEY, McpServer, connect, connect_all};
pub use tool::{TOOL_DESCRIPTION_CHARS_MAX, TOOL_ERROR_CHARS_MAX};
