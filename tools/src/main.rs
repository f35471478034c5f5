//! The `chronicle` command line: `serve`, `run`, `chat`, `log`, `runs`, `sessions`,
//! `replay` (the time-travel debugger), `checkpoints`, `restore`, `audit export|verify`,
//! `verify`, `bench`.

mod audit;
mod bench;
mod common;
mod domain;
mod inspect;
mod logs;
mod replay;
mod run;
mod serve;
mod sessions;
mod store_cmd;
mod trace;
mod view;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

use crate::common::Outcome;

/// jemalloc rather than glibc's malloc, because glibc writes a chunk header in front of every
/// allocation and another after it: a buffer a connection reserves but never fills (hyper keeps
/// two of 8 KiB per connection) was resident anyway, ~40% of an idle stream's memory.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(
    name = "chronicle",
    version,
    about = "Chronicle, an event-sourced workflow engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API (REST, SSE, WebSocket) on the embedded store or on PostgreSQL.
    Serve(Box<serve::ServeArgs>),
    /// Measure durable appends, replay, restore, replay memory and full engine runs; print one table.
    Bench(bench::BenchArgs),
    /// The child half of `bench`: replay a run from a store and report peak memory as JSON.
    #[command(name = "bench-replay-memory", hide = true)]
    BenchReplayMemory(bench::MemoryArgs),
    /// Print a run's events as readable lines or JSON (optionally following a server).
    Log(inspect::LogArgs),
    /// List the runs of a data directory (or a server) with their status.
    Runs(inspect::RunsArgs),
    /// List sessions (newest activity first), show one with its turns, or delete one.
    Sessions(sessions::SessionsArgs),
    /// Show a run's checkpoint tree (from a data directory or a server).
    Checkpoints(inspect::CheckpointsArgs),
    /// Restore a run to a checkpoint or seq (appends RunRestored).
    Restore(inspect::RestoreArgs),
    /// Check every chain and the density of offsets; name the first bad offset.
    Verify(inspect::VerifyArgs),
    /// The time-travel debugger: state at a seq, diff of two seqs, or step event by event.
    Replay(replay::ReplayArgs),
    /// Start a run, print its events live, ask for approvals on the terminal; exit with its outcome.
    Run(run::RunArgs),
    /// An interactive REPL of queries and slash commands: converse with runs, answer approvals.
    Chat(run::ChatArgs),
    /// Export every approval decision (JSON Lines or CSV), or verify an export against the log.
    Audit(audit::AuditArgs),
    /// The PostgreSQL store: create or upgrade its schema, or copy a data directory into it.
    Store(store_cmd::StoreArgs),
    /// A run's OpenTelemetry trace, rebuilt from its events: sent over OTLP or printed as JSON.
    Trace(trace::TraceArgs),
}

/// Exit codes: 0 success, 1 a negative answer, 2 usage or operational error.
const EXIT_OPERATIONAL: u8 = 2;

/// The process's file creation mask: what the command creates is its user's alone.
///
/// Everything the CLI writes is Chronicle data — the store (which sets its own modes as well),
/// sessions' workspace files written by the tools, snapshots, blobs — and part of it is made by
/// code that takes the default modes (sled's files, the workspace tools). One umask set before
/// anything starts makes all of it 0700/0600; a library cannot set it (it is process-wide).
const UMASK: u32 = 0o077;

fn main() -> ExitCode {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(UMASK));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` are not errors: print them as clap does.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // No command at all: the help, so a newcomer sees the commands (exit 2, it did nothing).
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // anstream strips the styles when stderr is no terminal (or `NO_COLOR` is set).
            anstream::eprint!("{}", e.render().ansi());
            return ExitCode::from(EXIT_OPERATIONAL);
        }
        // A usage error is one line on stderr, exit 2.
        Err(e) => {
            eprintln!("{}", usage_line(&e.render().to_string()));
            return ExitCode::from(EXIT_OPERATIONAL);
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    // A command that answers only "it worked" is `Outcome::Ok`.
    let done = |r: anyhow::Result<()>| r.map(|()| Outcome::Ok);
    let result = match &cli.command {
        Command::Serve(args) => done(serve::run(args)),
        Command::Bench(args) => done(bench::run(args, &mut out)),
        Command::BenchReplayMemory(args) => done(bench::replay_memory_child(args, &mut out)),
        Command::Log(args) => done(inspect::log(args, &mut out)),
        Command::Runs(args) => done(inspect::runs(args, &mut out)),
        Command::Sessions(args) => done(sessions::run(args, &mut out)),
        Command::Checkpoints(args) => done(inspect::checkpoints(args, &mut out)),
        Command::Restore(args) => done(inspect::restore(args, &mut out)),
        Command::Verify(args) => inspect::verify(args, &mut out),
        Command::Replay(args) => done(replay::run(args, &mut out)),
        Command::Run(args) => run::run(args, &mut out),
        Command::Chat(args) => run::chat::run(args, &mut out),
        Command::Audit(args) => audit::run(args, &mut out),
        Command::Store(args) => done(store_cmd::run(args, &mut out)),
        Command::Trace(args) => done(trace::run(args, &mut out)),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        // A negative answer (a problem `verify` found, a failed, cancelled or waiting run, an
        // audit row that does not match the log) exits 1: it is not an error.
        Ok(Outcome::Negative) => {
            let _ = out.flush();
            ExitCode::from(1)
        }
        // A closed pipe (`chronicle bench | head`) is the reader's choice, not a failure.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_OPERATIONAL)
        }
    }
}

/// clap's error as one line: its message, the indented lines that continue it (which argument is
/// missing), and its tip (`a similar subcommand exists: 'sessions'`), without the usage block.
fn usage_line(rendered: &str) -> String {
    let mut blocks = rendered.split("\n\n");
    let mut parts: Vec<&str> = blocks
        .next()
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .collect();
    parts.extend(
        blocks
            .flat_map(str::lines)
            .map(str::trim)
            .filter(|l| l.starts_with("tip:")),
    );
    parts.join(" ")
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|io| io.kind() == io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn refusal(args: &[&str]) -> clap::Error {
        Cli::command().try_get_matches_from(args).unwrap_err()
    }

    #[test]
    fn a_mistyped_command_gets_a_suggestion_on_its_one_line() {
        let e = refusal(&["chronicle", "sesions"]);
        let line = usage_line(&e.render().to_string());
        assert_eq!(
            line,
            "error: unrecognized subcommand 'sesions' tip: a similar subcommand exists: 'sessions'"
        );
        let e = refusal(&["chronicle", "replay"]);
        let line = usage_line(&e.render().to_string());
        assert!(!line.contains('\n') && line.contains("<RUN>"), "{line}");
    }

    #[test]
    fn no_command_shows_the_help() {
        let e = refusal(&["chronicle"]);
        assert_eq!(
            e.kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        let help = e.render().to_string();
        assert!(
            help.contains("Usage: chronicle <COMMAND>") && help.contains("serve"),
            "{help}"
        );
    }
}
