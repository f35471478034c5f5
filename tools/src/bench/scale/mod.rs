//! The scale section: stores of N runs, generated straight through the store (no engine per
//! run), and what an operator sees of each — on disk, start until `/healthz` answers, RSS, each
//! list's p50/p99, time travel and restore in old runs, RSS and runs/s under `/chat` load — one
//! column per size beside a store that starts empty, so growth with history is visible.
//!
//! The generated stores stay in `<dir>/chronicle-bench-stores/runs-<N>/` for the next bench at
//! the same N (their `manifest.json` says what was generated). Measuring writes to a store (the
//! load's runs, the restores), so a store that earlier measurements grew by more than a tenth of
//! its runs, one whose measuring did not finish, or one of an older generator is made again.

mod generate;
mod measure;
mod template;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tokio::runtime::Runtime;

use super::report::{Cell, Grid, GridRow, num};
use super::{Plan, progress};
use generate::Generated;
use measure::{LISTS, MeasurePlan, Measured};
use template::Templates;

/// Bump when the generated runs change, so older stores are made again.
const GENERATOR_VERSION: u32 = 3;
/// Where the generated stores stay, under `--dir`.
pub const STORES_DIR: &str = "chronicle-bench-stores";
/// The sizes measured unless `--store-runs` names others.
pub const RUNS_DEFAULT: [u64; 2] = [10_000, 100_000];
pub const RUNS_QUICK: [u64; 2] = [2_000, 5_000];

/// What `manifest.json` of a generated store holds.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    generator: u32,
    generated: Generated,
    /// Bytes on disk right after generation.
    bytes: u64,
    /// Runs the measurements added since (the load's).
    runs_added: u64,
    /// Set while a bench measures the store: found set, the measuring did not finish.
    measuring: bool,
}

/// A generated store, made now or earlier.
struct Stored {
    dir: PathBuf,
    manifest: Manifest,
    /// Made by this bench (else reused).
    made: bool,
}

impl Stored {
    fn store(&self) -> PathBuf {
        self.dir.join("store")
    }

