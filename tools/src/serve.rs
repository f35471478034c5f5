//! `chronicle serve`: the HTTP server on an embedded store (DESIGN §6/§7).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::Engine;
use chronicle_engine::store::{Durability, Options, Store};
use chronicle_schemas::HitlMode;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  chronicle serve\n  chronicle serve --addr 0.0.0.0:8080 --tokens tokens.txt\n  CHRONICLE_API_TOKEN=secret chronicle serve --hitl-default every_todo\n\nA full disk is answered with 507 and /healthz reports `\"storage\": \"full\"` until space is freed; appends then resume by themselves.\n\nExit codes: 0 clean shutdown, 2 could not start (bad flag, broken store, refused bind), 3 stopped after a failed fsync (nothing unacknowledged was acknowledged; restart to recover)."
)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Data directory (sled store, blobs, workspaces).
    #[arg(long, env = "CHRONICLE_DATA", default_value = "./.chronicle")]
    data: PathBuf,
    /// `sync` acknowledges appends after the durability barrier; `async` before it (see README).
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// HITL policy for runs whose request names none.
    #[arg(long, value_parser = parse_hitl, default_value = "none")]
    hitl_default: HitlMode,
    /// File of `principal token [admin]` lines; requests then need `Authorization: Bearer
    /// <token>`, and each principal sees only its own runs (an `admin` sees all).
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Allow binding a non-loopback address without tokens.
    #[arg(long)]
    insecure: bool,
    #[command(flatten)]
    domain: crate::domain::DomainArgs,
    /// Drop an undecodable final record of the log instead of refusing to start. It cannot
    /// repair a bad record before the last one (`chronicle verify` names its offset) or damage
    /// inside sled's own files (then sled cannot open the store: restore the data directory
    /// from a backup or copy).
    #[arg(long)]
    repair_truncate_tail: bool,
}

/// Exit code after a failed fsync stopped the store.
const EXIT_STORAGE_FAILED: i32 = 3;

pub fn parse_hitl(s: &str) -> Result<HitlMode, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).map_err(|_| {
        format!("HITL policy must be none, every_todo, categories or tools, got {s:?}")
    })
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    let tokens = match (
        &args.tokens,
        std::env::var("CHRONICLE_API_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    ) {
        (Some(path), _) => Tokens::from_file(path).map_err(anyhow::Error::msg)?,
        (None, Some(token)) => Tokens::single("admin", &token),
        (None, None) => Tokens::none(),
    };
    chronicle_api::check_bind(args.addr, &tokens, args.insecure).map_err(anyhow::Error::msg)?;
    let opts = Options {
        durability: args.durability,
        repair_truncate_tail: args.repair_truncate_tail,
        ..Options::default()
    };
    let store = Store::open(&args.data, opts)
        .with_context(|| format!("opening the store in {}", args.data.display()))?;
    let mut settings = args.domain.settings()?;
    settings.defaults.hitl = args.hitl_default;
    if settings.llm.is_none() {
        tracing::info!(
            "no LLM configured: intent, plan, evaluation and answers come from the rules"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
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
    rt.block_on(async move {
        let engine = Engine::open(store, settings).await?;
        let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("binding {}", args.addr))?;
        // The bound address, so that `--addr 127.0.0.1:0` tells which port it got.
        let addr = listener.local_addr().unwrap_or(args.addr);
        let state = AppState::new(engine, tokens.clone(), ApiConfig::default());
        tracing::info!(addr = %addr, data = %args.data.display(), auth = !tokens.is_empty(), "chronicle is listening");
        if tokens.is_empty() && !args.addr.ip().is_loopback() {
            tracing::warn!("serving without tokens on a non-loopback address (--insecure)");
        }
        chronicle_api::serve(listener, state, shutdown_signal()).await?;
        tracing::info!("stopped; the store is flushed");
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
