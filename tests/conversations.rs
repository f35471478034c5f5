//! Conversations that remember, black-box over a real server: a follow-up turn sees the
//! session's earlier turn (REST and WebSocket), and plain words said to a run that waits for a
//! human act on that run instead of starting another (REST, and read by a model when one is
//! configured).

use std::sync::Arc;
use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::ChatReply;
use chronicle_engine::llm::{LlmConfig, OpenAiCompat};
use chronicle_projections::RunState;
use chronicle_schemas::{Event, HitlMode, RunId, SessionId};
use chronicle_testkit::model::{Reply, TestServer};
use chronicle_wire::{ChatRequest, ResumeRequest};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;

use crate::api_support::{Server, server, server_settings};

/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(20);
const FIRST: &str = "강남구 아파트 전세 시세 알려줘";
const FOLLOW_UP: &str = "서초구는?";

fn say(message: &str, thread: &str, hitl: Option<HitlMode>) -> ChatRequest {
    ChatRequest {
        message: message.into(),
        thread_id: Some(thread.into()),
        hitl,
        ..ChatRequest::default()
    }
}

fn runs_of(srv: &Server, thread: &str) -> Vec<RunId> {
    srv.engine
        .store()
        .session_runs(&SessionId::new(thread))
        .unwrap()
}

async fn settled(srv: &Server, run: RunId) -> RunState {
    srv.engine.wait_settled(run, GUARD).await.unwrap()
}

fn events(srv: &Server, run: RunId) -> Vec<Event> {
    srv.engine
        .store()
        .read_run(run, 0, u64::MAX)
        .map(|e| e.unwrap().event)
        .collect()
}

