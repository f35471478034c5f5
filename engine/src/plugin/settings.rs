//! The engine's settings: what a deployment plugs in (agents, planner, texts, model, tools) and
//! every limit, each with its unit.

use std::path::PathBuf;
use std::sync::Arc;

use chronicle_schemas::RunConfig;

use crate::Result;
use crate::plugin::agents::Registry;
use crate::plugin::llm::{LlmConfig, LlmProvider, OpenAiCompat};
use crate::plugin::planner::{NoPlanner, Planner};
use crate::plugin::texts::{English, Texts};
use crate::plugin::tools::ToolRegistry;

/// The default of [`Settings::subagent_depth_max`].
pub const SUBAGENT_DEPTH_MAX_DEFAULT: u32 = 3;

#[derive(Clone)]
pub struct Settings {
    /// The config a run gets when its request leaves a field out (the server default). Its
    /// `plan` is never used: a fixed plan is a request's own (`StartRun::plan`).
    pub defaults: RunConfig,
    /// The agents runs may use; empty unless a domain registers some.
    pub registry: Registry,
    /// The domain's intent, plan, evaluation and response.
    pub planner: Arc<dyn Planner>,
    /// The words the engine says to people (notes, TODO names, approval messages, replies).
    pub texts: Arc<dyn Texts>,
    /// The model planners may ask; `None` for rules only.
    pub llm: Option<Arc<dyn LlmProvider>>,
    /// The tools agents may call.
    pub tools: ToolRegistry,
    /// Where each session's `/workspace/` lives (`<root>/<session>`). Default: `workspaces/` in
    /// the store's directory; for a store without one (in memory), a directory under the
    /// system's temporary directory.
    pub workspace_root: Option<PathBuf>,
    /// Messages queued for one run actor before senders wait.
    pub actor_mailbox_messages: usize,
    /// Live events buffered per run for subscribers before a slow one falls back to the log. The
    /// buffer is allocated whole for every run someone follows and keeps its newest events, so it
    /// is kept small: a lagging subscriber only costs a read of the log.
    pub bus_buffer_events: usize,
    /// Live chunks (pieces of a model's answer) buffered per run while someone listens for them.
    /// A subscriber that falls further behind loses the chunks it missed (they are not stored;
    /// the whole answer is one durable event); the run never waits for it.
    pub bus_buffer_chunks: usize,
    /// Agent results larger than this go to a blob file instead of the event.
    pub inline_payload_bytes_max: usize,
    /// Tool outputs larger than this (as JSON) are written to a file in the workspace and the
    /// call returns its path instead.
    pub tool_output_offload_bytes: usize,
    /// How many levels of sub-agent runs (`task` calls) may nest below a root run: a run this
    /// deep cannot start another.
    pub subagent_depth_max: u32,
    /// The server-wide skills (`<dir>/<skill>/SKILL.md`) llm agents are told of, beside each
    /// session's `/workspace/skills/`.
    pub skills_dir: Option<PathBuf>,
    /// Where the server-wide memory file (`AGENTS.md` or `agent.md`) of llm agents lives.
    pub memory_dir: Option<PathBuf>,
    /// Items of a user's long-term memory a turn loads at most (the newest), so that its
    /// `MemoryLoaded` stays small.
    pub memories_loaded_max: usize,
    /// Runs whose facts (owner, user, sub-agent or not, deleted or not) the engine keeps in
    /// memory for authorizing requests; past it the cache starts over.
    pub facts_cache_runs: usize,
    /// Events the states of recently ended long runs may fold in all (kept so that a command
    /// on a run that just ended needs no replay); past it the oldest are dropped.
    pub idle_cache_events: u64,
    /// This process as one node of several on a shared store; `None`: the only process, which
    /// drives every run.
    pub cluster: Option<ClusterSettings>,
}

/// A node of a cluster: several processes on one shared store, each driving the runs of the
/// sessions it owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The node's name, unique in the cluster and kept across restarts.
    pub node_name: String,
    /// Where the other nodes reach this one (`http://host:port`).
    pub advertise_url: String,
    /// How often the node tells the others it lives, and looks for dead nodes and due sessions
    /// (twice per heartbeat).
    pub heartbeat_ms: u64,
    /// A node silent this long is declared dead, even if its process may live (a partition, a
    /// stopped process).
    pub lease_ms: u64,
    /// A node whose process is gone and that has been silent this long is declared dead.
    pub crash_grace_ms: u64,
    /// A session whose runs all ended or wait for a person is released after this long without
    /// work.
    pub release_idle_ms: u64,
    /// Sessions a node claims at most per look.
    pub claim_batch: u32,
    /// The secret the nodes show each other (on their internal routes).
    pub secret: String,
}

impl ClusterSettings {
    /// A node with the default timing: a heartbeat every half second, a crashed node seen in a
    /// second, a 10-second lease.
    pub fn new(node_name: impl Into<String>, advertise_url: impl Into<String>) -> Self {
        ClusterSettings {
            node_name: node_name.into(),
            advertise_url: advertise_url.into(),
            heartbeat_ms: 500,
            lease_ms: 10_000,
            crash_grace_ms: 1000,
            release_idle_ms: 2000,
            claim_batch: 32,
            secret: String::new(),
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("defaults", &self.defaults)
            .field("registry", &self.registry)
            .field("tools", &self.tools)
            .field("llm", &self.llm.as_ref().map(|l| l.model().to_owned()))
            .field("workspace_root", &self.workspace_root)
            .finish_non_exhaustive()
    }
}

impl Default for Settings {
    /// No agents, no planning of its own ([`NoPlanner`]: runs bring their plan), English, no
    /// model, the built-in tools.
    fn default() -> Self {
        Self {
            defaults: RunConfig {
                max_retries: 2,
                ..RunConfig::default()
            },
            registry: Registry::empty(),
            planner: Arc::new(NoPlanner),
            texts: Arc::new(English),
            llm: None,
            tools: ToolRegistry::builtin(),
            workspace_root: None,
            actor_mailbox_messages: 64,
            bus_buffer_events: 128,
            bus_buffer_chunks: 64,
            inline_payload_bytes_max: 16 * 1024,
            tool_output_offload_bytes: 16 * 1024,
            subagent_depth_max: SUBAGENT_DEPTH_MAX_DEFAULT,
            skills_dir: None,
            memory_dir: None,
            memories_loaded_max: 50,
            facts_cache_runs: 65_536,
            idle_cache_events: 20_000,
            cluster: None,
        }
    }
}

impl Settings {
    /// The defaults, plus an OpenAI-compatible model when `CHRONICLE_LLM_BASE_URL` or an API key
    /// (`CHRONICLE_LLM_API_KEY` / `OPENAI_API_KEY`) is set; without either, rules only.
    pub fn from_env() -> Result<Self> {
        let mut s = Settings::default();
        if let Some(cfg) = LlmConfig::from_env() {
            s.llm = Some(Arc::new(OpenAiCompat::new(cfg)?));
        }
        Ok(s)
    }
}
