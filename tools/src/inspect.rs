//! `log`, `runs`, `checkpoints`, `restore` and `verify`: reading a run's history (from a data
//! directory, or from a server with `--server`), moving a run back to a checkpoint, and checking
//! every chain of the log.

#[path = "inspect_remote.rs"]
pub(crate) mod remote;
#[path = "inspect_view.rs"]
pub(crate) mod view;

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, bail};
use chronicle_engine::store::{RunHead, Store};
use chronicle_engine::{Engine, RestoreTarget};
use chronicle_schemas::{CheckpointId, Envelope, Event, RunId, RunStatus};
use serde_json::{Value, json};

use crate::common::{DataArgs, Outcome, RemoteArgs, json_line, open_store, parse_run_id};
use remote::Remote;
use view::{Branches, DIM, paint, styled};

/// Stores with more events than this show a progress indicator while `verify` runs.
const VERIFY_PROGRESS_EVENTS_MIN: u64 = 50_000;
/// `runs` shows a progress bar when it projects more runs than this.
const RUNS_PROGRESS_RUNS_MIN: usize = 200;
/// Longest query `runs` prints.
const RUNS_QUERY_CHARS_MAX: usize = 48;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

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
--follow needs --server: a data directory is locked by the process that writes it, so only a
running server has new events to show.

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
    if let Some(remote) = Remote::from_args(&args.remote)? {
        return runtime()?.block_on(log_remote(&remote, run, args.follow, &printer, out));
    }
    if args.follow {
        bail!(
            "--follow needs --server URL: a data directory is locked by the process writing to it, so only a running server has new events"
        );
    }
    let store = view::open_for_reading(&args.data.data)?;
    let head = view::require_run(&store, run)?;
    // Two passes: the restores decide which seqs are abandoned, then the events are printed.
    let branches = Branches::of_run(&store, &head)?;
    for env in store.read_run(run, 0, head.last_seq) {
        let env = env?;
        printer.print(out, &env, branches.is_abandoned(env.seq))?;
    }
    out.flush()?;
    Ok(())
}

/// Reads `/log` pages from `from` until an empty page.
async fn log_pages(remote: &Remote, run: RunId, from: u64) -> anyhow::Result<Vec<Envelope>> {
    let mut events: Vec<Envelope> = Vec::new();
    let mut next = from;
    loop {
        let page = remote
            .get(&format!("/api/v1/agent/{run}/log?from={next}"))
            .await?;
        let page: Vec<Envelope> =
            serde_json::from_value(page).context("the server's log page does not decode")?;
        let Some(last) = page.last() else {
            return Ok(events);
        };
        next = last.seq + 1;
        events.extend(page);
    }
}

