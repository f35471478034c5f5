//! The analyst without a model: the schema questions it answers by rules, each as the tool call
//! that answers it ([`Question::call`]) and the sentence made from that call's real result
//! ([`Question::answer`]). Pure: the calls themselves go through the run's tool host
//! (`analyst.rs`), recorded and gated like a model's.

use serde_json::{Value, json};

/// Rows `show rows of <table>` asks for when it names no number, and the most it may name.
pub const SAMPLE_ROWS_DEFAULT: u32 = 5;
pub const SAMPLE_ROWS_MAX: u32 = 100;
/// Rows of a sample or columns of a table written into an answer at most.
const LISTED_MAX: usize = 100;
/// Characters of one cell in an answer's table.
const CELL_CHARS_MAX: usize = 40;

/// What the rules answer without a model, and the sentence for anything else.
pub const CAN_ANSWER: &str = "Without a model I answer schema questions: \"what tables are there?\", \"describe <table>\", \"show 5 rows of <table>\" and \"how many rows in <table>?\"; and \"run dbt\" runs the dbt project in /workspace/dbt once a person approves. Configure a model (CHRONICLE_LLM_BASE_URL) and I write the SQL for anything else.";

/// A schema question the rules understand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Question {
    /// "what tables are there?"
    Tables,
    /// "describe sales"
    Describe(String),
    /// "show 5 rows of sales"
    Sample { table: String, limit: u32 },
    /// "how many rows in sales?"
    Count(String),
    /// "run dbt": the project in /workspace/dbt, once a person approves (`dbt_*` are gated).
    DbtRun,
}

impl Question {
    /// The question `query` asks, if the rules know it. Table names are plain identifiers,
    /// optionally with a schema (`results.run_1`), as the query spells them.
    pub fn parse(query: &str) -> Option<Question> {
        let words: Vec<String> = query
            .split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .to_owned()
            })
            .filter(|w| !w.is_empty())
            .collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let has = |w: &str| lower.iter().any(|x| x == w);
        // The table: the first word after the last of these markers that names one (articles
        // and "table" skipped), else the query's last such word.
        let table_after = |markers: &[&str]| -> Option<String> {
            let skipped = ["the", "a", "an", "table", "my", "our"];
            let name_from = |i: usize| {
                lower[i..]
                    .iter()
                    .position(|w| !skipped.contains(&w.as_str()))
                    .map(|k| words[i + k].as_str())
                    .filter(|w| is_table_name(w))
            };
            let after_markers = (0..lower.len())
                .rev()
                .filter(|&i| markers.contains(&lower[i].as_str()))
                .find_map(|i| name_from(i + 1));
            let last = || {
                (0..words.len())
                    .rev()
                    .find(|&i| {
                        !skipped.contains(&lower[i].as_str())
                            && !markers.contains(&lower[i].as_str())
                    })
                    .map(|i| words[i].as_str())
                    .filter(|w| is_table_name(w))
            };
            after_markers.or_else(last).map(str::to_owned)
        };
        if has("dbt") && (has("run") || has("build")) {
            return Some(Question::DbtRun);
        }
        if has("describe") || (has("columns") && (has("of") || has("in"))) || has("schema") {
            return table_after(&["describe", "of", "in", "table"]).map(Question::Describe);
        }
        if has("how") && has("many") && has("rows") || has("count") {
            return table_after(&["in", "of", "from", "count", "table"]).map(Question::Count);
        }
        if has("rows") && (has("show") || has("sample") || has("first")) || has("sample") {
            let limit = lower
                .iter()
                .find_map(|w| w.parse::<u32>().ok())
                .unwrap_or(SAMPLE_ROWS_DEFAULT)
                .clamp(1, SAMPLE_ROWS_MAX);
            return table_after(&["of", "from", "in", "sample", "table"])
                .map(|table| Question::Sample { table, limit });
        }
        if has("tables") {
            return Some(Question::Tables);
        }
        None
    }

    /// The tool call that answers the question: its name and args.
    pub fn call(&self) -> (&'static str, Value) {
        match self {
            Question::Tables => ("list_tables", json!({})),
            Question::Describe(table) => ("describe_table", json!({ "table": table })),
            Question::Sample { table, limit } => {
                ("sample_rows", json!({ "table": table, "limit": limit }))
            }
            Question::Count(table) => (
                "run_sql",
                json!({ "sql": format!("SELECT count(*) AS row_count FROM {}", quoted(table)) }),
            ),
            Question::DbtRun => ("dbt_run", json!({})),
        }
    }

    /// The answer from the call's result (the tool's JSON answer).
    pub fn answer(&self, result: &Value) -> String {
        match self {
            Question::Tables => tables(result),
            Question::Describe(table) => describe(table, result),
            Question::Sample { table, .. } => sample(table, result),
            Question::Count(table) => count(table, result),
            Question::DbtRun => dbt_run(result),
        }
    }
}

