//! `http` agents through the real `chronicle serve`, black-box: a weather agent written in Python
//! (standard library only) speaks the agent contract, is declared in TOML with English and Korean
//! keywords, and questions about the weather reach it without any model — in the default domain
//! and in `--domain generic` — and its answer is the run's answer.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli_run::rt;
use chronicle_client::Client;
use chronicle_schemas::HitlMode;
use chronicle_wire::RunRequest;

use crate::durability::Serve;

/// How long one run may take end to end (a debug build on a shared machine).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const QUERIES: [&str; 2] = [
    "What's the weather in Seoul tomorrow?",
    "내일 서울 날씨 어때?",
];

/// The agent: reads the contract's request, answers with `answer` and `data`. It binds port 0
/// and prints the port it got, so no other process can take the port in between.
const WEATHER_AGENT_PY: &str = r#"
import json
from http.server import BaseHTTPRequestHandler, HTTPServer


class Weather(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers["Content-Length"])
        request = json.loads(self.rfile.read(length))
        reply = {
            "answer": "Tomorrow in Seoul: sunny, 21°C (" + request["query"] + ")",
            "data": {
                "city": "Seoul",
                "temp_c": 21,
                "contract": request["contract"],
                "agent": request["agent"],
            },
        }
        body = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Weather)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The answer the agent gives to `query`.
fn weather_answer(query: &str) -> String {
    format!("Tomorrow in Seoul: sunny, 21°C ({query})")
}

/// The Python agent as a child process, killed when dropped.
struct WeatherAgent {
    child: Child,
    port: u16,
}

impl WeatherAgent {
    fn start(dir: &Path) -> WeatherAgent {
        let script = dir.join("weather_agent.py");
        std::fs::write(&script, WEATHER_AGENT_PY).unwrap();
        let mut child = Command::new("python3")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the weather agent did not print its port: {line:?}")
        });
        WeatherAgent { child, port }
    }

    /// The agents config, with English and Korean keywords.
    fn config(&self, dir: &Path) -> PathBuf {
        let path = dir.join("agents.toml");
        let toml = format!(
            r#"[[agent]]
name = "weather"
url = "http://127.0.0.1:{port}/run"
timeout_ms = 5000
category = "general"
team = "weather"
purpose = "Weather forecasts for a city and a day"
keywords = ["weather", "forecast", "rain", "날씨", "기온", "일기예보"]
examples = ["Will it be sunny in Busan this weekend?", "이번 주말 부산 날씨 맑을까?"]
"#,
            port = self.port
        );
        std::fs::write(&path, toml).unwrap();
        path
    }
}

