//! OpenTelemetry, black-box: a real `chronicle serve` exports its runs' traces over OTLP to a real
//! Arize Phoenix, read back through Phoenix's REST API; a run's trace rebuilt from the log by
//! `chronicle trace export` is the same trace; a receiver that is down or never answers costs
//! the runs nothing (spans are dropped and counted); JSON log lines of a run's work carry its
//! trace's ids.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use chronicle_client::Client;
use chronicle_schemas::{ApprovalStatus, Envelope, Event, RunId};
use chronicle_testkit::model::{Reply, TestServer};
use chronicle_wire::{DecisionRequest, Verdict};
use serde_json::{Value, json};

use crate::cli_run::{SCENARIO_2_QUERY, chronicle, rt};
use crate::durability::{Serve, free_port};

const MODEL_KEY: &str = "sk-otel-test-key-never-exported-7f3a";
const ALICE_TOKEN: &str = "alice-otel-token-0123456789";
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// A project name of Phoenix no other test uses.
fn project(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

/// The environment of a server (or `trace export`) sending to Phoenix under `project`.
fn otel_env(phoenix: &str, project: &str) -> Vec<(String, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), phoenix.into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
        (
            "OTEL_RESOURCE_ATTRIBUTES".into(),
            format!("openinference.project.name={project}"),
        ),
    ]
}

/// Every span of `project`, oldest first, once `done` says the set is whole (or the deadline
/// passes: the caller's assertions then say what is missing).
async fn spans_of(phoenix: &str, project: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!(
                "{phoenix}/v1/projects/{project}/spans?limit=1000&sort=start_time&order=asc"
            );
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let Ok(resp) = http.get(&url).send().await else {
                break;
            };
            if !resp.status().is_success() {
                break; // 404 until the project's first span arrives
            }
            let page: Value = resp.json().await.unwrap();
            all.extend(page["data"].as_array().cloned().unwrap_or_default());
            cursor = page["next_cursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        if done(&all) || Instant::now() > deadline {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn of_run(spans: &[Value], run: RunId) -> Vec<&Value> {
    let run = run.to_string();
    spans
        .iter()
        .filter(|s| attr(s, "chronicle.run_id") == run.as_str())
        .collect()
}

fn span_id(s: &Value) -> &str {
    s["context"]["span_id"].as_str().unwrap()
}

fn trace_id(s: &Value) -> &str {
    s["context"]["trace_id"].as_str().unwrap()
}

/// The spans of `spans` named `name`.
fn named<'a>(spans: &[&'a Value], name: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .copied()
        .filter(|s| s["name"] == name)
        .collect()
}

/// The name of a span's parent among `spans` (empty when it is not one of them).
fn parent_names<'a>(spans: &[&'a Value]) -> impl Fn(&Value) -> String + 'a {
    let by_id: BTreeMap<&str, &Value> = spans.iter().map(|s| (span_id(s), *s)).collect();
    move |s: &Value| {
        s["parent_id"]
            .as_str()
            .and_then(|p| by_id.get(p))
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    }
}

/// Runs that ended (their root span is there) among `spans`.
fn roots(spans: &[Value]) -> usize {
    spans.iter().filter(|s| s["name"] == "run").count()
}

/// Whether a model request is the analyst's (by its system prompt).
fn is_analyst(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("You write notes"))
}

