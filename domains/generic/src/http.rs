//! Agents declared in TOML (`[[agent]]` tables), of two kinds: `http` agents, external services
//! the engine POSTs the agent contract's request to (`chronicle.agent.v1`: the TODO's context and
//! input) and whose JSON reply is the agent's result; and `llm` agents, whose work is a
//! tool-calling loop over the configured model (the engine's [`LlmAgent`]; their prompt and
//! settings are read in `llm.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chronicle_engine::agents::{
    Agent, AgentContext, AgentError, AgentInfo, AgentOutput, AlreadyRegistered, LlmAgent,
    LlmAgentError, Registry, RoutingHints,
};
use chronicle_engine::tools::ToolRegistry;
use chronicle_schemas::contract::{AGENT_CONTRACT, AgentRequest, HistoryTurn, RememberedItem};
use serde::Deserialize;
use serde_json::Value;

/// 30 s per agent call, the default when the config names none.
pub const HTTP_AGENT_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The longest timeout a config may ask for; a run must not hang on one agent for longer.
pub const HTTP_AGENT_TIMEOUT_MS_MAX: u64 = 600_000;
/// The largest reply body accepted. A reply becomes an event (or a blob), so it is bounded.
pub const HTTP_AGENT_RESPONSE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Characters of an error reply's body quoted in the failure message.
const ERROR_BODY_CHARS_MAX: usize = 200;
/// The HITL categories a policy knows (the engine's defaults and `general`); an unknown one would
/// silently escape approval.
pub const CATEGORIES: [&str; 4] = ["contract", "payment", "sensitive", "general"];
/// Agent names appear in plans and in `/todo add <agent>`, so they are one word.
const NAME_CHARS_MAX: usize = 64;
/// Routing hints an agent may declare (keywords and examples each), and their length: a hint
/// is a word or a sentence, not a document.
const HINTS_MAX: usize = 64;
const HINT_CHARS_MAX: usize = 200;

/// A problem in an `http` agents config. Nothing is registered when any agent is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read agents config {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("agents config is not valid TOML: {0}")]
    Toml(String),
    #[error("agent #{index} has no `{field}`")]
    Missing { index: usize, field: &'static str },
    #[error("agent #{index}: name {name:?} must be 1-64 characters of a-z, 0-9, `_` or `-`")]
    BadName { index: usize, name: String },
    #[error("agent `{name}`: url {url:?} is not an http(s) URL: {reason}")]
    BadUrl {
        name: String,
        url: String,
        reason: String,
    },
    #[error("agent `{name}`: timeout_ms {timeout_ms} is outside 1..={max}", max = HTTP_AGENT_TIMEOUT_MS_MAX)]
    BadTimeout { name: String, timeout_ms: u64 },
    #[error(
        "agent `{name}`: category {category:?} is not one of contract, payment, sensitive, general"
    )]
    BadCategory { name: String, category: String },
    #[error("agent `{name}` is defined twice")]
    Duplicate { name: String },
    #[error("agent `{name}`: {field} has {count} entries, over {HINTS_MAX}")]
    TooManyHints {
        name: String,
        field: &'static str,
        count: usize,
    },
    #[error("agent `{name}`: a {field} entry is empty or longer than {HINT_CHARS_MAX} characters")]
    BadHint { name: String, field: &'static str },
    #[error(transparent)]
    AlreadyRegistered(#[from] AlreadyRegistered),
    #[error("agent `{name}`: cannot build an HTTP client: {message}")]
    Client { name: String, message: String },
    #[error("agent `{name}`: kind {kind:?} is not http or llm")]
    UnknownKind { name: String, kind: String },
    #[error("agent `{name}`: `{field}` is not a field of {kind} agents")]
    NotForKind {
        name: String,
        field: &'static str,
        kind: &'static str,
    },
    #[error("agent `{name}` (llm) needs `system_prompt` or `system_prompt_file`")]
    NoPrompt { name: String },
    #[error("agent `{name}`: give `system_prompt` or `system_prompt_file`, not both")]
    TwoPrompts { name: String },
    #[error("agent `{name}`: system_prompt_file {path:?} {reason}")]
    PromptFile {
        name: String,
        path: String,
        reason: String,
    },
    #[error("agent `{name}`: {source}")]
    Llm { name: String, source: LlmAgentError },
    /// An `[[mcp_server]]` entry that cannot be started or registered; the message names it.
    #[error(transparent)]
    Mcp(#[from] chronicle_mcp::Error),
    #[error(
        "the config declares {count} [[mcp_server]] entries, which only `load_config_file` / `load_config_in` start (this loader reads agents only)"
    )]
    McpServersNotStarted { count: usize },
}

