//! `chronicle audit verify FILE`: checks an audit export (JSON Lines or CSV) against the log.
//! Each row is recomputed from the log — the audit fold over its run, which reads the decision
//! event at the row's offset and the request it answered — and compared field by field; then the
//! row's own fields must re-encode to its `hash`, which must be the stored envelope's, linked to
//! the run's previous event by `prev_hash`. The first row that differs is reported with its line,
//! its approval and the field.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chronicle_engine::store::Store;
use chronicle_projections::Audit;
use chronicle_schemas::{AuditRow, RunId};
use chronicle_wire::audit::{CSV_COLUMNS, Format, read_csv, read_jsonl};
use serde_json::{Value, json};

use super::{Links, progress_bar};
use crate::common::{DataArgs, LOCKED_NEEDS_DIRECTORY, Outcome, json_line, open_store};

const VERIFY_HELP: &str = "\
Examples:
  chronicle audit verify approvals.csv
  chronicle audit verify approvals.jsonl --data /backups/chronicle-copy
  chronicle audit verify approvals.csv --json

The format is told by the extension (.csv, .jsonl, .ndjson, .json) or else by the content.
Prints `ok N rows`, or the first row that does not match the log: its line, its approval id,
and the field (with both values).

Exit codes: 0 every row matches, 1 a row does not match (or does not parse), 2 bad arguments
or an operational error (missing file, no data directory).";

#[derive(Debug, clap::Args)]
#[command(after_help = VERIFY_HELP)]
pub struct VerifyArgs {
    /// The export to check.
    file: PathBuf,
    /// One JSON line: {"type":"ok","data":{"rows"}} or {"type":"mismatch","data":{...}}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
}

/// The first row that does not match.
#[derive(Debug, PartialEq)]
struct Mismatch {
    line: u64,
    approval_id: Option<String>,
    field: String,
    detail: String,
}

pub fn run(args: &VerifyArgs, out: &mut dyn Write) -> anyhow::Result<Outcome> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let format = detect(&args.file, &text)?;
    let rows = match format {
        Format::Jsonl => read_jsonl(&text),
        Format::Csv => read_csv(&text)?,
    };
    // The check reads the log itself: a server's answers would be what is being verified.
    let store = open_store(&args.data, LOCKED_NEEDS_DIRECTORY)?;
    let progress = progress_bar(rows.len() as u64, "verifying");
    let mut log = LogRows::default();
    let mut checked = 0u64;
    for (line, row) in rows {
        progress.inc(1);
        let mismatch = match row {
            Err(e) => Some(Mismatch {
                line,
                approval_id: None,
                field: "row".into(),
                detail: format!("does not parse: {e}"),
            }),
            Ok(row) => check(&store, &mut log, line, row, format == Format::Csv)?,
        };
        if let Some(m) = mismatch {
            progress.finish_and_clear();
            report_mismatch(out, args.json, &m)?;
            return Ok(Outcome::Negative);
        }
        checked += 1;
    }
    progress.finish_and_clear();
    if args.json {
        json_line(out, "ok", json!({"rows": checked}))?;
    } else {
        writeln!(out, "ok {checked} rows")?;
    }
    // The head of the log as this check saw it (a later check against it detects truncation).
    eprintln!("log head: offset {}", store.durable_next_offset());
    for (run, (seq, hash)) in &log.heads {
        eprintln!("run {run} head: seq {seq} hash {hash}");
    }
    Ok(Outcome::Ok)
}

fn report_mismatch(out: &mut dyn Write, json: bool, m: &Mismatch) -> anyhow::Result<()> {
    if json {
        json_line(
            out,
            "mismatch",
            json!({"line": m.line, "approval_id": m.approval_id, "field": m.field, "detail": m.detail}),
        )?;
    } else {
        let approval = m
            .approval_id
            .as_deref()
            .map_or_else(String::new, |a| format!(" (approval {a})"));
        writeln!(
            out,
            "mismatch at line {}{approval}: {}: {}",
            m.line, m.field, m.detail
        )?;
    }
    Ok(())
}

/// JSON Lines or CSV, by the file's extension, else by its first line.
fn detect(path: &Path, text: &str) -> anyhow::Result<Format> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") => return Ok(Format::Csv),
        Some("jsonl" | "ndjson" | "json") => return Ok(Format::Jsonl),
        _ => {}
    }
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if first.trim_start().starts_with('{') || first.is_empty() {
        Ok(Format::Jsonl)
    } else if first.trim_start_matches('\u{feff}').starts_with("run_id,") {
        Ok(Format::Csv)
    } else {
        bail!(
            "{} is neither JSON Lines nor CSV of an audit export (name it .jsonl or .csv)",
            path.display()
        )
    }
}

