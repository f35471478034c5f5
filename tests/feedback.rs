//! A person's words reach the agent they let run: `resume {response}` (an edit with `feedback`)
//! steers the real-estate search to the district it names and gives the analysis its focus,
//! is sent to an `http` agent in its request's `feedback`, and is put to an `llm` agent's model
//! as a user message.

use std::sync::{Arc, Mutex};

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::ChatReply;
use chronicle_engine::agents::FEEDBACK_PREFIX;
use chronicle_engine::{Principal, StartRun, Turn, TurnInput};
use chronicle_schemas::{HitlMode, RunId, RunStatus, SessionId};
use chronicle_testkit::model::{Reply, TestServer};
use chronicle_wire::{PlanStepRequest, ResumeRequest, RunRequest};
use serde_json::{Value, json};

use crate::api_support::{Server, server, server_settings};
use crate::llm_support::{self, KEY, agent_of};
use crate::support::{WAIT, completed, open_engine, waiting};

/// Answers every approval of the session's run until it ends, with `say(agent)` as words when
/// it gives some, else a yes.
async fn answer_all(srv: &Server, run: RunId, thread: &str, say: fn(&str) -> Option<&'static str>) {
    loop {
        let s = srv
            .engine
            .wait_until(run, WAIT, |s| {
                s.supervisor.run_status == RunStatus::WaitingForApproval
                    || s.supervisor.run_status.is_terminal()
            })
            .await
            .unwrap();
        let Some(asked) = s.approvals.pending().next() else {
            return;
        };
        let answer = match say(&asked.tool_name) {
            Some(words) => ResumeRequest {
                approve: None,
                response: Some(words.into()),
            },
            None => ResumeRequest {
                approve: Some(true),
                response: None,
            },
        };
        srv.client.resume(thread, &answer).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_moves_the_search_to_the_district_it_names_and_focuses_the_analysis() {
    let srv = server(Tokens::none(), None).await;
    let step = |agent: &str, deps: &[&str]| PlanStepRequest {
        agent_name: agent.into(),
        dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
        ..PlanStepRequest::default()
    };
    let req = RunRequest {
        session_id: Some("t-fb".into()),
        hitl: Some(HitlMode::EveryTodo),
        plan: Some(vec![
            step("search_team", &[]),
            step("analysis_team", &["search_team"]),
        ]),
        ..RunRequest::new("강남구 아파트 매매 시세 분석해줘")
    };
    let run = srv.client.start_run(&req).await.unwrap().run_id;
    answer_all(&srv, run, "t-fb", |agent| match agent {
        "search_team" => Some("서초구로 해줘"),
        "analysis_team" => Some("학군 위주로 봐줘"),
        _ => None,
    })
    .await;
    let s = completed(&srv.engine, run).await;
    let results = &s.supervisor.team_results;
    let search = &results["search_team"];
    assert_eq!(search["filters"]["region"], "서울특별시 서초구", "{search}");
    let listings = search["property_search_results"].as_array().unwrap();
    assert!(!listings.is_empty(), "{search}");
    for l in listings {
        assert_eq!(l["region"], "서울특별시 서초구", "{l}");
    }
    let analysis = &results["analysis_team"];
    assert_eq!(analysis["focus"], "학군 위주로 봐줘", "{analysis}");
    let insights = analysis["insights"].to_string();
    assert!(insights.contains("학군 위주로 봐줘"), "{insights}");
    srv.stop().await;
}

/// What a person chose for the search (an edit of its region, as agent-chat-ui's edit sends the
/// whole args, or a district named in words) is what the analysis and the report work on, and
/// the answer speaks only of it: no step and no sentence stays on the query's district.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_choice_on_the_search_carries_to_the_steps_after_it_and_the_answer() {
    let srv = server(Tokens::none(), None).await;
    for (thread, by_words) in [("t-edit", false), ("t-words", true)] {
        let req = RunRequest {
            session_id: Some(thread.into()),
            hitl: Some(HitlMode::EveryTodo),
            ..RunRequest::new("강남구 아파트 매매 시세 분석 보고서 써줘")
        };
        let run = srv.client.start_run(&req).await.unwrap().run_id;
        let s = srv
            .engine
            .wait_until(run, WAIT, |s| s.approvals.pending().next().is_some())
            .await
            .unwrap();
        let asked = s.approvals.pending().next().unwrap().clone();
        assert_eq!(asked.tool_name, "search_team");
        assert_eq!(asked.request_args["region"], "서울특별시 강남구");
        if by_words {
            let words = ResumeRequest {
                approve: None,
                response: Some("서초구로 해줘".into()),
            };
            srv.client.resume(thread, &words).await.unwrap();
        } else {
            let mut args = asked.request_args.clone();
            args["region"] = json!("서울특별시 서초구");
            let edit = chronicle_wire::DecisionRequest::edit(args);
            srv.client
                .decide(run, &asked.approval_id, &edit)
                .await
                .unwrap();
        }
        // Every later approval asks with the chosen district, and its agent runs with it.
        loop {
            let s = srv
                .engine
                .wait_until(run, WAIT, |s| {
                    s.approvals.pending().next().is_some() || s.supervisor.run_status.is_terminal()
                })
                .await
                .unwrap();
            let Some(a) = s.approvals.pending().next() else {
                break;
            };
            assert_eq!(
                a.request_args["region"], "서울특별시 서초구",
                "{} {a:?}",
                a.tool_name
            );
            assert!(!a.message.contains("강남"), "{}", a.message);
            let yes = chronicle_wire::DecisionRequest::approve();
            srv.client.decide(run, &a.approval_id, &yes).await.unwrap();
        }
        let s = completed(&srv.engine, run).await;
        let results = &s.supervisor.team_results;
        assert_eq!(
            results["search_team"]["filters"]["region"],
            "서울특별시 서초구"
        );
        let analysis = &results["analysis_team"];
        assert_eq!(
            analysis["raw_analysis"]["market_analysis"]["region"], "서울특별시 서초구",
            "{analysis}"
        );
        let report = &results["document_team"];
        let title = report["document_content"]["title"]
            .as_str()
            .unwrap_or_default();
        assert!(!report.to_string().contains("강남"), "{report}");
        let answer = s.supervisor.final_response.clone().unwrap();
        let text = answer["answer"].as_str().unwrap();
        assert!(text.contains("서초구"), "{text}");
        assert!(!text.contains("강남"), "{text} (report {title})");
        assert_eq!(
            answer["metadata"]["region"], "서울특별시 서초구",
            "{answer}"
        );
    }
    srv.stop().await;
}

/// An `http` agent on loopback that keeps every request body and answers.
async fn http_agent(seen: Arc<Mutex<Vec<Value>>>) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().route(
        "/run",
        axum::routing::post(|body: axum::Json<Value>| async move {
            seen.lock().unwrap().push(body.0.clone());
            axum::Json(json!({"answer": "noted", "data": {"query": body.0["query"]}}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/run", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_agent_gets_the_feedback_in_its_request() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (url, task) = http_agent(seen.clone()).await;
    let mut settings = chronicle_realestate::settings();
    let toml = format!(
        "[[agent]]\nname = \"echo\"\nurl = \"{url}\"\npurpose = \"Echoes the request\"\ncategory = \"general\"\n"
    );
    chronicle_generic::load_agents(&mut settings.registry, &toml).unwrap();
    let srv = server_settings(Tokens::none(), settings, ApiConfig::default()).await;
    let c = &srv.client;
    let req = RunRequest {
        session_id: Some("t-http".into()),
        hitl: Some(HitlMode::EveryTodo),
        plan: Some(vec![PlanStepRequest {
            agent_name: "echo".into(),
            ..PlanStepRequest::default()
        }]),
        ..RunRequest::new("what is new?")
    };
    let run = c.start_run(&req).await.unwrap().run_id;
    waiting(&srv.engine, run).await;
    let words = ResumeRequest {
        approve: None,
        response: Some("only the last week, please".into()),
    };
    let reply = c.resume("t-http", &words).await.unwrap();
    assert!(matches!(reply, ChatReply::Done(_)), "{reply:?}");
    completed(&srv.engine, run).await;
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(
        bodies[0]["feedback"], "only the last week, please",
        "{}",
        bodies[0]
    );
    srv.stop().await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_is_told_the_feedback_as_a_user_message() {
    let model = TestServer::start(Some(KEY), |_| Reply::Content("Bonjour.".into())).await;
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), llm_support::settings(&model.base_url)).await;
    let run = engine
        .start_run(StartRun {
            query: "Greet the team.".into(),
            session_id: Some("t-llm".into()),
            hitl: Some(HitlMode::EveryTodo),
            agent: Some("helper".into()),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .run_id;
    waiting(&engine, run).await;
    engine
        .turn(Turn {
            session: SessionId::from("t-llm"),
            run: None,
            input: TurnInput::Response("answer in French".into()),
            by: Principal::default(),
            user_id: None,
            hitl: None,
            on_reject: None,
            idempotency_key: None,
        })
        .await
        .unwrap();
    completed(&engine, run).await;
    let told = format!("{FEEDBACK_PREFIX}answer in French");
    let helper: Vec<Value> = model
        .requests()
        .into_iter()
        .filter(|r| agent_of(&r.body) == "helper")
        .map(|r| r.body)
        .collect();
    assert!(!helper.is_empty(), "the helper asked its model");
    for body in &helper {
        let said = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "user" && m["content"] == json!(told));
        assert!(said, "{body}");
    }
    engine.shutdown().await;
}
