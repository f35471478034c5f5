//! One registered MCP server: its tools (listed at start, listed again when the server says they
//! changed), its instance (one for the engine, or one per conversation's workspace, stopped when
//! idle), and [`connect`], which starts it and registers it with a tool registry.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use chronicle_engine::tools::{Tool, ToolContext, ToolRegistry, ToolSource};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::config::{McpServerConfig, Resolved, Scope};
use crate::error::Error;
use crate::handler::Handler;
use crate::instance::{Instance, START_TIMEOUT_MS};
use crate::tool::{McpTool, TOOL_DESCRIPTION_CHARS_MAX, shorten, valid_name};

/// The `_meta` key of a call's idempotency key (`run/todo/attempt/index`): the same for every
/// execution of one recorded call, so a server can recognise the rare repeat (a call whose
/// completion was not recorded before a crash runs again).
pub const IDEMPOTENCY_META_KEY: &str = "chronicle/idempotency_key";
/// How long a call's answer waits at most for the tool list it changed to be listed again.
const REFRESH_WAIT_MAX: Duration = Duration::from_secs(5);
/// Times a finished call yields before it looks for refreshes under way (see `Inner::call`).
const NOTIFICATION_YIELDS: usize = 4;
/// How often a session-scoped server's idle processes are looked for, at most (and at least
/// every tenth of a second).
const IDLE_CHECK_EVERY_MAX: Duration = Duration::from_secs(10);

pub(crate) struct Inner {
    cfg: Arc<Resolved>,
    tools: RwLock<BTreeMap<String, Arc<McpTool>>>,
    /// Names other tools held when the server was registered: a refreshed list leaves them out.
    taken: RwLock<BTreeSet<String>>,
    /// The server-scoped instance.
    main: Option<Arc<Instance>>,
    /// The session-scoped instances, by workspace directory.
    sessions: Mutex<HashMap<PathBuf, Arc<Instance>>>,
    /// Refreshes of the tool list under way (the server said its list changed).
    refreshing: Arc<(std::sync::atomic::AtomicU32, tokio::sync::Notify)>,
    me: Weak<Inner>,
}

/// A refresh of the tool list under way, until dropped.
pub(crate) struct Refreshing(Arc<(std::sync::atomic::AtomicU32, tokio::sync::Notify)>);

impl Drop for Refreshing {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.1.notify_waiters();
    }
}

/// What a server's tool list makes of the tools: checked strictly at start (every problem is an
/// error), leniently on a refresh (a bad tool is left out and logged).
enum Strictness {
    Start,
    Refresh,
}

impl Inner {
    fn handler(&self) -> Handler {
        Handler {
            server: self.me.clone(),
        }
    }

    /// The tools of a `tools/list` answer, named and checked.
    fn build(
        &self,
        listed: Vec<rmcp::model::Tool>,
        how: &Strictness,
    ) -> Result<BTreeMap<String, Arc<McpTool>>, Error> {
        let server = &self.cfg.name;
        let taken = self.taken.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut out: BTreeMap<String, Arc<McpTool>> = BTreeMap::new();
        for t in listed {
            let mcp_name = t.name.to_string();
            let name = self.cfg.tool_name(&mcp_name);
            let problem = if out.values().any(|o| o.mcp_name == mcp_name) {
                Some(Error::DuplicateTool {
                    server: server.clone(),
                    tool: mcp_name.clone(),
                })
            } else if !valid_name(&name) {
                Some(Error::BadToolName {
                    server: server.clone(),
                    tool: mcp_name.clone(),
                    name: name.clone(),
                })
            } else if matches!(how, Strictness::Refresh) && taken.contains(&name) {
                Some(Error::Clash {
                    server: server.clone(),
                    tool: name.clone(),
                    holder: "another tool's name".into(),
                })
            } else {
                None
            };
            if let Some(e) = problem {
                match how {
                    Strictness::Start => return Err(e),
                    Strictness::Refresh => {
                        tracing::warn!(error = %e, "a listed MCP tool is left out");
                        continue;
                    }
                }
            }
            out.insert(name.clone(), Arc::new(self.tool(name, mcp_name, t)));
        }
        Ok(out)
    }