/// The log's rows per run, recomputed on first use: offset → row. Also each run's head.
#[derive(Debug, Default)]
struct LogRows {
    runs: HashMap<RunId, Option<HashMap<u64, AuditRow>>>,
    heads: std::collections::BTreeMap<RunId, (u64, chronicle_schemas::Hash)>,
}

impl LogRows {
    /// The rows of `run` by offset; `None` when the run is not in the log.
    fn of(&mut self, store: &Store, run: RunId) -> anyhow::Result<Option<&HashMap<u64, AuditRow>>> {
        if !self.runs.contains_key(&run) {
            let rows = match store.run_head(run)? {
                None => None,
                Some(head) => {
                    let mut links = Links::default();
                    let mut audit = Audit::new();
                    let mut rows = HashMap::new();
                    for env in store.read_run(run, 0, head.last_seq) {
                        let env = env.context("reading the log")?;
                        // A row is only as good as the chain it sits in.
                        links.check(&env, false)?;
                        if let Some(row) = audit.apply(&env) {
                            rows.insert(row.offset, row);
                        }
                    }
                    self.heads.insert(run, (head.last_seq, head.last_hash));
                    Some(rows)
                }
            };
            self.runs.insert(run, rows);
        }
        Ok(self.runs.get(&run).and_then(Option::as_ref))
    }
}

/// Checks one row; `Ok(None)` when it states exactly what the log recorded.
fn check(
    store: &Store,
    log: &mut LogRows,
    line: u64,
    mut row: AuditRow,
    csv: bool,
) -> anyhow::Result<Option<Mismatch>> {
    let mismatch = |field: &str, detail: String| Mismatch {
        line,
        approval_id: Some(row.approval_id.to_string()),
        field: field.to_owned(),
        detail,
    };
    let Some(rows) = log.of(store, row.run_id)? else {
        return Ok(Some(mismatch(
            "run_id",
            format!("run {} is not in the log", row.run_id),
        )));
    };
    // The row at the stated offset; failing that, the decision of the stated approval (an id
    // carries at most one decision), so a moved row is reported by the field that moved.
    let want = rows
        .get(&row.offset)
        .filter(|w| w.approval_id == row.approval_id)
        .or_else(|| rows.values().find(|w| w.approval_id == row.approval_id));
    let Some(want) = want else {
        let (field, detail) = match store.get(row.offset)? {
            None => (
                "offset",
                format!("the log has no event at offset {}", row.offset),
            ),
            Some(env) if env.run_id != row.run_id => (
                "run_id",
                format!(
                    "the event at offset {} belongs to run {}, not {}",
                    row.offset, env.run_id, row.run_id
                ),
            ),
            Some(env) => match rows.get(&row.offset) {
                Some(w) => (
                    "approval_id",
                    format!(
                        "{:?} in the file, {:?} in the log",
                        row.approval_id.as_str(),
                        w.approval_id.as_str()
                    ),
                ),
                None => (
                    "offset",
                    format!(
                        "the event at offset {} is {}, not a decision",
                        row.offset,
                        env.event.kind()
                    ),
                ),
            },
        };
        return Ok(Some(mismatch(field, detail)));
    };
    // CSV cannot tell an absent comment from an empty one (both are an empty cell).
    if csv && row.comment.is_none() && want.comment.as_deref() == Some("") {
        row.comment = want.comment.clone();
    }
    let (got_v, want_v) = (serde_json::to_value(&row)?, serde_json::to_value(want)?);
    for col in CSV_COLUMNS {
        let (g, w) = (&got_v[col], &want_v[col]);
        if g != w {
            return Ok(Some(mismatch(
                col,
                format!("{} in the file, {} in the log", show(g), show(w)),
            )));
        }
    }
    // Every field agrees with the log; the row must also vouch for itself.
    if !row.hash_recomputes() {
        return Ok(Some(mismatch(
            "hash",
            "the row's fields do not re-encode to its hash".into(),
        )));
    }
    Ok(None)
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "(none)".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_name_or_content() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(detect(&p("a.CSV"), "").unwrap(), Format::Csv);
        assert_eq!(detect(&p("a.jsonl"), "run_id,x").unwrap(), Format::Jsonl);
        assert_eq!(
            detect(&p("export"), "\n{\"run_id\":1}\n").unwrap(),
            Format::Jsonl
        );
        assert_eq!(
            detect(&p("export"), "run_id,session_id\n").unwrap(),
            Format::Csv
        );
        assert_eq!(detect(&p("export"), "").unwrap(), Format::Jsonl);
        assert!(detect(&p("export"), "hello world\n").is_err());
    }
}