/// The second turn was given the first (its `SessionContextLoaded` names it), kept its property
/// and deal type, and answered for the new district.
fn assert_follow_up(srv: &Server, first: RunId, second: &RunState) {
    let context = &second.supervisor.session_context;
    assert_eq!(
        context.iter().map(|t| t.run_id).collect::<Vec<_>>(),
        [first]
    );
    assert_eq!(context[0].query, FIRST);
    let run = second.run_id.unwrap();
    assert!(events(srv, run).iter().any(|e| matches!(
        e,
        Event::SessionContextLoaded { turns, .. } if turns[0].run_id == first
    )));
    let intent = &second
        .supervisor
        .planning_state
        .as_ref()
        .unwrap()
        .analyzed_intent;
    let entities = &intent["entities"];
    assert_eq!(
        (
            &entities["region"],
            &entities["property_type"],
            &entities["deal_type"]
        ),
        (
            &json!("서울특별시 서초구"),
            &json!("아파트"),
            &json!("전세")
        ),
        "{intent}"
    );
    let answer = second.supervisor.final_response.as_ref().unwrap()["answer"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        answer.contains("서초구") && answer.contains("전세"),
        "{answer}"
    );
    assert!(!answer.contains("매매"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_sees_the_turn_before_over_rest() {
    let srv = server(Tokens::none(), None).await;
    for message in [FIRST, FOLLOW_UP] {
        let reply = srv
            .client
            .chat(&say(message, "t-rest", None))
            .await
            .unwrap();
        assert!(matches!(reply, ChatReply::Done(_)), "{reply:?}");
    }
    let runs = runs_of(&srv, "t-rest");
    assert_eq!(runs.len(), 2);
    let second = settled(&srv, runs[1]).await;
    assert_follow_up(&srv, runs[0], &second);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_sees_the_turn_before_over_the_websocket() {
    let srv = server(Tokens::none(), None).await;
    let url = format!(
        "{}/ws?thread_id=t-ws",
        srv.base.replacen("http://", "ws://", 1)
    );
    let (mut ws, _) = tokio::time::timeout(GUARD, connect_async(url))
        .await
        .unwrap()
        .unwrap();
    let mut finals = Vec::new();
    for message in [FIRST, FOLLOW_UP] {
        let frame = json!({"type": "message", "content": message}).to_string();
        ws.send(Message::text(frame)).await.unwrap();
        loop {
            let msg = tokio::time::timeout(GUARD, ws.next()).await.unwrap();
            let Some(Ok(Message::Text(t))) = msg else {
                continue;
            };
            let f: Value = serde_json::from_str(t.as_str()).unwrap();
            if f["type"] == "final" {
                finals.push(f);
                break;
            }
        }
    }
    let runs = runs_of(&srv, "t-ws");
    assert_eq!(runs.len(), 2);
    assert_eq!(finals[1]["run_id"], json!(runs[1]));
    let second = settled(&srv, runs[1]).await;
    assert_follow_up(&srv, runs[0], &second);
    srv.stop().await;
}

/// A user adding a TODO, in plain words: while the run waits for approval of its search, "분석도 추가해줘"
/// adds the analysis team as `todo_002`; words that mean nothing get what the run waits for; "승인"
/// through `resume` approves; one run in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_words_act_on_the_waiting_run_over_rest() {
    let srv = server(Tokens::none(), None).await;
    let hitl = Some(HitlMode::EveryTodo);
    let first = srv
        .client
        .chat(&say("강남구 아파트 시세 조회", "t-s2", hitl))
        .await
        .unwrap();
    assert!(matches!(first, ChatReply::Waiting { .. }), "{first:?}");
    let run = runs_of(&srv, "t-s2")[0];

    let added = srv
        .client
        .chat(&say("분석도 추가해줘", "t-s2", hitl))
        .await
        .unwrap();
    let ChatReply::Command(c) = added else {
        panic!("{added:?}");
    };
    assert_eq!(c.interpreted_from.as_deref(), Some("분석도 추가해줘"));
    assert_eq!(c.command, "/todo add analysis_team");
    assert_eq!(c.run_id, run);
    let s = srv.engine.state(run, None).unwrap();
    let todos = &s.supervisor.planning_state.as_ref().unwrap().todos;
    let added = todos.iter().find(|t| t.id.as_str() == "todo_002").unwrap();
    assert_eq!(added.agent_name, "analysis_team");

    let unclear = srv
        .client
        .chat(&say("음 글쎄", "t-s2", hitl))
        .await
        .unwrap();
    let ChatReply::Waiting { waiting, message } = unclear else {
        panic!("{unclear:?}");
    };
    assert_eq!(waiting.turn.run_id, run);
    assert!(message.contains("/new <query>"), "{message}");
    assert!(!waiting.approvals.is_empty());

    let resume = ResumeRequest {
        response: Some("승인".into()),
        ..ResumeRequest::default()
    };
    srv.client.resume("t-s2", &resume).await.unwrap();
    let received: Vec<(String, Option<String>)> = events(&srv, run)
        .into_iter()
        .filter_map(|e| match e {
            Event::CommandReceived { command, said, .. } => Some((command, said)),
            _ => None,
        })
        .collect();
    assert_eq!(
        received,
        [
            (
                "/todo add analysis_team".into(),
                Some("분석도 추가해줘".into())
            ),
            ("/todo approve".into(), Some("승인".into())),
        ]
    );
    assert_eq!(runs_of(&srv, "t-s2"), [run]);
    srv.stop().await;
}

/// With a model configured, the model reads the words: what it answers is carried out, and its
/// call is recorded beside the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_reads_the_words_when_one_is_configured() {
    let model = TestServer::start(None, |body: &Value| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.starts_with("A workflow run waits for a person") {
            Reply::Content(json!({"command": "/todo add analysis_team"}).to_string())
        } else {
            // Unusable: the planner answers by its rules.
            Reply::Content("no".into())
        }
    })
    .await;
    let mut settings = chronicle_realestate::settings();
    let config = LlmConfig {
        base_url: model.base_url.clone(),
        model: "test-model".into(),
        api_key: None,
        timeout_ms: 10_000,
    };
    settings.llm = Some(Arc::new(OpenAiCompat::new(config).unwrap()));
    let srv = server_settings(Tokens::none(), settings, ApiConfig::default()).await;
    let hitl = Some(HitlMode::EveryTodo);
    srv.client
        .chat(&say("강남구 아파트 시세 조회", "t-m", hitl))
        .await
        .unwrap();
    let run = runs_of(&srv, "t-m")[0];
    settled(&srv, run).await;
    let words = "could you look at the numbers behind it too";
    let reply = srv.client.chat(&say(words, "t-m", hitl)).await.unwrap();
    let ChatReply::Command(c) = reply else {
        panic!("{reply:?}");
    };
    assert_eq!(c.interpreted_from.as_deref(), Some(words));
    let all = events(&srv, run);
    let asked = all
        .iter()
        .position(|e| matches!(e, Event::LlmCalled { purpose, .. } if purpose == "interpret"));
    let received = all.iter().position(|e| {
        matches!(e, Event::CommandReceived { command, said: Some(s), .. }
            if command == "/todo add analysis_team" && s == words)
    });
    assert!(asked.is_some() && asked < received, "{all:#?}");
    srv.stop().await;
}

/// An `http` agent gets the session's earlier turns and the user in its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_agent_gets_the_history_and_the_user() {
    let seen: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/agent",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let record = record.clone();
            async move {
                let n = {
                    let mut all = record.lock().unwrap();
                    all.push(body);
                    all.len()
                };
                axum::Json(json!({"answer": format!("forecast number {n}")}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut settings = chronicle_generic::settings();
    let agents = format!(
        "[[agent]]\nname = \"weather\"\nurl = \"http://{addr}/agent\"\nkeywords = [\"weather\"]\n"
    );
    chronicle_generic::load_agents(&mut settings.registry, &agents).unwrap();
    let srv = server_settings(Tokens::none(), settings, ApiConfig::default()).await;
    for message in ["weather in Seoul today", "and the weather tomorrow?"] {
        let req = ChatRequest {
            user_id: Some("u1".into()),
            ..say(message, "t-http", None)
        };
        let reply = srv.client.chat(&req).await.unwrap();
        assert!(matches!(reply, ChatReply::Done(_)), "{reply:?}");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].get("history").is_none(), "{}", seen[0]);
    let second = &seen[1];
    assert_eq!(second["user_id"], "u1");
    assert_eq!(second["history"][0]["query"], "weather in Seoul today");
    assert_eq!(second["history"][0]["answer"], "forecast number 1");
    assert_eq!(
        second["history"][0]["run_id"],
        json!(runs_of(&srv, "t-http")[0])
    );
    srv.stop().await;
}

/// A chat turn sent again with its `Idempotency-Key` answers with the run the first one started
/// and starts nothing; the key sent with another message, or with a bad thread, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_sent_again_with_its_idempotency_key_starts_no_second_run() {
    let srv = server(Tokens::none(), None).await;
    let post = |body: Value, key: &'static str| {
        srv.http
            .post(srv.url("/chat"))
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let body = json!({"message": "강남구 아파트 시세", "thread_id": "t-idem"});
    let first: Value = post(body.clone(), "k-1")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let again = post(body, "k-1").await.unwrap();
    assert!(again.status().is_success(), "{}", again.status());
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["run_id"], first["run_id"], "{again}");
    assert_eq!(runs_of(&srv, "t-idem").len(), 1);
    let other = post(
        json!({"message": "서초구 아파트", "thread_id": "t-idem"}),
        "k-1",
    )
    .await
    .unwrap();
    assert_eq!(other.status().as_u16(), 409);
    let bad = post(json!({"message": "강남구", "thread_id": "a\u{0}b"}), "k-1")
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 422);
    assert_eq!(runs_of(&srv, "t-idem").len(), 1);
}
