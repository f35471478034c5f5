//! `chronicle serve`: the HTTP server, on the embedded store or on PostgreSQL (`--store`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::store::{Create, Durability, Location, Options, PgLog, Store};
use chronicle_engine::{Engine, Settings};
use chronicle_schemas::{HitlMode, OnReject};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  chronicle serve\n  chronicle serve --addr 0.0.0.0:8080 --tokens tokens.txt\n  chronicle serve --cors-origin http://localhost:5173\n  CHRONICLE_API_TOKEN=$(openssl rand -hex 16) chronicle serve --hitl-default every_todo\n\nA full disk is answered with 507 and /healthz reports `\"storage\": \"full\"` until space is freed; appends then resume by themselves. The store keeps --disk-reserve-mib free; on a file system that reports no size the free space cannot be known, and only a failed write tells.\n\nThe data directory is created 0700 and every file in it 0600; a looser existing directory or tokens file is warned about at start.\n\nA connection over --connections-max, and a stream (SSE or WebSocket) over --streams-max or --streams-per-principal-max, is answered 503 with Retry-After (`too_many_connections`, `too_many_streams`). The soft limit on open files is raised to the hard one at start (every connection is a file descriptor).\n\nExit codes: 0 clean shutdown, 2 could not start (bad flag, broken store, refused bind), 3 stopped after a failed fsync (nothing unacknowledged was acknowledged; restart to recover), or a node of a cluster that another node took over (its lease ran out: restart it).\n\nSeveral nodes: give each --node-name, the same --store postgres://…, --cluster-token-file and --workspace-root (shared storage), and put them behind one load balancer; any node answers, and a change to a session goes to the node that drives it."
)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Data directory (sled store, blobs, workspaces).
    #[arg(long, env = "CHRONICLE_DATA", default_value = "./.chronicle")]
    data: PathBuf,
    /// Keep the log on PostgreSQL instead of the data directory: `postgres://user@host/db`
    /// (`?schema=NAME` picks the schema, `chronicle` by default; created on first start). The
    /// data directory then holds only the workspaces (see --workspace-root).
    #[arg(long, env = "CHRONICLE_STORE", value_name = "URL", value_parser = parse_store)]
    store: Option<Location>,
    /// Where session workspaces (the files agents read and write) live; default
    /// `<data directory>/workspaces`.
    #[arg(long, env = "CHRONICLE_WORKSPACE_ROOT", value_name = "DIR")]
    workspace_root: Option<PathBuf>,
    /// `sync` acknowledges appends after the durability barrier; `async` before it (see
    /// docs/operations.md).
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// HITL policy for runs whose request names none (default: the domain's — `tools` for the
    /// data domain, `none` for the others).
    #[arg(long, value_parser = parse_hitl)]
    hitl_default: Option<HitlMode>,
    /// What a rejected approval does in runs whose request names nothing: `skip` what it gated
    /// and carry on, or `end_turn` (the run answers with what was rejected and why).
    #[arg(long, value_parser = parse_on_reject, default_value = "skip")]
    on_reject: OnReject,
    /// File of `principal token [admin]` lines; requests then need `Authorization: Bearer
    /// <token>`, and each principal sees only its own runs (an `admin` sees all).
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Allow binding a non-loopback address without tokens. Bound to every interface (`0.0.0.0`)
    /// it also needs --allowed-host: it would answer any Host otherwise (DNS rebinding).
    #[arg(long)]
    insecure: bool,
    /// A name the server answers to besides its address and the loopback names, as `name`
    /// (any port) or `name:port` — e.g. the name a reverse proxy forwards (repeatable). Other
    /// `Host` headers get 400, which stops DNS-rebinding pages.
    #[arg(long = "allowed-host", value_name = "NAME", value_parser = parse_host)]
    allowed_hosts: Vec<String>,
    /// The origin of a browser UI served elsewhere that may call the API, e.g.
    /// `https://ui.example.com` (repeatable). Pages of other origins get 403.
    #[arg(long = "cors-origin", value_name = "ORIGIN", value_parser = parse_origin)]
    cors_origins: Vec<String>,
    #[command(flatten)]
    domain: crate::domain::DomainArgs,
    /// Drop an undecodable final record of the log instead of refusing to start. It cannot
    /// repair a bad record before the last one (`chronicle verify` names its offset) or damage
    /// inside sled's log (then sled cannot open the store: restore the data directory from a
    /// backup or copy). A damaged body file record is kept and named, and a damaged sled
    /// snapshot file set aside, without it.
    #[arg(long)]
    repair_truncate_tail: bool,
    /// Free disk space the store keeps, in MiB: an append that would leave less is refused with
    /// 507 and /healthz says full. 0 keeps none (a full disk then shows as a failed write).
    #[arg(long, value_name = "MIB", default_value_t = Options::default().disk_reserve_bytes >> 20)]
    disk_reserve_mib: u64,
    /// Memory for sled's page cache, in MiB: the store's pages kept in memory, whatever the
    /// store's size.
    #[arg(long, value_name = "MIB", default_value_t = Options::default().cache_capacity_bytes >> 20)]
    store_cache_mib: u64,
    /// Runs whose facts (owner, user, deleted or not) are kept in memory to authorize requests.
    #[arg(long, value_name = "RUNS", default_value_t = Settings::default().facts_cache_runs)]
    facts_cache_runs: usize,
    /// Events the kept states of recently ended long runs may fold in all.
    #[arg(long, value_name = "EVENTS", default_value_t = Settings::default().idle_cache_events)]
    ended_runs_cache_events: u64,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// On PostgreSQL: how long a transaction may sit idle before the database ends it, in ms.
    /// A server that stalls while it holds the log's head (a paused VM, a stopped process)
    /// holds up every other node's appends at most this long.
    #[arg(long, value_name = "MS", default_value_t = Options::default().pg_idle_in_transaction_ms, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pg_idle_in_transaction_ms: u64,
    /// A fault drill for the tests: hold the log head this long inside every append.
    #[arg(long, hide = true, value_name = "MS", default_value_t = 0)]
    pg_drill_hold_lock_ms: u64,
    /// Put the runs' content in the exported spans: the query, the model's answers, the tools'
    /// arguments and results (also `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    /// Traces are exported when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; the model's key never is.
    #[arg(long)]
    trace_content: bool,
    /// How log lines are written to stderr: `text`, or `json` (one object per line, with
    /// `trace_id`, `span_id` and `run_id` on the lines of a run's work).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
}