    fn tool(&self, name: String, mcp_name: String, t: rmcp::model::Tool) -> McpTool {
        let schema = Value::Object((*t.input_schema).clone());
        let validator = match jsonschema::validator_for(&schema) {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::warn!(server = %self.cfg.name, tool = %mcp_name, error = %e,
                    "the tool's input schema cannot be compiled; its args go unchecked");
                None
            }
        };
        let annotations = t.annotations.as_ref();
        // `destructiveHint` means something only for a tool that is not read-only.
        let destructive = annotations
            .is_some_and(|a| a.destructive_hint == Some(true) && a.read_only_hint != Some(true));
        let description = t
            .description
            .as_deref()
            .or(t.title.as_deref())
            .unwrap_or(&mcp_name)
            .to_owned();
        McpTool {
            gated: destructive || self.cfg.gated.contains(&mcp_name),
            name,
            description: shorten(&description, TOOL_DESCRIPTION_CHARS_MAX),
            schema,
            validator,
            server_name: self.cfg.name.clone(),
            timeout: self.cfg.timeout,
            server: self.me.clone(),
            mcp_name,
        }
    }

    pub(crate) fn refresh_started(&self) -> Refreshing {
        self.refreshing
            .0
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Refreshing(self.refreshing.clone())
    }

    /// Waits (until `deadline` at most) for the refreshes under way: a call that changed the
    /// tool list answers once the new list is there, so the agent's next turn offers it.
    async fn refreshed(&self, deadline: tokio::time::Instant) {
        let (count, notify) = &*self.refreshing;
        loop {
            let notified = notify.notified();
            if count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Lists the tools again (the server said they changed, or it was restarted).
    pub(crate) async fn refresh(&self, peer: &Peer<RoleClient>) {
        let limit = Duration::from_millis(START_TIMEOUT_MS);
        let listed = match tokio::time::timeout(limit, peer.list_all_tools()).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                tracing::warn!(server = %self.cfg.name, error = %e, "listing an MCP server's tools again failed; the old list stays");
                return;
            }
            Err(_) => {
                tracing::warn!(server = %self.cfg.name, "listing an MCP server's tools again timed out; the old list stays");
                return;
            }
        };
        let Ok(tools) = self.build(listed, &Strictness::Refresh) else {
            return;
        };
        let names: Vec<&String> = tools.keys().collect();
        tracing::info!(server = %self.cfg.name, tools = ?names, "MCP server's tools listed again");
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = tools;
    }

    /// The instance that serves calls from `ctx`'s conversation, entered for one call.
    fn instance_for(&self, ctx: &ToolContext) -> Result<crate::instance::Entered, String> {
        if let Some(main) = &self.main {
            return Ok(main.enter());
        }
        ctx.workspace.dir().map_err(|e| e.to_string())?;
        let dir = std::path::absolute(ctx.workspace.root()).map_err(|e| e.to_string())?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let instance = sessions.entry(dir.clone()).or_insert_with(|| {
            Arc::new(Instance::new(self.cfg.clone(), self.handler(), Some(dir)))
        });
        Ok(instance.enter())
    }

    pub(crate) async fn call(
        &self,
        ctx: &ToolContext,
        tool: &str,
        args: Value,
        timeout: Duration,
    ) -> Result<CallToolResult, String> {
        let Value::Object(args) = args else {
            return Err("the arguments must be a JSON object".into());
        };
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let mut meta = serde_json::Map::new();
        if !ctx.idempotency_key.is_empty() {
            meta.insert(IDEMPOTENCY_META_KEY.into(), json!(ctx.idempotency_key));
        }
        // The trace context, where the OpenTelemetry conventions for MCP put it: the server's
        // spans join the run's trace under the tool call's span.
        if let Some(tp) = chronicle_engine::trace::traceparent() {
            meta.insert("traceparent".into(), json!(tp));
        }
        if !meta.is_empty() {
            params.meta = Some(meta.into());
        }
        let entered = self.instance_for(ctx)?;
        let result =
            entered.0.call(params).await.map_err(|e| {
                crate::tool::shorten(&e.to_string(), crate::tool::TOOL_ERROR_CHARS_MAX)
            });
        // The SDK hands a notification that came before the answer to a task of its own,
        // spawned before this call is woken, but the woken call may run first: let the
        // notification's task count its refresh before looking.
        for _ in 0..NOTIFICATION_YIELDS {
            tokio::task::yield_now().await;
        }
        self.refreshed(tokio::time::Instant::now() + timeout.min(REFRESH_WAIT_MAX))
            .await;
        result
    }

    /// Stops the session processes idle for `idle_ms`.
    async fn stop_idle(&self) {
        let idle: Vec<Arc<Instance>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let gone: Vec<PathBuf> = sessions
                .iter()
                .filter(|(_, i)| i.idle_for().is_some_and(|d| d >= self.cfg.idle))
                .map(|(dir, _)| dir.clone())
                .collect();
            gone.iter().filter_map(|d| sessions.remove(d)).collect()
        };
        for instance in idle {
            tracing::info!(server = %self.cfg.name, ?instance, "stopping an idle MCP server");
            instance.stop().await;
        }
    }

    async fn stop_all(&self) {
        if let Some(main) = &self.main {
            main.stop().await;
        }
        let sessions: Vec<Arc<Instance>> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, i)| i)
            .collect();
        for instance in sessions {
            instance.stop().await;
        }
    }
}