    fn save(&self) -> Result<()> {
        let path = self.dir.join("manifest.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&self.manifest)?)
            .with_context(|| format!("writing {}", path.display()))
    }
}

fn measure_plan(plan: &Plan) -> MeasurePlan {
    if plan.quick {
        MeasurePlan {
            list_requests: 10,
            list_budget: Duration::from_secs(2),
            restores: 2,
            load_clients: 16,
            load_window: Duration::from_secs(5),
            start_wait: Duration::from_secs(600),
        }
    } else {
        MeasurePlan {
            list_requests: 100,
            list_budget: Duration::from_secs(10),
            restores: 5,
            load_clients: 64,
            load_window: Duration::from_secs(60),
            start_wait: Duration::from_secs(1800),
        }
    }
}

/// Makes (or reuses) the store of each size in `sizes` under `stores`; measures them and an
/// empty one unless `generate_only`.
pub fn section(
    rt: &Runtime,
    root: &Path,
    stores: &Path,
    plan: &Plan,
    sizes: &[u64],
    generate_only: bool,
) -> Result<Grid> {
    let mut templates = None;
    let mut stored = Vec::new();
    for &n in sizes {
        stored.push(ensure(rt, root, stores, n, &mut templates)?);
    }
    if generate_only {
        return Ok(generation_grid(&stored));
    }
    let mplan = measure_plan(plan);
    let mut measured = Vec::new();
    let mut disks = Vec::new();
    let mut at_start = Vec::new();
    progress("scale: an empty store");
    let empty = root.join("scale-empty");
    measured.push(rt.block_on(measure::measure(
        &empty,
        &root.join("serve-empty.log"),
        &[],
        &generate::user_name(1),
        &mplan,
    ))?);
    plan.discard(&empty);
    for s in &mut stored {
        let n = s.manifest.generated.runs;
        progress(&format!(
            "scale: {} runs (`chronicle serve` on {})",
            num(n as f64),
            s.store().display()
        ));
        disks.push(super::engine::disk_bytes(&s.store()));
        at_start.push(n + s.manifest.runs_added);
        s.manifest.measuring = true;
        s.save()?;
        let m = rt.block_on(measure::measure(
            &s.store(),
            &root.join(format!("serve-{n}.log")),
            &s.manifest.generated.probes,
            &s.manifest.generated.memory_user,
            &mplan,
        ))?;
        s.manifest.measuring = false;
        s.manifest.runs_added += (m.load_done + m.load_failed) as u64;
        s.save()?;
        measured.push(m);
    }
    Ok(grid(&stored, &at_start, &disks, &measured, &mplan))
}

/// The store of `n` runs under `stores`: the one there when it can be reused, else a new one.
fn ensure(
    rt: &Runtime,
    root: &Path,
    stores: &Path,
    n: u64,
    templates: &mut Option<Arc<Templates>>,
) -> Result<Stored> {
    let dir = stores.join(format!("runs-{n}"));
    let found = std::fs::read(dir.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok());
    let why_not = match &found {
        None => None,
        Some(m) if m.generator != GENERATOR_VERSION => Some("an older generator made it"),
        Some(m) if m.measuring => Some("a measurement of it did not finish"),
        Some(m) if m.runs_added > n / 10 => Some("earlier measurements grew it by over 10%"),
        Some(_) => {
            progress(&format!(
                "scale: reusing the store of {} runs in {} (delete it to make it again)",
                num(n as f64),
                dir.display()
            ));
            return Ok(Stored {
                dir,
                manifest: found.expect("matched"),
                made: false,
            });
        }
    };
    if let Some(why) = why_not {
        progress(&format!(
            "scale: making the store in {} again: {why}",
            dir.display()
        ));
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    progress(&format!(
        "scale: generating a store of {} runs in {}",
        num(n as f64),
        dir.display()
    ));
    let t = match templates {
        Some(t) => t.clone(),
        None => {
            let template_dir = root.join("scale-templates");
            let t = Arc::new(Templates::make(rt, &template_dir)?);
            std::fs::remove_dir_all(&template_dir).ok();
            templates.insert(t).clone()
        }
    };
    let generated = generate::generate(rt, &dir.join("store"), t, n)?;
    let bytes = super::engine::disk_bytes(&dir.join("store"));
    progress(&format!(
        "scale: {} runs in {} s ({} runs/s, {} events, {} B on disk per run)",
        num(generated.runs as f64),
        num(generated.secs),
        num(generated.runs as f64 / generated.secs),
        num(generated.events as f64),
        num(bytes as f64 / generated.runs as f64)
    ));
    let s = Stored {
        dir,
        manifest: Manifest {
            generator: GENERATOR_VERSION,
            generated,
            bytes,
            runs_added: 0,
            measuring: false,
        },
        made: true,
    };
    s.save()?;
    Ok(s)
}

fn size_label(n: u64) -> String {
    format!("{} runs", num(n as f64))
}

/// The generation rows of each store.
fn generation_rows(stored: &[Stored], lead: usize) -> Vec<GridRow> {
    let row = |id: &str, metric: &str, unit: &'static str, f: &dyn Fn(&Stored) -> Cell| GridRow {
        id: id.into(),
        metric: metric.into(),
        unit,
        cells: std::iter::repeat_with(Cell::none)
            .take(lead)
            .chain(stored.iter().map(f))
            .collect(),
    };
    let g = |s: &Stored| s.manifest.generated.clone();
    vec![
        row(
            "generate_runs_per_s",
            "generated (runs/s)",
            "runs/s",
            &|s| {
                if s.made {
                    Cell::one(g(s).runs as f64 / g(s).secs)
                } else {
                    Cell::Text("reused".into())
                }
            },
        ),
        row(
            "sessions_users",
            "sessions / users / memory items",
            "count",
            &|s| {
                let g = g(s);
                Cell::Num(vec![g.sessions as f64, g.users as f64, g.memories as f64])
            },
        ),
        row(
            "index_s",
            "its index built at once (a store written before the index)",
            "s",
            &|s| Cell::one(g(s).index_secs),
        ),
        row("events_per_run", "events per run", "events", &|s| {
            Cell::one(g(s).events as f64 / g(s).runs as f64)
        }),
        row(
            "disk_bytes_per_run",
            "on disk per run, as generated",
            "B",
            &|s| Cell::one(s.manifest.bytes as f64 / g(s).runs as f64),
        ),
    ]
}

fn generation_grid(stored: &[Stored]) -> Grid {
    let mut notes = vec![];
    for s in stored {
        notes.push(format!(
            "{}: {} ({})",
            size_label(s.manifest.generated.runs),
            s.store().display(),
            s.manifest
                .generated
                .kinds
                .iter()
                .map(|(k, n)| format!("{k} {}", num(*n as f64)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Grid {
        id: "scale",
        columns: stored
            .iter()
            .map(|s| size_label(s.manifest.generated.runs))
            .collect(),
        rows: generation_rows(stored, 0),
        notes,
    }
}

fn grid(
    stored: &[Stored],
    at_start: &[u64],
    disks: &[u64],
    measured: &[Measured],
    plan: &MeasurePlan,
) -> Grid {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut rows = Vec::new();
    let mut row =
        |id: &str, metric: String, unit: &'static str, f: &dyn Fn(usize, &Measured) -> Cell| {
            rows.push(GridRow {
                id: id.into(),
                metric,
                unit,
                cells: measured.iter().enumerate().map(|(i, m)| f(i, m)).collect(),
            })
        };
    // Column 0 is the empty store; column i is stored[i - 1].
    row(
        "runs_at_start",
        "runs in the store at start".into(),
        "runs",
        &|i, _| match i {
            0 => Cell::one(0.0),
            _ => Cell::one(at_start[i - 1] as f64),
        },
    );
    row(
        "disk_mb",
        "on disk at start".into(),
        "MB",
        &|i, _| match i {
            0 => Cell::none(),
            _ => Cell::one(disks[i - 1] as f64 / 1e6),
        },
    );
    row(
        "start_ms",
        "start until /healthz answers".into(),
        "ms",
        &|_, m| Cell::one(m.start_ms),
    );
    row("rss_start", "RSS after start".into(), "MiB", &|_, m| {
        Cell::one(mib(m.rss_start_kib))
    });
    for (k, (id, path)) in LISTS.iter().enumerate() {
        row(
            &format!("list_{id}"),
            format!("GET {path} p50 / p99"),
            "ms",
            &|_, m| Cell::Num(vec![m.lists[k].p50, m.lists[k].p99]),
        );
    }
    row(
        "state_at",
        "GET /api/v1/agent/{old run}/state?at=<seq> p50 / p99".into(),
        "ms",
        &|_, m| {
            m.state_at
                .map_or(Cell::none(), |l| Cell::Num(vec![l.p50, l.p99]))
        },
    );
    row(
        "restore",
        "restore an old run to a checkpoint p50".into(),
        "ms",
        &|_, m| m.restore.map_or(Cell::none(), |l| Cell::one(l.p50)),
    );
    let window = plan.load_window.as_secs();
    row(
        "runs_per_s",
        format!(
            "POST /chat runs/s, {} clients, {window} s",
            plan.load_clients
        ),
        "runs/s",
        &|_, m| Cell::one(m.runs_per_s),
    );
    row(
        "rss_load",
        format!("RSS after {window} s of load (peak)"),
        "MiB",
        &|_, m| {
            Cell::Num(vec![
                mib(m.rss_load_kib),
                mib(m.rss_load_peak_kib.max(m.rss_load_kib)),
            ])
        },
    );
    let mut gen_rows = generation_rows(stored, 1);
    gen_rows.extend(rows);
    let failed: usize = measured.iter().map(|m| m.load_failed).sum();
    let requests = measured.last().map_or(String::new(), |m| {
        LISTS
            .iter()
            .zip(&m.lists)
            .map(|((id, _), l)| format!("{id} {}", l.n))
            .collect::<Vec<_>>()
            .join(", ")
    });
    Grid {
        id: "scale",
        columns: std::iter::once("empty".to_owned())
            .chain(stored.iter().map(|s| size_label(s.manifest.generated.runs)))
            .collect(),
        rows: gen_rows,
        notes: vec![
            format!(
                "`chronicle serve --domain bench` on each store in place, release build, the page cache warm; \
                 lists p50 / p99 over up to {} requests each ({} s at most), one loopback connection per request; \
                 the inbox lists every pending approval; {failed} load requests failed; \
                 requests timed in the last column: {requests}",
                plan.list_requests,
                plan.list_budget.as_secs()
            ),
            "the load's runs stay in the store: a reused store has them too (`runs in the store at start`)".into(),
        ],
    }
}
