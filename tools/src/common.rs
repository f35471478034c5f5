//! What every `chronicle` command shares: the data directory, the exit-code convention, JSON
//! Lines output, run ids, the remote server options (`--server`, `CHRONICLE_SERVER`) and the
//! async runtime of the commands that need one.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chronicle_engine::store::{self, Options, Store};
use chronicle_schemas::RunId;

/// How a command ended, beyond "it worked". Errors (anyhow) exit 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Ok,
    /// Exit 1: a negative answer (a broken chain, a failed run, a mismatching audit row).
    Negative,
}

/// `--data DIR` for the commands that work on a data directory directly (embedded mode).
#[derive(Clone, Debug, clap::Args)]
pub struct DataArgs {
    /// Data directory of a Chronicle store (not created when missing).
    #[arg(
        long,
        env = "CHRONICLE_DATA",
        default_value = "./.chronicle",
        value_name = "DIR"
    )]
    pub data: PathBuf,
    /// A store on PostgreSQL instead of the data directory: `postgres://user@host/db`
    /// (`?schema=NAME`, `chronicle` by default). Nothing is locked: reading works while servers
    /// run on it.
    #[arg(long, env = "CHRONICLE_STORE", value_name = "URL", value_parser = parse_postgres)]
    pub store: Option<store::Location>,
}

fn parse_postgres(s: &str) -> Result<store::Location, String> {
    match s.parse()? {
        store::Location::Sled(_) => {
            Err("--store takes a PostgreSQL URL; a data directory is --data DIR".into())
        }
        pg => Ok(pg),
    }
}

/// `--server URL` for the commands that also work against a running server.
#[derive(Clone, Debug, clap::Args)]
pub struct RemoteArgs {
    /// Talk to the server at URL instead of opening the data directory (which a running server
    /// holds locked).
    #[arg(long, env = "CHRONICLE_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for `--server`.
    #[arg(long, env = "CHRONICLE_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl RemoteArgs {
    /// The client of `--server`, or `None` when the command works on a data directory.
    pub fn client(&self) -> anyhow::Result<Option<chronicle_client::Client>> {
        let Some(server) = &self.server else {
            return Ok(None);
        };
        let client = chronicle_client::Client::new(server).map_err(|_| {
            anyhow::anyhow!(
                "--server must be an http(s) URL like http://127.0.0.1:8080, got {server:?}"
            )
        })?;
        Ok(Some(client.with_token(self.token.clone())))
    }
}

/// What to do while a server holds the data directory, for commands that can ask it instead.
pub const LOCKED_USE_SERVER: &str = "stop it, work on a copy of the directory, or use --server URL";
/// The same for commands that need the directory itself.
pub const LOCKED_NEEDS_DIRECTORY: &str = "stop it, or work on a copy of the directory";

/// Opens an existing store to write to it. A missing directory is an error (nothing is created),
/// and a store held by a running server ends with `when_locked` (what to do instead).
pub fn open_store(data: &DataArgs, when_locked: &str) -> anyhow::Result<Store> {
    open_existing(data, Options::default(), when_locked)
}

/// Opens the store of `--store` (a PostgreSQL store that must exist), or the data directory,
/// which must already hold a store, with `opts`.
pub fn open_existing(data: &DataArgs, opts: Options, when_locked: &str) -> anyhow::Result<Store> {
    if let Some(pg) = &data.store {
        return pg
            .open(opts, store::Create::No)
            .with_context(|| format!("opening the store at {pg}"));
    }
    let data = data.data.as_path();
    if !data.join("sled").exists() {
        bail!(
            "no Chronicle data in {} (use --data DIR or CHRONICLE_DATA)",
            data.display()
        );
    }
    open_with(data, opts, when_locked)
}

/// Opens (or creates) the store in `data`, waiting briefly for its lock; a store held by a
/// running server is an error that ends with `when_locked` (what to do instead).
pub fn open_with(data: &Path, opts: Options, when_locked: &str) -> anyhow::Result<Store> {
    let opts = Options {
        open_lock_wait_ms: 200,
        ..opts
    };
    Store::open(data, opts).map_err(|e| match e {
        store::Error::Locked(_) => anyhow::anyhow!(
            "{} is in use by a running server: {when_locked}",
            data.display()
        ),
        e => anyhow::Error::new(e).context(format!("opening {}", data.display())),
    })
}

/// Events behind the log past which bringing the index up to date shows a progress bar.
const INDEX_PROGRESS_EVENTS_MIN: u64 = 50_000;

/// Brings the store's index up to date with its log, with a progress bar on stderr when that
/// means reading much of the log (a store written before the index existed: once).
pub fn index_store(store: &Store) -> anyhow::Result<()> {
    let behind = chronicle_engine::index::behind(store)?;
    let bar = (behind > INDEX_PROGRESS_EVENTS_MIN).then(|| {
        indicatif::ProgressBar::with_draw_target(
            Some(behind),
            indicatif::ProgressDrawTarget::stderr(),
        )
        .with_message("indexing the log (once, for a store written before its index)")
    });
    chronicle_engine::index::catch_up_with(store, &mut |done, _| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    })
    .context("indexing the log")?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(())
}

pub fn parse_run_id(s: &str) -> anyhow::Result<RunId> {
    s.parse()
        .with_context(|| format!("invalid run id {s:?} (expected a UUID)"))
}

/// One line of `--json` output: `{"type": ..., "data": ...}`.
pub fn json_line(out: &mut dyn Write, ty: &str, data: serde_json::Value) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, &serde_json::json!({"type": ty, "data": data}))?;
    out.write_all(b"\n")?;
    Ok(())
}

/// The runtime of the commands that talk to a server or run an engine: the engine's actors and
/// agents run on its workers while the main thread prints and reads the terminal.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_are_checked() {
        let args = |s: &str| RemoteArgs {
            server: Some(s.into()),
            token: None,
        };
        assert!(args("http://127.0.0.1:8080/").client().unwrap().is_some());
        for bad in ["127.0.0.1:8080", "ftp://x", "http//x", ""] {
            let e = args(bad).client().unwrap_err().to_string();
            assert!(e.starts_with("--server must be"), "{bad:?}: {e}");
        }
        let none = RemoteArgs {
            server: None,
            token: None,
        };
        assert!(none.client().unwrap().is_none());
    }
}