/// The file: `[[agent]]` tables, and `[[mcp_server]]` tables (MCP servers whose tools `llm`
/// agents may name; see `mcp.rs`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    #[serde(default)]
    pub(crate) agent: Vec<AgentEntry>,
    #[serde(default)]
    pub(crate) mcp_server: Vec<chronicle_mcp::McpServerConfig>,
}

/// One `[[agent]]` table. `name` and `url` are optional here so that a missing one gets our
/// error, which names the agent's position, rather than the TOML parser's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentEntry {
    pub(crate) name: Option<String>,
    /// `http` (the default) or `llm`.
    pub(crate) kind: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) category: Option<String>,
    pub(crate) team: Option<String>,
    pub(crate) purpose: Option<String>,
    /// Routing hints: words (any language) and example requests that should reach this agent.
    #[serde(default)]
    pub(crate) keywords: Vec<String>,
    #[serde(default)]
    pub(crate) examples: Vec<String>,
    // `llm` agents (see `llm.rs`).
    pub(crate) system_prompt: Option<String>,
    pub(crate) system_prompt_file: Option<String>,
    pub(crate) tools: Option<Vec<String>>,
    pub(crate) max_turns: Option<u32>,
    pub(crate) max_tool_calls: Option<u32>,
    pub(crate) model: Option<String>,
    pub(crate) context_budget_tokens: Option<usize>,
}

/// An agent a config declares.
#[derive(Debug, Clone)]
pub enum Declared {
    Http(HttpAgent),
    Llm(LlmAgent),
}

impl Declared {
    pub fn name(&self) -> &str {
        match self {
            Declared::Http(a) => a.name(),
            Declared::Llm(a) => a.name(),
        }
    }

    pub(crate) fn into_agent(self) -> Arc<dyn Agent> {
        match self {
            Declared::Http(a) => Arc::new(a),
            Declared::Llm(a) => Arc::new(a),
        }
    }
}

/// Where a config is read from: the directory its `system_prompt_file`s are relative to, and the
/// tools its `llm` agents may name.
#[derive(Debug, Clone, Copy)]
pub struct ConfigPlace<'a> {
    pub dir: &'a Path,
    pub tools: &'a ToolRegistry,
}

/// An external agent reached over HTTP.
#[derive(Debug, Clone)]
pub struct HttpAgent {
    info: AgentInfo,
    url: reqwest::Url,
    timeout_ms: u64,
    client: reqwest::Client,
}

impl HttpAgent {
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    fn fail(&self, retryable: bool, what: String) -> AgentError {
        let message = format!("http agent `{}`: POST {} {what}", self.info.name, self.url);
        AgentError { message, retryable }
    }
}

/// Adds the agents of a TOML config to `registry`: `[[agent]]` tables with `name`, an optional
/// `kind` (`http`, the default, or `llm`), and optional `category`, `team`, `purpose`,
/// `keywords`, `examples`; an `http` agent has `url` and optional `timeout_ms`; an `llm` agent
/// has `system_prompt` or `system_prompt_file`, and optional `tools`, `max_turns`,
/// `max_tool_calls` and `model`. Prompt files are read relative to the current directory and
/// `llm` agents may name the built-in tools ([`load_agents_in`] says otherwise). All or nothing:
/// on any error no agent is added; a name already registered is an error, because silently
/// replacing an agent would change what a plan means. Returns how many were added.
pub fn load_agents(registry: &mut Registry, toml_text: &str) -> Result<usize, ConfigError> {
    let tools = ToolRegistry::builtin();
    let place = ConfigPlace {
        dir: Path::new("."),
        tools: &tools,
    };
    load_agents_in(registry, toml_text, place)
}

