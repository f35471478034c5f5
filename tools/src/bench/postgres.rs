//! The store on sled beside the store on PostgreSQL, the same work on each in one run: durable
//! appends at 1 and many writers (the append section's workload), the commits and the log head's
//! lock during the many-writer run, equal-work runs many at a time (the engine section's), the
//! bytes each store takes per run, and replay of one long run (the replay section's). One column
//! per store.
//!
//! Every measurement opens a new store: a directory under the bench's root for sled, a new
//! schema for PostgreSQL, deleted (dropped) when the measurement ends unless `--keep`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chronicle_engine::store::{Create, Durability, Options, PgLog, Store, Target};
use chronicle_schemas::RunId;
use tokio::runtime::Runtime;

use super::append::{self, AppendStats};
use super::engine::{self, RunPhase, WARMUP_RUNS};
use super::report::{Cell, Grid, GridRow, Row, num};
use super::{Plan, load_long_run, percentile, progress, replay};

/// The run the replay rows fold.
const REPLAY_RUN: RunId = RunId::from_u128(0xB1);

/// The two stores, in column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sled,
    Postgres,
}

const KINDS: [Kind; 2] = [Kind::Sled, Kind::Postgres];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sled => "sled",
            Kind::Postgres => "postgres",
        }
    }
}

/// The row that stands for the section when no PostgreSQL was given.
pub(super) fn skipped() -> Row {
    Row::new("postgres_skipped", "sled beside PostgreSQL", 0.0, "skipped").note(
        "no PostgreSQL given: pass --postgres URL or set CHRONICLE_BENCH_PG \
         (`make bench` starts a throwaway server and passes its URL)",
    )
}

/// Where the section's stores are made.
struct Stores<'a> {
    root: &'a Path,
    /// The server and database; each store gets a schema of its own there.
    server: Target,
    keep: bool,
    made: usize,
}

/// One store of the section; its directory or schema goes when it drops, unless `--keep`.
struct Opened {
    store: Option<Store>,
    place: Place,
    keep: bool,
}

enum Place {
    Dir(PathBuf),
    /// Boxed: a target is large beside a path.
    Schema(Box<Target>),
}

impl<'a> Stores<'a> {
    fn new(root: &'a Path, url: &str, keep: bool) -> Result<Self> {
        let server = Target::parse(url).context("--postgres")?;
        let mut stores = Stores {
            root,
            server,
            keep,
            made: 0,
        };
        // A server that cannot be reached is said before anything is measured (the store
        // opened to find out is not kept, even with `--keep`).
        let mut check = stores.open(Kind::Postgres, "check", Durability::Sync)?;
        check.keep = false;
        drop(check);
        Ok(stores)
    }

    /// A new, empty store of `kind`; sled in `durability`, PostgreSQL always commits
    /// synchronously.
    fn open(&mut self, kind: Kind, what: &str, durability: Durability) -> Result<Opened> {
        self.made += 1;
        let opts = Options {
            durability,
            ..Options::default()
        };
        let (store, place) = match kind {
            Kind::Sled => {
                let dir = self.root.join(format!("pg-section-{what}-{}", self.made));
                let store = Store::open(&dir, opts)
                    .with_context(|| format!("opening a store in {}", dir.display()))?;
                (store, Place::Dir(dir))
            }
            Kind::Postgres => {
                let target = self.server.with_schema(&self.schema_name())?;
                let store = Store::from_log(
                    PgLog::open_target(target.clone(), opts, Create::IfAbsent)
                        .with_context(|| format!("opening a store at {}", target.shown))?,
                );
                (store, Place::Schema(Box::new(target)))
            }
        };
        Ok(Opened {
            store: Some(store),
            place,
            keep: self.keep,
        })
    }

    /// A schema no earlier bench left behind: the process and the time, and a counter.
    fn schema_name(&self) -> String {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("bench_{}_{secs}_{}", std::process::id(), self.made)
    }
}

impl Opened {
    fn store(&self) -> &Store {
        self.store
            .as_ref()
            .expect("the store is open until dropped")
    }

