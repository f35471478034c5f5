//! The data domain: a deepagents-style data analyst, on real DuckDB and dbt. An agent
//! named `analyst` drives every run (agent mode) over the conversation's workspace, with the
//! tools `list_tables`, `describe_table`, `sample_rows`, `run_sql`, `fetch_result`,
//! `ingest_source`, `save_chart_spec`, `save_report_md`, `dbt_run`, `dbt_compile`, `dbt_ls`
//! and `dbt_test` beside `write_todos`, `task` and the file tools.
//!
//! The data tools come from an MCP server of the domain's own (`python/server.py`, on the
//! official `mcp` Python SDK), one process per conversation started in its workspace: a DuckDB
//! file per conversation, sandboxed to the workspace, that starts with the tables of a source
//! folder (by default the bundled sample, table `sales`), and dbt-core with dbt-duckdb on the
//! dbt project in `/workspace/dbt`. The dbt tools wait for a person (HITL `tools`, the run
//! default here). With a model the analyst writes the SQL; without one it answers the schema
//! questions of [`rules`] through the same recorded tools.
//!
//! `chronicle serve --domain data` plugs it in; the Python side is the venv `make data-venv`
//! makes (`target/data-venv`).

mod analyst;
pub mod rules;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chronicle_engine::Settings;
use chronicle_engine::agents::{
    AgentInfo, CONTEXT_BUDGET_TOKENS_DEFAULT, LlmAgent, LlmAgentConfig, LlmAgentError, RoutingHints,
};
use chronicle_mcp::{McpServerConfig, Scope};
use chronicle_schemas::HitlMode;

pub use analyst::Analyst;

/// The agent that drives every run of the domain.
pub const ANALYST: &str = "analyst";
/// The MCP server the data tools come from (its tools keep their own names: no prefix).
pub const SERVER: &str = "data";
/// The data tools, as the model sees them.
pub const DATA_TOOLS: [&str; 12] = [
    "list_tables",
    "describe_table",
    "sample_rows",
    "run_sql",
    "fetch_result",
    "ingest_source",
    "save_chart_spec",
    "save_report_md",
    "dbt_run",
    "dbt_compile",
    "dbt_ls",
    "dbt_test",
];
/// The data tools that run dbt: a person approves each call.
pub const DBT_TOOLS: [&str; 4] = ["dbt_run", "dbt_compile", "dbt_ls", "dbt_test"];
/// The engine's tools the analyst has beside them.
pub const ENGINE_TOOLS: [&str; 8] = [
    "write_todos",
    "task",
    "ls",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
];
/// The analyst's turns and tool calls per attempt: an analysis is a few schema looks, a few
/// queries, a check, a chart and a report.
pub const ANALYST_MAX_TURNS: u32 = 40;
pub const ANALYST_MAX_TOOL_CALLS: u32 = 200;
/// How long one data tool call may take: dbt starts a Python process of its own (seconds) and
/// the server stops a SQL statement after 25 s, a dbt command after 110 s.
pub const DATA_TOOL_TIMEOUT_MS: u64 = 120_000;

/// The analyst's instructions (the engine adds how tools, files and approvals work).
pub const SYSTEM_PROMPT: &str = include_str!("prompt.md");

/// Where the domain's files are: the Python that serves the tools, the server, the source
/// folder a new conversation's database starts with, and the skills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataConfig {
    /// The Python with the pinned packages (`make data-venv`: `target/data-venv/bin/python`).
    pub python: PathBuf,
    /// The MCP server (`domains/data/python/server.py`).
    pub server: PathBuf,
    /// The tables a new conversation's database starts with: one per CSV, Parquet or JSON file,
    /// and a `dbt/` project copied to `/workspace/dbt`.
    pub sources: PathBuf,
    /// The skills the analyst is told of, when the deployment names no skills directory.
    pub skills: PathBuf,
}

/// This source tree: the domain's files are read from it at run time (the server, the sample,
/// the skills), and the venv is made in its `target/`.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Default for DataConfig {
    fn default() -> Self {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        Self {
            python: repo().join("target/data-venv/bin/python"),
            server: here.join("python/server.py"),
            sources: here.join("sample"),
            skills: here.join("skills"),
        }
    }
}

