//! `[[mcp_server]]` tables of an agents config: MCP servers started before the config's agents
//! are built, so `llm` agents may name their tools (exactly, or by pattern: `tools =
//! ["duckdb_*"]`). The entry is the MCP crate's [`McpServerConfig`]; relative `command` paths and
//! `cwd` are relative to the config file.
//!
//! ```toml
//! [[mcp_server]]
//! name = "duckdb"                   # the tools' prefix: the model sees duckdb_<tool>
//! command = "uvx"                   # stdio: a child process...
//! args = ["mcp-server-motherduck", "--db-path", "data.duckdb"]
//! # env = { MOTHERDUCK_TOKEN = "${MOTHERDUCK_TOKEN}" }
//! # scope = "session"               # a process per conversation, in its workspace
//! gated = ["execute_query"]         # waits for a person under the HITL policy `tools`
//! timeout_ms = 30000
//!
//! [[mcp_server]]
//! name = "tickets"
//! url = "https://mcp.example.com/mcp"                     # ...or streamable HTTP
//! headers = { Authorization = "Bearer ${TICKETS_TOKEN}" } # from the environment
//! ```

use std::path::Path;

use chronicle_engine::agents::Registry;
use chronicle_engine::tools::{ToolRegistry, ToolSource};
use chronicle_mcp::McpServer;

use crate::http::{
    ConfigError, ConfigPlace, Declared, agents_of, config_dir, parse_file, read_config,
};

/// What a config added: how many agents, and the MCP servers it started.
#[derive(Debug)]
pub struct Loaded {
    pub agents: usize,
    pub servers: Vec<McpServer>,
}

/// Reads a config: starts its `[[mcp_server]]`s, whose tools join `tools`, then adds its agents
/// to `registry` (their tools looked up among `tools`, the servers' included). Relative paths
/// (prompt files, servers' `command` and `cwd`) are relative to `dir`. All or nothing: on any
/// error the servers it started are stopped, and neither `registry` nor `tools` changes.
pub async fn load_config_in(
    registry: &mut Registry,
    tools: &mut ToolRegistry,
    toml_text: &str,
    dir: &Path,
) -> Result<Loaded, ConfigError> {
    let file = parse_file(toml_text)?;
    let mut entries = file.mcp_server;
    for e in &mut entries {
        e.base_dir = Some(dir.to_owned());
    }
    let mut staged = tools.clone();
    let servers = chronicle_mcp::connect_all(&entries, &mut staged).await?;
    let place = ConfigPlace {
        dir,
        tools: &staged,
    };
    let added = agents_of(file.agent, place)
        .and_then(|agents| Ok(registry.add_new(agents.into_iter().map(Declared::into_agent))?));
    match added {
        Ok(agents) => {
            *tools = staged;
            Ok(Loaded { agents, servers })
        }
        Err(e) => {
            for s in &servers {
                s.stop().await;
            }
            Err(e)
        }
    }
}

/// [`load_config_in`] from a file, relative paths relative to the file's directory.
pub async fn load_config_file(
    registry: &mut Registry,
    tools: &mut ToolRegistry,
    path: &Path,
) -> Result<Loaded, ConfigError> {
    let text = read_config(path)?;
    load_config_in(registry, tools, &text, config_dir(path)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guide_example_is_a_valid_config() {
        let guide = include_str!("../../../docs/mcp.md");
        let start = guide
            .find("```toml\n[[mcp_server]]")
            .expect("docs/mcp.md shows MCP servers");
        let block = &guide[start + "```toml\n".len()..];
        let block = &block[..block.find("```").unwrap()];
        let file = parse_file(block).unwrap();
        let names: Vec<&str> = file.mcp_server.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["files", "tickets", "scratch"]);
        assert_eq!(file.mcp_server[2].scope, chronicle_mcp::Scope::Session);
        assert_eq!(file.agent.len(), 1);
    }

    #[tokio::test]
    async fn a_bad_entry_adds_nothing() {
        let mut registry = Registry::empty();
        let mut tools = ToolRegistry::builtin();
        let before = tools.names();
        let text = "[[mcp_server]]\nname = \"t\"\ncommand = \"/no/such/server\"\n\n\
                    [[agent]]\nname = \"a\"\nkind = \"llm\"\nsystem_prompt = \"p\"\ntools = [\"ls\"]";
        let err = load_config_in(&mut registry, &mut tools, text, Path::new("."))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "mcp_server `t`: cannot start: command \"/no/such/server\" not found"
        );
        assert!(registry.is_empty());
        assert_eq!(tools.names(), before);
        let sync = crate::load_agents(&mut registry, text).unwrap_err();
        assert_eq!(
            sync.to_string(),
            "the config declares 1 [[mcp_server]] entries, which only `load_config_file` / `load_config_in` start (this loader reads agents only)"
        );
    }
}