    /// Bytes the store takes, then deletes it: sled's directory (allocated blocks) once the
    /// store is closed, PostgreSQL's tables of the schema with their indexes.
    fn disk_bytes(mut self) -> Result<u64> {
        match &self.place {
            Place::Dir(dir) => {
                // The last handle closes sled, so everything it holds is on disk.
                drop(self.store.take());
                Ok(engine::disk_bytes(dir))
            }
            Place::Schema(target) => self
                .store()
                .disk_bytes()?
                .with_context(|| format!("{} says nothing of its size", target.shown)),
        }
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        // Closing first: sled joins its writer, PostgreSQL ends its connections.
        drop(self.store.take());
        match (&self.place, self.keep) {
            (Place::Dir(dir), false) => {
                std::fs::remove_dir_all(dir).ok();
            }
            (Place::Schema(target), false) => {
                if let Err(e) = PgLog::drop_schema(target) {
                    progress(&format!("warning: dropping {}: {e}", target.shown));
                }
            }
            (Place::Dir(dir), true) => progress(&format!("kept {}", dir.display())),
            (Place::Schema(target), true) => progress(&format!("kept {}", target.shown)),
        }
    }
}

/// The URL without its password and parameters, for messages.
fn shown_server(url: &str) -> String {
    Target::parse(url).map_or_else(
        |_| "(an unparsable URL)".to_owned(),
        |t| t.shown.split('?').next().unwrap_or_default().to_owned(),
    )
}

/// What was measured on one store.
struct Measured {
    one: AppendStats,
    many: AppendStats,
    /// The log head's lock hold of each commit of the many-writer run, in µs (PostgreSQL).
    hold_us: Vec<f64>,
    runs: RunPhase,
    /// Runs the equal-work store holds: the warm-up runs and the timed ones.
    runs_stored: usize,
    disk_bytes: u64,
    load_rate: f64,
    replay_rate: f64,
}

fn appends(
    rt: &Runtime,
    stores: &mut Stores,
    kind: Kind,
    writers: usize,
    window: Duration,
) -> Result<(AppendStats, Vec<f64>)> {
    progress(&format!(
        "postgres: durable appends on {}, {writers} writer(s), {:.1} s",
        kind.name(),
        window.as_secs_f64()
    ));
    let opened = stores.open(kind, &format!("append-{writers}"), Durability::Sync)?;
    let stats = rt.block_on(append::append_rate(opened.store(), writers, window))?;
    // One hold time per commit: the newest ones are the window's.
    let hold = opened.store().lock_hold_us();
    let in_window = (stats.barriers as usize).min(hold.len());
    let hold_us = hold[hold.len() - in_window..]
        .iter()
        .map(|&us| f64::from(us))
        .collect();
    Ok((stats, hold_us))
}

/// Equal-work runs, `plan.engine_runs_many` at a time, after the engine section's warm-up; then
/// the bytes the store takes.
fn equal_runs(
    rt: &Runtime,
    stores: &mut Stores,
    kind: Kind,
    plan: &Plan,
) -> Result<(RunPhase, u64)> {
    let many = plan.engine_runs_many;
    progress(&format!(
        "postgres: equal work on {}, {WARMUP_RUNS} warm-up runs, then {many} at a time, {:.1} s",
        kind.name(),
        plan.pg_engine_window.as_secs_f64()
    ));
    let opened = stores.open(kind, "equal", Durability::Sync)?;
    let engine = engine::engine_on(rt, opened.store().clone(), chronicle_bench::settings())?;
    let req = engine::equal_work_req();
    let phase = rt.block_on(async {
        for _ in 0..WARMUP_RUNS {
            engine::full_run(&engine, &req).await?;
        }
        engine::run_phase(&engine, &req, many, plan.pg_engine_window).await
    });
    engine::close_engine(rt, engine);
    let phase = phase?;
    Ok((phase, opened.disk_bytes()?))
}

