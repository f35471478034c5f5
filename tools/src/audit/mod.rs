//! `chronicle audit export` and `chronicle audit verify`: one row per approval decision, from the
//! audit projection over the log (or a server's export), and the check that an export still states
//! exactly what the log recorded (`verify.rs`).

mod verify;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chronicle_client::Client;
use chronicle_engine::store::Store;
use chronicle_projections::Audit;
use chronicle_schemas::{AuditRow, Envelope, Hash, RunId, Timestamp};
use chronicle_wire::ExportQuery;
use chronicle_wire::audit::{Encoder, Format};

use crate::common::{
    DataArgs, LOCKED_USE_SERVER, Outcome, RemoteArgs, open_store, parse_run_id, runtime,
};

/// Logs with at least this many events get a progress bar (on a terminal).
pub(crate) const PROGRESS_MIN_EVENTS: u64 = 10_000;
/// The progress bar moves every this many events (drawing per event would cost more than
/// the export).
const PROGRESS_STEP_EVENTS: u64 = 1_024;

const AUDIT_HELP: &str = "\
Examples:
  chronicle audit export --format csv --out approvals.csv
  chronicle audit export --run 0199c0de-... --since 2025-10-05T00:00:00Z
  chronicle audit export --server http://127.0.0.1:8080 --token $TOKEN > approvals.jsonl
  chronicle audit verify approvals.csv --data ./.chronicle

Exit codes: 0 success (verify: every row matches the log), 1 verify found a row that does
not match, 2 bad arguments or an operational error.";

#[derive(Debug, clap::Args)]
#[command(after_help = AUDIT_HELP)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AuditCommand {
    /// Write one row per approval decision (and expiry) as JSON Lines or CSV.
    Export(ExportArgs),
    /// Check every row of an export against the log: hash, chain link and every field.
    Verify(verify::VerifyArgs),
}

const EXPORT_HELP: &str = "\
Examples:
  chronicle audit export --format csv --out approvals.csv
  chronicle audit export --run 0199c0de-... --since 2025-10-05T00:00:00Z --until 2025-10-06T00:00:00Z
  chronicle audit export --server http://127.0.0.1:8080 > approvals.jsonl

Rows: run_id, session_id, approval_id, subject_kind, subject, todo_id, tool_or_agent,
requested_args, decision, effective_args, decided_by, comment, on_expiry, requested_at,
decided_at, and the decision event's seq, offset, hash, prev_hash (so `audit verify` can
recompute it). The head the export saw (log offset, and each run's last seq and hash) goes to
stderr: keep it to detect a truncated log later.

Exit codes: 0 exported, 2 bad arguments or an operational error (a broken log exports nothing).";

#[derive(Debug, clap::Args)]
#[command(after_help = EXPORT_HELP)]
pub struct ExportArgs {
    /// jsonl | csv.
    #[arg(long, default_value = "jsonl", value_name = "FORMAT")]
    format: String,
    /// Only this run.
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// Only rows decided at or after this RFC 3339 instant.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only rows decided before this RFC 3339 instant.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Write here instead of stdout (replaced only once the export is complete).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn run(args: &AuditArgs, out: &mut dyn Write) -> anyhow::Result<Outcome> {
    match &args.command {
        AuditCommand::Export(a) => export(a, out).map(|()| Outcome::Ok),
        AuditCommand::Verify(a) => verify::run(a, out),
    }
}

fn parse_format(s: &str) -> anyhow::Result<Format> {
    Format::parse(s).with_context(|| format!("--format must be jsonl or csv, got {s:?}"))
}

fn parse_time(flag: &str, s: &str) -> anyhow::Result<Timestamp> {
    Timestamp::parse_rfc3339(s).with_context(|| {
        format!("{flag} must be an RFC 3339 instant like 2025-10-05T10:00:00Z, got {s:?}")
    })
}

/// Which rows an export keeps: `since <= decided_at < until` (as the server's export).
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    since: Option<Timestamp>,
    until: Option<Timestamp>,
}

impl Window {
    fn keeps(&self, row: &AuditRow) -> bool {
        self.since.is_none_or(|s| row.decided_at >= s)
            && self.until.is_none_or(|u| row.decided_at < u)
    }
}

fn export(args: &ExportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let format = parse_format(&args.format)?;
    let run = args.run.as_deref().map(parse_run_id).transpose()?;
    let window = Window {
        since: args
            .since
            .as_deref()
            .map(|s| parse_time("--since", s))
            .transpose()?,
        until: args
            .until
            .as_deref()
            .map(|s| parse_time("--until", s))
            .transpose()?,
    };
    let remote = args.remote.client()?;
    // Refuse a destination we cannot write before reading anything.
    let mut dest = Destination::open(args.out.as_deref())?;
    let head = match &remote {
        Some(client) => export_remote(client, args, format, run, dest.writer(out))?,
        None => {
            let store = open_store(&args.data, LOCKED_USE_SERVER)?;
            export_local(&store, format, run, window, dest.writer(out))?
        }
    };
    dest.finish()?;
    head.report();
    Ok(())
}

