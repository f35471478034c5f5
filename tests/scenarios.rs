//! The user scenarios end to end at the engine level, with the built-in agents and the
//! rule-based planner: (1) the deposit-increase question with every TODO approved, (2) a user
//! adding a TODO while the run waits, (3) restore after a crash (with a real SIGKILL); the
//! Gangnam-station price query, a contract document under the `categories` policy, and an
//! OpenAI-compatible model on loopback.

use chronicle_engine::Principal;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use chronicle_engine::{Engine, Settings, StartRun};
use chronicle_schemas::{Event, HitlMode, RunId, Source, TodoStatus};
use serde_json::{Value, json};

use crate::support::{asking_about, completed, edit, events, open_engine};

/// A market question the rules read without a model.
const GANGNAM_STATION: &str = "강남역 근처 30평대 아파트 매매 시세 알려줘";
const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

async fn builtin_engine(dir: &std::path::Path) -> Engine {
    open_engine(dir, chronicle_realestate::settings()).await
}

async fn start(engine: &Engine, query: &str, hitl: HitlMode) -> RunId {
    let req = StartRun {
        query: query.into(),
        hitl: Some(hitl),
        ..StartRun::default()
    };
    engine.start_run(req).await.unwrap().run_id
}

/// Waits for the approval of `todo` and returns its message.
async fn asked_for(engine: &Engine, run: RunId, todo: &str) -> String {
    let s = asking_about(engine, run, todo).await;
    assert_eq!(
        s.supervisor
            .planning_state
            .as_ref()
            .unwrap()
            .current_todo_id
            .as_ref()
            .unwrap()
            .as_str(),
        todo
    );
    s.supervisor.approval_message.clone().unwrap()
}

/// A slash command as `local`, its outcome as JSON.
async fn command(engine: &Engine, run: RunId, text: &str) -> Value {
    let out = engine
        .command(run, text, &Principal::local())
        .await
        .unwrap();
    serde_json::to_value(out).unwrap()
}