/// One long run bulk-loaded, then folded from the log without snapshots: the load rate and the
/// replay rate, in events/s.
fn replay_one(stores: &mut Stores, kind: Kind, plan: &Plan) -> Result<(f64, f64)> {
    let n = plan.pg_replay_events;
    progress(&format!(
        "postgres: replay on {}, loading {} events",
        kind.name(),
        num(n as f64)
    ));
    // sled loads as the replay section does (acknowledged before the barrier, flushed at the
    // end); PostgreSQL commits each append.
    let opened = stores.open(kind, "replay", Durability::Async)?;
    let load = load_long_run(opened.store(), REPLAY_RUN, n, plan.bulk_batch_events)?;
    let rate = replay::replay_rate(opened.store(), REPLAY_RUN, n)?;
    Ok((load, rate))
}

/// Every measurement on each store in turn, one metric after another, so that a machine that
/// drifts during the bench skews both columns alike.
fn measure_all(rt: &Runtime, stores: &mut Stores, plan: &Plan) -> Result<[Measured; 2]> {
    let window = plan.pg_append_window;
    let mut one = Vec::new();
    let mut many = Vec::new();
    let mut runs = Vec::new();
    let mut replays = Vec::new();
    for kind in KINDS {
        one.push(appends(rt, stores, kind, 1, window)?.0);
    }
    for kind in KINDS {
        many.push(appends(rt, stores, kind, plan.writers_many, window)?);
    }
    for kind in KINDS {
        runs.push(equal_runs(rt, stores, kind, plan)?);
    }
    for kind in KINDS {
        replays.push(replay_one(stores, kind, plan)?);
    }
    let mut out = one.into_iter().zip(many).zip(runs).zip(replays).map(
        |(((one, (many, hold_us)), (runs, disk_bytes)), (load_rate, replay_rate))| Measured {
            one,
            many,
            hold_us,
            runs_stored: WARMUP_RUNS + runs.runs,
            runs,
            disk_bytes,
            load_rate,
            replay_rate,
        },
    );
    let sled = out.next().context("no sled measurement")?;
    let pg = out.next().context("no PostgreSQL measurement")?;
    Ok([sled, pg])
}