/// A registered MCP server: a [`ToolSource`] whose tools are the server's. Clones share it; its
/// processes are stopped by [`stop`](ToolSource::stop) (the engine's shutdown) and killed when
/// the last clone goes.
#[derive(Clone)]
pub struct McpServer(Arc<Inner>);

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.0.cfg.name)
            .field("tools", &self.tool_names())
            .finish()
    }
}

impl McpServer {
    pub fn name(&self) -> &str {
        &self.0.cfg.name
    }

    /// The tools' names as the model sees them, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.0
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// The process ids of its running stdio processes (the server's, or each session's).
    pub async fn pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        if let Some(main) = &self.0.main {
            out.extend(main.pid().await);
        }
        let sessions: Vec<Arc<Instance>> = self
            .0
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for s in sessions {
            out.extend(s.pid().await);
        }
        out
    }
}

#[async_trait::async_trait]
impl ToolSource for McpServer {
    fn name(&self) -> &str {
        &self.0.cfg.name
    }
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.0
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|t| t.clone() as Arc<dyn Tool>)
            .collect()
    }
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.0
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .map(|t| t.clone() as Arc<dyn Tool>)
    }
    async fn stop(&self) {
        self.0.stop_all().await;
    }
}

/// Starts the server of `config`, lists its tools and registers them with `registry` (as one
/// [`ToolSource`]). A session-scoped server is listed by a process started in a temporary
/// directory, then stopped; its conversations' processes start on their first calls.
///
/// Refused, with nothing registered and nothing left running, when the entry is invalid, the
/// server cannot be started or listed, it lists two tools with one name or a name a model cannot
/// call, `gated` names a tool it does not list, or one of its tools has the name of a tool the
/// registry holds (built in or another server's).
pub async fn connect(
    config: &McpServerConfig,
    registry: &mut ToolRegistry,
) -> Result<McpServer, Error> {
    let cfg = Arc::new(config.resolve()?);
    let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
        let handler = Handler { server: me.clone() };
        Inner {
            main: (cfg.scope == Scope::Server)
                .then(|| Arc::new(Instance::new(cfg.clone(), handler, None))),
            cfg: cfg.clone(),
            tools: RwLock::default(),
            taken: RwLock::new(registry.names().into_iter().collect()),
            sessions: Mutex::default(),
            refreshing: Arc::default(),
            me: me.clone(),
        }
    });
    // A session-scoped server is listed from a process of its own in a directory of its own.
    let probe_dir = match cfg.scope {
        Scope::Server => None,
        Scope::Session => Some(tempfile::tempdir().map_err(|e| Error::Start {
            server: cfg.name.clone(),
            reason: crate::error::StartError::Spawn {
                command: "(a temporary directory)".into(),
                message: e.to_string(),
            },
        })?),
    };
    let instance = match &inner.main {
        Some(main) => main.clone(),
        None => Arc::new(Instance::new(
            cfg.clone(),
            inner.handler(),
            probe_dir.as_ref().map(|d| d.path().to_owned()),
        )),
    };
    let listed = list(&cfg.name, &instance).await;
    let checked = listed.and_then(|listed| {
        let tools = inner.build(listed, &Strictness::Start)?;
        check_against(&cfg, &tools, registry)?;
        Ok(tools)
    });
    if probe_dir.is_some() || checked.is_err() {
        instance.stop().await;
    }
    *inner.tools.write().unwrap_or_else(|e| e.into_inner()) = checked?;
    let server = McpServer(inner);
    registry
        .add_source(Arc::new(server.clone()))
        .map_err(|c| Error::Clash {
            server: cfg.name.clone(),
            tool: c.tool,
            holder: c.holder,
        })?;
    if cfg.scope == Scope::Session {
        spawn_idle_stopper(Arc::downgrade(&server.0), cfg.idle);
    }
    tracing::info!(server = %cfg.name, tools = ?server.tool_names(), "MCP server registered");
    Ok(server)
}