fn todo_view(todos: &Value) -> Vec<(String, String, Vec<String>)> {
    todos
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let deps = t["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap().to_owned())
                .collect();
            (
                t["id"].as_str().unwrap().to_owned(),
                t["name"].as_str().unwrap().to_owned(),
                deps,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_1_deposit_question_with_every_todo_approved() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builtin_engine(dir.path()).await;
    let run = start(&engine, SCENARIO_1, HitlMode::EveryTodo).await;

    let msg = asked_for(&engine, run, "todo_001").await;
    // What will run and with what, in the query's language; no terminal commands.
    assert_eq!(
        msg,
        "todo_001: search_team을(를) 실행할까요? 법률 조항과 시세 정보 수집.\n\
         조건: 거래 전세 · 금액 3억원, 10억원 · 키워드 전세금, 올려, 법적"
    );
    let state = engine.state(run, None).unwrap();
    let p = state.supervisor.planning_state.as_ref().unwrap();
    assert_eq!(p.analyzed_intent["intent_type"], "comprehensive");

    let todos = command(&engine, run, "/todos").await;
    assert_eq!(
        (
            todos["summary"]["total"].clone(),
            todos["summary"]["pending"].clone(),
            todos["summary"]["completed"].clone()
        ),
        (json!(2), json!(2), json!(0))
    );
    assert_eq!(
        todo_view(&todos["todos"]),
        [
            ("todo_001".into(), "search_team 실행".into(), vec![]),
            (
                "todo_002".into(),
                "analysis_team 실행".into(),
                vec!["todo_001".to_owned()]
            ),
        ]
    );
    assert_eq!(todos["current_todo_id"], "todo_001");

    let approved = command(&engine, run, "/todo approve").await;
    assert_eq!(
        (approved["status"].as_str(), approved["todo_id"].as_str()),
        (Some("resumed"), Some("todo_001"))
    );

    let msg = asked_for(&engine, run, "todo_002").await;
    assert!(
        msg.starts_with("todo_002: analysis_team을(를) 실행할까요? 인상률과 법정 한도 분석."),
        "{msg}"
    );
    assert!(
        msg.ends_with("조건: 거래 전세 · 금액 3억원, 10억원 · 분석 유형 legal"),
        "{msg}"
    );
    let todos = command(&engine, run, "/todos").await;
    assert_eq!(
        (
            todos["summary"]["total"].clone(),
            todos["summary"]["pending"].clone(),
            todos["summary"]["completed"].clone()
        ),
        (json!(2), json!(1), json!(1))
    );
    assert_eq!(todos["todos"][0]["status"], "completed");
    assert!(todos["todos"][0]["duration"].is_number());
    assert_eq!(todos["current_todo_id"], "todo_002");

    command(&engine, run, "/todo approve").await;
    let s = completed(&engine, run).await;
    let analysis = &s.supervisor.team_results["analysis_team"];
    assert_eq!(analysis["metrics"]["increase_rate_pct"], json!(233.3));
    let answer = s.supervisor.final_response.as_ref().unwrap()["answer"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        answer.contains("233.3%") && answer.contains("5%"),
        "{answer}"
    );
    assert_eq!(
        s.supervisor
            .planning_state
            .as_ref()
            .unwrap()
            .completed_todo_ids
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_2_user_adds_a_todo() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builtin_engine(dir.path()).await;
    let run = start(&engine, "강남구 아파트 시세 조회", HitlMode::EveryTodo).await;
    asked_for(&engine, run, "todo_001").await;
    let todos = command(&engine, run, "/todos").await;
    assert_eq!(
        todo_view(&todos["todos"]),
        [("todo_001".into(), "search_team 실행".into(), vec![])]
    );

    let added = command(&engine, run, "/todo add analysis_team").await;
    assert_eq!(added["status"], "added");
    let t = &added["todo"];
    assert_eq!(
        (
            t["id"].as_str(),
            t["name"].as_str(),
            t["agent_name"].as_str(),
            t["status"].as_str()
        ),
        (
            Some("todo_002"),
            Some("analysis_team 추가 실행"),
            Some("analysis_team"),
            Some("pending")
        )
    );
    assert_eq!(t["metadata"]["added_by"], "user");

    command(&engine, run, "/todo approve").await;
    asked_for(&engine, run, "todo_002").await;
    command(&engine, run, "/todo approve").await;
    let s = completed(&engine, run).await;
    let p = s.supervisor.planning_state.as_ref().unwrap();
    assert!(p.todos.iter().all(|t| t.status == TodoStatus::Completed));
    assert!(s.supervisor.team_results.contains_key("analysis_team"));
    assert!(
        s.supervisor.final_response.as_ref().unwrap()["answer"]
            .as_str()
            .is_some_and(|a| !a.is_empty())
    );
}

/// Scenario 3: the process dies after search_team completed; a fresh process lists the
/// checkpoints, restores the last approval checkpoint, approves, and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_3_restore_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_engine-child"))
        .args(["scenario3", dir.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    let run: RunId = lines
        .next()
        .unwrap()
        .strip_prefix("RUN ")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(lines.next().as_deref(), Some("SEARCH_DONE"));
    child.kill().unwrap();
    child.wait().unwrap();

    let engine = builtin_engine(dir.path()).await;
    // The recovered run goes on to the next approval gate by itself.
    asked_for(&engine, run, "todo_002").await;
    let list = command(&engine, run, "/checkpoint list").await;
    let cps = list["checkpoints"].as_array().unwrap();
    let nodes: Vec<(&str, u64)> = cps
        .iter()
        .map(|c| {
            (
                c["node"].as_str().unwrap(),
                c["todos_completed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("initialize", 0),
            ("analyze_intent", 0),
            ("build_plan", 0),
            ("approval", 0),
            ("execute_todo", 1),
            ("approval", 1)
        ]
    );
    let last_approval =
        cps.iter().rev().find(|c| c["node"] == "approval").unwrap()["checkpoint_id"]
            .as_str()
            .unwrap()
            .to_owned();
    assert_eq!(last_approval, "cp_006");

    let restored = command(
        &engine,
        run,
        &format!("/checkpoint restore {last_approval}"),
    )
    .await;
    assert_eq!(restored["status"], "restored");
    assert_eq!(restored["current_todo_id"], "todo_002");
    let msg = asked_for(&engine, run, "todo_002").await;
    assert!(msg.starts_with("todo_002: analysis_team을(를)"), "{msg}");
    let todos = command(&engine, run, "/todos").await;
    assert_eq!(todos["todos"][0]["status"], "completed");
    assert_eq!(todos["todos"][1]["status"], "waiting_approval");

    command(&engine, run, "/todo approve").await;
    let s = completed(&engine, run).await;
    assert_eq!(
        s.supervisor.restored_from.as_ref().unwrap().as_str(),
        "cp_006"
    );
    // search_team ran exactly once, across the crash and the restore.
    let searches = events(&engine, run)
        .iter()
        .filter(|e| matches!(&e.event, Event::AgentStarted { agent, .. } if agent == "search_team"))
        .count();
    assert_eq!(searches, 1);
    assert!(engine.store().verify().unwrap().ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangnam_station_query_through_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builtin_engine(dir.path()).await;
    let run = start(&engine, GANGNAM_STATION, HitlMode::None).await;
    let s = completed(&engine, run).await;
    let p = s.supervisor.planning_state.as_ref().unwrap();
    assert_eq!(p.analyzed_intent["intent_type"], "analysis");
    assert_eq!(p.intent_source, Some(Source::Rules));
    let agents: Vec<&str> = p.todos.iter().map(|t| t.agent_name.as_str()).collect();
    assert_eq!(agents, ["property_search", "market_analysis"]);
    assert_eq!(
        p.todos[1].dependencies,
        [chronicle_schemas::TodoId::from("todo_001")]
    );
    let out = s.supervisor.final_response.as_ref().unwrap();
    for key in ["answer", "listings", "insights", "metadata"] {
        assert!(out.get(key).is_some(), "final output lacks {key}: {out}");
    }
    assert!(!out["listings"].as_array().unwrap().is_empty());
    assert!(!out["insights"].as_array().unwrap().is_empty());
    assert!(
        out["listings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l.to_string().contains("강남")),
        "{}",
        out["listings"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_needs_approval_under_categories() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builtin_engine(dir.path()).await;
    for query in ["전세 계약서 작성해줘", "draft a lease contract"] {
        let run = start(&engine, query, HitlMode::Categories).await;
        // search_team (general) runs without asking; document_team (contract) waits.
        let msg = asked_for(&engine, run, "todo_002").await;
        assert!(
            msg.contains("document_team") && !msg.contains("/todo"),
            "{msg}"
        );
        let s = engine.state(run, None).unwrap();
        let p = s.supervisor.planning_state.as_ref().unwrap();
        let agents: Vec<&str> = p.todos.iter().map(|t| t.agent_name.as_str()).collect();
        assert_eq!(agents, ["search_team", "document_team"], "{query}");
        assert_eq!(p.todos[0].status, TodoStatus::Completed);
        assert_eq!(s.approvals.list.len(), 1);
        command(&engine, run, "/todo approve").await;
        let s = completed(&engine, run).await;
        let doc = &s.supervisor.team_results["document_team"];
        assert!(
            doc["final_document"]
                .as_str()
                .is_some_and(|d| d.contains("임대차")),
            "{query}: {doc}"
        );
        assert_eq!(
            s.supervisor.document_team_state.as_ref().unwrap().status,
            "completed"
        );
    }
}

/// A chat-completions server on loopback: a usable intent, garbage for everything else, and a
/// check that the bearer key arrived.
async fn model_server(key: &'static str) -> String {
    use axum::{Json, Router, http::HeaderMap, routing::post};
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap, Json(body): Json<Value>| async move {
            assert_eq!(headers["authorization"], format!("Bearer {key}"));
            let prompt = body.to_string();
            let content = if prompt.contains("의도 분석") {
                json!({"intent_type": "analysis", "region": "서울특별시 강남구", "property_type": "아파트", "deal_type": "매매"}).to_string()
            } else {
                "this is not json".to_owned()
            };
            Json(json!({"choices": [{"message": {"role": "assistant", "content": content}}]}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// An engine with the real-estate agents, asking the OpenAI-compatible model at `base_url` with
/// `key`.
async fn with_model(dir: &std::path::Path, base_url: String, key: &str) -> Engine {
    use chronicle_engine::llm::{LlmConfig, OpenAiCompat};
    let cfg = LlmConfig {
        base_url,
        model: "test-model".into(),
        api_key: Some(key.into()),
        timeout_ms: 5000,
    };
    let settings = Settings {
        llm: Some(std::sync::Arc::new(OpenAiCompat::new(cfg).unwrap())),
        ..chronicle_realestate::settings()
    };
    open_engine(dir, settings).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_compatible_model_is_used_and_its_key_is_never_recorded() {
    const KEY: &str = "sk-test-SECRET-0123456789";
    let base_url = model_server(KEY).await;
    let dir = tempfile::tempdir().unwrap();
    let engine = with_model(dir.path(), base_url, KEY).await;
    let run = start(&engine, GANGNAM_STATION, HitlMode::None).await;
    let s = completed(&engine, run).await;
    let p = s.supervisor.planning_state.as_ref().unwrap();
    assert_eq!(
        p.intent_source,
        Some(Source::Llm),
        "the model's intent was used"
    );
    let evs = events(&engine, run);
    let plan_source = evs.iter().find_map(|e| match &e.event {
        Event::PlanCreated { source, .. } => Some(*source),
        _ => None,
    });
    assert_eq!(
        plan_source,
        Some(Source::Rules),
        "bad JSON falls back to the rules"
    );
    let calls: Vec<(&str, bool)> = evs
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmCalled {
                purpose,
                model,
                error,
                ..
            } => {
                assert_eq!(model, "test-model");
                Some((purpose.as_str(), error.is_some()))
            }
            _ => None,
        })
        .collect();
    assert!(calls.len() >= 3, "{calls:?}");
    assert!(
        calls.iter().any(|(_, failed)| !failed) && calls.iter().any(|(_, failed)| *failed),
        "{calls:?}"
    );
    for e in &evs {
        let bytes = e.encode().unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "the key leaked into {}",
            e.event.kind()
        );
        assert!(!serde_json::to_string(&e.event).unwrap().contains(KEY));
    }
    assert!(!format!("{:?}", engine.settings()).contains(KEY));
}

/// A model that echoes the key back in every form it could take (exact, other letter cases,
/// percent-encoded, base64 in both alphabets with and without padding, runs of 8 characters):
/// none of them reaches the store's files, while a run of 7 characters of the key (too short to
/// say anything about it) is recorded as the model sent it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_echoed_in_any_form_is_never_recorded() {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use chronicle_engine::llm::KEY_FRAGMENT_CHARS_MIN;
    use chronicle_testkit::model::{Reply, TestServer};
    // `/`, `+` and `~` make the encodings differ from the key and from each other.
    const KEY: &str = "sk-Live/9fQ+zT~4mWp2";
    assert_eq!(KEY_FRAGMENT_CHARS_MIN, 8);
    let every_byte: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    let unreserved_kept: String = KEY
        .bytes()
        .map(|b| match b {
            b'/' | b'+' | b'~' => format!("%{b:02x}"),
            _ => char::from(b).to_string(),
        })
        .collect();
    let embedded = format!("Authorization: Bearer {KEY}");
    let forms: Vec<(&str, String)> = vec![
        ("exact", KEY.to_owned()),
        ("upper case", KEY.to_uppercase()),
        ("lower case", KEY.to_lowercase()),
        ("percent-encoded, every byte", every_byte),
        ("percent-encoded, specials", unreserved_kept),
        ("base64", STANDARD.encode(KEY)),
        ("base64, no padding", STANDARD_NO_PAD.encode(KEY)),
        ("base64url", URL_SAFE.encode(KEY)),
        ("base64url, no padding", URL_SAFE_NO_PAD.encode(KEY)),
        ("base64 of a header", STANDARD.encode(&embedded)),
        ("8 characters", KEY[6..14].to_owned()),
    ];
    // Each form between spaces, so that no form runs into another.
    let content: String = forms.iter().map(|(_, f)| format!(" {f} ")).collect();
    let seven = &KEY[1..8];
    let content = format!("{content} tail {seven} end");
    let model = TestServer::start(Some(KEY), move |_| Reply::Content(content.clone())).await;

    let dir = tempfile::tempdir().unwrap();
    let engine = with_model(dir.path(), model.base_url.clone(), KEY).await;
    let run = start(&engine, GANGNAM_STATION, HitlMode::None).await;
    completed(&engine, run).await;
    assert!(!model.requests().is_empty(), "the model was asked");
    let responses: Vec<String> = events(&engine, run)
        .into_iter()
        .filter_map(|e| match e.event {
            Event::LlmCalled { response, .. } => response.inline().cloned(),
            _ => None,
        })
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(!responses.is_empty());
    for response in &responses {
        assert!(response.contains("<redacted>"), "{response}");
        assert!(
            response.contains(&format!(" tail {seven} end")),
            "{response}"
        );
    }
    engine.shutdown().await;
    drop(engine);

    let mut bytes = Vec::new();
    for entry in walk(dir.path()) {
        bytes.extend(std::fs::read(entry).unwrap());
    }
    let found = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(found(seven), "the recorded answer is in the store's files");
    for (name, form) in &forms {
        assert!(
            !found(form),
            "the key, {name} ({form}), is in the store's files"
        );
    }
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// An edit is the agent's input: editing the region of the Gangnam-station search moves the
/// listings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_region_reaches_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builtin_engine(dir.path()).await;
    let run = start(&engine, GANGNAM_STATION, HitlMode::EveryTodo).await;
    asked_for(&engine, run, "todo_001").await;
    let s = engine.state(run, None).unwrap();
    let a = s.approvals.pending().next().unwrap().clone();
    let mut args = a.request_args.clone();
    args["region"] = json!("서울특별시 서초구");
    edit(&engine, run, a.approval_id, "alice", args).await;
    asked_for(&engine, run, "todo_002").await;
    let s = engine.state(run, None).unwrap();
    let listings = s.supervisor.team_results["property_search"]["data"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!listings.is_empty());
    assert!(
        listings.iter().all(|l| l.to_string().contains("서초구")),
        "{listings:?}"
    );
}