/// stdout, or a temporary file beside `--out` that replaces it once the export is complete, so
/// a failed export never leaves a plausible-looking partial file.
enum Destination {
    Stdout,
    File {
        tmp: std::io::BufWriter<tempfile::NamedTempFile>,
        path: PathBuf,
    },
}

impl Destination {
    fn open(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Destination::Stdout);
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Destination::File {
            tmp: std::io::BufWriter::new(tmp),
            path: path.to_owned(),
        })
    }

    fn writer<'a>(&'a mut self, stdout: &'a mut dyn Write) -> &'a mut dyn Write {
        match self {
            Destination::Stdout => stdout,
            Destination::File { tmp, .. } => tmp,
        }
    }

    fn finish(self) -> anyhow::Result<()> {
        if let Destination::File { tmp, path } = self {
            let tmp = tmp.into_inner().map_err(|e| e.into_error())?;
            tmp.as_file().sync_all()?;
            tmp.persist(&path)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        Ok(())
    }
}

/// What an export saw: the log's next offset, and the head of each run it has rows of.
#[derive(Debug, Default)]
struct Head {
    offset: Option<u64>,
    rows: u64,
    /// run → (last seq, last hash), in run order.
    runs: BTreeMap<RunId, (u64, Hash)>,
    remote_run: Option<(RunId, String, String)>,
}

impl Head {
    /// On stderr: the export's data is on stdout.
    fn report(&self) {
        match self.offset {
            Some(o) => eprintln!("exported {} rows; log head: offset {o}", self.rows),
            None => eprintln!("exported {} rows", self.rows),
        }
        for (run, (seq, hash)) in &self.runs {
            eprintln!("run {run} head: seq {seq} hash {hash}");
        }
        if let Some((run, seq, hash)) = &self.remote_run {
            eprintln!("run {run} head: seq {seq} hash {hash}");
        }
    }
}

/// Writes rows in the server export's encoding (header first for CSV) as they come.
pub(crate) struct RowWriter<'a> {
    enc: Encoder,
    out: &'a mut dyn Write,
}

impl<'a> RowWriter<'a> {
    pub(crate) fn new(format: Format, out: &'a mut dyn Write) -> Self {
        Self {
            enc: Encoder::new(format),
            out,
        }
    }

    pub(crate) fn push(&mut self, row: &AuditRow) -> anyhow::Result<()> {
        self.enc.push(row);
        self.out.write_all(&self.enc.take())?;
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        self.out.write_all(&self.enc.take())?;
        self.out.flush()?;
        Ok(())
    }
}

/// The export on the data directory: the audit fold over the whole log (or one run), checking
/// as it reads that offsets are dense and every run's chain links (rows from a broken log would
/// vouch for what is not there).
fn export_local(
    store: &Store,
    format: Format,
    run: Option<RunId>,
    window: Window,
    out: &mut dyn Write,
) -> anyhow::Result<Head> {
    let to_offset = store.durable_next_offset();
    let (events, total): (Box<dyn Iterator<Item = _>>, u64) = match run {
        Some(run) => {
            let head = store.run_head(run)?.with_context(|| {
                format!(
                    "run {run} not found in {}",
                    store.dir().unwrap_or(Path::new(".")).display()
                )
            })?;
            (
                Box::new(store.read_run(run, 0, head.last_seq)),
                head.last_seq + 1,
            )
        }
        None => (Box::new(store.read_range(0, to_offset)), to_offset),
    };
    let progress = progress_bar(total, "exporting");
    let mut links = Links::default();
    let mut audit = Audit::new();
    let mut writer = RowWriter::new(format, out);
    let mut head = Head {
        offset: Some(to_offset),
        ..Head::default()
    };
    let mut with_rows = std::collections::BTreeSet::new();
    for (i, env) in events.enumerate() {
        let env = env.context("reading the log")?;
        links.check(&env, run.is_none())?;
        if (i as u64 + 1).is_multiple_of(PROGRESS_STEP_EVENTS) {
            progress.inc(PROGRESS_STEP_EVENTS);
        }
        let Some(row) = audit.apply(&env) else {
            continue;
        };
        if window.keeps(&row) {
            with_rows.insert(row.run_id);
            writer.push(&row)?;
            head.rows += 1;
        }
    }
    if run.is_none() && links.next_offset != to_offset {
        bail!(
            "the log ends at offset {} below its head {to_offset}; run `chronicle verify`",
            links.next_offset
        );
    }
    writer.flush()?;
    progress.finish_and_clear();
    head.runs = links
        .runs
        .into_iter()
        .filter(|(r, _)| with_rows.contains(r) || Some(*r) == run)
        .collect();
    Ok(head)
}

