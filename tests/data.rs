//! The data analyst (`--domain data`) on real DuckDB and dbt, its tools served over MCP by the
//! domain's Python server (the venv `make data-venv` makes): with the scripted model, an
//! analysis from an ingested CSV to a chart, a report and an approved `dbt_run`, checked by
//! reading the conversation's DuckDB file independently; a rejected `dbt_run` that leaves the
//! dbt target untouched; SQL and paths outside the workspace refused with nothing written; and
//! without a model, the schema questions answered from the tools' real results.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use chronicle_data::DataConfig;
use chronicle_engine::llm::{LlmConfig, OpenAiCompat};
use chronicle_engine::{Engine, Settings, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{Envelope, Event, HitlMode, RunId};
use chronicle_testkit::model::{Reply, TestServer};
use serde_json::{Value, json};

use crate::llm_support::{KEY, calls, last_results, messages, turn_of};
use crate::support::{approve, assert_completed, events, open_engine, pending_call, reject};

/// A run's longest wait: a dbt command starts a Python process of its own (seconds).
const WAIT: Duration = Duration::from_secs(90);

/// The data domain over the scripted model (or none), in `dir`.
async fn engine(dir: &Path, model: Option<&TestServer>) -> Engine {
    let mut settings = Settings::default();
    if let Some(model) = model {
        let config = LlmConfig {
            base_url: model.base_url.clone(),
            model: "test-model".into(),
            api_key: Some(KEY.into()),
            timeout_ms: 10_000,
        };
        settings.llm = Some(Arc::new(OpenAiCompat::new(config).expect("client")));
    }
    let settings = chronicle_data::install(settings, &DataConfig::default())
        .await
        .expect("the data domain starts (make data-venv)");
    open_engine(dir, settings).await
}

/// The session's workspace, made before its first run so the test can put files in it.
fn workspace(dir: &Path, session: &str) -> PathBuf {
    let ws = dir.join("workspaces").join(session);
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

async fn start(engine: &Engine, query: &str, session: &str, hitl: Option<HitlMode>) -> RunId {
    engine
        .start_run(StartRun {
            query: query.into(),
            session_id: Some(session.into()),
            hitl,
            ..StartRun::default()
        })
        .await
        .unwrap()
        .run_id
}

/// The run once it waits or has ended.
async fn settled(engine: &Engine, run: RunId) -> RunState {
    engine.wait_settled(run, WAIT).await.unwrap()
}

async fn completed(engine: &Engine, run: RunId) -> RunState {
    let s = engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    assert_completed(&s);
    s
}

fn answer(s: &RunState) -> String {
    s.supervisor.final_response.as_ref().unwrap()["answer"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The tool calls of a run, in order: (tool, args, output or error).
fn tool_calls(evs: &[Envelope]) -> Vec<(String, Value, Result<Value, String>)> {
    let mut out = Vec::new();
    for e in evs {
        if let Event::ToolCallRequested {
            tool_call_id,
            tool,
            args,
            ..
        } = &e.event
        {
            let done = evs.iter().find_map(|c| match &c.event {
                Event::ToolCallCompleted {
                    tool_call_id: id,
                    output,
                    error,
                    ..
                } if id == tool_call_id => Some(match error {
                    Some(e) => Err(e.clone()),
                    None => Ok(output
                        .as_ref()
                        .and_then(|p| p.inline().cloned())
                        .unwrap_or(Value::Null)),
                }),
                _ => None,
            });
            out.push((
                tool.clone(),
                args.clone(),
                done.unwrap_or(Err("never completed".into())),
            ));
        }
    }
    out
}

/// A tool's output as JSON (the data tools answer JSON text).
fn json_of(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    }
}

/// `sql` on the conversation's DuckDB file, opened read-only by a Python of its own: what is
/// in the file, not what a tool says.
fn duckdb(db: &Path, sql: &str) -> Value {
    const SCRIPT: &str = "import duckdb, json, sys\n\
        con = duckdb.connect(sys.argv[1], read_only=True)\n\
        print(json.dumps(con.execute(sys.argv[2]).fetchall(), default=str))";
    let out = Command::new(DataConfig::default().python)
        .args(["-c", SCRIPT])
        .arg(db)
        .arg(sql)
        .output()
        .expect("the venv's Python runs");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn tables(db: &Path) -> Vec<String> {
    duckdb(
        db,
        "SELECT schema_name || '.' || table_name FROM duckdb_tables() ORDER BY 1",
    )
    .as_array()
    .unwrap()
    .iter()
    .map(|r| r[0].as_str().unwrap().to_owned())
    .collect()
}

/// The tool names a model request offered.
fn offered(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

const MONTHLY: &str = "SELECT date_trunc('month', CAST(order_date AS DATE)) AS month, \
    round(sum(revenue), 2) AS revenue FROM sales_2024_2025 GROUP BY ALL ORDER BY month";
const CHECK: &str = "SELECT (SELECT round(sum(revenue), 2) FROM results.run_1) AS aggregated, \
    (SELECT round(sum(revenue), 2) FROM sales_2024_2025) AS source";
const REPORT: &str = "# Monthly revenue\n\nRevenue per month, 2024-2025: see the chart.\n";
const ANSWER: &str = "Monthly revenue is kept in results.run_1 (24 months, checked against the source); the chart is /workspace/charts/monthly_revenue.vl.json, the report /workspace/reports/monthly.md, and dbt built stg_sales and monthly_revenue.";

/// The analyst's turns: ingest, look at the schema, aggregate, verify, chart and report, dbt.
fn analyst(body: &Value) -> Reply {
    match turn_of(body) {
        1 => calls(&[(
            "ingest_source",
            json!({"connector": "csv", "config": {"path": "/workspace/incoming/sales.csv", "header": true},
                   "target_table": "sales_2024_2025"}),
        )]),
        2 => calls(&[
            ("list_tables", json!({})),
            ("describe_table", json!({"table": "sales_2024_2025"})),
        ]),
        3 => calls(&[("run_sql", json!({"sql": MONTHLY}))]),
        4 => calls(&[("run_sql", json!({"sql": CHECK}))]),
        5 => calls(&[
            (
                "save_chart_spec",
                json!({"name": "monthly_revenue", "run_id": "run_1", "title": "Revenue per month",
                       "spec": {"mark": "line", "encoding": {
                           "x": {"field": "month", "type": "temporal"},
                           "y": {"field": "revenue", "type": "quantitative"}}}}),
            ),
            (
                "save_report_md",
                json!({"name": "monthly", "content": REPORT}),
            ),
        ]),
        6 => calls(&[("dbt_run", json!({}))]),
        _ => Reply::Content(ANSWER.into()),
    }
}

#[tokio::test]
async fn the_analyst_ingests_queries_charts_reports_and_runs_dbt_once_approved() {
    let model = TestServer::start(Some(KEY), analyst).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "sales");
    std::fs::create_dir_all(ws.join("incoming")).unwrap();
    std::fs::copy(
        DataConfig::default().sources.join("sales.csv"),
        ws.join("incoming/sales.csv"),
    )
    .unwrap();
    let engine = engine(dir.path(), Some(&model)).await;
    // The domain's defaults: agent mode (the analyst), HITL `tools`.
    let run = start(
        &engine,
        "How did revenue develop per month? Chart it, write a report and rebuild the dbt models.",
        "sales",
        None,
    )
    .await;
    let s = settled(&engine, run).await;
    // Only dbt_run waits for a person.
    let call = pending_call(&s, "dbt_run");
    let db = ws.join("analyst.duckdb");
    assert!(
        !tables(&db).contains(&"main.stg_sales".to_owned()),
        "dbt has not run before the approval"
    );
    approve(&engine, run, call.approval_id, "alice").await;
    let s = completed(&engine, run).await;
    assert_eq!(answer(&s), ANSWER);

    // The model saw exactly the analyst's tools.
    let seen = model.requests();
    assert_eq!(seen.len(), 7);
    let mut expected: Vec<String> = chronicle_data::DATA_TOOLS
        .iter()
        .chain(chronicle_data::ENGINE_TOOLS.iter())
        .map(|t| (*t).to_owned())
        .collect();
    expected.sort();
    assert_eq!(offered(&seen[0].body), expected);
    let system = messages(&seen[0].body)[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("time-series-analysis"),
        "the skill is offered"
    );

    // What the tools answered the model.
    let result = |turn: usize, i: usize| json_of(&json!(last_results(&seen[turn].body)[i]));
    let ingested = result(1, 0);
    assert_eq!(ingested["rows"], 2924, "{ingested}");
    assert_eq!(ingested["source"], "/workspace/incoming/sales.csv");
    let listed = result(2, 0);
    let names: Vec<&str> = listed["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sales", "sales_2024_2025"], "{listed}");
    let described = result(2, 1);
    assert_eq!(
        described["columns"][1],
        json!({"name": "order_date", "type": "DATE", "nullable": true})
    );
    let monthly = result(3, 0);
    assert_eq!(monthly["run_id"], "run_1");
    assert_eq!(monthly["result_table"], "results.run_1");
    assert_eq!(monthly["status"], "ok");
    assert_eq!(monthly["row_count"], 24);
    assert_eq!(monthly["preview"]["rows"].as_array().unwrap().len(), 10);
    let check = result(4, 0);
    assert_eq!(
        check["preview"]["rows"][0][0],
        check["preview"]["rows"][0][1]
    );
    let chart = result(5, 0);
    assert_eq!(chart["path"], "/workspace/charts/monthly_revenue.vl.json");
    assert_eq!(chart["rows"], 24);
    let dbt = result(6, 0);
    assert_eq!(dbt["status"], "success", "{dbt}");

    // The DuckDB file, read on its own.
    assert_eq!(
        tables(&db),
        [
            "main.monthly_revenue",
            "main.sales",
            "main.sales_2024_2025",
            "main.stg_sales",
            "results._runs",
            "results.run_1",
            "results.run_2",
        ]
    );
    assert_eq!(
        duckdb(&db, "SELECT count(*) FROM sales_2024_2025"),
        json!([[2924]])
    );
    let months = duckdb(
        &db,
        "SELECT count(*), round(sum(revenue), 2) = (SELECT round(sum(revenue), 2) FROM sales) \
         FROM results.run_1",
    );
    assert_eq!(months, json!([[24, true]]));
    assert_eq!(
        duckdb(
            &db,
            "SELECT (SELECT count(*) FROM stg_sales), (SELECT count(*) FROM monthly_revenue)"
        ),
        json!([[2924, 96]])
    );
    assert_eq!(
        duckdb(&db, "SELECT run_id, status FROM results._runs ORDER BY n"),
        json!([["run_1", "ok"], ["run_2", "ok"]])
    );

    // The workspace's files.
    let spec: Value =
        serde_json::from_slice(&std::fs::read(ws.join("charts/monthly_revenue.vl.json")).unwrap())
            .unwrap();
    assert_eq!(spec["mark"], "line");
    assert_eq!(spec["title"], "Revenue per month");
    assert_eq!(spec["data"]["values"].as_array().unwrap().len(), 24);
    assert_eq!(spec["data"]["values"][0]["month"], "2024-01-01");
    assert_eq!(
        std::fs::read_to_string(ws.join("reports/monthly.md")).unwrap(),
        REPORT
    );
    assert!(ws.join("dbt/target/run_results.json").is_file());

    // The events: every call recorded, in the model's order, the dbt_run approved.
    let evs = events(&engine, run);
    let calls = tool_calls(&evs);
    let names: Vec<&str> = calls.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        names,
        [
            "ingest_source",
            "list_tables",
            "describe_table",
            "run_sql",
            "run_sql",
            "save_chart_spec",
            "save_report_md",
            "dbt_run"
        ]
    );
    assert!(calls.iter().all(|(_, _, r)| r.is_ok()), "{calls:?}");
    let asked: Vec<&Envelope> = evs
        .iter()
        .filter(|e| e.event.kind() == "ApprovalRequested")
        .collect();
    assert_eq!(asked.len(), 1);

    // Events and bytes per analyst run (the closing note's measurement).
    let bytes: usize = evs.iter().map(|e| e.encode().unwrap().len()).sum();
    let blobs: u64 = std::fs::read_dir(dir.path().join("blobs"))
        .map(|d| d.map(|f| f.unwrap().metadata().unwrap().len()).sum())
        .unwrap_or(0);
    eprintln!(
        "data analyst run: {} events, {bytes} bytes of records and {blobs} bytes of blobs \
         ({} tool calls, {} model turns)",
        evs.len(),
        calls.len(),
        seen.len()
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_rejected_dbt_run_leaves_the_dbt_target_untouched() {
    // The first call starts the conversation's server (its database and dbt project); then
    // the dbt run a person rejects.
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[("list_tables", json!({}))]),
        2 => calls(&[("dbt_run", json!({}))]),
        _ => Reply::Content("dbt was not run.".into()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), Some(&model)).await;
    let run = start(&engine, "Rebuild the dbt models.", "no-dbt", None).await;
    let s = settled(&engine, run).await;
    let call = pending_call(&s, "dbt_run");
    reject(&engine, run, call.approval_id, "alice", Some("not today")).await;
    let s = completed(&engine, run).await;
    assert_eq!(answer(&s), "dbt was not run.");
    let told = &last_results(&model.requests()[2].body)[0];
    assert!(told.starts_with("rejected: "), "{told}");
    let ws = dir.path().join("workspaces/no-dbt");
    assert!(
        ws.join("dbt/dbt_project.yml").is_file(),
        "the project is there"
    );
    assert!(!ws.join("dbt/target").exists(), "dbt never ran");
    assert!(!ws.join("dbt/logs").exists(), "dbt never ran");
    let names = tables(&ws.join("analyst.duckdb"));
    assert!(
        !names
            .iter()
            .any(|t| t.ends_with("stg_sales") || t.ends_with("monthly_revenue")),
        "{names:?}"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn sql_and_paths_outside_the_workspace_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // Another conversation's workspace, and a folder outside every workspace.
    let other = workspace(dir.path(), "other");
    std::fs::write(other.join("secret.csv"), "secret\n42\n").unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let other_file = other.join("secret.csv").display().to_string();
    let leak = outside.join("leak.csv").display().to_string();
    let attach = outside.join("x.duckdb").display().to_string();
    let sql = [
        "SELECT * FROM read_csv('/etc/passwd')".to_owned(),
        format!("SELECT * FROM read_csv('{other_file}')"),
        "SELECT * FROM read_csv('/workspace/../other/secret.csv')".to_owned(),
        format!("COPY sales TO '{leak}'"),
        format!("ATTACH '{attach}' AS x"),
        "INSTALL httpfs".to_owned(),
        "LOAD '/tmp/evil.duckdb_extension'".to_owned(),
        "SET enable_external_access = true".to_owned(),
    ];
    let first: Vec<(&str, Value)> = sql
        .iter()
        .map(|q| ("run_sql", json!({ "sql": q })))
        .collect();
    let model = TestServer::start(Some(KEY), move |body| match turn_of(body) {
        1 => calls(&first),
        2 => calls(&[
            (
                "ingest_source",
                json!({"connector": "csv", "config": {"path": "/etc/passwd"}, "target_table": "pw"}),
            ),
            (
                "ingest_source",
                json!({"connector": "csv", "config": {"path": "/workspace/../other/secret.csv"},
                       "target_table": "secret"}),
            ),
            ("dbt_run", json!({"project_dir": "/workspace/../other"})),
            ("dbt_ls", json!({"project_dir": "/etc"})),
            (
                "save_report_md",
                json!({"name": "../../outside/report", "content": "x"}),
            ),
        ]),
        _ => Reply::Content("Nothing outside the workspace.".into()),
    })
    .await;
    let engine = engine(dir.path(), Some(&model)).await;
    let run = start(
        &engine,
        "Read what you can.",
        "sandboxed",
        Some(HitlMode::None),
    )
    .await;
    completed(&engine, run).await;
    let seen = model.requests();
    let sql_results = last_results(&seen[1].body);
    assert_eq!(sql_results.len(), sql.len());
    for (q, r) in sql.iter().zip(&sql_results) {
        let r = json_of(&json!(r));
        assert_eq!(r["status"], "error", "{q}: {r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains("Permission Error") || error.contains("configuration has been locked"),
            "{q}: {error}"
        );
    }
    let path_results = last_results(&seen[2].body);
    let expected = [
        "/etc/passwd is outside the workspace",
        "/workspace/../other/secret.csv leads outside the workspace",
        "/workspace/../other leads outside the workspace",
        "/etc is outside the workspace",
        "`name` '../../outside/report' must be",
    ];
    assert_eq!(path_results.len(), expected.len());
    for (r, want) in path_results.iter().zip(expected) {
        assert!(r.starts_with("failed: "), "{r}");
        assert!(r.contains(want), "{want:?} missing from {r}");
    }
    // Nothing was written outside, nothing loaded, the other conversation untouched.
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    let mut theirs: Vec<String> = std::fs::read_dir(&other)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    theirs.sort();
    assert_eq!(theirs, ["secret.csv"]);
    let db = dir.path().join("workspaces/sandboxed/analyst.duckdb");
    assert_eq!(tables(&db), ["main.sales", "results._runs"]);
    engine.shutdown().await;
}

#[tokio::test]
async fn without_a_model_the_schema_questions_are_answered_from_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), None).await;
    let mut answers = Vec::new();
    let mut tools = Vec::new();
    for q in [
        "what tables are there?",
        "describe sales",
        "show 5 rows of sales",
        "how many rows in sales?",
    ] {
        let run = start(&engine, q, "schema", None).await;
        let s = completed(&engine, run).await;
        answers.push(answer(&s));
        let calls = tool_calls(&events(&engine, run));
        assert_eq!(calls.len(), 1, "{q}: {calls:?}");
        assert!(calls[0].2.is_ok(), "{q}: {calls:?}");
        tools.push(calls[0].0.clone());
    }
    assert_eq!(
        tools,
        ["list_tables", "describe_table", "sample_rows", "run_sql"]
    );
    assert_eq!(
        answers[0],
        "The database has 1 table:\n- sales (2924 rows, 7 columns)"
    );
    assert_eq!(
        answers[1],
        "sales has 2924 rows and 7 columns:\n- order_id BIGINT\n- order_date DATE\n- region VARCHAR\n- product VARCHAR\n- units BIGINT\n- unit_price DOUBLE\n- revenue DOUBLE"
    );
    assert_eq!(
        answers[2],
        "The first 5 rows of sales:\n\n| order_id | order_date | region | product | units | unit_price | revenue |\n\
         |---|---|---|---|---|---|---|\n\
         | 1 | 2024-01-01 | North | Widget | 4 | 12.5 | 50.0 |\n\
         | 2 | 2024-01-01 | South | Gadget | 8 | 29.9 | 239.2 |\n\
         | 3 | 2024-01-01 | East | Widget | 8 | 12.5 | 100.0 |\n\
         | 4 | 2024-01-01 | West | Gadget | 8 | 29.9 | 239.2 |\n\
         | 5 | 2024-01-02 | North | Gadget | 9 | 29.9 | 269.1 |"
    );
    assert_eq!(
        answers[3],
        "sales has 2924 rows (run_sql run_1, kept as results.run_1)."
    );
    engine.shutdown().await;
}
