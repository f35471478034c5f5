//! `sessions`: the sessions of a data directory (or a server), one session's turns, and deleting
//! one. Embedded, the reads go straight to the store (no engine starts, so no unfinished run
//! resumes); a delete starts an engine for the moment of the delete, as `restore` does, because
//! the tombstones are appended through the runs' actors.

use std::io::Write;

use chronicle_engine::{Engine, Principal, SessionReader};
use chronicle_schemas::SessionId;
use chronicle_wire::{SessionDeletedView, SessionDetail, SessionSummary, SessionsQuery};

use crate::common::{DataArgs, LOCKED_USE_SERVER, RemoteArgs, json_line, open_store, runtime};
use crate::view::{self, paint, styled};

/// Longest title the table prints.
const TITLE_CHARS_MAX: usize = 48;
/// Longest answer `sessions show` prints per turn.
const ANSWER_CHARS_MAX: usize = 60;

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "\
A session is the runs started with one session id; each run that is not a sub-agent run is one
turn. `sessions` lists them, the most recently active first: session id, turns, the latest
turn's status, last activity (UTC), user and title (the first turn's query).

Examples:
  chronicle sessions
  chronicle sessions --user alice --json
  chronicle sessions show thread-42
  chronicle sessions delete thread-42 --server http://127.0.0.1:8080

`delete` records a tombstone (a SessionDeleted event) as the last event of every run of the
session, cancelling a run still going first, and removes the session's workspace directory. The
events stay in the log: `verify` and the audit export still cover them, and `log` / `replay` on the
data directory still show them by run id; every other read treats the session as gone.

--json prints one `{\"type\":\"session\",\"data\":{...}}` line per session (`show`: the session
with its turns; `delete`: `{\"type\":\"session_deleted\",...}`).
--server URL (or CHRONICLE_SERVER) works on a running server, which holds its data directory
locked; the output is the same.

Exit codes: 0 done (also when nothing is listed), 2 error (unknown session, bad argument,
unreadable store, unreachable server)."
)]
pub struct SessionsArgs {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    list: ListArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// One session with all its turns: run, status, start (UTC), query and answer.
    Show(OneArgs),
    /// Delete a session: a recorded tombstone on each of its runs; its workspace is removed.
    Delete(OneArgs),
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Only the sessions of this user id.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Only the sessions of this owner (a principal; on a server, another than yours needs an
    /// admin token).
    #[arg(long, value_name = "OWNER")]
    owner: Option<String>,
    /// JSON Lines: one session per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Args)]
struct OneArgs {
    /// The session id.
    session: String,
    /// One JSON line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn run(args: &SessionsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let out = &mut styled(out);
    match &args.action {
        None => list(&args.list, out),
        Some(Action::Show(one)) => show(one, out),
        Some(Action::Delete(one)) => delete(one, out),
    }
}

/// The embedded reads: the store of the data directory, as the local principal (who sees all).
fn reader(data: &DataArgs) -> anyhow::Result<SessionReader> {
    let store = view::open_for_reading(data, LOCKED_USE_SERVER)?;
    Ok(SessionReader::new(store))
}

fn list(args: &ListArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let query = SessionsQuery {
        user: args.user.clone(),
        owner: args.owner.clone(),
        ..SessionsQuery::default()
    };
    let rows = match args.remote.client()? {
        Some(client) => runtime()?.block_on(client.sessions(&query))?,
        None => every_page(&reader(&args.data)?, query)?,
    };
    view::listing(
        out,
        args.json,
        "session",
        &rows,
        &[
            "SESSION",
            "TURNS",
            "STATUS",
            "LAST ACTIVITY",
            "USER",
            "TITLE",
        ],
        session_row,
    )
}

/// Every session, page after page, as the server lists them.
fn every_page(
    reader: &SessionReader,
    mut query: SessionsQuery,
) -> anyhow::Result<Vec<SessionSummary>> {
    let mut rows = Vec::new();
    loop {
        let page = reader.list(&Principal::local(), &query)?;
        rows.extend(page.sessions);
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return Ok(rows),
        }
    }
}

fn session_row(s: &SessionSummary) -> Vec<String> {
    vec![
        s.session_id.to_string(),
        s.turns.to_string(),
        paint(view::run_status_style(s.status), s.status.as_str()),
        view::date_time(s.last_activity),
        s.user_id.clone().unwrap_or_else(|| "-".into()),
        view::one_line(&s.title, TITLE_CHARS_MAX),
    ]
}

fn show(args: &OneArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let detail: SessionDetail = match args.remote.client()? {
        Some(client) => runtime()?.block_on(client.session_detail(&args.session))?,
        None => {
            reader(&args.data)?.get(&Principal::local(), &SessionId::from(args.session.as_str()))?
        }
    };
    if args.json {
        return json_line(out, "session", serde_json::to_value(&detail)?);
    }
    let s = &detail.session;
    writeln!(
        out,
        "session {}  {}",
        s.session_id,
        paint(view::BOLD, &s.title)
    )?;
    writeln!(
        out,
        "owner {}  user {}  created {}  last activity {}",
        s.owner,
        s.user_id.as_deref().unwrap_or("-"),
        view::date_time(s.created_at),
        view::date_time(s.last_activity)
    )?;
    let rows: Vec<Vec<String>> = detail
        .turns
        .iter()
        .map(|t| {
            vec![
                t.run_id.to_string(),
                paint(view::run_status_style(t.status), t.status.as_str()),
                view::date_time(t.started_at),
                view::one_line(&t.query, TITLE_CHARS_MAX),
                t.answer
                    .as_deref()
                    .map_or_else(|| "-".into(), |a| view::one_line(a, ANSWER_CHARS_MAX)),
            ]
        })
        .collect();
    view::table(out, &["RUN", "STATUS", "STARTED", "QUERY", "ANSWER"], &rows)?;
    Ok(())
}

fn delete(args: &OneArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let deleted = match args.remote.client()? {
        Some(client) => runtime()?.block_on(client.delete_session(&args.session))?,
        None => delete_embedded(args)?,
    };
    if args.json {
        return json_line(out, "session_deleted", serde_json::to_value(&deleted)?);
    }
    writeln!(
        out,
        "deleted session {}: {} run(s) end with a SessionDeleted event ({} cancelled first); the events stay in the log",
        deleted.session_id,
        deleted.runs.len(),
        deleted.cancelled.len()
    )?;
    Ok(())
}

fn delete_embedded(args: &OneArgs) -> anyhow::Result<SessionDeletedView> {
    // The full open-time check: a delete writes, and must not write after a broken tail.
    let store = open_store(&args.data, LOCKED_USE_SERVER)?;
    let session = SessionId::from(args.session.as_str());
    runtime()?.block_on(async move {
        let engine = Engine::open(
            store,
            crate::domain::DomainArgs::from_env()?.settings().await?,
        )
        .await?;
        let deleted = engine.delete_session(&Principal::local(), &session).await;
        // Stop at once: the engine exists only for the delete.
        engine.shutdown().await;
        Ok(deleted?)
    })
}
