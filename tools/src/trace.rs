//! `chronicle trace export`: a run's trace rebuilt from its events — the same spans, with the
//! same ids, as the server's live export sends — sent over OTLP or written as OTLP JSON.

use std::io::Write;

use anyhow::{Context, bail};
use chronicle_projections::trace::{TraceOptions, spans_of};
use chronicle_telemetry::Config;

use crate::common::{DataArgs, RemoteArgs, parse_run_id, runtime};
use crate::view;

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TraceCommand {
    /// Send a run's trace to the OTLP endpoint of the `OTEL_EXPORTER_OTLP_*` variables, or print
    /// it as OTLP JSON (`--json`). A run still going is exported as far as it got.
    Export(ExportArgs),
}

#[derive(clap::Args, Debug)]
struct ExportArgs {
    /// The run id (a UUID).
    run: String,
    /// Print the trace as one OTLP JSON `ExportTraceServiceRequest` instead of sending it.
    #[arg(long)]
    json: bool,
    /// Put the run's content in the spans: the query, the model's answers, the tools' arguments
    /// and results (also `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    #[arg(long)]
    content: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// Whether the operator asked for content in spans through the environment.
pub fn content_from_env() -> bool {
    std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

pub fn run(args: &TraceArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let TraceCommand::Export(args) = &args.command;
    let run = parse_run_id(&args.run)?;
    let config = match args.json {
        true => None,
        false => Some(Config::from_env()?.context(
            "no OTLP endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or print OTLP JSON with --json",
        )?),
    };
    let rt = runtime()?;
    let events = match args.remote.client()? {
        Some(client) => rt.block_on(client.log(run, 0))?,
        None => {
            let store = view::open_for_reading(&args.data, crate::common::LOCKED_USE_SERVER)?;
            let head = view::require_run(&store, run)?;
            store
                .read_run(run, 0, head.last_seq)
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    if events.is_empty() {
        bail!("run {run} not found");
    }
    let opts = TraceOptions {
        content: args.content || content_from_env(),
    };
    let spans = spans_of(run, &events, opts);
    match config {
        None => {
            serde_json::to_writer(&mut *out, &chronicle_telemetry::otlp_json(&spans))?;
            writeln!(out)?;
        }
        Some(config) => {
            rt.block_on(chronicle_telemetry::export_once(&config, &spans))
                .map_err(|e| anyhow::anyhow!("the OTLP export failed: {e}"))?;
            writeln!(
                out,
                "exported {} spans of run {run} (trace {})",
                spans.len(),
                spans
                    .first()
                    .map(|s| s.trace_id.to_string())
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(())
}