/// The format of the server's log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Several nodes on one PostgreSQL store.
#[derive(Debug, clap::Args)]
struct ClusterArgs {
    /// Run as a node of a cluster under this name (unique among the nodes, the same across
    /// restarts): several `serve` processes on one PostgreSQL store, each driving the runs of
    /// the sessions it owns, any of them answering. Needs --store, --cluster-token-file and
    /// --workspace-root on storage every node shares.
    #[arg(long, env = "CHRONICLE_NODE_NAME", value_name = "NAME", value_parser = parse_node_name)]
    node_name: Option<String>,
    /// Where the other nodes reach this one, e.g. `http://10.0.0.11:8080`; default
    /// `http://<the bound address>` (which must then not be 0.0.0.0).
    #[arg(long, env = "CHRONICLE_ADVERTISE_URL", value_name = "URL", value_parser = parse_advertise)]
    advertise_url: Option<String>,
    /// File holding the secret the nodes show each other when one sends another a request on a
    /// caller's behalf (the same file on every node; at least 16 characters).
    #[arg(long, env = "CHRONICLE_CLUSTER_TOKEN_FILE", value_name = "FILE")]
    cluster_token_file: Option<PathBuf>,
    /// How often a node tells the others it lives, in ms; it looks for dead nodes and sessions
    /// due twice as often.
    #[arg(long, value_name = "MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    heartbeat_ms: u64,
    /// A node silent this long is declared dead even if its process may live (a partition, a
    /// stopped process), in ms; its sessions go to the others.
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(500..=600_000))]
    lease_ms: u64,
    /// A node whose process is gone (its connection to the database closed) is declared dead
    /// once silent this long, in ms.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=600_000))]
    crash_grace_ms: u64,
    /// A session whose runs all ended or wait for a person is released after this long without
    /// work, in ms: it then holds nothing on any node until an input or its next timer.
    #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    release_idle_ms: u64,
}