/// An `http` agent that answers the weather and keeps the `traceparent` of every request.
async fn weather_agent(
    seen: Arc<Mutex<Vec<Option<String>>>>,
) -> (String, tokio::task::JoinHandle<()>) {
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(
                    headers
                        .get("traceparent")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                );
                axum::Json(json!({"answer": "Tomorrow in Seoul: sunny"}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

/// Starts a run as alice (with the caller's trace when `traceparent` is given); its id.
async fn start(port: u16, body: Value, traceparent: Option<&str>) -> RunId {
    let mut req = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/v1/agent/run"))
        .bearer_auth(ALICE_TOKEN)
        .json(&body);
    if let Some(t) = traceparent {
        req = req.header("traceparent", t);
    }
    let resp = req.send().await.unwrap();
    assert!(resp.status().is_success(), "{:?}", resp.text().await);
    let v: Value = resp.json().await.unwrap();
    v["run_id"].as_str().unwrap().parse().unwrap()
}

/// Approves, as alice, whatever the run asks until it ends; its log.
async fn approve_to_end(api: &Client, run: RunId) -> Vec<Envelope> {
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        let log = api.log(run, 0).await.unwrap();
        if log.iter().any(|e| e.event.is_terminal()) {
            return log;
        }
        for a in api.approvals(run).await.unwrap() {
            if a.approval.status == ApprovalStatus::Pending {
                let _ = api
                    .decide(run, &a.id, &DecisionRequest::new(Verdict::Approve))
                    .await;
            }
        }
        assert!(Instant::now() < deadline, "run {run} did not end: {log:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn runs_are_traced_in_phoenix_with_their_tree_model_usage_approvals_and_callers() {
    let phoenix = chronicle_testkit::phoenix::url();
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    // The model: first a `write_file` call (gated by the `tools` policy), then an answer.
    let model = rt.block_on(TestServer::start(Some(MODEL_KEY), |body| {
        // Only the analyst is answered; the planners fall back to their rules.
        if !is_analyst(body) {
            return Reply::Status(500);
        }
        let called = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        match called {
            false => Reply::ToolCalls {
                content: None,
                calls: vec![(
                    "write_file".into(),
                    json!({"file_path": "/workspace/notes.md", "content": "sunny"}),
                )],
            },
            true => Reply::Content("The notes are written.".into()),
        }
    }));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (weather_url, _agent) = rt.block_on(weather_agent(seen.clone()));
    let agents = dir.path().join("agents.toml");
    std::fs::write(
        &agents,
        format!(
            r#"
[[agent]]
name = "analyst"
kind = "llm"
purpose = "Writes notes"
system_prompt = "You write notes to /workspace."
tools = ["write_file"]

[[agent]]
name = "weather"
url = "{weather_url}"
purpose = "Answers the weather"
keywords = ["weather"]
"#
        ),
    )
    .unwrap();
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, format!("alice {ALICE_TOKEN}\n")).unwrap();
    let live = project("live");
    let mut env = otel_env(&phoenix, &live);
    env.push(("CHRONICLE_LLM_BASE_URL".into(), model.base_url.clone()));
    env.push(("CHRONICLE_LLM_API_KEY".into(), MODEL_KEY.into()));
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args: Vec<&OsStr> = vec![
        OsStr::new("--agents"),
        agents.as_os_str(),
        OsStr::new("--tokens"),
        tokens.as_os_str(),
    ];
    let serve = Serve::start_env(
        &dir.path().join("data"),
        &args,
        &dir.path().join("serve.log"),
        None,
        &env_refs,
    );
    let api = serve.api.clone().with_token(Some(ALICE_TOKEN.into()));
    // The caller's trace a run is started under: new each time (Phoenix keeps a trace in the
    // project it first saw it in).
    let caller_trace = uuid::Uuid::new_v4().simple().to_string();
    let caller_span = &uuid::Uuid::new_v4().simple().to_string()[..16];
    let caller = format!("00-{caller_trace}-{caller_span}-01");

    // The real-estate demo, a person approving every TODO, under the caller's trace.
    let demo = rt.block_on(start(
        serve.port,
        json!({"query": SCENARIO_2_QUERY, "hitl": "every_todo"}),
        Some(&caller),
    ));
    let demo_log = rt.block_on(approve_to_end(&api, demo));
    // The llm agent: two model calls and a gated tool call, approved.
    let notes = rt.block_on(start(
        serve.port,
        json!({"query": "Write today's notes", "agent": "analyst", "hitl": "tools"}),
        None,
    ));
    let notes_log = rt.block_on(approve_to_end(&api, notes));
    // The http agent.
    let weather = rt.block_on(start(
        serve.port,
        json!({"query": "What's the weather?", "agent": "weather"}),
        None,
    ));
    let weather_log = rt.block_on(approve_to_end(&api, weather));
    for log in [&demo_log, &notes_log, &weather_log] {
        assert!(
            matches!(log.last().unwrap().event, Event::RunCompleted { .. }),
            "{log:?}\n{}",
            serve.log_text()
        );
    }

    let spans = rt.block_on(spans_of(&phoenix, &live, |s| roots(s) >= 3));
    assert_eq!(roots(&spans), 3, "{spans:#?}\n{}", serve.log_text());
    let everything = serde_json::to_string(&spans).unwrap();
    assert!(
        !everything.contains(MODEL_KEY),
        "the model's key was exported"
    );

    // The demo's trace continues the caller's; its TODOs hang under the run, each attempt under
    // its TODO, each wait for a person under the TODO with who decided.
    let d = of_run(&spans, demo);
    let root = named(&d, "run");
    assert_eq!(root.len(), 1);
    assert_eq!(trace_id(root[0]), caller_trace);
    assert_eq!(root[0]["parent_id"], caller_span);
    assert!(d.iter().all(|s| trace_id(s) == caller_trace));
    let parent_name = parent_names(&d);
    let todos: Vec<&&Value> = d
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("todo "))
        .collect();
    assert!(!todos.is_empty(), "{d:#?}");
    assert!(todos.iter().all(|t| parent_name(t) == "run"));
    let attempts: Vec<&&Value> = d
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("invoke_agent "))
        .collect();
    assert_eq!(attempts.len(), todos.len(), "{d:#?}");
    assert!(attempts.iter().all(|a| parent_name(a).starts_with("todo ")));
    let waits: Vec<&&Value> = d
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("wait_for_approval"))
        .collect();
    let decided = demo_log
        .iter()
        .filter(|e| matches!(e.event, Event::ApprovalDecided { .. }))
        .count();
    assert_eq!(waits.len(), decided, "{d:#?}");
    for w in &waits {
        assert_eq!(attr(w, "chronicle.approval.decided_by"), "alice");
        assert_eq!(attr(w, "chronicle.principal"), "alice");
        assert!(parent_name(w).starts_with("todo "), "{w}");
    }

    // The llm agent: run → TODO → agent → model calls and the tool call → the wait for alice.
    let n = of_run(&spans, notes);
    let parent_name = parent_names(&n);
    let agent = named(&n, "invoke_agent analyst");
    assert_eq!(agent.len(), 1, "{n:#?}");
    assert_eq!(parent_name(agent[0]), "todo analyst");
    let tool = named(&n, "execute_tool write_file");
    assert_eq!(tool.len(), 1, "{n:#?}");
    assert_eq!(parent_name(tool[0]), "invoke_agent analyst");
    assert_eq!(attr(tool[0], "gen_ai.tool.name"), "write_file");
    let wait = named(&n, "wait_for_approval write_file");
    assert_eq!(wait.len(), 1, "{n:#?}");
    assert_eq!(parent_name(wait[0]), "execute_tool write_file");
    assert_eq!(attr(wait[0], "chronicle.approval.decided_by"), "alice");
    let calls: Vec<(u64, &str, u64, u64)> = notes_log
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmCalled { model, usage, .. } => {
                let u = usage.expect("the scripted model reports usage");
                Some((e.seq, model.as_str(), u.prompt_tokens, u.completion_tokens))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    let chats: Vec<&Value> = n
        .iter()
        .copied()
        .filter(|s| s["name"].as_str().unwrap().starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2, "{n:#?}");
    for (seq, model_name, input, output) in &calls {
        let chat = chats
            .iter()
            .find(|c| attr(c, "chronicle.seq.start") == *seq)
            .unwrap_or_else(|| panic!("no span of the model call at seq {seq}: {chats:#?}"));
        assert_eq!(parent_name(chat), "invoke_agent analyst");
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.request.model"), *model_name);
        assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), *input);
        assert_eq!(attr(chat, "gen_ai.usage.output_tokens"), *output);
        assert!(
            attr(chat, "gen_ai.response.finish_reasons").is_array(),
            "{chat}"
        );
    }
    // The model was called inside each call's span.
    let asked: Vec<String> = model
        .requests()
        .iter()
        .filter(|r| is_analyst(&r.body))
        .map(|r| r.traceparent.clone().expect("a traceparent to the model"))
        .collect();
    let expected: BTreeSet<String> = chats
        .iter()
        .map(|c| format!("00-{}-{}-01", trace_id(c), span_id(c)))
        .collect();
    assert_eq!(asked.iter().cloned().collect::<BTreeSet<_>>(), expected);

    // The http agent was called inside its attempt's span.
    let w = of_run(&spans, weather);
    let attempt = named(&w, "invoke_agent weather");
    assert_eq!(attempt.len(), 1, "{w:#?}");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![Some(format!(
            "00-{}-{}-01",
            trace_id(attempt[0]),
            span_id(attempt[0])
        ))]
    );

    // `trace export` rebuilds from the log the spans the live export sent: the same ids, parents
    // and names.
    let url = format!("http://127.0.0.1:{}", serve.port);
    for run in [demo, notes, weather] {
        assert_eq!(
            json_export(&url, run),
            shape(of_run(&spans, run)),
            "run {run}"
        );
    }

    // A run recorded while tracing was off, exported afterwards over OTLP/gRPC, is in Phoenix.
    let plain = Serve::start_with(
        &dir.path().join("data-untraced"),
        &args,
        &dir.path().join("serve-untraced.log"),
        None,
    );
    let api = plain.api.clone().with_token(Some(ALICE_TOKEN.into()));
    let untraced = rt.block_on(start(
        plain.port,
        json!({"query": SCENARIO_2_QUERY, "hitl": "every_todo"}),
        None,
    ));
    rt.block_on(approve_to_end(&api, untraced));
    let later = project("export");
    let plain_url = format!("http://127.0.0.1:{}", plain.port);
    let mut cmd = chronicle();
    cmd.args([
        "trace",
        "export",
        &untraced.to_string(),
        "--server",
        &plain_url,
    ])
    .args(["--token", ALICE_TOKEN])
    .envs(otel_env(&chronicle_testkit::phoenix::grpc_url(), &later))
    .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = rt.block_on(spans_of(&phoenix, &later, |s| roots(s) >= 1));
    assert_eq!(
        shape(of_run(&sent, untraced)),
        json_export(&plain_url, untraced)
    );
    assert!(shape(of_run(&sent, untraced)).len() >= 5);
}