/// [`load_agents`] with prompt files relative to `place.dir` and the tools of `place.tools`.
pub fn load_agents_in(
    registry: &mut Registry,
    toml_text: &str,
    place: ConfigPlace<'_>,
) -> Result<usize, ConfigError> {
    let agents = parse_config_in(toml_text, place)?;
    Ok(registry.add_new(agents.into_iter().map(Declared::into_agent))?)
}

/// [`load_agents`] from a file, its prompt files relative to the file's directory, its `llm`
/// agents' tools among `tools`.
pub fn load_agents_file(
    registry: &mut Registry,
    path: &Path,
    tools: &ToolRegistry,
) -> Result<usize, ConfigError> {
    let text = read_config(path)?;
    load_agents_in(
        registry,
        &text,
        ConfigPlace {
            dir: config_dir(path),
            tools,
        },
    )
}

/// The directory a config file's relative paths are relative to.
pub(crate) fn config_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Checks one hints list of an agent.
fn hints(name: &str, field: &'static str, list: Vec<String>) -> Result<Vec<String>, ConfigError> {
    if list.len() > HINTS_MAX {
        return Err(ConfigError::TooManyHints {
            name: name.to_owned(),
            field,
            count: list.len(),
        });
    }
    let list: Vec<String> = list.into_iter().map(|h| h.trim().to_owned()).collect();
    if list
        .iter()
        .any(|h| h.is_empty() || h.chars().count() > HINT_CHARS_MAX)
    {
        return Err(ConfigError::BadHint {
            name: name.to_owned(),
            field,
        });
    }
    Ok(list)
}

/// Parses and validates a config of `http` agents only (prompt files relative to the current
/// directory, the built-in tools); returns the agents in file order.
#[cfg(test)]
pub(crate) fn parse_config(toml_text: &str) -> Result<Vec<Declared>, ConfigError> {
    let tools = ToolRegistry::builtin();
    let place = ConfigPlace {
        dir: Path::new("."),
        tools: &tools,
    };
    parse_config_in(toml_text, place)
}

/// Parses and validates a config of agents only; returns the agents in file order.
pub(crate) fn parse_config_in(
    toml_text: &str,
    place: ConfigPlace<'_>,
) -> Result<Vec<Declared>, ConfigError> {
    let file = parse_file(toml_text)?;
    if !file.mcp_server.is_empty() {
        return Err(ConfigError::McpServersNotStarted {
            count: file.mcp_server.len(),
        });
    }
    agents_of(file.agent, place)
}

/// The file's tables, as TOML.
pub(crate) fn parse_file(toml_text: &str) -> Result<ConfigFile, ConfigError> {
    toml::from_str(toml_text).map_err(|e| {
        // `Display` of a TOML error is a multi-line snippet; one line with the position reads
        // better in a log and in a CLI's error line.
        let at = e.span().map(|span| {
            let head = &toml_text[..span.start.min(toml_text.len())];
            let line = head.matches('\n').count() + 1;
            let column = head.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: ")
        });
        ConfigError::Toml(format!("{}{}", at.unwrap_or_default(), e.message()))
    })
}

/// The agents of `[[agent]]` tables, checked; in file order.
pub(crate) fn agents_of(
    entries: Vec<AgentEntry>,
    place: ConfigPlace<'_>,
) -> Result<Vec<Declared>, ConfigError> {
    let mut out: Vec<Declared> = Vec::with_capacity(entries.len());
    for (i, mut entry) in entries.into_iter().enumerate() {
        let index = i + 1;
        let name = entry.name.take().ok_or(ConfigError::Missing {
            index,
            field: "name",
        })?;
        let valid_name = !name.is_empty()
            && name.len() <= NAME_CHARS_MAX
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !valid_name {
            return Err(ConfigError::BadName { index, name });
        }
        if out.iter().any(|a| a.name() == name) {
            return Err(ConfigError::Duplicate { name });
        }
        let agent = match entry.kind.as_deref().unwrap_or("http") {
            "http" => Declared::Http(http_agent(index, name, entry)?),
            "llm" => Declared::Llm(crate::llm::llm_agent(name, entry, place)?),
            other => {
                return Err(ConfigError::UnknownKind {
                    kind: other.to_owned(),
                    name,
                });
            }
        };
        out.push(agent);
    }
    Ok(out)
}

