//! `chronicle store`: the PostgreSQL store's schema (`migrate`), and moving a data directory onto
//! PostgreSQL (`copy`).

use std::io::Write;

use anyhow::{Context, bail};
use chronicle_engine::store::{self, Create, Location, Options, PgLog};

#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Debug, clap::Subcommand)]
enum StoreCommand {
    /// Create the store's schema on PostgreSQL, or upgrade it to this version's (under an
    /// advisory lock: several processes migrating at once do it once).
    #[command(
        after_help = "Examples:\n  chronicle store migrate --store postgres://chronicle@db.internal/chronicle\n  chronicle store migrate --store 'postgres://chronicle@db.internal/chronicle?schema=staging'"
    )]
    Migrate {
        /// The PostgreSQL store: `postgres://user@host/db` (`?schema=NAME`, `chronicle` by default).
        #[arg(long, env = "CHRONICLE_STORE", value_name = "URL")]
        store: Location,
    },
    /// Copy a data directory (sled) into an empty PostgreSQL store with the same offsets,
    /// hashes, records, blobs and index, then verify that both end at the same heads. Stop the
    /// server of the directory first.
    #[command(
        after_help = "Examples:\n  chronicle store copy --from sled:./.chronicle --to postgres://chronicle@db.internal/chronicle\n\nThe target must be empty (a new schema: add ?schema=NAME). Snapshots are a cache and are not copied; the server makes them again as runs go on."
    )]
    Copy {
        /// The data directory to copy, as `sled:DIR`.
        #[arg(long, value_name = "sled:DIR")]
        from: Location,
        /// The PostgreSQL store to copy into (created when absent).
        #[arg(long, value_name = "URL")]
        to: Location,
        /// Print the report as one JSON line.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: &StoreArgs, out: &mut impl Write) -> anyhow::Result<()> {
    match &args.command {
        StoreCommand::Migrate { store } => {
            let Location::Postgres(url) = store else {
                bail!("a sled store needs no migration: its directory is upgraded when opened");
            };
            let done = PgLog::migrate(url).with_context(|| format!("migrating {store}"))?;
            match done.from {
                None => writeln!(
                    out,
                    "created the store at {store} (schema version {})",
                    done.to
                )?,
                Some(v) => writeln!(
                    out,
                    "the store at {store} is at schema version {v}; nothing to do"
                )?,
            }
            Ok(())
        }
        StoreCommand::Copy { from, to, json } => copy(from, to, *json, out),
    }
}

fn copy(from: &Location, to: &Location, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let Location::Sled(dir) = from else {
        bail!("--from must be a data directory, as sled:DIR");
    };
    let Location::Postgres(url) = to else {
        bail!("--to must be a PostgreSQL URL (postgres://…)");
    };
    if !dir.join("sled").exists() {
        bail!("no Chronicle data in {}", dir.display());
    }
    let source = crate::common::open_with(
        dir,
        Options {
            open_verify_tail_events: 0,
            ..Options::default()
        },
        crate::common::LOCKED_NEEDS_DIRECTORY,
    )?;
    let target = PgLog::open(url, Options::default(), Create::IfAbsent)
        .with_context(|| format!("opening {to}"))?;
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(source.durable_next_offset()),
        indicatif::ProgressDrawTarget::stderr(),
    )
    .with_message("copying events");
    let copied = store::copy(&source, &target, &mut |done, _| bar.set_position(done))
        .with_context(|| format!("copying {from} to {to}"))?;
    bar.finish_and_clear();
    if json {
        crate::common::json_line(out, "store.copied", serde_json::to_value(&copied)?)?;
    } else {
        writeln!(
            out,
            "copied {} events of {} runs, {} blobs, {} records and {} index entries (watermark {}) from {from} to {to}; both verify to the same heads",
            copied.events,
            copied.runs,
            copied.blobs,
            copied.records,
            copied.index_entries,
            copied.index_watermark
        )?;
    }
    Ok(())
}
