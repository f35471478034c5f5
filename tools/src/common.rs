//! What every `chronicle` command shares: the data directory, the exit-code convention, JSON
//! Lines output, run ids, and the remote server options.

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
}

/// `--server URL` for the commands that also work against a running server.
#[derive(Clone, Debug, clap::Args)]
pub struct RemoteArgs {
    /// Talk to a running server instead of opening the data directory.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for `--server`.
    #[arg(long, env = "CHRONICLE_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Opens an existing store for inspection. A missing directory is an error (nothing is created),
/// and a store held by a running server says how to reach it instead.
pub fn open_store(data: &Path) -> anyhow::Result<Store> {
    open_existing(data, Options::default())
}

/// Opens a data directory that must already hold a store, with `opts`.
pub fn open_existing(data: &Path, opts: Options) -> anyhow::Result<Store> {
    if !data.join("sled").exists() {
        bail!(
            "no Chronicle data in {} (use --data DIR or CHRONICLE_DATA)",
            data.display()
        );
    }
    open_with(
        data,
        opts,
        "stop it, work on a copy of the directory, or use --server URL",
    )
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
