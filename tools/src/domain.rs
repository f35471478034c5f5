//! Which domain an engine of the `chronicle` binary runs, and which extra agents: the same for
//! `serve` (flags) and for the embedded `run`, `chat` and `restore` (the same environment
//! variables), so a run continues with the agents it was planned with.

use std::path::PathBuf;

use anyhow::Context;
use chronicle_engine::Settings;
use clap::Parser;

/// The domains this binary can plug into the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Domain {
    /// Korean real-estate questions answered by built-in agents over a bundled dataset.
    #[default]
    Realestate,
    /// Any agents, from `--agents`: a query goes to the agents whose keywords or examples match
    /// it (or whom a configured model picks), and their replies are the answer.
    Generic,
    /// The benchmark workflow that Restate and LangGraph comparisons run too: keyword rules plan
    /// up to three mock agents that return small fixed results (equal work for comparisons).
    Bench,
    /// The data analyst: SQL on a DuckDB database per conversation, dbt under approval, charts
    /// and reports, its tools from the domain's MCP server (Python, made by `make data-venv`).
    Data,
}

#[derive(Clone, Debug, clap::Args)]
pub struct DomainArgs {
    /// The domain: its agents, its planner and its language.
    #[arg(long, env = "CHRONICLE_DOMAIN", value_enum, default_value_t)]
    pub domain: Domain,
    /// TOML file of agents (`[[agent]]` tables, `kind` http or llm) to add to the domain's own,
    /// and of MCP servers (`[[mcp_server]]` tables) whose tools llm agents may call: they are
    /// started first, and a bad one stops the start, named.
    #[arg(long, env = "CHRONICLE_AGENTS", value_name = "FILE")]
    pub agents: Option<PathBuf>,
    /// How many levels of sub-agent runs (`task` calls) may nest below a run: a run this deep
    /// cannot delegate further.
    #[arg(long, env = "CHRONICLE_SUBAGENT_DEPTH_MAX", value_name = "LEVELS",
          default_value_t = chronicle_engine::SUBAGENT_DEPTH_MAX_DEFAULT)]
    pub subagent_depth_max: u32,
    /// Skills llm agents are told of: `<DIR>/<skill>/SKILL.md` files with `name` and
    /// `description` front matter (a session's own `/workspace/skills/` copy wins).
    #[arg(long, env = "CHRONICLE_SKILLS_DIR", value_name = "DIR")]
    pub skills_dir: Option<PathBuf>,
    /// The directory of the server-wide memory file (`AGENTS.md` or `agent.md`) that llm agents
    /// read at every turn, before the session's own `/workspace/AGENTS.md`.
    #[arg(long, env = "CHRONICLE_MEMORY_DIR", value_name = "DIR")]
    pub memory_dir: Option<PathBuf>,
    /// The data domain's Python, with its pinned packages (default: the venv `make data-venv`
    /// makes, `target/data-venv/bin/python` in the source tree).
    #[arg(long, env = "CHRONICLE_DATA_PYTHON", value_name = "FILE")]
    pub data_python: Option<PathBuf>,
    /// The data domain's source folder: a new conversation's database starts with a table per
    /// CSV, Parquet or JSON file in it, and its `dbt/` project (default: the bundled sample).
    #[arg(long, env = "CHRONICLE_DATA_SOURCES", value_name = "DIR")]
    pub data_sources: Option<PathBuf>,
}

impl Default for DomainArgs {
    fn default() -> Self {
        Self {
            domain: Domain::default(),
            agents: None,
            subagent_depth_max: chronicle_engine::SUBAGENT_DEPTH_MAX_DEFAULT,
            skills_dir: None,
            memory_dir: None,
            data_python: None,
            data_sources: None,
        }
    }
}

impl DomainArgs {
    /// The data domain's files: the bundled ones, with `--data-python` and `--data-sources`.
    fn data_config(&self) -> chronicle_data::DataConfig {
        let mut config = chronicle_data::DataConfig::default();
        if let Some(python) = &self.data_python {
            config.python.clone_from(python);
        }
        if let Some(sources) = &self.data_sources {
            config.sources.clone_from(sources);
        }
        config
    }
}

/// Only the environment variables of [`DomainArgs`].
#[derive(Debug, Parser)]
struct FromEnv {
    #[command(flatten)]
    domain: DomainArgs,
}

impl DomainArgs {
    /// `CHRONICLE_DOMAIN`, `CHRONICLE_AGENTS` and `CHRONICLE_SUBAGENT_DEPTH_MAX`, for commands
    /// without the flags.
    pub fn from_env() -> anyhow::Result<DomainArgs> {
        Ok(FromEnv::try_parse_from(["chronicle"])
            .context("reading CHRONICLE_DOMAIN / CHRONICLE_AGENTS / CHRONICLE_SUBAGENT_DEPTH_MAX")?
            .domain)
    }

    /// The engine settings: a model from the environment when one is configured, the domain,
    /// and the agents and MCP servers of `--agents` (the servers started, their tools
    /// registered; the engine's shutdown stops them). The data domain starts its own MCP server.
    pub async fn settings(&self) -> anyhow::Result<Settings> {
        let mut settings = Settings::from_env()?;
        settings.subagent_depth_max = self.subagent_depth_max;
        for (dir, what) in [
            (&self.skills_dir, "--skills-dir"),
            (&self.memory_dir, "--memory-dir"),
        ] {
            if let Some(dir) = dir
                && !dir.is_dir()
            {
                anyhow::bail!("{what} {} is not a directory", dir.display());
            }
        }
        settings.skills_dir.clone_from(&self.skills_dir);
        settings.memory_dir.clone_from(&self.memory_dir);
        let mut settings = match self.domain {
            Domain::Realestate => chronicle_realestate::install(settings),
            Domain::Generic => chronicle_generic::install(settings),
            Domain::Bench => chronicle_bench::install(settings),
            Domain::Data => chronicle_data::install(settings, &self.data_config()).await?,
        };
        if let Some(path) = &self.agents {
            let loaded = chronicle_generic::load_config_file(
                &mut settings.registry,
                &mut settings.tools,
                path,
            )
            .await
            .with_context(|| format!("loading agents from {}", path.display()))?;
            let servers: Vec<&str> = loaded.servers.iter().map(|s| s.name()).collect();
            tracing::info!(agents = loaded.agents, mcp_servers = ?servers, "loaded agents");
        }
        if settings.registry.is_empty() {
            tracing::warn!("no agents are registered: every run will answer that no agent could");
        }
        Ok(settings)
    }
}