fn parse_node_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match ok {
        true => Ok(s.to_owned()),
        false => {
            Err("a node name is 1 to 64 characters of letters, digits, `-`, `_` and `.`".into())
        }
    }
}

fn parse_advertise(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or("the advertised URL starts with http:// or https://")?;
    if rest.is_empty() || rest.contains(['?', '#', ' ']) {
        return Err("the advertised URL is `http://host:port`, with no query".into());
    }
    Ok(s.trim_end_matches('/').to_owned())
}

impl ClusterArgs {
    /// The node's settings (with the cluster's secret); `None` without --node-name.
    fn settings(
        &self,
        store: &Location,
        workspace_root: Option<&PathBuf>,
        addr: SocketAddr,
    ) -> anyhow::Result<Option<chronicle_engine::ClusterSettings>> {
        let Some(name) = &self.node_name else {
            for (given, flag) in [
                (self.advertise_url.is_some(), "--advertise-url"),
                (self.cluster_token_file.is_some(), "--cluster-token-file"),
            ] {
                anyhow::ensure!(
                    !given,
                    "{flag} is for a node of a cluster: give --node-name too"
                );
            }
            return Ok(None);
        };
        anyhow::ensure!(
            matches!(store, Location::Postgres(_)),
            "--node-name needs a store the nodes share: --store postgres://…"
        );
        anyhow::ensure!(
            workspace_root.is_some(),
            "--node-name needs --workspace-root on storage every node shares (a session's files \
             must be there when another node takes the session over)"
        );
        let path = self
            .cluster_token_file
            .as_ref()
            .context("--node-name needs --cluster-token-file: the secret the nodes share")?;
        warn_if_others_read(path);
        let secret = std::fs::read_to_string(path)
            .with_context(|| format!("reading the cluster token {}", path.display()))?
            .trim()
            .to_owned();
        let url = match &self.advertise_url {
            Some(url) => url.clone(),
            None if addr.ip().is_unspecified() => anyhow::bail!(
                "--addr {addr} listens on every interface: say where the other nodes reach this \
                 one with --advertise-url"
            ),
            None => format!("http://{addr}"),
        };
        anyhow::ensure!(
            self.crash_grace_ms >= 2 * self.heartbeat_ms,
            "--crash-grace-ms ({}) must be at least two heartbeats (--heartbeat-ms {})",
            self.crash_grace_ms,
            self.heartbeat_ms
        );
        anyhow::ensure!(
            self.crash_grace_ms < self.lease_ms,
            "--crash-grace-ms ({}) must be less than --lease-ms ({})",
            self.crash_grace_ms,
            self.lease_ms
        );
        anyhow::ensure!(
            self.heartbeat_ms * 2 < self.lease_ms,
            "--lease-ms ({}) must be more than two heartbeats (--heartbeat-ms {})",
            self.lease_ms,
            self.heartbeat_ms
        );
        let mut c = chronicle_engine::ClusterSettings::new(name.clone(), url);
        c.heartbeat_ms = self.heartbeat_ms;
        c.lease_ms = self.lease_ms;
        c.crash_grace_ms = self.crash_grace_ms;
        c.release_idle_ms = self.release_idle_ms;
        // Checked as a token is, before the node joins.
        Tokens::none()
            .with_cluster_secret(&secret)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        c.secret = secret;
        Ok(Some(c))
    }
}

