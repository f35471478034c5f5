//! `/metrics` after a mixed workload on a real server: `llm` agent runs over the scripted model
//! (model and tool calls), an approval decided, a run cancelled while it waits, a 404 on a route
//! and one on no route, a stream refused for its cap. The scrape passes `promtool check metrics`,
//! its histograms count exactly what the workload did, and every metric the Grafana dashboard
//! asks for is in it.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_schemas::{Event, HitlMode, RunId};
use chronicle_testkit::model::TestServer;
use chronicle_wire::{CancelRequest, DecisionRequest, RunRequest};
use reqwest::StatusCode;

use crate::api_support::{Server, server_settings};
use crate::llm_support::{self, KEY, analyst};
use crate::support::first_pending;

const WAIT: Duration = Duration::from_secs(30);

const DASHBOARD: &str = include_str!("../docs/grafana/chronicle-dashboard.json");

/// The value of the sample named exactly `series` (name and labels); a series that is not there
/// fails the test.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
}

/// Waits until `chronicle_approvals_pending` is `n`: the index it is read from follows the log.
async fn pending_becomes(srv: &Server, n: f64) {
    let deadline = std::time::Instant::now() + WAIT;
    while sample(&scrape(srv).await, "chronicle_approvals_pending") != n {
        assert!(
            std::time::Instant::now() < deadline,
            "pending approvals never {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A scrape as Prometheus' older text format (what a request without `Accept` gets).
async fn scrape(srv: &Server) -> String {
    let res = srv.http.get(srv.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let ct = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    res.text().await.unwrap()
}

/// `promtool check metrics` on `text`: skipped (said on stderr) without promtool, except under
/// CI, where it fails.
fn promtool_check(text: &str) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "promtool is missing (Debian's `prometheus` package; `make test-deps` installs it)"
            );
            eprintln!("skipping `promtool check metrics`: promtool is not installed");
            return;
        }
        Err(e) => panic!("promtool: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn status(srv: &Server, run: &str) -> StatusCode {
    let url = srv.url(&format!("/api/v1/agent/{run}/status"));
    srv.http.get(url).send().await.unwrap().status()
}

fn agent_run(hitl: HitlMode, session: &str) -> RunRequest {
    RunRequest {
        agent: Some("analyst".into()),
        hitl: Some(hitl),
        session_id: Some(session.into()),
        ..RunRequest::new("How did sales go in March? Write a report.")
    }
}

/// What the committed events say the metrics must count.
#[derive(Debug, Default)]
struct Committed {
    started: u64,
    finished: BTreeMap<&'static str, u64>,
    decided: u64,
    /// By (tool, outcome).
    tool_calls: BTreeMap<(String, &'static str), u64>,
    model_calls: u64,
    input_tokens: u64,
    output_tokens: u64,
}

fn committed(srv: &Server) -> Committed {
    let store = srv.engine.store();
    let mut c = Committed::default();
    let mut tools = BTreeMap::new();
    for env in store.read_range(0, store.durable_next_offset()) {
        match env.unwrap().event {
            Event::RunStarted { .. } => c.started += 1,
            Event::RunCompleted { .. } => *c.finished.entry("completed").or_default() += 1,
            Event::RunFailed { .. } => *c.finished.entry("failed").or_default() += 1,
            Event::RunCancelled { .. } => *c.finished.entry("cancelled").or_default() += 1,
            Event::ApprovalDecided { .. } => c.decided += 1,
            Event::ToolCallRequested {
                tool_call_id, tool, ..
            } => {
                tools.insert(tool_call_id, tool);
            }
            Event::ToolCallCompleted {
                tool_call_id,
                error,
                ..
            } => {
                let outcome = if error.is_some() { "error" } else { "ok" };
                *c.tool_calls
                    .entry((tools[&tool_call_id].clone(), outcome))
                    .or_default() += 1;
            }
            Event::LlmCalled { model, usage, .. } => {
                assert_eq!(model, "test-model");
                c.model_calls += 1;
                let u = usage.unwrap_or_default();
                c.input_tokens += u.prompt_tokens;
                c.output_tokens += u.completion_tokens;
            }
            _ => {}
        }
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_mixed_workload_and_pass_promtool() {
    let model = TestServer::start(Some(KEY), analyst).await;
    let config = ApiConfig {
        streams_max: 1,
        ..ApiConfig::default()
    };
    let srv = server_settings(
        Tokens::none(),
        llm_support::settings(&model.base_url),
        config,
    )
    .await;
    let c = &srv.client;

    // An agent run that asks nobody, one whose gated call a person approves, and one cancelled
    // while its approval waits.
    let free = c
        .start_run(&agent_run(HitlMode::None, "free"))
        .await
        .unwrap();
    let approved = c
        .start_run(&agent_run(HitlMode::Tools, "approved"))
        .await
        .unwrap();
    let cancelled = c
        .start_run(&agent_run(HitlMode::Tools, "cancelled"))
        .await
        .unwrap();
    for run in [approved.run_id, cancelled.run_id] {
        let s = srv.engine.wait_settled(run, WAIT).await.unwrap();
        first_pending(&s);
    }
    pending_becomes(&srv, 2.0).await;

    let s = srv
        .engine
        .wait_settled(approved.run_id, WAIT)
        .await
        .unwrap();
    c.decide(
        approved.run_id,
        &first_pending(&s),
        &DecisionRequest::approve(),
    )
    .await
    .unwrap();
    c.cancel(cancelled.run_id, &CancelRequest::default())
        .await
        .unwrap();
    for run in [free.run_id, approved.run_id] {
        crate::support::completed(&srv.engine, run).await;
    }

    // Status reads: two of runs that exist, one of a run that does not, one of no route.
    let statuses = [
        status(&srv, &free.run_id.to_string()).await,
        status(&srv, &approved.run_id.to_string()).await,
        status(&srv, &RunId::from_u128(42).to_string()).await,
    ];
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::OK, StatusCode::NOT_FOUND]
    );
    let nowhere = srv.http.get(srv.url("/no/such/route")).send().await;
    assert_eq!(nowhere.unwrap().status(), StatusCode::NOT_FOUND);
    // A route asked with a method it does not take counts under its route.
    let url = srv.url(&format!("/api/v1/agent/{}/status", free.run_id));
    let wrong = srv.http.delete(url).send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);

    // A stream holds the one slot; a second is refused for the cap.
    let open = srv
        .http
        .get(srv.url("/api/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), StatusCode::OK);
    let refused = srv
        .http
        .get(srv.url("/api/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);

    let text = scrape(&srv).await;
    promtool_check(&text);

    // HTTP: by the route's template, never the path sent.
    let route = r#"route="/api/v1/agent/{run_id}/status",method="GET""#;
    assert_eq!(
        sample(
            &text,
            &format!("chronicle_http_request_duration_seconds_count{{{route}}}")
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"chronicle_http_requests_total{{{route},status="200"}}"#)
        ),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"chronicle_http_requests_total{{{route},status="404"}}"#)
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"chronicle_http_requests_total{route="unmatched",method="GET",status="404"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"chronicle_http_requests_total{route="/api/v1/agent/{run_id}/status",method="DELETE",status="405"}"#
        ),
        1.0
    );
    assert!(!text.contains("/no/such/route"), "{text}");
    assert!(!text.contains(&free.run_id.to_string()), "{text}");
    assert_eq!(
        sample(
            &text,
            r#"chronicle_http_requests_total{route="/api/v1/events",method="GET",status="503"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(&text, r#"chronicle_refused_total{cap="streams"}"#),
        1.0
    );
    assert_eq!(sample(&text, "chronicle_open_streams"), 1.0);

    // What runs did, as the log has it.
    let want = committed(&srv);
    assert_eq!(want.started, 3);
    assert_eq!(sample(&text, "chronicle_runs_started_total"), 3.0);
    assert_eq!(
        want.finished,
        BTreeMap::from([("cancelled", 1), ("completed", 2)])
    );
    for (status, n) in &want.finished {
        let series = format!(r#"chronicle_runs_finished_total{{status="{status}"}}"#);
        assert_eq!(sample(&text, &series), *n as f64, "{series}");
    }
    assert_eq!(want.decided, 1);
    assert_eq!(
        sample(
            &text,
            r#"chronicle_approval_wait_duration_seconds_count{outcome="approve"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"chronicle_approval_decisions_total{decision="approve"}"#
        ),
        1.0
    );
    assert_eq!(sample(&text, "chronicle_approval_waits_untimed_total"), 0.0);
    pending_becomes(&srv, 0.0).await;
    assert!(!want.tool_calls.is_empty());
    let mut counted = 0.0;
    for ((tool, outcome), n) in &want.tool_calls {
        let series = format!(
            r#"chronicle_tool_call_duration_seconds_count{{tool="{tool}",outcome="{outcome}"}}"#
        );
        assert_eq!(sample(&text, &series), *n as f64, "{series}");
        counted += *n as f64;
    }
    let all_tool_calls: f64 = text
        .lines()
        .filter(|l| l.starts_with("chronicle_tool_call_duration_seconds_count{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(all_tool_calls, counted);
    assert!(want.model_calls > 0 && want.input_tokens > 0);
    assert_eq!(
        sample(
            &text,
            r#"chronicle_model_call_duration_seconds_count{model="test-model",outcome="ok"}"#
        ),
        want.model_calls as f64
    );
    assert_eq!(
        sample(
            &text,
            r#"chronicle_model_tokens_total{model="test-model",type="input"}"#
        ),
        want.input_tokens as f64
    );
    assert_eq!(
        sample(
            &text,
            r#"chronicle_model_tokens_total{model="test-model",type="output"}"#
        ),
        want.output_tokens as f64
    );

    // The store.
    assert!(
        sample(
            &text,
            r#"chronicle_store_append_duration_seconds_count{ack="written"}"#
        ) > 0.0
    );
    // Every event of the log came through one append of this store.
    assert_eq!(
        sample(&text, "chronicle_store_append_events_sum"),
        srv.engine.store().durable_next_offset() as f64
    );
    assert!(sample(&text, "chronicle_store_barrier_duration_seconds_count") > 0.0);
    assert!(sample(&text, "chronicle_store_durable_wait_duration_seconds_count") > 0.0);
    assert_eq!(
        sample(&text, r#"chronicle_storage_health{state="ok"}"#),
        1.0
    );
    assert_eq!(
        sample(&text, r#"chronicle_storage_health{state="failed"}"#),
        0.0
    );

    dashboard_metrics_exist(&text);

    // Prometheus asks for OpenMetrics and gets it.
    let om = srv
        .http
        .get(srv.url("/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
        .send()
        .await
        .unwrap();
    let ct = om.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let om = om.text().await.unwrap();
    assert!(om.ends_with("# EOF\n"));
    assert!(
        om.contains("# TYPE chronicle_runs_started counter\n"),
        "{om}"
    );

    drop(open);
    srv.stop().await;
}

/// Every metric an expression of the dashboard names is in `scraped`, so the dashboard cannot
/// ask for a metric that was renamed or removed.
fn dashboard_metrics_exist(scraped: &str) {
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut names: Vec<String> = Vec::new();
    for expr in &exprs {
        let mut rest = expr.as_str();
        while let Some(at) = rest.find("chronicle_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.push(name);
        }
    }
    assert!(!names.is_empty());
    for name in names {
        let present = scraped.lines().any(|l| {
            l.strip_prefix(&name)
                .is_some_and(|r| r.starts_with(['{', ' ']))
        });
        assert!(
            present,
            "the dashboard asks for {name}, which /metrics lacks"
        );
    }
}

/// Every `expr` of every target, however deep the panels nest.
fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect_exprs(i, out)),
        _ => {}
    }
}