impl Drop for WeatherAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a run without HITL and waits for it to end; its state and log, as JSON.
async fn run_to_end(api: &Client, query: &str) -> (Value, Vec<Value>) {
    let req = RunRequest {
        hitl: Some(HitlMode::None),
        ..RunRequest::new(query)
    };
    let run = api.start_run(&req).await.unwrap().run_id;
    let deadline = Instant::now() + RUN_TIMEOUT;
    let state: Value = loop {
        let state: Value = api.state(run, None).await.unwrap();
        let status = state["supervisor"]["run_status"].as_str().unwrap_or("");
        if ["completed", "failed", "cancelled"].contains(&status) {
            break state;
        }
        assert!(Instant::now() < deadline, "run {run} did not end: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = api.log(run, 0).await.unwrap();
    let log = log
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    (state, log)
}

/// The `agent_name` of each item of a list (plan steps, TODOs).
fn agent_names(list: &Value) -> Vec<&str> {
    let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .filter_map(|i| i["agent_name"].as_str())
        .collect()
}

/// The payloads of the log's events of one kind.
fn events<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter_map(|e| e["event"].get(kind)).collect()
}

#[test]
fn an_http_agent_is_routed_to_by_its_keywords_without_a_model_in_any_domain() {
    let scratch = tempfile::tempdir().unwrap();
    let agent = WeatherAgent::start(scratch.path());
    let config = agent.config(scratch.path());
    let rt = rt();
    for domain in [None, Some("generic")] {
        let name = domain.unwrap_or("default");
        let data = scratch.path().join(format!("data-{name}"));
        let server_log = scratch.path().join(format!("serve-{name}.log"));
        let mut args: Vec<&OsStr> = vec![OsStr::new("--agents"), config.as_os_str()];
        if let Some(d) = domain {
            args.extend([OsStr::new("--domain"), OsStr::new(d)]);
        }
        let serve = Serve::start_with(&data, &args, &server_log, None);
        for query in QUERIES {
            let (state, log) = rt.block_on(run_to_end(&serve.api, query));
            let what = format!("domain {name}, {query:?}");
            let s = &state["supervisor"];
            assert_eq!(
                s["run_status"],
                "completed",
                "{what}: {state}\n{}",
                serve.log_text()
            );
            let plans = events(&log, "PlanCreated");
            assert_eq!(plans.len(), 1, "{what}");
            assert_eq!(agent_names(&plans[0]["steps"]), ["weather"], "{what}");
            let todos = agent_names(&s["planning_state"]["todos"]);
            assert_eq!(todos, ["weather"], "{what}");
            let notes: Vec<&str> = events(&log, "Reasoning")
                .iter()
                .filter_map(|r| r["message"].as_str())
                .collect();
            assert!(
                notes
                    .iter()
                    .any(|n| n.starts_with("routed to weather: keyword ")),
                "{what}: {notes:?}"
            );
            assert!(events(&log, "LlmCalled").is_empty(), "{what}");
            // The agent got the contract's request, and its answer is the run's answer.
            let data = &s["team_results"]["weather"]["data"];
            assert_eq!(data["contract"], "chronicle.agent.v1", "{what}");
            assert_eq!(data["agent"], "weather", "{what}");
            assert_eq!(
                s["final_response"]["answer"],
                weather_answer(query),
                "{what}"
            );
            assert_eq!(s["final_response"]["agents"], json!(["weather"]), "{what}");
        }
    }
}

/// The run's state once its status is one of `statuses`.
async fn state_when(api: &Client, run: chronicle_schemas::RunId, statuses: &[&str]) -> Value {
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        let state: Value = api.state(run, None).await.unwrap();
        let status = state["supervisor"]["run_status"].as_str().unwrap_or("");
        if statuses.contains(&status) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} is not {statuses:?}: {state}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn serve_on_reject_end_turn_is_the_default_of_runs_and_a_bad_value_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(["serve", "--on-reject", "maybe", "--data"])
        .arg(scratch.path().join("data-bad"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("on_reject must be skip or end_turn"),
        "{stderr}"
    );
    assert!(!scratch.path().join("data-bad").exists(), "nothing written");

    let data = scratch.path().join("data");
    let log = scratch.path().join("serve.log");
    let args = [
        OsStr::new("--on-reject"),
        OsStr::new("end_turn"),
        OsStr::new("--hitl-default"),
        OsStr::new("every_todo"),
    ];
    let serve = Serve::start_with(&data, &args, &log, None);
    let rt = rt();
    let state = rt.block_on(async {
        let api = &serve.api;
        let req =
            RunRequest::new("집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘");
        let run = api.start_run(&req).await.unwrap().run_id;
        state_when(api, run, &["waiting_for_approval"]).await;
        let pending = api.approvals(run).await.unwrap();
        let no = chronicle_wire::DecisionRequest {
            comment: Some("not now".into()),
            ..chronicle_wire::DecisionRequest::reject()
        };
        api.decide(run, &pending[0].id, &no).await.unwrap();
        state_when(api, run, &["completed", "failed", "cancelled"]).await
    });
    let s = &state["supervisor"];
    assert_eq!(
        s["run_status"],
        "completed",
        "{state}\n{}",
        serve.log_text()
    );
    assert_eq!(s["config"]["on_reject"], "end_turn");
    assert_eq!(s["final_response"]["type"], "rejected", "{state}");
    assert!(
        s["final_response"]["answer"]
            .as_str()
            .unwrap()
            .contains("not now"),
        "{state}"
    );
}