async fn log_remote(
    remote: &Remote,
    run: RunId,
    follow: bool,
    printer: &LogPrinter,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let events = log_pages(remote, run, 0).await?;
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
    let mut sse = remote
        .sse(&format!(
            "/api/v1/agent/{run}/events?from={next}&follow=true"
        ))
        .await?;
    while let Some(msg) = sse.next().await? {
        let seq = msg.id.as_deref().and_then(|i| i.parse::<u64>().ok());
        if seq.is_some_and(|s| s < next) {
            continue;
        }
        for env in log_pages(remote, run, next).await? {
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
Lists the runs of a data directory, oldest first: run id, session, status, created (UTC), last
seq and the query.

Examples:
  chronicle runs
  chronicle runs --status waiting_for_approval
  chronicle runs --session 6f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b --json

--json prints one `{\"type\":\"run\",\"data\":{...}}` line per run.

Exit codes: 0 listed (also when nothing matches), 2 error (bad argument, unreadable store).")]
pub struct RunsArgs {
    /// Only the runs of this session.
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// Only runs in this state.
    #[arg(long, value_enum)]
    status: Option<StatusFilter>,
    /// JSON Lines: one run per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
}

pub fn runs(args: &RunsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let out = &mut styled(out);
    let store = view::open_for_reading(&args.data.data)?;
    let mut heads: Vec<RunHead> = match &args.session {
        Some(s) => {
            let ids = store.session_runs(&chronicle_schemas::SessionId(s.clone()))?;
            ids.into_iter()
                .filter_map(|r| store.run_head(r).transpose())
                .collect::<Result<_, _>>()?
        }
        None => store.runs().collect::<Result<_, _>>()?,
    };
    heads.sort_by_key(|h| (h.created_at, h.run_id));
    let bar = (heads.len() > RUNS_PROGRESS_RUNS_MIN).then(|| {
        indicatif::ProgressBar::with_draw_target(
            Some(heads.len() as u64),
            indicatif::ProgressDrawTarget::stderr(),
        )
        .with_message("projecting runs")
    });
    let mut rows = Vec::new();
    for head in &heads {
        let state = store
            .state_at(head.run_id, head.last_seq)
            .with_context(|| format!("projecting run {}", head.run_id))?;
        if let Some(b) = &bar {
            b.inc(1);
        }
        let status = state.supervisor.run_status;
        if args.status.is_some_and(|f| f.status() != status) {
            continue;
        }
        rows.push((head, state));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if args.json {
        for (head, state) in &rows {
            let sup = &state.supervisor;
            json_line(
                out,
                "run",
                json!({
                    "run_id": head.run_id,
                    "session_id": head.session_id,
                    "status": sup.run_status,
                    "created_at": head.created_at,
                    "updated_at": head.updated_at,
                    "last_seq": head.last_seq,
                    "query": sup.query,
                    "parent": sup.parent,
                }),
            )?;
        }
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(out, "no runs")?;
        return Ok(());
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(head, state)| {
            let s = state.supervisor.run_status;
            vec![
                head.run_id.to_string(),
                head.session_id.to_string(),
                paint(view::run_status_style(s), s.as_str()),
                view::date_time(head.created_at),
                head.last_seq.to_string(),
                view::one_line(&state.supervisor.query, RUNS_QUERY_CHARS_MAX),
            ]
        })
        .collect();
    view::table(
        out,
        &["RUN", "SESSION", "STATUS", "CREATED", "SEQ", "QUERY"],
        &table,
    )?;
    Ok(())
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

/// The checkpoint list as the API's `GET .../checkpoints` shapes it.
pub(crate) fn checkpoints_json(run: RunId, store: &Store, head: &RunHead) -> anyhow::Result<Value> {
    let s = store.state_at(run, head.last_seq)?;
    let list: Vec<Value> = s
        .checkpoints
        .with_abandoned()
        .into_iter()
        .map(|(c, abandoned)| {
            json!({
                "checkpoint_id": c.checkpoint_id, "timestamp": c.at, "node": c.node,
                "todos_completed": c.todos_completed, "seq": c.seq, "parent": c.parent,
                "branch": c.branch, "abandoned": abandoned,
            })
        })
        .collect();
    Ok(json!({"run_id": run, "checkpoints": list, "head": s.checkpoints.head}))
}

pub fn checkpoints(args: &CheckpointsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = parse_run_id(&args.run)?;
    let out = &mut styled(out);
    let listing = match Remote::from_args(&args.remote)? {
        Some(remote) => {
            runtime()?.block_on(remote.get(&format!("/api/v1/agent/{run}/checkpoints")))?
        }
        None => {
            let store = view::open_for_reading(&args.data.data)?;
            let head = view::require_run(&store, run)?;
            checkpoints_json(run, &store, &head)?
        }
    };
    let list = listing["checkpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if args.json {
        for c in list {
            json_line(out, "checkpoint", c)?;
        }
        return Ok(());
    }
    if list.is_empty() {
        writeln!(out, "no checkpoints")?;
        return Ok(());
    }
    let head = listing["head"].as_str();
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|c| {
            let id = s(&c["checkpoint_id"]);
            let is_head = head == Some(id.as_str());
            let abandoned = c["abandoned"].as_bool().unwrap_or(false);
            let at = c["timestamp"]
                .as_str()
                .and_then(chronicle_schemas::Timestamp::parse_rfc3339)
                .map_or_else(|| "-".into(), view::clock);
            let mark = if is_head { "*" } else { "" };
            let row = vec![
                format!("{id}{mark}"),
                s(&c["seq"]),
                s(&c["node"]),
                s(&c["todos_completed"]),
                s(&c["parent"]),
                s(&c["branch"]),
                at,
                if abandoned {
                    "abandoned".into()
                } else if is_head {
                    "head".into()
                } else {
                    String::new()
                },
            ];
            if abandoned {
                row.into_iter().map(|cell| paint(DIM, cell)).collect()
            } else {
                row
            }
        })
        .collect();
    view::table(
        out,
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
        &rows,
    )?;
    Ok(())
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
    let result = match Remote::from_args(&args.remote)? {
        Some(remote) => {
            let Some(cp) = &args.checkpoint else {
                bail!("--seq works on a data directory only: the API restores by checkpoint id");
            };
            runtime()?.block_on(remote.post(
                &format!("/api/v1/agent/{run}/checkpoints/{cp}/restore"),
                json!({}),
            ))?
        }
        None => restore_embedded(args, run)?,
    };
    if args.json {
        return json_line(out, "restore", result);
    }
    let s = |k: &str| match &result[k] {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    writeln!(
        out,
        "restored run {run} to {} (seq {}); current todo {}",
        s("checkpoint_id"),
        s("to_seq"),
        s("current_todo_id")
    )?;
    if let Value::Object(summary) = &result["summary"] {
        let parts: Vec<String> = summary
            .iter()
            .filter(|(_, v)| v.as_u64().is_some_and(|n| n > 0))
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if parts.is_empty() {
            writeln!(out, "todos: none")?;
        } else {
            writeln!(out, "todos: {}", parts.join(", "))?;
        }
    }
    Ok(())
}

fn restore_embedded(args: &RestoreArgs, run: RunId) -> anyhow::Result<Value> {
    // The full open-time check here: a restore writes, and must not write after a broken tail.
    let store = open_store(&args.data.data)?;
    let head = view::require_run(&store, run)?;
    // Check the target before starting an engine, so a bad argument changes nothing.
    let target = match (&args.checkpoint, args.seq) {
        (_, Some(seq)) => {
            view::check_seq(&head, seq)?;
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
        let engine =
            Engine::open(store, crate::domain::DomainArgs::from_env()?.settings()?).await?;
        let result = engine.restore(run, target, &args.by).await;
        // The engine continues a restored run only while it lives; stop it now, so the next
        // `serve` picks the run up from the restored point.
        engine.shutdown().await;
        Ok::<_, anyhow::Error>(result?)
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
    let store = view::open_for_reading(&args.data.data)?;
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