/// The connection and stream limits an operator tunes (the rest keep `ApiConfig`'s defaults).
#[derive(Debug, clap::Args)]
struct LimitArgs {
    /// How long a request head may take to arrive, in ms (from the connection's opening, or the
    /// first byte of a later request); then the connection is closed.
    #[arg(long, default_value_t = ApiConfig::default().header_read_timeout_ms)]
    header_read_timeout_ms: u64,
    /// How long a request body may take to arrive, in ms; then 408 and the connection is closed.
    #[arg(long, default_value_t = ApiConfig::default().body_read_timeout_ms)]
    body_read_timeout_ms: u64,
    /// How long a keep-alive connection waits for its next request, in ms.
    #[arg(long, default_value_t = ApiConfig::default().idle_timeout_ms)]
    idle_timeout_ms: u64,
    /// Connections served at once (WebSockets included); one more is answered 503.
    #[arg(long, default_value_t = ApiConfig::default().connections_max)]
    connections_max: usize,
    /// SSE and WebSocket streams open at once, in all; one more is answered 503.
    #[arg(long, default_value_t = ApiConfig::default().streams_max)]
    streams_max: usize,
    /// SSE and WebSocket streams one principal may hold open at once.
    #[arg(long, default_value_t = ApiConfig::default().streams_per_principal_max)]
    streams_per_principal_max: usize,
    /// How long a response may wait for its client to read more of it, in ms; then the
    /// connection is closed.
    #[arg(long, default_value_t = ApiConfig::default().send_timeout_ms)]
    send_timeout_ms: u64,
    /// State-changing requests an ordinary principal may make a second, on average (0: no
    /// quota); past it 429. Admins are not limited.
    #[arg(long, default_value_t = ApiConfig::default().writes_per_principal_per_s)]
    writes_per_principal_per_s: u32,
    /// The burst of state-changing requests an ordinary principal may make at once.
    #[arg(long, default_value_t = ApiConfig::default().writes_per_principal_burst)]
    writes_per_principal_burst: u32,
}

impl LimitArgs {
    fn config(&self) -> ApiConfig {
        ApiConfig {
            header_read_timeout_ms: self.header_read_timeout_ms,
            body_read_timeout_ms: self.body_read_timeout_ms,
            idle_timeout_ms: self.idle_timeout_ms,
            connections_max: self.connections_max,
            streams_max: self.streams_max,
            streams_per_principal_max: self.streams_per_principal_max,
            send_timeout_ms: self.send_timeout_ms,
            writes_per_principal_per_s: self.writes_per_principal_per_s,
            writes_per_principal_burst: self.writes_per_principal_burst,
            ..ApiConfig::default()
        }
    }
}

/// Exit code after a failed fsync stopped the store.
const EXIT_STORAGE_FAILED: i32 = 3;

/// File descriptors the server needs besides its connections (the store's files, the listener,
/// agents' and the model's connections), for the warning about a low limit.
const FILES_BESIDES_CONNECTIONS: u64 = 256;

/// Raises the soft limit on open files to the hard one, because every connection is a file
/// descriptor and the usual soft limit (1024) is below the connection cap; logs the limit.
fn raise_open_files_limit(connections_max: usize) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let mut current = limit.current;
    if limit.maximum.is_some() && limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => current = limit.maximum,
            Err(e) => tracing::warn!(error = %e, "cannot raise the limit on open files"),
        }
    }
    let Some(open_files_max) = current else {
        tracing::info!("open files: no limit");
        return;
    };
    tracing::info!(open_files_max, "open files limit");
    if open_files_max < connections_max as u64 + FILES_BESIDES_CONNECTIONS {
        tracing::warn!(
            open_files_max,
            connections_max,
            "the limit on open files is below the connection cap plus {FILES_BESIDES_CONNECTIONS}: \
             connections past it cannot be accepted (raise the hard limit, e.g. `ulimit -Hn`)"
        );
    }
}

