//! `log`, `runs`, `checkpoints`, `restore` and `verify`: reading a run's history (from a data
//! directory, or from a server with `--server`), moving a run back to a checkpoint, and checking
//! every chain of the log.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, bail};
use chronicle_client::{Client, EventsFrom};
use chronicle_engine::index::RunScope;
use chronicle_engine::{Engine, RestoreTarget};
use chronicle_schemas::{CheckpointId, Envelope, Event, RunId, RunStatus};
use chronicle_wire::{CheckpointList, DamagedRun, Order, Restored, RunSummary, RunsQuery};
use serde_json::{Value, json};

use crate::common::{
    DataArgs, LOCKED_NEEDS_DIRECTORY, LOCKED_USE_SERVER, Outcome, RemoteArgs, json_line,
    open_store, parse_run_id, runtime,
};
use crate::view::{self, Branches, DIM, paint, styled};

/// Stores with more events than this show a progress indicator while `verify` runs.
const VERIFY_PROGRESS_EVENTS_MIN: u64 = 50_000;
/// `runs` shows a progress bar when it projects more runs than this.
const RUNS_PROGRESS_RUNS_MIN: usize = 200;
/// Longest query `runs` prints.
const RUNS_QUERY_CHARS_MAX: usize = 48;

// ------------------------------------------------------------------------------------------ log

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each line is `seq  time (UTC)  event  summary`. By default only the effective history is shown:
events that a later restore abandoned are hidden (the restore line says which seqs it left).
--all-branches shows every stored event and marks abandoned ones with `~`.

Examples:
  chronicle log 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192
  chronicle log 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --all-branches
  chronicle log 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --json | jq .data.event
  chronicle log 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --follow --server http://127.0.0.1:8080

--json prints one `{\"type\":\"event\",\"data\":<envelope + \"abandoned\">}` line per event.
--server URL (or CHRONICLE_SERVER) reads the log from a running server, which holds its data
directory locked; the output is the same. --follow needs --server: only a running server has new
events to show.