pub(super) fn section(rt: &Runtime, root: &Path, url: &str, plan: &Plan) -> Result<Grid> {
    append::settle();
    let started = Instant::now();
    let mut stores = Stores::new(root, url, plan.keep)?;
    let mut measured = measure_all(rt, &mut stores, plan)?;
    progress(&format!(
        "postgres: done in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(grid(&mut measured, plan, root, &shown_server(url)))
}

fn grid(m: &mut [Measured; 2], plan: &Plan, root: &Path, server: &str) -> Grid {
    let many = plan.writers_many;
    let runs_many = plan.engine_runs_many;
    let mut rows = Vec::new();
    let mut row = |id: &str, metric: String, unit: &'static str, cells: Vec<Cell>| {
        rows.push(GridRow {
            id: id.into(),
            metric,
            unit,
            cells,
        });
    };
    let each = |f: &dyn Fn(&Measured) -> f64| m.iter().map(|x| Cell::one(f(x))).collect();
    row(
        "append_1",
        "durable appends, 1 writer".into(),
        "appends/s",
        each(&|x| x.one.rate),
    );
    row(
        "append_n",
        format!("durable appends, {many} writers"),
        "appends/s",
        each(&|x| x.many.rate),
    );
    row(
        "append_n_latency",
        format!("  append latency, {many} writers, p50 / p99"),
        "ms",
        m.iter()
            .map(|x| Cell::Num(vec![x.many.p50_ms, x.many.p99_ms]))
            .collect(),
    );
    row(
        "commits_n",
        format!("  commits, {many} writers"),
        "commits/s",
        each(&|x| x.many.barriers as f64 / x.many.secs),
    );
    row(
        "events_per_commit_n",
        format!("  events per commit, {many} writers"),
        "events",
        each(&|x| x.many.appends as f64 / x.many.barriers as f64),
    );
    let hold: Vec<Cell> = m
        .iter_mut()
        .map(|x| {
            if x.hold_us.is_empty() {
                Cell::none()
            } else {
                Cell::Num(vec![
                    percentile(&mut x.hold_us, 0.5),
                    percentile(&mut x.hold_us, 0.99),
                ])
            }
        })
        .collect();
    row(
        "lock_hold_n",
        format!("  log-head lock hold, {many} writers, p50 / p99"),
        "µs",
        hold,
    );
    let each = |f: &dyn Fn(&Measured) -> f64| m.iter().map(|x| Cell::one(f(x))).collect();
    row(
        "equal_runs_n",
        format!("equal work: full runs, {runs_many} at a time"),
        "runs/s",
        each(&|x| x.runs.rate()),
    );
    let latency: Vec<Cell> = m
        .iter_mut()
        .map(|x| {
            Cell::Num(vec![
                percentile(&mut x.runs.lat_ms, 0.5),
                percentile(&mut x.runs.lat_ms, 0.99),
            ])
        })
        .collect();
    row(
        "equal_run_latency",
        "  start → completed, p50 / p99".into(),
        "ms",
        latency,
    );
    let each = |f: &dyn Fn(&Measured) -> f64| m.iter().map(|x| Cell::one(f(x))).collect();
    row(
        "equal_commits_per_run",
        "  commits per run".into(),
        "commits",
        each(&|x| x.runs.barriers as f64 / x.runs.runs as f64),
    );
    row(
        "disk_per_run",
        "  on disk per run".into(),
        "B",
        each(&|x| x.disk_bytes as f64 / x.runs_stored as f64),
    );
    row(
        "replay",
        format!(
            "replay_from_zero, one run of {} events",
            num(plan.pg_replay_events as f64)
        ),
        "events/s",
        each(&|x| x.replay_rate),
    );
    let [sled, pg] = &*m;
    Grid {
        id: "postgres",
        columns: KINDS.iter().map(|k| k.name().to_owned()).collect(),
        rows,
        notes: notes(sled, pg, plan, root, server),
    }
}

fn notes(sled: &Measured, pg: &Measured, plan: &Plan, root: &Path, server: &str) -> Vec<String> {
    let many = plan.writers_many;
    vec![
        format!(
            "sled: a new directory under {} per measurement, sync durability (a group commit is \
             answered after sled's flush + fdatasync); PostgreSQL: {server}, a new schema per \
             measurement, dropped afterwards (synchronous_commit=on: a commit is answered once its \
             WAL is flushed)",
            root.display()
        ),
        format!(
            "appends: the append section's workload, each writer appending one event (about \
             150 B) per call to its own run and awaiting it, {:.1} s per store and writer count; \
             commits are the store's barriers (sled: flush + fdatasync; PostgreSQL: transactions, \
             one per writer batch); {} and {} appends in the {many}-writer runs",
            plan.pg_append_window.as_secs_f64(),
            num(sled.many.appends as f64),
            num(pg.many.appends as f64),
        ),
        format!(
            "lock hold: per commit, from the log-head row lock granted to the commit answered \
             (every writer of the database waits for it), {} commits of the {many}-writer run; \
             sled has no such lock",
            num(pg.hold_us.len() as f64)
        ),
        format!(
            "equal work: the engine section's (the bench domain's workflow), {WARMUP_RUNS} \
             warm-up runs, then {} clients running full runs back to back for {:.1} s ({} / {} \
             runs); on disk: sled's directory (allocated blocks) / the schema's tables with their \
             indexes and TOAST (pg_total_relation_size), ÷ the {} / {} runs stored",
            plan.engine_runs_many,
            plan.pg_engine_window.as_secs_f64(),
            num(sled.runs.runs as f64),
            num(pg.runs.runs as f64),
            num(sled.runs_stored as f64),
            num(pg.runs_stored as f64),
        ),
        format!(
            "replay: the replay section's long run, bulk-loaded in {}-event appends ({} / {} \
             events/s; sled acknowledging before its barrier, PostgreSQL committing each), then \
             replay_from_zero: read, decode and apply from the log, no snapshots",
            plan.bulk_batch_events,
            num(sled.load_rate),
            num(pg.load_rate),
        ),
    ]
}
