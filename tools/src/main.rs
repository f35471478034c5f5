//! The `chronicle` command line (DESIGN §7). So far `serve` and `bench`; `run`, `replay`, `log`
//! and the rest join the [`Command`] enum as their issues land.

mod audit;
mod bench;
mod common;
mod inspect;
mod replay;
mod run;
mod serve;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Serve the HTTP API (REST, SSE, WebSocket) on an embedded store.
    Serve(serve::ServeArgs),
    /// Measure durable appends, replay, restore, replay memory and full engine runs; print one table.
    Bench(bench::BenchArgs),
    /// The child half of `bench`: replay a run from a store and report peak memory as JSON.
    #[command(name = "bench-replay-memory", hide = true)]
    BenchReplayMemory(bench::MemoryArgs),
}

/// Exit codes (STYLE "The CLI"): 0 success, 1 a negative answer, 2 usage or operational error.
const EXIT_OPERATIONAL: u8 = 2;

fn main() -> ExitCode {
    // clap exits with 2 on a usage error by itself.
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let result = match &cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args, &mut out),
        Command::BenchReplayMemory(args) => bench::replay_memory_child(args, &mut out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`chronicle bench | head`) is the reader's choice, not a failure.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_OPERATIONAL)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|io| io.kind() == io::ErrorKind::BrokenPipe)
}