Exit codes: 0 printed, 2 error (unknown run, bad argument, unreadable store, unreachable server).")]
pub struct LogArgs {
    /// The run id (a UUID).
    run: String,
    /// Keep printing new events as the server appends them (needs --server).
    #[arg(long, short = 'f')]
    follow: bool,
    /// JSON Lines: one envelope per line.
    #[arg(long)]
    json: bool,
    /// Also show events of abandoned branches, marked `~`.
    #[arg(long)]
    all_branches: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// How `log` prints one event.
struct LogPrinter {
    json: bool,
    all_branches: bool,
}

impl LogPrinter {
    fn print(&self, out: &mut dyn Write, env: &Envelope, abandoned: bool) -> anyhow::Result<()> {
        if abandoned && !self.all_branches {
            return Ok(());
        }
        if self.json {
            let mut data = serde_json::to_value(env)?;
            data["abandoned"] = json!(abandoned);
            return json_line(out, "event", data);
        }
        let marker = self.all_branches.then_some(abandoned);
        let mut line = view::event_line(env, marker);
        if let Event::RunRestored { to_seq, .. } = &env.event
            && env.seq > to_seq + 1
        {
            line.push_str(&paint(
                DIM,
                format!("  [abandons seq {}..={}]", to_seq + 1, env.seq - 1),
            ));
        }
        writeln!(out, "{line}")?;
        Ok(())
    }
}

pub fn log(args: &LogArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = parse_run_id(&args.run)?;
    let out = &mut styled(out);
    let printer = LogPrinter {
        json: args.json,
        all_branches: args.all_branches,
    };
    if let Some(client) = args.remote.client()? {
        return runtime()?.block_on(log_remote(&client, run, args.follow, &printer, out));
    }
    if args.follow {
        bail!(
            "--follow needs --server URL: a data directory is locked by the process writing to it, so only a running server has new events"
        );
    }
    let store = view::open_for_reading(&args.data, LOCKED_USE_SERVER)?;
    let head = view::require_run(&store, run)?;
    // Two passes: the restores decide which seqs are abandoned, then the events are printed.
    let branches = view::branches_of_run(&store, &head)?;
    for env in store.read_run(run, 0, head.last_seq) {
        let env = env?;
        printer.print(out, &env, branches.is_abandoned(env.seq))?;
    }
    out.flush()?;
    Ok(())
}

async fn log_remote(
    client: &Client,
    run: RunId,
    follow: bool,
    printer: &LogPrinter,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let events = client.log(run, 0).await?;
    let branches = Branches::of_events(&events);
    for env in &events {
        printer.print(out, env, branches.is_abandoned(env.seq))?;
    }
    out.flush()?;
    if !follow {
        return Ok(());
    }
    // The SSE stream is only a wake-up: each message is followed by a read of the log, so the
    // printed events are the stored envelopes, with their hashes, exactly as without --follow.
    let mut next = events.last().map_or(0, |e| e.seq + 1);
    let from = EventsFrom {
        from: Some(next),
        last_event_id: None,
        follow: true,
    };
    let mut stream = client.run_events(run, from).await?;
    while let Some(ev) = stream.next().await {
        if ev?.id < next {
            continue;
        }
        for env in client.log(run, next).await? {
            // New events extend the effective history; a restore among them says what it left.
            printer.print(out, &env, false)?;
            next = env.seq + 1;
        }
        out.flush()?;
    }
    bail!("the server closed the event stream")
}

// ----------------------------------------------------------------------------------------- runs

/// `--status` values (the API's run states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
enum StatusFilter {
    Running,
    WaitingForApproval,
    Completed,
    Failed,
    Cancelled,
}

impl StatusFilter {
    fn status(self) -> RunStatus {
        match self {
            StatusFilter::Running => RunStatus::Running,
            StatusFilter::WaitingForApproval => RunStatus::WaitingForApproval,
            StatusFilter::Completed => RunStatus::Completed,
            StatusFilter::Failed => RunStatus::Failed,
            StatusFilter::Cancelled => RunStatus::Cancelled,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Lists the runs of a data directory, oldest first (--newest-first: newest first): run id,
session, status, created (UTC), last seq and the query.

Examples:
  chronicle runs
  chronicle runs --newest-first --owner alice
  chronicle runs --status waiting_for_approval
  chronicle runs --session 6f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b --json
  chronicle runs --server http://127.0.0.1:8080

--json prints one `{\"type\":\"run\",\"data\":{...}}` line per run.
--server URL (or CHRONICLE_SERVER) lists the runs of a running server, which holds its data
directory locked; the output is the same.

Exit codes: 0 listed (also when nothing matches), 2 error (bad argument, unreadable store,
unreachable server).")]
pub struct RunsArgs {
    /// Only the runs of this session.
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// Only runs in this state.
    #[arg(long, value_enum)]
    status: Option<StatusFilter>,
    /// Only the runs of this owner (a principal), not those of deleted sessions; on a server,
    /// another owner than yours needs an admin token.
    #[arg(long, value_name = "OWNER")]
    owner: Option<String>,
    /// The newest run first.
    #[arg(long)]
    newest_first: bool,
    /// JSON Lines: one run per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn runs(args: &RunsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let out = &mut styled(out);
    let query = RunsQuery {
        session_id: args.session.clone(),
        status: args.status.map(StatusFilter::status),
        owner: args.owner.clone(),
        order: args.newest_first.then_some(Order::Desc),
        ..RunsQuery::default()
    };
    let (rows, damaged) = match args.remote.client()? {
        Some(client) => runtime()?.block_on(runs_remote(&client, query))?,
        None => runs_embedded(args, query)?,
    };
    // A run that could not be read is named (on stderr, where errors go); the rest are listed.
    for d in &damaged {
        eprintln!("warning: run {} is damaged: {}", d.run_id, d.error);
    }
    view::listing(
        out,
        args.json,
        "run",
        &rows,
        &["RUN", "SESSION", "STATUS", "CREATED", "SEQ", "QUERY"],
        |r| {
            vec![
                r.run_id.to_string(),
                r.session_id.to_string(),
                paint(view::run_status_style(r.status), r.status.as_str()),
                view::date_time(r.created_at),
                r.last_seq.to_string(),
                view::one_line(&r.query, RUNS_QUERY_CHARS_MAX),
            ]
        },
    )
}

/// The runs of a server, page after page, and those it found damaged.
async fn runs_remote(
    client: &chronicle_client::Client,
    mut query: RunsQuery,
) -> anyhow::Result<(Vec<RunSummary>, Vec<DamagedRun>)> {
    let (mut rows, mut damaged) = (Vec::new(), Vec::new());
    loop {
        let page = client.runs_page(&query).await?;
        rows.extend(page.runs);
        damaged.extend(page.damaged);
        match page.next {
            Some(next) => query.after = Some(next),
            None => return Ok((rows, damaged)),
        }
    }
}

/// The runs of the data directory, listed the way the server lists them (page after page), and
/// those found damaged.
fn runs_embedded(
    args: &RunsArgs,
    mut query: RunsQuery,
) -> anyhow::Result<(Vec<RunSummary>, Vec<DamagedRun>)> {
    let store = view::open_for_reading(&args.data, LOCKED_USE_SERVER)?;
    let total = store.runs().count();
    let bar = (total > RUNS_PROGRESS_RUNS_MIN).then(|| {
        indicatif::ProgressBar::with_draw_target(
            Some(total as u64),
            indicatif::ProgressDrawTarget::stderr(),
        )
        .with_message("projecting runs")
    });
    let (mut rows, mut damaged) = (Vec::new(), Vec::new());
    loop {
        let mut tick = || {
            if let Some(b) = &bar {
                b.inc(1);
            }
        };
        let scope = match query.owner.as_deref() {
            None => RunScope::All,
            Some(owner) => RunScope::Owner(owner),
        };
        let page = chronicle_api::runs::page(&store, &query, scope, &mut tick)?;
        rows.extend(page.runs);
        damaged.extend(page.damaged);
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok((rows, damaged))
}

// ---------------------------------------------------------------------------------- checkpoints

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The checkpoint tree of a run, in log order: each checkpoint names its parent (the checkpoint
before it on its history) and its branch (0 = the original history, +1 per restore). `*` marks
the head of the effective history; checkpoints a restore left behind are marked abandoned.
Any of them can be passed to `chronicle restore` or `replay --step`'s `c` command.

Examples:
  chronicle checkpoints 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192
  chronicle checkpoints 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --json
  chronicle checkpoints 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --server http://127.0.0.1:8080

--json prints one `{\"type\":\"checkpoint\",\"data\":{...}}` line per checkpoint.
--server URL (or CHRONICLE_SERVER) reads the tree from a running server, which holds its data
directory locked; the output is the same.

Exit codes: 0 listed, 2 error (unknown run, bad argument, unreadable store, unreachable server).")]
pub struct CheckpointsArgs {
    /// The run id (a UUID).
    run: String,
    /// JSON Lines: one checkpoint per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn checkpoints(args: &CheckpointsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = parse_run_id(&args.run)?;
    let out = &mut styled(out);
    let listing = match args.remote.client()? {
        Some(client) => runtime()?.block_on(client.checkpoints(run))?,
        None => {
            let store = view::open_for_reading(&args.data, LOCKED_USE_SERVER)?;
            let head = view::require_run(&store, run)?;
            let s = store.state_at(run, head.last_seq)?;
            CheckpointList::new(
                run,
                s.checkpoints.head.clone(),
                s.checkpoints.with_abandoned(),
            )
        }
    };
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    view::listing(
        out,
        args.json,
        "checkpoint",
        &listing.checkpoints,
        &[
            "CHECKPOINT",
            "SEQ",
            "NODE",
            "DONE",
            "PARENT",
            "BRANCH",
            "TIME",
            "",
        ],
        |c| {
            let is_head = listing.head.as_ref() == Some(&c.checkpoint_id);
            let mark = if is_head { "*" } else { "" };
            let row = vec![
                format!("{}{mark}", c.checkpoint_id),
                c.seq.to_string(),
                c.node.clone(),
                c.todos_completed.to_string(),
                or_dash(c.parent.as_ref().map(|p| p.to_string())),
                c.branch.to_string(),
                view::clock(c.timestamp),
                if c.abandoned {
                    "abandoned".into()
                } else if is_head {
                    "head".into()
                } else {
                    String::new()
                },
            ];
            if c.abandoned {
                row.into_iter().map(|cell| paint(DIM, cell)).collect()
            } else {
                row
            }
        },
    )
}

// -------------------------------------------------------------------------------------- restore

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Appends a RunRestored event: the run's effective history becomes what it was at the checkpoint
(or seq), and whatever came after stays in the log as an abandoned branch (`log --all-branches`,
`replay`). Approvals pending on the abandoned branch are cancelled; the engine asks again for
what the restored point was waiting on.

Without --server the restore is done on the data directory by an engine inside this command,
which stops right after the restore: the run continues from the restored point the next time
`chronicle serve` opens the directory (nothing runs in between). With --server the running
server restores it and continues the run at once; the principal is the token's.

Examples:
  chronicle restore 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 cp_004
  chronicle restore 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --seq 17 --by alice
  chronicle restore 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 cp_004 --server http://127.0.0.1:8080

Exit codes: 0 restored, 2 error (unknown run or checkpoint, seq beyond the run, bad argument,
store in use, unreachable server).")]
pub struct RestoreArgs {
    /// The run id (a UUID).
    run: String,
    /// The checkpoint to go back to (see `chronicle checkpoints`).
    #[arg(required_unless_present = "seq", conflicts_with = "seq")]
    checkpoint: Option<String>,
    /// Go back to the state right after this seq instead of a checkpoint (data directory only).
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// Who restores (recorded in the event); the server uses its token's principal instead.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "local",
        conflicts_with = "server"
    )]
    by: String,
    /// Print the result as one JSON line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn restore(args: &RestoreArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = parse_run_id(&args.run)?;
    let out = &mut styled(out);
    let result = match args.remote.client()? {
        Some(client) => {
            let Some(cp) = &args.checkpoint else {
                bail!("--seq works on a data directory only: the API restores by checkpoint id");
            };
            runtime()?.block_on(client.restore(run, &CheckpointId(cp.clone())))?
        }
        None => restore_embedded(args, run)?,
    };
    if args.json {
        return json_line(out, "restore", serde_json::to_value(&result)?);
    }
    writeln!(
        out,
        "restored run {run} to {} (seq {}); current todo {}",
        result.checkpoint_id,
        result.to_seq,
        result
            .current_todo_id
            .as_ref()
            .map_or_else(|| "-".to_owned(), |t| t.to_string())
    )?;
    // The counts in the summary's order, the non-zero ones.
    let counts = serde_json::to_value(result.summary)?;
    let parts: Vec<String> = counts
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_u64().is_some_and(|n| n > 0))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if parts.is_empty() {
        writeln!(out, "todos: none")?;
    } else {
        writeln!(out, "todos: {}", parts.join(", "))?;
    }
    Ok(())
}

fn restore_embedded(args: &RestoreArgs, run: RunId) -> anyhow::Result<Restored> {
    // The full open-time check here: a restore writes, and must not write after a broken tail.
    let store = open_store(&args.data, LOCKED_USE_SERVER)?;
    let head = view::require_run(&store, run)?;
    // Check the target before starting an engine, so a bad argument changes nothing.
    let target = match (&args.checkpoint, args.seq) {
        (_, Some(seq)) => {
            view::check_seq(run, head.last_seq, seq)?;
            RestoreTarget::Seq(seq)
        }
        (Some(cp), None) => {
            let id = CheckpointId(cp.clone());
            let state = store.state_at(run, head.last_seq)?;
            if state.checkpoints.get(&id).is_none() {
                bail!("checkpoint {cp} not found in run {run}");
            }
            RestoreTarget::Checkpoint(id)
        }
        (None, None) => bail!("name a checkpoint or --seq N"),
    };
    let rt = runtime()?;
    rt.block_on(async move {
        let engine = Engine::open(
            store,
            crate::domain::DomainArgs::from_env()?.settings().await?,
        )
        .await?;
        let result = engine
            .restore(
                run,
                target,
                &chronicle_engine::Principal::admin(args.by.clone()),
            )
            .await;
        // The engine continues a restored run only while it lives; stop it now, so the next
        // `serve` picks the run up from the restored point.
        engine.shutdown().await;
        Ok::<Restored, anyhow::Error>(result?)
    })
}

// --------------------------------------------------------------------------------------- verify

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Checks the whole log: offsets dense from 0, every record decodes, every hash is intact, every
run's chain is unbroken, and the run heads and the stored next offset agree with the records.
Prints the number of events checked, the next offset, each run's head (seq, hash) — remember it:
a later verify against it detects a cut-off tail — and OK or the first bad offset with the
reason. The store is opened without its own tail check, so a damaged log can be verified.

Examples:
  chronicle verify
  chronicle verify --run 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192
  chronicle verify --data ./copy-of-crashed-server --json

--json prints one `{\"type\":\"verify\",\"data\":{events, next_offset, ok, problem, heads}}` line.

Exit codes: 0 everything verified, 1 a problem was found (its offset is printed), 2 could not
verify (bad argument, unknown run, unreadable store).")]
pub struct VerifyArgs {
    /// Check only this run's chain (offsets are still checked for density).
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// One JSON line with the report.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
}

pub fn verify(args: &VerifyArgs, out: &mut dyn Write) -> anyhow::Result<Outcome> {
    let run = args.run.as_deref().map(parse_run_id).transpose()?;
    let out = &mut styled(out);
    // `verify` reads the files themselves: a server cannot do it for us.
    let store = view::open_for_reading(&args.data, LOCKED_NEEDS_DIRECTORY)?;
    if let Some(run) = run {
        view::require_run(&store, run)?;
    }
    let total = store.durable_next_offset();
    // The store checks in one call; a spinner with the log's size shows it is working. indicatif
    // draws nothing when stderr is not a terminal.
    let spinner = (total >= VERIFY_PROGRESS_EVENTS_MIN).then(|| {
        let s =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        s.set_message(format!("verifying {total} events"));
        s.enable_steady_tick(Duration::from_millis(120));
        s
    });
    let report = match run {
        Some(r) => store.verify_run(r),
        None => store.verify(),
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let report = report.context("verifying the log")?;
    if args.json {
        let heads: Vec<Value> = report
            .heads
            .iter()
            .map(|(run, (seq, hash))| json!({"run_id": run, "seq": seq, "hash": hash}))
            .collect();
        json_line(
            out,
            "verify",
            json!({
                "events": report.events,
                "next_offset": report.next_offset,
                "ok": report.ok(),
                "problem": report.problem,
                "heads": heads,
            }),
        )?;
    } else {
        writeln!(
            out,
            "checked {} events; next offset {}; {} run(s)",
            report.events,
            report.next_offset,
            report.heads.len()
        )?;
        for (run, (seq, hash)) in &report.heads {
            writeln!(out, "  run {run}  head seq {seq}  hash {hash}")?;
        }
        match &report.problem {
            None => writeln!(out, "{}", paint(view::GREEN, "OK"))?,
            Some(p) => {
                let which = match (p.run_id, p.seq) {
                    (Some(run), Some(seq)) => format!(" (run {run} seq {seq})"),
                    _ => String::new(),
                };
                writeln!(
                    out,
                    "{}",
                    paint(
                        view::RED,
                        format!("FAILED at offset {}{which}: {}", p.offset, p.reason)
                    )
                )?
            }
        }
    }
    Ok(if report.ok() {
        Outcome::Ok
    } else {
        Outcome::Negative
    })
}