/// The export's integrity check while it reads (as the server's): dense offsets over the whole
/// log, dense seqs and linked `prev_hash` per run. Each record's hash against its body is
/// already checked by the store's decoder.
#[derive(Debug, Default)]
pub(crate) struct Links {
    pub(crate) next_offset: u64,
    pub(crate) runs: BTreeMap<RunId, (u64, Hash)>,
}

impl Links {
    pub(crate) fn check(&mut self, env: &Envelope, whole_log: bool) -> anyhow::Result<()> {
        if whole_log {
            if env.offset != self.next_offset {
                bail!(
                    "gap in the log: expected offset {}, found {}; run `chronicle verify`",
                    self.next_offset,
                    env.offset
                );
            }
            self.next_offset += 1;
        }
        let (next_seq, prev) = self
            .runs
            .get(&env.run_id)
            .map_or((0, Hash::ZERO), |&(seq, h)| (seq + 1, h));
        if env.seq != next_seq || env.prev_hash != prev {
            bail!(
                "broken chain of run {} at offset {}: seq {} (expected {next_seq}), prev_hash {} (expected {prev}); run `chronicle verify`",
                env.run_id,
                env.offset,
                env.seq,
                env.prev_hash
            );
        }
        self.runs.insert(env.run_id, (env.seq, env.hash));
        Ok(())
    }
}

/// The export of a server (`GET /api/v1/audit/approvals`), streamed to `out` as it arrives.
fn export_remote(
    client: &Client,
    args: &ExportArgs,
    format: Format,
    run: Option<RunId>,
    out: &mut dyn Write,
) -> anyhow::Result<Head> {
    // Times are sent as given (already checked to be RFC 3339): the server applies the same
    // window.
    let query = ExportQuery {
        format: Some(format.as_str().to_owned()),
        since: args.since.clone(),
        until: args.until.clone(),
        run_id: run.map(|r| r.to_string()),
    };
    runtime()?.block_on(async {
        let mut export = client.audit_export(&query).await?;
        let mut head = Head {
            offset: export.head_offset,
            ..Head::default()
        };
        if let (Some(run), Some((seq, hash))) = (run, export.run_head.clone()) {
            head.remote_run = Some((run, seq.to_string(), hash));
        }
        let mut lines = 0u64;
        // A body that breaks off is an incomplete export (an error), never a short one.
        while let Some(chunk) = export.chunk().await? {
            lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
            out.write_all(&chunk)?;
        }
        out.flush()?;
        // Counted by lines, for the summary only: a CSV comment may hold a newline in its cell.
        head.rows = match format {
            Format::Jsonl => lines,
            Format::Csv => lines.saturating_sub(1),
        };
        Ok(head)
    })
}

/// A progress bar on stderr for long work; hidden for short work and when stderr is not a
/// terminal (indicatif draws nothing then).
pub(crate) fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    if total < PROGRESS_MIN_EVENTS {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} events ({eta} left)")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

#[cfg(test)]
mod tests {
    use chronicle_projections::audit_rows;
    use chronicle_projections::fixtures::{envelopes, scenario_1_events};

    use super::*;

    /// The CLI writes exactly what the server's export sends.
    #[test]
    fn rows_encode_as_the_server_does() {
        let envs = envelopes(RunId::from_u128(0xA0D17), scenario_1_events());
        let rows = audit_rows(&envs);
        assert!(!rows.is_empty());
        for format in [Format::Csv, Format::Jsonl] {
            let mut buf = Vec::new();
            let mut w = RowWriter::new(format, &mut buf);
            for r in &rows {
                w.push(r).unwrap();
            }
            w.flush().unwrap();
            let want = chronicle_wire::audit::encode(format, &rows);
            assert_eq!(String::from_utf8(buf).unwrap(), want, "{format:?}");
        }
    }

    #[test]
    fn arguments_are_checked() {
        assert_eq!(parse_format("csv").unwrap(), Format::Csv);
        assert!(parse_format("xml").is_err());
        assert!(parse_time("--since", "2025-10-05T10:00:00Z").is_ok());
        let e = parse_time("--since", "yesterday").unwrap_err().to_string();
        assert!(e.starts_with("--since must be an RFC 3339 instant"), "{e}");
    }

    #[test]
    fn links_find_gaps_and_broken_chains() {
        let envs = envelopes(RunId::from_u128(7), scenario_1_events());
        let mut links = Links::default();
        for e in &envs {
            links.check(e, true).unwrap();
        }
        let mut links = Links::default();
        links.check(&envs[0], true).unwrap();
        assert!(
            links
                .check(&envs[2], true)
                .unwrap_err()
                .to_string()
                .contains("gap")
        );
        let mut links = Links::default();
        links.check(&envs[0], false).unwrap();
        let mut bad = envs[1].clone();
        bad.prev_hash = Hash([9; 32]);
        assert!(
            links
                .check(&bad, false)
                .unwrap_err()
                .to_string()
                .contains("broken chain")
        );
    }
}