/// A span as (trace id, span id, parent id, name).
type Shape = BTreeSet<(String, String, String, String)>;

fn shape(spans: Vec<&Value>) -> Shape {
    spans
        .into_iter()
        .map(|s| {
            (
                trace_id(s).to_owned(),
                span_id(s).to_owned(),
                s["parent_id"].as_str().unwrap_or_default().to_owned(),
                s["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The spans `chronicle trace export --json` rebuilds for `run` from the server's log.
fn json_export(server: &str, run: RunId) -> Shape {
    let mut cmd = chronicle();
    cmd.args([
        "trace",
        "export",
        &run.to_string(),
        "--json",
        "--server",
        server,
    ])
    .args(["--token", ALICE_TOKEN]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let request: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut shape = Shape::new();
    for rs in request["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for s in ss["spans"].as_array().unwrap() {
                shape.insert((
                    s["traceId"].as_str().unwrap().to_owned(),
                    s["spanId"].as_str().unwrap().to_owned(),
                    s["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                    s["name"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    shape
}

/// `n` runs of the demo, started together, then each followed to its end; how many completed.
async fn run_many(api: &Client, n: usize) -> usize {
    let mut started = Vec::new();
    for i in 0..n {
        let req = chronicle_wire::RunRequest {
            query: format!("{SCENARIO_2_QUERY} {i}"),
            ..Default::default()
        };
        started.push(api.start_run(&req).await.unwrap().run_id);
    }
    let mut completed = 0;
    for run in started {
        let log = approve_to_end(api, run).await;
        completed += usize::from(matches!(
            log.last().map(|e| &e.event),
            Some(Event::RunCompleted { .. })
        ));
    }
    completed
}

/// The value of the counter `name{outcome="…"}` in a scrape.
fn counter(metrics: &str, outcome: &str) -> u64 {
    let prefix = format!("chronicle_trace_spans_total{{outcome=\"{outcome}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_receiver_down_or_silent_costs_runs_nothing_and_log_lines_carry_the_trace() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    // One receiver refuses connections; the other accepts them and never answers.
    let closed = free_port();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let keep = std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().take(64) {
            held.push(c);
        }
    });
    for (name, endpoint) in [
        ("down", format!("http://127.0.0.1:{closed}")),
        ("silent", silent_url),
    ] {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "8"),
            ("OTEL_BSP_SCHEDULE_DELAY", "20"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "60000"),
            ("RUST_LOG", "warn,chronicle_engine=debug"),
        ];
        let args = [OsStr::new("--log-format"), OsStr::new("json")];
        let serve = Serve::start_env(
            &dir.path().join(format!("data-{name}")),
            &args,
            &dir.path().join(format!("serve-{name}.log")),
            None,
            &env,
        );
        let completed = rt.block_on(run_many(&serve.api, 8));
        assert_eq!(completed, 8, "{name}: {}", serve.log_text());
        let metrics = rt.block_on(serve.api.metrics()).unwrap();
        let (exported, dropped, failed) = (
            counter(&metrics, "exported"),
            counter(&metrics, "dropped"),
            counter(&metrics, "failed"),
        );
        assert_eq!(exported, 0, "{name}: {metrics}");
        match name {
            // Every export is refused at once.
            "down" => assert!(failed > 0, "{name}: {metrics}"),
            // The first export never returns: eight runs' spans overflow a queue of 8.
            _ => assert!(dropped > 0, "{name}: {metrics}"),
        }
        // Every line is JSON; those written for a run's work name it and its trace.
        let log = serve.log_text();
        let lines: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let of_runs: Vec<&Value> = lines.iter().filter(|l| l.get("run_id").is_some()).collect();
        assert!(!of_runs.is_empty(), "{name}: {log}");
        for l in of_runs {
            assert_eq!(l["trace_id"].as_str().map(str::len), Some(32), "{l}");
            assert_eq!(l["span_id"].as_str().map(str::len), Some(16), "{l}");
        }
    }
    drop(keep);
}

#[test]
fn bad_telemetry_settings_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = chronicle();
    cmd.args([
        "serve",
        "--addr",
        &format!("127.0.0.1:{}", free_port()),
        "--data",
    ])
    .arg(dir.path().join("data"))
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    .env("OTEL_EXPORTER_OTLP_PROTOCOL", "udp");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{err}");
    // Without an endpoint, `trace export` says what to set (or to print JSON instead).
    let mut cmd = chronicle();
    cmd.args([
        "trace",
        "export",
        &uuid::Uuid::new_v4().to_string(),
        "--data",
    ])
    .arg(dir.path().join("data"))
    .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
    .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_ENDPOINT") && err.contains("--json"),
        "{err}"
    );
    // A run that is not there is named.
    let mut cmd = chronicle();
    let run = uuid::Uuid::new_v4().to_string();
    cmd.args(["trace", "export", &run, "--json", "--data"])
        .arg(dir.path().join("data"));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&run));
}