/// [`connect`] for each entry, in order: all or nothing (on an error the servers started before
/// are stopped and nothing is registered).
pub async fn connect_all(
    configs: &[McpServerConfig],
    registry: &mut ToolRegistry,
) -> Result<Vec<McpServer>, Error> {
    let mut staged = registry.clone();
    let mut servers: Vec<McpServer> = Vec::with_capacity(configs.len());
    for (i, config) in configs.iter().enumerate() {
        let outcome = if configs[..i].iter().any(|c| c.name == config.name) {
            Err(Error::Duplicate {
                server: config.name.clone(),
            })
        } else {
            connect(config, &mut staged).await
        };
        match outcome {
            Ok(server) => servers.push(server),
            Err(e) => {
                for s in &servers {
                    s.stop().await;
                }
                return Err(e);
            }
        }
    }
    *registry = staged;
    Ok(servers)
}

async fn list(server: &str, instance: &Instance) -> Result<Vec<rmcp::model::Tool>, Error> {
    let conn = instance.start().await.map_err(|reason| Error::Start {
        server: server.to_owned(),
        reason,
    })?;
    let list_error = |reason: String| Error::List {
        server: server.to_owned(),
        reason,
    };
    let peer = conn
        .peer()
        .cloned()
        .ok_or_else(|| list_error("no connection".into()))?;
    let limit = Duration::from_millis(START_TIMEOUT_MS);
    tokio::time::timeout(limit, peer.list_all_tools())
        .await
        .map_err(|_| list_error(format!("no answer within {START_TIMEOUT_MS} ms")))?
        .map_err(|e| list_error(e.to_string()))
}

/// The entry's `gated` names tools the server lists, and no tool takes a name the registry holds.
fn check_against(
    cfg: &Resolved,
    tools: &BTreeMap<String, Arc<McpTool>>,
    registry: &ToolRegistry,
) -> Result<(), Error> {
    for g in &cfg.gated {
        if !tools.values().any(|t| &t.mcp_name == g) {
            return Err(Error::UnknownGated {
                server: cfg.name.clone(),
                tool: g.clone(),
                known: tools.values().map(|t| t.mcp_name.clone()).collect(),
            });
        }
    }
    for name in tools.keys() {
        if let Some(holder) = registry.holder(name) {
            return Err(Error::Clash {
                server: cfg.name.clone(),
                tool: name.clone(),
                holder,
            });
        }
    }
    Ok(())
}

/// Stops a session-scoped server's idle processes until the server goes.
fn spawn_idle_stopper(server: Weak<Inner>, idle: Duration) {
    let every = (idle / 2).clamp(Duration::from_millis(100), IDLE_CHECK_EVERY_MAX);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(server) = server.upgrade() else {
                return;
            };
            server.stop_idle().await;
        }
    });
}