/// A table name the rules pass on: `name` or `schema.name`, each part a plain identifier.
fn is_table_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() <= 2
        && parts.iter().all(|p| {
            let mut chars = p.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
                && p.len() <= 63
        })
}

fn quoted(table: &str) -> String {
    table
        .split('.')
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(".")
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn tables(result: &Value) -> String {
    let list = result["tables"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return "The database has no tables yet.".to_owned();
    }
    let mut out = format!(
        "The database has {}:",
        plural(list.len() as u64, "table", "tables")
    );
    for t in list.iter().take(LISTED_MAX) {
        out.push_str(&format!(
            "\n- {} ({}, {})",
            t["table"].as_str().unwrap_or("?"),
            plural(t["rows"].as_u64().unwrap_or(0), "row", "rows"),
            plural(t["columns"].as_u64().unwrap_or(0), "column", "columns"),
        ));
    }
    out
}

fn describe(table: &str, result: &Value) -> String {
    let columns = result["columns"].as_array().cloned().unwrap_or_default();
    let name = result["table"].as_str().unwrap_or(table);
    let mut out = format!(
        "{name} has {} and {}:",
        plural(result["rows"].as_u64().unwrap_or(0), "row", "rows"),
        plural(columns.len() as u64, "column", "columns"),
    );
    for c in columns.iter().take(LISTED_MAX) {
        out.push_str(&format!(
            "\n- {} {}{}",
            c["name"].as_str().unwrap_or("?"),
            c["type"].as_str().unwrap_or("?"),
            if c["nullable"] == json!(false) {
                " NOT NULL"
            } else {
                ""
            },
        ));
    }
    out
}

fn cell(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let text = text.replace('|', "\\|").replace('\n', " ");
    if text.chars().count() > CELL_CHARS_MAX {
        let cut: String = text.chars().take(CELL_CHARS_MAX).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn sample(table: &str, result: &Value) -> String {
    let columns: Vec<String> = result["columns"]
        .as_array()
        .map(|c| c.iter().map(cell).collect())
        .unwrap_or_default();
    let rows = result["rows"].as_array().cloned().unwrap_or_default();
    let name = result["table"].as_str().unwrap_or(table);
    if rows.is_empty() {
        return format!("{name} has no rows.");
    }
    let mut out = format!(
        "The first {} of {name}:\n\n| {} |\n|{}",
        plural(rows.len() as u64, "row", "rows"),
        columns.join(" | "),
        "---|".repeat(columns.len()),
    );
    for row in rows.iter().take(LISTED_MAX) {
        let cells: Vec<String> = row
            .as_array()
            .map(|r| r.iter().map(cell).collect())
            .unwrap_or_default();
        out.push_str(&format!("\n| {} |", cells.join(" | ")));
    }
    out
}

fn count(table: &str, result: &Value) -> String {
    if result["status"] != "ok" {
        return format!(
            "Counting the rows of {table} failed: {}",
            result["error"].as_str().unwrap_or("no reason given")
        );
    }
    let n = result["preview"]["rows"][0][0].as_u64();
    match n {
        Some(n) => format!(
            "{table} has {} (run_sql {}, kept as {}).",
            plural(n, "row", "rows"),
            result["run_id"].as_str().unwrap_or("?"),
            result["result_table"].as_str().unwrap_or("?"),
        ),
        None => format!("Counting the rows of {table} gave no number: {result}"),
    }
}

fn dbt_run(result: &Value) -> String {
    let results = result["results"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "{} on {}: {}",
        result["command"].as_str().unwrap_or("dbt run"),
        result["project"].as_str().unwrap_or("?"),
        result["status"].as_str().unwrap_or("?"),
    );
    if results.is_empty() {
        out.push_str(&format!(
            "\n{}",
            result["output"].as_str().unwrap_or_default()
        ));
    }
    for r in results.iter().take(LISTED_MAX) {
        let id = r["unique_id"].as_str().unwrap_or("?");
        out.push_str(&format!(
            "\n- {}: {}",
            id.rsplit('.').next().unwrap_or(id),
            r["status"].as_str().unwrap_or("?"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_questions_parse() {
        let q = Question::parse;
        assert_eq!(q("what tables are there?"), Some(Question::Tables));
        assert_eq!(q("Which tables do we have"), Some(Question::Tables));
        assert_eq!(
            q("describe sales"),
            Some(Question::Describe("sales".into()))
        );
        assert_eq!(
            q("What are the columns of sales?"),
            Some(Question::Describe("sales".into()))
        );
        assert_eq!(
            q("show 5 rows of sales"),
            Some(Question::Sample {
                table: "sales".into(),
                limit: 5
            })
        );
        assert_eq!(
            q("show rows from results.run_1"),
            Some(Question::Sample {
                table: "results.run_1".into(),
                limit: SAMPLE_ROWS_DEFAULT
            })
        );
        assert_eq!(
            q("show 100000 rows of sales"),
            Some(Question::Sample {
                table: "sales".into(),
                limit: SAMPLE_ROWS_MAX
            })
        );
        assert_eq!(
            q("how many rows in sales?"),
            Some(Question::Count("sales".into()))
        );
        assert_eq!(
            q("how many rows are in the sales table?"),
            Some(Question::Count("sales".into()))
        );
        assert_eq!(q("run dbt"), Some(Question::DbtRun));
        assert_eq!(q("please run the dbt project"), Some(Question::DbtRun));
        assert_eq!(q("How did sales go in March?"), None);
        // A name that is not a plain identifier is not passed on (the SQL is built from it).
        assert_eq!(q("how many rows in sales;drop"), None);
        assert_eq!(q("describe"), None);
    }

    #[test]
    fn calls_and_answers() {
        let count = Question::Count("sales".into());
        assert_eq!(
            count.call(),
            (
                "run_sql",
                json!({"sql": "SELECT count(*) AS row_count FROM \"sales\""})
            )
        );
        let result = json!({"run_id": "run_1", "result_table": "results.run_1", "status": "ok",
            "error": null, "row_count": 1, "preview": {"columns": ["row_count"], "rows": [[2924]]}});
        assert_eq!(
            count.answer(&result),
            "sales has 2924 rows (run_sql run_1, kept as results.run_1)."
        );
        let failed = json!({"run_id": "run_2", "status": "error", "error": "Catalog Error: no"});
        assert_eq!(
            count.answer(&failed),
            "Counting the rows of sales failed: Catalog Error: no"
        );
        let tables =
            json!({"tables": [{"table": "sales", "kind": "table", "rows": 2924, "columns": 7}]});
        assert_eq!(
            Question::Tables.answer(&tables),
            "The database has 1 table:\n- sales (2924 rows, 7 columns)"
        );
        let rows =
            json!({"table": "sales", "columns": ["a", "b"], "rows": [[1, "x|y"], [2, null]]});
        assert_eq!(
            Question::Sample {
                table: "sales".into(),
                limit: 2
            }
            .answer(&rows),
            "The first 2 rows of sales:\n\n| a | b |\n|---|---|\n| 1 | x\\|y |\n| 2 |  |"
        );
    }
}