/// Why the domain cannot start; each names what is missing and how to get it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the data domain's Python {} is missing: run `make data-venv` (or name another with --data-python)",
        .0.display()
    )]
    NoPython(PathBuf),
    #[error("the data domain's MCP server {} is missing", .0.display())]
    NoServer(PathBuf),
    #[error("--data-sources {} is not a directory", .0.display())]
    NoSources(PathBuf),
    /// Said in this message, not as a source, so that a chain of errors says it once.
    #[error("the analyst: {0}")]
    Analyst(LlmAgentError),
    /// The MCP client's error (its source) names the server and the reason.
    #[error(
        "the data tools did not start (the Python {} needs the packages of domains/data/python/requirements.txt: `make data-venv`)",
        .python.display()
    )]
    Mcp {
        python: PathBuf,
        #[source]
        source: chronicle_mcp::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl DataConfig {
    /// Checks that the files are there.
    pub fn check(&self) -> Result<()> {
        if !self.python.is_file() {
            return Err(Error::NoPython(self.python.clone()));
        }
        if !self.server.is_file() {
            return Err(Error::NoServer(self.server.clone()));
        }
        if !self.sources.is_dir() {
            return Err(Error::NoSources(self.sources.clone()));
        }
        Ok(())
    }

    /// The domain's MCP server: the venv's Python on `server.py` with the source folder, one
    /// process per conversation in its workspace, its tools under their own names (no prefix),
    /// the dbt tools gated (they also say `destructiveHint: true`).
    pub fn mcp_server(&self) -> McpServerConfig {
        let env = BTreeMap::from([
            // dbt stays offline: no usage statistics, no version check (the server sets the same
            // for the dbt processes it starts).
            (
                "DBT_SEND_ANONYMOUS_USAGE_STATS".to_owned(),
                "false".to_owned(),
            ),
            ("DBT_VERSION_CHECK".to_owned(), "false".to_owned()),
            // The server's folder is the source tree: no __pycache__ written into it.
            ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
        ]);
        McpServerConfig {
            name: SERVER.to_owned(),
            prefix: Some(String::new()),
            command: Some(self.python.display().to_string()),
            args: vec![
                self.server.display().to_string(),
                "--sources".to_owned(),
                self.sources.display().to_string(),
            ],
            env,
            scope: Scope::Session,
            gated: DBT_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
            timeout_ms: Some(DATA_TOOL_TIMEOUT_MS),
            ..McpServerConfig::default()
        }
    }
}

/// What the analyst declares about itself.
pub fn analyst_info() -> AgentInfo {
    AgentInfo::new(
        ANALYST,
        "data",
        "Explores the conversation's DuckDB database with SQL, ingests files, runs dbt under approval, and saves charts and reports",
    )
    .with_hints(RoutingHints {
        keywords: vec![
            "sql".into(),
            "table".into(),
            "tables".into(),
            "rows".into(),
            "dbt".into(),
            "chart".into(),
        ],
        examples: vec![
            "what tables are there?".into(),
            "how many rows in sales?".into(),
        ],
    })
}

/// The llm agent the analyst is with a model: the data tools and the engine's.
pub fn analyst_config() -> LlmAgentConfig {
    LlmAgentConfig {
        info: analyst_info(),
        system_prompt: SYSTEM_PROMPT.to_owned(),
        tools: DATA_TOOLS
            .iter()
            .chain(ENGINE_TOOLS.iter())
            .map(|t| (*t).to_owned())
            .collect(),
        max_turns: ANALYST_MAX_TURNS,
        max_tool_calls: ANALYST_MAX_TOOL_CALLS,
        model: None,
        context_budget_tokens: CONTEXT_BUDGET_TOKENS_DEFAULT,
    }
}

/// `settings` with the data domain plugged in: the generic planner and English texts, the
/// analyst (over the model when `settings.llm` has one, by rules otherwise), agent mode and
/// HITL `tools` by default (the engine's gated list keeps `dbt_*`), and the domain's skills
/// unless the deployment names a skills directory. The data tools come from the domain's MCP
/// server ([`DataConfig::mcp_server`]), started here once to list them: a Python that cannot
/// start it (no venv, a missing package) stops the domain with the reason.
pub async fn install(settings: Settings, config: &DataConfig) -> Result<Settings> {
    config.check()?;
    let mut settings = chronicle_generic::install(settings);
    chronicle_mcp::connect(&config.mcp_server(), &mut settings.tools)
        .await
        .map_err(|source| Error::Mcp {
            python: config.python.clone(),
            source,
        })?;
    let model = match settings.llm {
        Some(_) => Some(LlmAgent::new(analyst_config(), &settings.tools).map_err(Error::Analyst)?),
        None => None,
    };
    settings
        .registry
        .register(Arc::new(Analyst::new(analyst_info(), model)));
    settings.defaults.agent = Some(ANALYST.to_owned());
    settings.defaults.hitl = HitlMode::Tools;
    if settings.skills_dir.is_none() {
        settings.skills_dir = Some(config.skills.clone());
    }
    Ok(settings)
}

/// The domain's configuration with the bundled sample.
pub fn config() -> DataConfig {
    DataConfig::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_files_are_there_and_small() {
        let c = DataConfig::default();
        assert!(c.server.is_file(), "{}", c.server.display());
        let sample = c.sources.join("sales.csv");
        let bytes = std::fs::metadata(&sample).unwrap().len();
        assert!(bytes < 1024 * 1024, "the sample is {bytes} bytes");
        let rows = std::fs::read_to_string(&sample).unwrap().lines().count() - 1;
        assert!((2_000..10_000).contains(&rows), "{rows} rows");
        let skill =
            std::fs::read_to_string(c.skills.join("time-series-analysis/SKILL.md")).unwrap();
        assert!(skill.starts_with("---\nname: time-series-analysis\n"));
        assert!(c.sources.join("dbt/dbt_project.yml").is_file());
    }

    #[test]
    fn a_missing_python_is_named_with_the_way_to_make_it() {
        let c = DataConfig {
            python: "/nowhere/python".into(),
            ..DataConfig::default()
        };
        assert_eq!(
            c.check().unwrap_err().to_string(),
            "the data domain's Python /nowhere/python is missing: run `make data-venv` (or name another with --data-python)"
        );
    }

    #[test]
    fn the_sample_is_what_its_generator_writes() {
        // The committed CSV is make_sample.py's output: regenerate it rather than edit it.
        let c = DataConfig::default();
        let python = c.python.clone();
        assert!(
            python.is_file(),
            "{}: run `make data-venv`",
            python.display()
        );
        let out = tempfile::tempdir().unwrap();
        let path = out.path().join("sales.csv");
        let status = std::process::Command::new(&python)
            .arg(c.server.with_file_name("make_sample.py"))
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(c.sources.join("sales.csv")).unwrap()
        );
    }
}