/// What every kind declares about itself: purpose, team, category and routing hints.
pub(crate) fn info(
    name: &str,
    entry: &mut AgentEntry,
    default_team: &str,
    default_purpose: impl FnOnce() -> String,
) -> Result<AgentInfo, ConfigError> {
    let category = entry
        .category
        .take()
        .unwrap_or_else(|| "general".to_owned());
    if !CATEGORIES.contains(&category.as_str()) {
        return Err(ConfigError::BadCategory {
            name: name.to_owned(),
            category,
        });
    }
    let hints = RoutingHints {
        keywords: hints(name, "keywords", std::mem::take(&mut entry.keywords))?,
        examples: hints(name, "examples", std::mem::take(&mut entry.examples))?,
    };
    let purpose = entry.purpose.take().unwrap_or_else(default_purpose);
    let team = entry.team.take().unwrap_or_else(|| default_team.to_owned());
    Ok(AgentInfo::new(name, &team, &purpose)
        .with_category(&category)
        .with_hints(hints))
}

/// One `http` agent of a config.
fn http_agent(index: usize, name: String, mut entry: AgentEntry) -> Result<HttpAgent, ConfigError> {
    let not_for = |field| ConfigError::NotForKind {
        name: name.clone(),
        field,
        kind: "http",
    };
    for (set, field) in [
        (entry.system_prompt.is_some(), "system_prompt"),
        (entry.system_prompt_file.is_some(), "system_prompt_file"),
        (entry.tools.is_some(), "tools"),
        (entry.max_turns.is_some(), "max_turns"),
        (entry.max_tool_calls.is_some(), "max_tool_calls"),
        (entry.model.is_some(), "model"),
        (
            entry.context_budget_tokens.is_some(),
            "context_budget_tokens",
        ),
    ] {
        if set {
            return Err(not_for(field));
        }
    }
    let url_text = entry.url.take().ok_or(ConfigError::Missing {
        index,
        field: "url",
    })?;
    let bad_url = |reason: &str| ConfigError::BadUrl {
        name: name.clone(),
        url: url_text.clone(),
        reason: reason.to_owned(),
    };
    let url = reqwest::Url::parse(&url_text).map_err(|e| bad_url(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad_url(&format!(
            "scheme {} is not http or https",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad_url("no host"));
    }
    let timeout_ms = entry.timeout_ms.unwrap_or(HTTP_AGENT_TIMEOUT_MS_DEFAULT);
    if !(1..=HTTP_AGENT_TIMEOUT_MS_MAX).contains(&timeout_ms) {
        return Err(ConfigError::BadTimeout { name, timeout_ms });
    }
    let host = url.host_str().unwrap_or_default().to_owned();
    let info = info(&name, &mut entry, "external", || {
        format!("external http agent at {host}")
    })?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(timeout_ms))
        .build()
        .map_err(|e| ConfigError::Client {
            name: name.clone(),
            message: e.to_string(),
        })?;
    Ok(HttpAgent {
        info,
        url,
        timeout_ms,
        client,
    })
}

pub(crate) fn read_config(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// The contract's request for one TODO.
pub fn request(agent: &str, ctx: &AgentContext, input: Value) -> AgentRequest {
    AgentRequest {
        contract: AGENT_CONTRACT.to_owned(),
        agent: agent.to_owned(),
        run_id: ctx.run_id.to_string(),
        session_id: ctx.session_id.to_string(),
        user_id: ctx.user_id.clone(),
        todo_id: ctx.todo_id.to_string(),
        attempt: ctx.attempt,
        query: ctx.query.clone(),
        intent: ctx.intent.clone(),
        input,
        team_results: ctx.team_results.clone(),
        history: ctx.turn.history.iter().map(HistoryTurn::of).collect(),
        memories: ctx.turn.memories.iter().map(RememberedItem::of).collect(),
        feedback: ctx.turn.feedback.clone(),
    }
}

#[async_trait::async_trait]
impl Agent for HttpAgent {
    fn info(&self) -> &AgentInfo {
        &self.info
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let body = request(&self.info.name, ctx, input);
        let mut post = self.client.post(self.url.clone()).json(&body);
        // The service's spans join the run's trace, under this attempt's span.
        if let Some(tp) = chronicle_engine::trace::traceparent() {
            post = post.header("traceparent", tp);
        }
        let mut response = post.send().await.map_err(|e| {
            if e.is_timeout() {
                self.fail(true, format!("timed out after {} ms", self.timeout_ms))
            } else {
                // Connection refused or reset, DNS: the service may be back on the next try.
                self.fail(true, format!("failed: {}", error_chain(&e)))
            }
        })?;
        let status = response.status();
        if let Some(len) = response.content_length()
            && len > HTTP_AGENT_RESPONSE_BYTES_MAX as u64
        {
            return Err(self.fail(
                false,
                format!("replied with {len} bytes, over {HTTP_AGENT_RESPONSE_BYTES_MAX}"),
            ));
        }
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let chunk = response.chunk().await.map_err(|e| {
                if e.is_timeout() {
                    self.fail(
                        true,
                        format!("timed out after {} ms reading the reply", self.timeout_ms),
                    )
                } else {
                    self.fail(true, format!("reply broke off: {}", error_chain(&e)))
                }
            })?;
            let Some(chunk) = chunk else { break };
            if bytes.len() + chunk.len() > HTTP_AGENT_RESPONSE_BYTES_MAX {
                return Err(self.fail(
                    false,
                    format!("replied with over {HTTP_AGENT_RESPONSE_BYTES_MAX} bytes"),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let snippet: String = String::from_utf8_lossy(&bytes)
                .chars()
                .take(ERROR_BODY_CHARS_MAX)
                .collect();
            // 5xx, 408 and 429 are the service's passing trouble; any other status says the
            // request itself is wrong, and sending it again will not help.
            let retryable = status.is_server_error()
                || status == reqwest::StatusCode::REQUEST_TIMEOUT
                || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
            let snippet = snippet.trim();
            let what = if snippet.is_empty() {
                format!("returned {status}")
            } else {
                format!("returned {status}: {snippet}")
            };
            return Err(self.fail(retryable, what));
        }
        let result: Value = serde_json::from_slice(&bytes).map_err(|e| {
            self.fail(
                false,
                format!("returned {status} with a body that is not JSON: {e}"),
            )
        })?;
        Ok(AgentOutput { result })
    }
}

/// `error: cause: cause`, because reqwest's top-level message hides the reason (refused, reset).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use axum::Json;
    use axum::Router;
    use axum::http::StatusCode;
    use axum::routing::post;
    use chronicle_schemas::{RunId, SessionId, TodoId};

    use serde_json::json;

    use super::*;

    /// A real HTTP server on 127.0.0.1:0 with one route per behaviour under test.
    async fn server() -> String {
        let app = Router::new()
            .route(
                "/echo",
                post(|Json(body): Json<Value>| async move {
                    Json(json!({"ok": true, "received": body}))
                }),
            )
            .route(
                "/fail",
                post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "database down") }),
            )
            .route(
                "/busy",
                post(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }),
            )
            .route(
                "/bad",
                post(|| async { (StatusCode::BAD_REQUEST, "missing field region") }),
            )
            .route("/text", post(|| async { "plain text, not json" }))
            .route(
                "/slow",
                post(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Json(json!({"late": true}))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    fn agent(url: &str, timeout_ms: u64) -> HttpAgent {
        let toml =
            format!("[[agent]]\nname = \"ext\"\nurl = \"{url}\"\ntimeout_ms = {timeout_ms}\n");
        http(parse_config(&toml).unwrap().remove(0))
    }

    /// How the agent at `url` fails.
    async fn failure(url: &str, timeout_ms: u64) -> AgentError {
        agent(url, timeout_ms)
            .run(&ctx(), Value::Null)
            .await
            .unwrap_err()
    }

    fn http(d: Declared) -> HttpAgent {
        match d {
            Declared::Http(a) => a,
            Declared::Llm(a) => panic!("not an http agent: {a:?}"),
        }
    }

    fn ctx() -> AgentContext {
        AgentContext {
            turn: Default::default(),
            run_id: RunId::from_u128(7),
            session_id: SessionId::new("s1"),
            todo_id: TodoId::new("todo_002"),
            attempt: 2,
            query: "강남 아파트".into(),
            intent: json!({"intent_type": "search"}),
            team_results: BTreeMap::from([("search_team".to_owned(), json!({"total_results": 3}))]),
            ..AgentContext::default()
        }
    }

    #[tokio::test]
    async fn posts_the_context_and_returns_the_reply() {
        let base = server().await;
        let a = agent(&format!("{base}/echo"), 5_000);
        let out = a
            .run(&ctx(), json!({"region": "강남구"}))
            .await
            .unwrap()
            .result;
        assert_eq!(out["ok"], true);
        let got = &out["received"];
        assert_eq!(got["contract"], "chronicle.agent.v1");
        assert_eq!(got["agent"], "ext");
        assert_eq!(got["run_id"], "00000000-0000-0000-0000-000000000007");
        assert_eq!(got["session_id"], "s1");
        assert_eq!(got["todo_id"], "todo_002");
        assert_eq!(got["attempt"], 2);
        assert_eq!(got["query"], "강남 아파트");
        assert_eq!(got["intent"], json!({"intent_type": "search"}));
        assert_eq!(got["input"], json!({"region": "강남구"}));
        assert_eq!(
            got["team_results"],
            json!({"search_team": {"total_results": 3}})
        );
    }

    #[tokio::test]
    async fn server_errors_are_retryable_and_client_errors_are_not() {
        let base = server().await;
        let err = failure(&format!("{base}/fail"), 5_000).await;
        assert!(err.retryable);
        assert_eq!(
            err.message,
            format!(
                "http agent `ext`: POST {base}/fail returned 500 Internal Server Error: database down"
            )
        );
        let err = failure(&format!("{base}/busy"), 5_000).await;
        assert!(err.retryable, "429 is worth another try");
        let err = failure(&format!("{base}/bad"), 5_000).await;
        assert!(!err.retryable);
        assert_eq!(
            err.message,
            format!(
                "http agent `ext`: POST {base}/bad returned 400 Bad Request: missing field region"
            )
        );
        let err = failure(&format!("{base}/text"), 5_000).await;
        assert!(!err.retryable);
        assert!(
            err.message
                .contains("returned 200 OK with a body that is not JSON"),
            "{}",
            err.message
        );
        let err = failure(&format!("{base}/nowhere"), 5_000).await;
        assert!(
            !err.retryable && err.message.contains("returned 404 Not Found"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn timeouts_and_refused_connections_are_retryable() {
        let base = server().await;
        let err = failure(&format!("{base}/slow"), 200).await;
        assert!(err.retryable);
        assert_eq!(
            err.message,
            format!("http agent `ext`: POST {base}/slow timed out after 200 ms")
        );

        // A port that was just free: nothing listens there.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = failure(&format!("http://{addr}/run"), 2_000).await;
        assert!(err.retryable);
        assert!(
            err.message.starts_with(&format!(
                "http agent `ext`: POST http://{addr}/run failed: "
            )),
            "{}",
            err.message
        );
    }

    #[test]
    fn config_defaults_and_fields() {
        let agents = parse_config(
            r#"
            [[agent]]
            name = "valuation"
            url = "http://127.0.0.1:9000/run"
            timeout_ms = 5000
            category = "payment"
            team = "analysis"
            purpose = "감정평가"
            keywords = ["감정", "valuation "]
            examples = ["이 아파트 감정가는?"]

            [[agent]]
            name = "notify"
            url = "https://example.com/hook"
            "#,
        )
        .unwrap();
        assert_eq!(agents.len(), 2);
        let mut agents = agents.into_iter().map(http);
        let (v, n) = (&agents.next().unwrap(), &agents.next().unwrap());
        assert_eq!(
            (v.name(), v.team(), v.category(), v.purpose()),
            ("valuation", "analysis", "payment", "감정평가")
        );
        assert_eq!(
            (v.url(), v.timeout_ms()),
            ("http://127.0.0.1:9000/run", 5000)
        );
        assert_eq!(
            (n.team(), n.category(), n.timeout_ms()),
            ("external", "general", HTTP_AGENT_TIMEOUT_MS_DEFAULT)
        );
        assert_eq!(n.purpose(), "external http agent at example.com");
        assert_eq!(v.info().hints.keywords, ["감정", "valuation"]);
        assert_eq!(v.info().hints.examples, ["이 아파트 감정가는?"]);
        assert!(n.info().hints.keywords.is_empty());
        assert_eq!(parse_config("").unwrap().len(), 0);
    }

    #[test]
    fn config_errors_name_the_problem() {
        let err = |toml: &str| parse_config(toml).unwrap_err().to_string();
        assert!(err("[[agent]\nname = ").starts_with("agents config is not valid TOML: "));
        assert_eq!(
            err("[[agent]]\nurl = \"http://x\""),
            "agent #1 has no `name`"
        );
        assert_eq!(
            err("[[agent]]\nname = \"a\"\nurl = \"http://x\"\n[[agent]]\nname = \"b\""),
            "agent #2 has no `url`"
        );
        assert_eq!(
            err("[[agent]]\nname = \"a\"\nurl = \"ftp://x/run\""),
            "agent `a`: url \"ftp://x/run\" is not an http(s) URL: scheme ftp is not http or https"
        );
        assert!(
            err("[[agent]]\nname = \"a\"\nurl = \"not a url\"")
                .starts_with("agent `a`: url \"not a url\" is not an http(s) URL: ")
        );
        assert_eq!(
            err(
                "[[agent]]\nname = \"a\"\nurl = \"http://x\"\n[[agent]]\nname = \"a\"\nurl = \"http://y\""
            ),
            "agent `a` is defined twice"
        );
        assert_eq!(
            err("[[agent]]\nname = \"a\"\nurl = \"http://x\"\ntimeout_ms = 0"),
            "agent `a`: timeout_ms 0 is outside 1..=600000"
        );
        assert_eq!(
            err("[[agent]]\nname = \"a\"\nurl = \"http://x\"\ncategory = \"payments\""),
            "agent `a`: category \"payments\" is not one of contract, payment, sensitive, general"
        );
        assert_eq!(
            err("[[agent]]\nname = \"My Agent\"\nurl = \"http://x\""),
            "agent #1: name \"My Agent\" must be 1-64 characters of a-z, 0-9, `_` or `-`"
        );
        assert!(
            err("[[agent]]\nname = \"a\"\nurl = \"http://x\"\ntimeout = 5")
                .contains("unknown field `timeout`")
        );
        assert_eq!(
            err("[[agent]]\nname = \"a\"\nurl = \"http://x\"\nkeywords = [\" \"]"),
            "agent `a`: a keywords entry is empty or longer than 200 characters"
        );
        let many: Vec<String> = (0..65).map(|i| format!("\"k{i}\"")).collect();
        assert_eq!(
            err(&format!(
                "[[agent]]\nname = \"a\"\nurl = \"http://x\"\nexamples = [{}]",
                many.join(",")
            )),
            "agent `a`: examples has 65 entries, over 64"
        );
    }

    #[test]
    fn registry_loads_all_or_nothing() {
        let mut r = Registry::empty();
        load_agents(
            &mut r,
            "[[agent]]\nname = \"search_team\"\nurl = \"http://y\"",
        )
        .unwrap();
        let before: Vec<String> = r.names().map(str::to_owned).collect();
        let err = load_agents(&mut r, "[[agent]]\nname = \"ext\"\nurl = \"http://x\"\n[[agent]]\nname = \"search_team\"\nurl = \"http://y\"")
            .unwrap_err();
        assert_eq!(err.to_string(), "agent `search_team` is already registered");
        assert_eq!(
            r.names().map(str::to_owned).collect::<Vec<_>>(),
            before,
            "nothing registered"
        );
        assert_eq!(
            load_agents(&mut r, "[[agent]]\nname = \"ext\"\nurl = \"http://x\"").unwrap(),
            1
        );
        assert_eq!(r.get("ext").unwrap().category(), "general");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agents.toml");
        std::fs::write(&path, "[[agent]]\nname = \"valuation\"\nurl = \"http://127.0.0.1:9/run\"\ncategory = \"payment\"").unwrap();
        let tools = ToolRegistry::builtin();
        assert_eq!(load_agents_file(&mut r, &path, &tools).unwrap(), 1);
        assert_eq!(r.get("valuation").unwrap().category(), "payment");
        let missing = dir.path().join("nope.toml");
        let err = load_agents_file(&mut r, &missing, &tools).unwrap_err();
        assert!(err.to_string().starts_with(&format!(
            "cannot read agents config {}: ",
            missing.display()
        )));
    }
}