/// Warns, in one line, when the tokens file at `path` lets other users read it (or write it).
fn warn_if_others_read(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        tracing::warn!(
            "the tokens file {} is mode {mode:04o}: other local users may read the tokens; restrict it with `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
}

pub fn parse_on_reject(s: &str) -> Result<OnReject, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned()))
        .map_err(|_| format!("on_reject must be skip or end_turn, got {s:?}"))
}

pub fn parse_hitl(s: &str) -> Result<HitlMode, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).map_err(|_| {
        format!("HITL policy must be none, every_todo, categories or tools, got {s:?}")
    })
}

fn parse_host(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    ok.then(|| s.to_owned())
        .ok_or_else(|| format!("a host is `name` or `name:port`, got {s:?}"))
}

fn parse_origin(s: &str) -> Result<String, String> {
    let s = s.trim_end_matches('/');
    let authority = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or_else(|| format!("an origin is `http(s)://host[:port]`, got {s:?}"))?;
    if authority.contains('/') {
        return Err(format!("an origin has no path, got {s:?}"));
    }
    parse_host(authority).map(|_| s.to_owned())
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    crate::logs::init(args.log_format);
    let tokens = match (
        &args.tokens,
        std::env::var("CHRONICLE_API_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    ) {
        (Some(path), _) => Tokens::from_file(path).map_err(anyhow::Error::msg)?,
        (None, Some(token)) => Tokens::single("admin", &token)
            .map_err(|e| anyhow::anyhow!("CHRONICLE_API_TOKEN: {e}"))?,
        (None, None) => Tokens::none(),
    };
    chronicle_api::check_bind(args.addr, &tokens, args.insecure).map_err(anyhow::Error::msg)?;
    chronicle_api::browser::check_open_host(args.addr, &tokens, &args.allowed_hosts)
        .map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.tokens {
        warn_if_others_read(path);
    }
    let disk_reserve_bytes = args
        .disk_reserve_mib
        .checked_mul(1 << 20)
        .with_context(|| format!("--disk-reserve-mib {} is too large", args.disk_reserve_mib))?;
    let config = ApiConfig {
        allowed_hosts: args.allowed_hosts.clone(),
        cors_origins: args.cors_origins.clone(),
        ..args.limits.config()
    };
    raise_open_files_limit(config.connections_max);
    let opts = Options {
        durability: args.durability,
        repair_truncate_tail: args.repair_truncate_tail,
        disk_reserve_bytes,
        pg_idle_in_transaction_ms: args.pg_idle_in_transaction_ms,
        pg_drill_hold_lock_ms: args.pg_drill_hold_lock_ms,
        cache_capacity_bytes: args
            .store_cache_mib
            .checked_mul(1 << 20)
            .with_context(|| format!("--store-cache-mib {} is too large", args.store_cache_mib))?,
        ..Options::default()
    };
    let location = args
        .store
        .clone()
        .unwrap_or_else(|| Location::Sled(args.data.clone()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Bound first: a node tells the others where it listens when it joins.
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(args.addr))
        .with_context(|| format!("binding {}", args.addr))?;
    // The bound address, so that `--addr 127.0.0.1:0` tells which port it got.
    let addr = listener.local_addr().unwrap_or(args.addr);
    let cluster = args
        .cluster
        .settings(&location, args.workspace_root.as_ref(), addr)?;
    let store = match &location {
        Location::Postgres(url) => {
            let log = PgLog::open(url, opts, Create::IfAbsent)
                .with_context(|| format!("opening the store at {location}"))?;
            // One server per store, unless it is one node of several (each joins as it opens).
            if cluster.is_none() {
                log.hold_exclusive()?;
            }
            Store::from_log(log)
        }
        Location::Sled(dir) => Store::open(dir, opts)
            .with_context(|| format!("opening the store in {}", dir.display()))?,
    };
    crate::common::index_store(&store)?;
    // In the runtime: MCP servers are started here (the data domain's and those of --agents),
    // and their connections live in it.
    let mut settings = rt.block_on(args.domain.settings())?;
    if let Some(hitl) = args.hitl_default {
        settings.defaults.hitl = hitl;
    }
    settings.defaults.on_reject = args.on_reject;
    settings.facts_cache_runs = args.facts_cache_runs;
    settings.workspace_root = Some(
        args.workspace_root
            .clone()
            .unwrap_or_else(|| args.data.join("workspaces")),
    );
    settings.idle_cache_events = args.ended_runs_cache_events;
    let node = cluster.as_ref().map(|c| c.node_name.clone());
    settings.cluster = cluster;
    if settings.llm.is_none() {
        tracing::info!(
            "no LLM configured: intent, plan, evaluation and answers come from the rules"
        );
    }
    let mut failure = store.watch_failure();
    rt.spawn(async move {
        // Fail-stop: after a failed fsync nothing more may be acknowledged; recovery is a restart.
        if let Ok(why) = failure.wait_for(Option::is_some).await {
            let why = why.clone().unwrap_or_default();
            tracing::error!(reason = %why, "storage failed; exiting so that a restart recovers");
            eprintln!("error: storage failed: {why}; exiting (restart to recover)");
            std::process::exit(EXIT_STORAGE_FAILED);
        }
    });
    let traces = chronicle_telemetry::Config::from_env()?;
    let trace_opts = chronicle_projections::trace::TraceOptions {
        content: args.trace_content || crate::trace::content_from_env(),
    };
    rt.block_on(async move {
        let engine = Engine::open(store, settings).await?;
        // Spans of every run over OTLP, when an endpoint is configured; it stops after the
        // server, with a last export of what is queued.
        let (stop_traces, traces_stopped) = tokio::sync::oneshot::channel::<()>();
        let export = match &traces {
            None => None,
            Some(config) => {
                let stopped = async move {
                    let _ = traces_stopped.await;
                };
                let drives = engine.clone();
                let ours = std::sync::Arc::new(move |s: &str| drives.drives_session(s));
                let export = chronicle_telemetry::start(
                    engine.store().clone(),
                    config,
                    trace_opts,
                    ours,
                    stopped,
                )?;
                tracing::info!(sampler = ?config.sampler, transport = ?config.transport, "exporting traces over OTLP");
                Some(export)
            }
        };
        let mut state = AppState::new(engine, tokens.clone(), config)
            .in_cluster()
            .map_err(anyhow::Error::msg)?;
        if let Some(export) = &export {
            state = state.with_traces(export.stats.clone());
        }
        // The handlers are in place before anyone is told the server listens: a SIGTERM from
        // then on is a clean stop, never the default kill.
        let stop = shutdown_signal()?;
        tracing::info!(
            addr = %addr,
            store = %location,
            auth = !tokens.is_empty(),
            node = node.as_deref(),
            "chronicle is listening"
        );
        if tokens.is_empty() && !args.addr.ip().is_loopback() {
            tracing::warn!("serving without tokens on a non-loopback address (--insecure)");
        }
        chronicle_api::serve(listener, state, stop).await?;
        let _ = stop_traces.send(());
        if let Some(export) = export {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), export.done).await;
        }
        tracing::info!("stopped; the store is flushed");
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(())
}

fn parse_store(s: &str) -> Result<Location, String> {
    match s.parse()? {
        Location::Sled(_) => {
            Err("--store takes a PostgreSQL URL; the sled store is --data DIR".into())
        }
        pg => Ok(pg),
    }
}

/// Ctrl-C or SIGTERM, with their handlers installed now (not when the future is first polled).
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    let (mut interrupt, mut term) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        )
    };
    Ok(async move {
        #[cfg(unix)]
        tokio::select! { _ = interrupt.recv() => {}, _ = term.recv() => {} }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}
