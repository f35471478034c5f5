//! The REST API, black-box: the chat → resume → session flow, every error code with the store
//! unchanged after each bad request, bearer principals, and the OpenAPI document. Requests go
//! through the one client; the ones it cannot send (malformed bodies, bad ids and query values,
//! unknown fields) go raw.

use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::{ChatReply, Error};
use chronicle_schemas::{ApprovalId, CheckpointId, HitlMode, RunId, RunStatus};
use chronicle_wire::{
    CancelRequest, ChatRequest, CommandOutcome, DecisionRequest, ErrorBody, LogQuery,
    ResumeRequest, RunRequest, SessionStatus,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{Server, server, server_with};
use crate::support::first_pending;

const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
const WAIT: Duration = Duration::from_secs(20);

fn gated(query: &str) -> RunRequest {
    RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        ..RunRequest::new(query)
    }
}

fn turn(message: &str, thread: &str) -> ChatRequest {
    ChatRequest {
        message: message.into(),
        thread_id: Some(thread.into()),
        ..ChatRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_resume_and_session_flow() {
    chat_resume_and_session_flow_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_resume_and_session_flow_on_postgres() {
    crate::api_support::on_postgres(chat_resume_and_session_flow_test()).await;
}

async fn chat_resume_and_session_flow_test() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let first = c
        .chat(&ChatRequest {
            hitl: Some(HitlMode::EveryTodo),
            ..turn(SCENARIO_1, "t1")
        })
        .await
        .unwrap();
    let ChatReply::Waiting { message, waiting } = first else {
        panic!("the run waits for todo_001: {first:?}");
    };
    assert!(
        message.starts_with("todo_001: search_team을(를)"),
        "{message}"
    );
    let asked = waiting.approval.unwrap();
    assert_eq!(
        asked.approval.subject.unwrap().todo_id().as_str(),
        "todo_001"
    );
    assert_eq!(waiting.turn.thread_id, "t1");

    let s = c.session("t1").await.unwrap();
    assert_eq!(s.status, SessionStatus::WaitingHuman);

    let approve = ResumeRequest {
        approve: Some(true),
        response: None,
    };
    let second = c.resume("t1", &approve).await.unwrap();
    let ChatReply::Waiting { waiting, .. } = second else {
        panic!("the run waits for todo_002: {second:?}");
    };
    let asked = waiting.approval.unwrap();
    assert_eq!(
        asked.approval.subject.unwrap().todo_id().as_str(),
        "todo_002"
    );

    let done = c.resume("t1", &approve).await.unwrap();
    let ChatReply::Done(done) = done else {
        panic!("the run ends: {done:?}");
    };
    assert_eq!(done.status, SessionStatus::Completed);
    let answer = done.response.unwrap();
    assert!(
        answer["answer"].as_str().unwrap().contains("233.3%"),
        "{answer}"
    );

    assert_eq!(
        c.session("t1").await.unwrap().status,
        SessionStatus::Completed
    );
    let cps = c.session_checkpoints("t1").await.unwrap();
    let nodes: Vec<&str> = cps
        .latest
        .checkpoints
        .iter()
        .map(|c| c.node.as_str())
        .collect();
    assert_eq!(
        nodes.iter().filter(|n| **n == "approval").count(),
        2,
        "{nodes:?}"
    );
    assert_eq!(nodes.last(), Some(&"generate_response"));

    // A slash command through /chat goes to the session's latest run.
    let reply = c.chat(&turn("/todos", "t1")).await.unwrap();
    let ChatReply::Command(cmd) = reply else {
        panic!("a command's outcome: {reply:?}");
    };
    let CommandOutcome::Todos(todos) = cmd.result else {
        panic!("/todos answers the TODO list: {:?}", cmd.result);
    };
    assert_eq!(todos.summary.completed, 2);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hitl_none_chat_answers_at_once() {
    let srv = server(Tokens::none(), None).await;
    let reply = srv
        .client
        .chat(&ChatRequest {
            message: "강남역 근처 30평대 아파트 매매 시세 알려줘".into(),
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    let ChatReply::Done(done) = reply else {
        panic!("answered at once: {reply:?}");
    };
    assert!(
        !done.response.unwrap()["listings"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    srv.stop().await;
}

/// The error body of a refusal that must have `status`/`code` and have written nothing.
#[track_caller]
fn refusal(
    srv: &Server,
    before: u64,
    result: Result<Error, String>,
    status: u16,
    code: &str,
) -> ErrorBody {
    let e = result.unwrap_or_else(|ok| panic!("accepted: {ok}"));
    let Error::Http { status: got, body } = e else {
        panic!("not an error answer: {e}");
    };
    assert_eq!((got, body.error.code.as_str()), (status, code), "{body:?}");
    assert!(!body.error.message.is_empty(), "{body:?}");
    assert_eq!(
        srv.offsets(),
        before,
        "a refused request wrote to the store: {body:?}"
    );
    body
}

/// A typed call that must be refused.
macro_rules! refused {
    ($srv:expr, $call:expr, $status:expr, $code:expr) => {{
        let before = $srv.offsets();
        let result = match $call.await {
            Ok(ok) => Err(format!("{ok:?}")),
            Err(e) => Ok(e),
        };
        refusal(&$srv, before, result, $status, $code)
    }};
}

/// A raw request (one the typed client cannot send) that must be refused.
async fn refused_raw(
    srv: &Server,
    req: reqwest::RequestBuilder,
    status: u16,
    code: &str,
) -> ErrorBody {
    let before = srv.offsets();
    let res = req.send().await.unwrap();
    let got = res.status().as_u16();
    let body: ErrorBody = res.json().await.unwrap();
    refusal(
        srv,
        before,
        Ok(Error::Http { status: got, body }),
        status,
        code,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_code_and_nothing_written() {
    let config = ApiConfig {
        request_body_bytes_max: 4096,
        ..ApiConfig::default()
    };
    let srv = server_with(Tokens::none(), None, config).await;
    let c = &srv.client;
    let raw = &srv.http;
    // A run waiting for approval of todo_001, to aim the bad requests at.
    let run = c.start_run(&gated(SCENARIO_1)).await.unwrap().run_id;
    let state = srv.engine.wait_settled(run, WAIT).await.unwrap();
    let approval = first_pending(&state);
    let u = |p: &str| srv.url(&format!("/api/v1/agent/{run}{p}"));

    // 400: malformed JSON, a malformed id, a bad query parameter.
    refused_raw(
        &srv,
        raw.post(srv.url("/api/v1/agent/run"))
            .header("content-type", "application/json")
            .body("{\"query\": "),
        400,
        "bad_request",
    )
    .await;
    refused_raw(
        &srv,
        raw.get(srv.url("/api/v1/agent/not-a-uuid/status")),
        400,
        "bad_request",
    )
    .await;
    refused_raw(&srv, raw.get(u("/state?at=abc")), 400, "bad_request").await;
    // 415: a state-changing request that is not JSON.
    let b = refused_raw(
        &srv,
        raw.post(srv.url("/api/v1/agent/run")).body("query=x"),
        415,
        "unsupported_media_type",
    )
    .await;
    assert!(
        b.error.message.to_lowercase().contains("content-type"),
        "{b:?}"
    );
    // A bad command is refused but, like every command, recorded (CommandReceived): one event.
    let before = srv.offsets();
    let res = raw
        .post(u("/commands"))
        .json(&json!({"command": "/frobnicate"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let b: ErrorBody = res.json().await.unwrap();
    assert_eq!(b.error.code, "bad_request");
    assert!(b.help().unwrap().contains("/todos"));
    assert_eq!(srv.offsets(), before + 1);
    // The client reads the same answer as the command's refusal.
    let out = c.command(run, "/frobnicate").await.unwrap();
    assert_eq!(out.refusal(), Some("Unknown command"));

    // 404: unknown run, approval, checkpoint, session, route.
    let ghost = RunId(uuid::Uuid::now_v7());
    refused!(srv, c.status(ghost), 404, "not_found");
    refused!(
        srv,
        c.decide(run, &ApprovalId::from("nope"), &DecisionRequest::approve()),
        404,
        "not_found"
    );
    refused!(
        srv,
        c.restore(run, &CheckpointId::from("cp_999")),
        404,
        "not_found"
    );
    refused!(srv, c.session("ghost"), 404, "not_found");
    refused_raw(&srv, raw.get(srv.url("/api/v2/nothing")), 404, "not_found").await;

    // 422: empty query, wrong types, unknown fields, edit without args, seq out of range, bad limit.
    refused!(
        srv,
        c.start_run(&RunRequest::new("   ")),
        422,
        "unprocessable_entity"
    );
    refused_raw(
        &srv,
        raw.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": 5})),
        422,
        "unprocessable_entity",
    )
    .await;
    refused_raw(
        &srv,
        raw.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": "x", "hitl": "sometimes"})),
        422,
        "unprocessable_entity",
    )
    .await;
    refused_raw(
        &srv,
        raw.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "approve", "decided_by": "mallory"})),
        422,
        "unprocessable_entity",
    )
    .await;
    let b = refused_raw(
        &srv,
        raw.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "edit"})),
        422,
        "unprocessable_entity",
    )
    .await;
    assert!(b.error.message.contains("needs edited_args"), "{b:?}");
    let b = refused_raw(
        &srv,
        raw.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "approve", "edited_args": {"q": 1}})),
        422,
        "unprocessable_entity",
    )
    .await;
    assert!(
        b.error.message.contains("edited_args goes only with"),
        "{b:?}"
    );
    refused!(
        srv,
        c.state::<Value>(run, Some(100_000)),
        422,
        "unprocessable_entity"
    );
    refused!(
        srv,
        c.log_page(
            run,
            &LogQuery {
                from: None,
                limit: Some(0)
            }
        ),
        422,
        "unprocessable_entity"
    );

    // 413: a body over the limit.
    refused!(
        srv,
        c.start_run(&RunRequest::new("x".repeat(10_000))),
        413,
        "payload_too_large"
    );

    // 409: a second decision; an illegal transition; cancelling a finished run.
    c.decide(run, &approval, &DecisionRequest::reject())
        .await
        .unwrap();
    // Let the run settle (todo_002 is blocked by the rejection; the run then completes).
    let done = srv
        .engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    assert!(done.supervisor.run_status.is_terminal());
    refused!(
        srv,
        c.decide(run, &approval, &DecisionRequest::approve()),
        409,
        "conflict"
    );
    refused!(
        srv,
        c.cancel(run, &CancelRequest::default()),
        409,
        "conflict"
    );
    // An illegal transition by command: refused, recorded as a command, nothing else written.
    let before = srv.offsets();
    let out = c
        .command(run, "/todo update todo_001 in_progress")
        .await
        .unwrap();
    assert_eq!(
        out.refusal(),
        Some("illegal transition todo_001: skipped -> in_progress")
    );
    assert_eq!(srv.offsets(), before + 1);

    // "No approval is pending" is one 409 everywhere: as a command (recorded, with the help) and
    // as the chat's resume (nothing written).
    let before = srv.offsets();
    let res = raw
        .post(u("/commands"))
        .json(&json!({"command": "/todo approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
    let b: ErrorBody = res.json().await.unwrap();
    assert_eq!(
        (b.error.code.as_str(), b.error.message.as_str()),
        ("conflict", "no approval is pending")
    );
    assert!(b.help().unwrap().contains("/todos"), "{b:?}");
    assert_eq!(srv.offsets(), before + 1);
    let session = done.supervisor.session_id.clone();
    let yes = json!({"approve": true});
    let b = refused_raw(
        &srv,
        raw.post(srv.url(&format!("/api/sessions/{session}/resume")))
            .json(&yes),
        409,
        "conflict",
    )
    .await;
    assert_eq!(b.error.message, "no approval is pending");

    // 503: the engine is shut down underneath the server (not the caller's fault: try later).
    srv.engine.shutdown().await;
    let b = refused!(
        srv,
        c.start_run(&RunRequest::new("x")),
        503,
        "shutting_down"
    );
    assert_eq!(b.error.message, "the engine is shutting down", "{b:?}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_name_the_principal_and_are_required() {
    // bob is an admin: he may act on alice's run, and the log names him.
    let tokens = Tokens::parse("alice tok-alice-123456\nbob tok-bob-123456789 admin").unwrap();
    let srv = server(tokens, None).await;
    let (alice, bob) = (
        srv.client_as("tok-alice-123456"),
        srv.client_as("tok-bob-123456789"),
    );
    // 401 without a token or with a wrong one; /healthz stays open.
    refused!(
        srv,
        srv.client.start_run(&RunRequest::new("x")),
        401,
        "unauthorized"
    );
    refused!(
        srv,
        srv.client_as("tok-wrong-0000").session("x"),
        401,
        "unauthorized"
    );
    srv.client.health().await.unwrap();

    let run = alice.start_run(&gated(SCENARIO_1)).await.unwrap().run_id;
    srv.engine.wait_settled(run, WAIT).await.unwrap();
    let out = bob.command(run, "/todo approve").await.unwrap();
    assert!(matches!(out, CommandOutcome::Approved(_)), "{out:?}");
    let approvals = alice.approvals(run).await.unwrap();
    assert_eq!(approvals[0].approval.decided_by.as_deref(), Some("bob"));
    let log: Vec<Value> = alice
        .log(run, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let by: Vec<&Value> = log
        .iter()
        .filter_map(|e| e["event"].get("CommandReceived"))
        .map(|c| &c["by"])
        .collect();
    assert_eq!(by, [&json!("user:bob")]);
    srv.stop().await;
}

#[test]
fn a_public_bind_needs_tokens_or_insecure() {
    let public = "0.0.0.0:8080".parse().unwrap();
    let err = chronicle_api::check_bind(public, &Tokens::none(), false).unwrap_err();
    assert!(err.contains("--insecure"), "{err}");
    assert!(chronicle_api::check_bind(public, &Tokens::none(), true).is_ok());
    assert!(
        chronicle_api::check_bind(
            public,
            &Tokens::single("admin", "tok-admin-12345678").unwrap(),
            false
        )
        .is_ok()
    );
    assert!(
        chronicle_api::check_bind("127.0.0.1:8080".parse().unwrap(), &Tokens::none(), false)
            .is_ok()
    );
    assert!(
        chronicle_api::check_bind("[::1]:8080".parse().unwrap(), &Tokens::none(), false).is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_routes_time_travel_and_cancel() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let run = c.start_run(&gated(SCENARIO_1)).await.unwrap().run_id;
    srv.engine.wait_settled(run, WAIT).await.unwrap();
    let st = c.status(run).await.unwrap();
    assert_eq!(st.state, RunStatus::WaitingForApproval);
    assert!(st.pending_approval_id.is_some());
    let todos = c.todos(run).await.unwrap();
    assert_eq!(todos.summary.total, 2);
    let at0: Value = c.state(run, Some(0)).await.unwrap();
    assert_eq!(at0["last_seq"], 0);
    assert_eq!(at0["supervisor"]["planning_state"], Value::Null);
    let page = c
        .log_page(
            run,
            &LogQuery {
                from: Some(2),
                limit: Some(3),
            },
        )
        .await
        .unwrap();
    let seqs: Vec<u64> = page.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2, 3, 4]);
    let cancelled = c
        .cancel(
            run,
            &CancelRequest {
                reason: Some("changed my mind".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(cancelled.run_id, run);
    assert_eq!(c.status(run).await.unwrap().state, RunStatus::Cancelled);
    let metrics = c.metrics().await.unwrap();
    assert!(
        metrics.contains("chronicle_runs_started_total 1"),
        "{metrics}"
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_listed_a_page_at_a_time() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let mut started = Vec::new();
    for (i, q) in [
        "강남구 아파트 시세 조회",
        "서초구 아파트 시세 조회",
        SCENARIO_1,
    ]
    .iter()
    .enumerate()
    {
        let req = RunRequest {
            hitl: (i == 2).then_some(HitlMode::EveryTodo),
            session_id: Some(if i == 0 { "s-a" } else { "s-b" }.into()),
            ..RunRequest::new(*q)
        };
        let run = c.start_run(&req).await.unwrap().run_id;
        srv.engine.wait_settled(run, WAIT).await.unwrap();
        started.push(run);
    }
    let all = c.runs(&Default::default()).await.unwrap();
    let ids: Vec<RunId> = all.iter().map(|r| r.run_id).collect();
    assert_eq!(ids, started, "oldest first");
    assert_eq!(all[2].status, RunStatus::WaitingForApproval);
    assert_eq!(all[0].query, "강남구 아파트 시세 조회");
    // One run per page: the pages chain through `next`.
    let one_per_page = chronicle_wire::RunsQuery {
        limit: Some(1),
        ..Default::default()
    };
    let page = c.runs_page(&one_per_page).await.unwrap();
    assert_eq!((page.runs.len(), page.next), (1, Some(started[0])));
    assert_eq!(c.runs(&one_per_page).await.unwrap(), all);
    let in_b = c
        .runs(&chronicle_wire::RunsQuery {
            session_id: Some("s-b".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        in_b.iter().map(|r| r.run_id).collect::<Vec<_>>(),
        started[1..]
    );
    let waiting = c
        .runs(&chronicle_wire::RunsQuery {
            status: Some(RunStatus::WaitingForApproval),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        waiting.iter().map(|r| r.run_id).collect::<Vec<_>>(),
        [started[2]]
    );
    // Bad pages are 400.
    refused!(
        srv,
        c.runs_page(&chronicle_wire::RunsQuery {
            limit: Some(0),
            ..Default::default()
        }),
        400,
        "bad_request"
    );
    refused!(
        srv,
        c.runs_page(&chronicle_wire::RunsQuery {
            after: Some(RunId::from_u128(9)),
            ..Default::default()
        }),
        404,
        "not_found"
    );
    refused_raw(
        &srv,
        srv.http.get(srv.url("/api/v1/runs?status=sleeping")),
        400,
        "bad_request",
    )
    .await;
    srv.stop().await;
}

/// The OpenAPI document is generated from the handlers; its snapshot makes every change to the
/// API's surface a visible, reviewed diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document() {
    let srv = server(Tokens::none(), None).await;
    let doc = srv.client.openapi().await.unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for route in [
        "/chat",
        "/api/v1/agent/run",
        "/api/v1/agent/{run_id}/events",
        "/api/v1/audit/approvals",
        "/api/v1/runs",
        "/ws",
    ] {
        assert!(
            paths.contains_key(route),
            "{route} missing from the OpenAPI document"
        );
    }
    // Without tokens nothing needs one, and nothing answers 401.
    let text = doc.to_string();
    assert!(!text.contains("\"security\""), "{text}");
    assert!(!text.contains("\"401\""));
    // The document stands alone.
    assert_eq!(crate::citations::cited(&text), None);
    for word in ["DESIGN", "§"] {
        assert!(!text.contains(word), "the document mentions {word:?}");
    }
    insta::assert_json_snapshot!("openapi", doc, {".info.version" => "[version]"});
    srv.stop().await;
}

/// With tokens, every operation but `/healthz` and `/openapi.json` needs the bearer token and
/// declares 401; every error answer has the error body; every body is required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_with_tokens_declares_auth_and_every_error() {
    let srv = server(Tokens::single("admin", "tok-admin-123456").unwrap(), None).await;
    let doc = srv.client_as("tok-admin-123456").openapi().await.unwrap();
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer"})
    );
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let public = path == "/healthz" || path == "/openapi.json";
            let responses = op["responses"].as_object().unwrap();
            assert_eq!(
                op.get("security").is_none(),
                public,
                "{method} {path}: security {:?}",
                op.get("security")
            );
            assert_eq!(responses.contains_key("401"), !public, "{method} {path}");
            for status in ["400", "403", "503"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path}: no {status}"
                );
            }
            // A write can meet its principal's quota.
            let write = ["post", "put", "patch", "delete"].contains(&method.as_str());
            assert_eq!(
                responses.contains_key("429"),
                write && path != "/api/v1/stream-tickets",
                "{method} {path}: 429"
            );
            if let Some(body) = op.get("requestBody") {
                assert_eq!(body["required"], true, "{method} {path}");
                for status in ["408", "413", "415", "422"] {
                    assert!(
                        responses.contains_key(status),
                        "{method} {path}: no {status}"
                    );
                }
            }
            for (status, response) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = response
                        .get("$ref")
                        .map(|r| {
                            let name = r.as_str().unwrap().rsplit('/').next().unwrap();
                            doc["components"]["responses"][name]["content"]["application/json"]
                                ["schema"]
                                .clone()
                        })
                        .unwrap_or_else(|| {
                            response["content"]["application/json"]["schema"].clone()
                        });
                    assert!(
                        !schema.is_null(),
                        "{method} {path} {status}: no JSON error body"
                    );
                    // The LangGraph routes answer errors in LangGraph's shape.
                    if op["tags"] == json!(["langgraph"]) {
                        assert_eq!(
                            schema,
                            json!({"$ref": "#/components/schemas/Detail"}),
                            "{method} {path} {status}"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(operations, 61);
    // Unsigned integers carry their real range, not a signed format.
    let text = doc.to_string();
    assert!(!text.contains("\"int32\""), "u32 declared as int32");
    let at = &doc["paths"]["/api/v1/agent/{run_id}/state"]["get"]["parameters"][1]["schema"];
    assert_eq!(
        at,
        &json!({"type": "integer", "minimum": 0, "maximum": u64::MAX})
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_record_is_damaged_is_answered_with_corrupt_log_naming_the_offset() {
    use chronicle_engine::store::{Options, Store};
    use chronicle_schemas::Event;
    let dir = tempfile::tempdir().unwrap();
    let run = crate::support::run(0xC0);
    {
        let store = crate::support::open(dir.path());
        // Text that does not compress, so that the events' bodies go to the body file.
        let big = |seed| Event::Reasoning {
            message: chronicle_testkit::incompressible_text(20_000, seed),
        };
        let events = vec![
            crate::support::run_started("s"),
            big(1),
            big(2),
            Event::RunFailed {
                error: "done".into(),
            },
        ];
        store.append(run, 0, events).await.unwrap();
    }
    // Damage the body of offset 1 (the first large event) on disk.
    let path = dir.path().join("bodies");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    // The damage is older than what `open` checks: the server starts, then names it per run.
    let opts = Options {
        open_verify_tail_events: 0,
        ..Options::default()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    let srv = crate::api_support::server_on(
        dir,
        store,
        Tokens::none(),
        chronicle_realestate::settings(),
        ApiConfig::default(),
    )
    .await;
    let c = &srv.client;
    let answers = [
        ("log", c.log(run, 0).await.map(drop)),
        ("status", c.status(run).await.map(drop)),
        ("state", c.state::<Value>(run, None).await.map(drop)),
    ];
    for (path, answer) in answers {
        let e = answer.unwrap_err();
        assert_eq!(
            (e.status(), e.code()),
            (Some(500), Some("corrupt_log")),
            "{path}: {e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("offset 1"), "{path}: {msg}");
        assert!(msg.contains("chronicle verify"), "{path}: {msg}");
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_plan_naming_an_unknown_agent_is_422_at_submission_and_writes_nothing() {
    let srv = server(Tokens::none(), None).await;
    let step = |agent: &str, deps: &[&str]| {
        json!({"agent_name": agent, "team": "x", "task": "t", "description": "d", "priority": 0,
               "dependencies": deps, "input_mapping": {}, "timeout": 30, "retry_count": 0,
               "optional": false})
    };
    let cases = [
        (json!([step("weather", &[])]), "unknown agent \"weather\""),
        // Unknown keys are refused, not ignored.
        (json!([{"agent": "weather"}]), "unknown field `agent`"),
        (json!([{"agent_name": ""}]), "has no `agent_name`"),
        (
            json!([step("search_team", &["analysis_team"])]),
            "depends on \"analysis_team\"",
        ),
    ];
    let offset = || async { srv.client.health().await.unwrap().durable_next_offset };
    let before = offset().await;
    for (plan, says) in cases {
        // Plans that may not even decode as plan steps: sent raw.
        let b = refused_raw(
            &srv,
            srv.http
                .post(srv.url("/api/v1/agent/run"))
                .json(&json!({"query": "서울 날씨", "plan": plan})),
            422,
            "unprocessable_entity",
        )
        .await;
        assert!(b.error.message.contains(says), "{b:?}");
    }
    assert_eq!(offset().await, before, "a refused plan appends nothing");
    // A valid fixed plan is still accepted.
    let req = RunRequest {
        plan: Some(serde_json::from_value(json!([step("search_team", &[])])).unwrap()),
        ..RunRequest::new("강남구 아파트 시세")
    };
    srv.client.start_run(&req).await.unwrap();
    srv.stop().await;
}

/// A route asked with a method it does not take: 405 in the error format, with `Allow`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_is_405_with_the_error_body_and_allow() {
    let srv = server(Tokens::none(), None).await;
    let run = RunId(uuid::Uuid::now_v7());
    for (method, path, allow) in [
        (
            reqwest::Method::DELETE,
            "/api/v1/agent/run".to_owned(),
            "POST",
        ),
        (reqwest::Method::PUT, "/healthz".to_owned(), "GET,HEAD"),
        (
            reqwest::Method::GET,
            format!("/api/v1/agent/{run}/cancel"),
            "POST",
        ),
    ] {
        let before = srv.offsets();
        let res = srv
            .http
            .request(method.clone(), srv.url(&path))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(res.headers()["allow"], allow, "{method} {path}");
        assert_eq!(
            res.headers()["content-type"],
            "application/json",
            "{method} {path}"
        );
        let b: ErrorBody = res.json().await.unwrap();
        assert_eq!(b.error.code, "method_not_allowed");
        assert_eq!(
            b.error.message,
            format!("{path} does not take {method}"),
            "{b:?}"
        );
        assert_eq!(srv.offsets(), before);
    }
    // An unknown path is still 404, whatever the method.
    let res = srv
        .http
        .delete(srv.url("/api/v1/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    srv.stop().await;
}

/// `approval_timeout_ms` is checked at submission, at both ends of its range: outside it the
/// run is refused with 422 naming the field and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_timeout_outside_its_range_is_422_and_writes_nothing() {
    use chronicle_schemas::{APPROVAL_TIMEOUT_MS_MAX, APPROVAL_TIMEOUT_MS_MIN};
    let srv = server(Tokens::none(), None).await;
    let run = |ms: Value| {
        srv.http
            .post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": SCENARIO_1, "approval_timeout_ms": ms}))
    };
    for ms in [
        json!(0),
        json!(APPROVAL_TIMEOUT_MS_MIN - 1),
        json!(APPROVAL_TIMEOUT_MS_MAX + 1),
        json!(9_000_000_000_000_000_u64),
        json!(u64::MAX),
    ] {
        let b = refused_raw(&srv, run(ms.clone()), 422, "unprocessable_entity").await;
        assert!(
            b.error
                .message
                .starts_with("approval_timeout_ms must be 1000..=2592000000"),
            "{ms}: {b:?}"
        );
    }
    // What is not a u64 at all is refused when the body is read (422 too).
    for ms in [json!(9e15), json!(-1), json!("60000")] {
        let b = refused_raw(&srv, run(ms.clone()), 422, "unprocessable_entity").await;
        assert!(
            b.error.message.contains("approval_timeout_ms"),
            "{ms}: {b:?}"
        );
    }
    for ms in [APPROVAL_TIMEOUT_MS_MIN, APPROVAL_TIMEOUT_MS_MAX] {
        let res = run(json!(ms)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::ACCEPTED, "{ms}");
    }
    srv.stop().await;
}

/// Cancel takes `{}`, `{"reason"}` or `null` as a JSON body; restore takes `{}`. A missing body
/// or an unknown field is refused and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_restore_take_json_bodies() {
    cancel_and_restore_take_json_bodies_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_restore_take_json_bodies_on_postgres() {
    crate::api_support::on_postgres(cancel_and_restore_take_json_bodies_test()).await;
}

async fn cancel_and_restore_take_json_bodies_test() {
    let srv = server(Tokens::none(), None).await;
    let raw = &srv.http;
    let started = || async {
        srv.client
            .start_run(&gated(SCENARIO_1))
            .await
            .unwrap()
            .run_id
    };
    let runs = [started().await, started().await, started().await];
    for run in runs {
        srv.engine.wait_settled(run, WAIT).await.unwrap();
    }
    let cancel = |run: RunId| raw.post(srv.url(&format!("/api/v1/agent/{run}/cancel")));
    // No body (and so no JSON content type): 415; an empty JSON one: 400.
    refused_raw(&srv, cancel(runs[0]), 415, "unsupported_media_type").await;
    refused_raw(
        &srv,
        cancel(runs[0])
            .header("content-type", "application/json")
            .body(""),
        400,
        "bad_request",
    )
    .await;
    refused_raw(
        &srv,
        cancel(runs[0]).json(&json!({"why": "x"})),
        422,
        "unprocessable_entity",
    )
    .await;
    refused_raw(
        &srv,
        cancel(runs[0]).json(&json!([])),
        422,
        "unprocessable_entity",
    )
    .await;
    for (run, body) in
        runs.iter()
            .zip([Value::Null, json!({}), json!({"reason": "changed my mind"})])
    {
        let res = cancel(*run).json(&body).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{body}");
    }
    let reasons: Vec<Option<String>> = runs
        .iter()
        .map(|run| {
            srv.engine
                .store()
                .read_run(*run, 0, u64::MAX)
                .filter_map(|e| match e.unwrap().event {
                    chronicle_schemas::Event::RunCancelled { reason, .. } => Some(reason),
                    _ => None,
                })
                .last()
                .unwrap()
        })
        .collect();
    assert_eq!(reasons, [None, None, Some("changed my mind".to_owned())]);

    let run = started().await;
    srv.engine.wait_settled(run, WAIT).await.unwrap();
    let cp = srv.client.checkpoints(run).await.unwrap().checkpoints[0]
        .checkpoint_id
        .clone();
    let restore = || raw.post(srv.url(&format!("/api/v1/agent/{run}/checkpoints/{cp}/restore")));
    refused_raw(&srv, restore(), 415, "unsupported_media_type").await;
    refused_raw(
        &srv,
        restore().json(&json!({"to": "cp_001"})),
        422,
        "unprocessable_entity",
    )
    .await;
    refused_raw(
        &srv,
        restore().json(&Value::Null),
        422,
        "unprocessable_entity",
    )
    .await;
    let res = restore().json(&json!({})).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    srv.stop().await;
}

/// What the document declares is what the server takes, at each boundary: session (thread) ids
/// of 1..=64 characters without NUL, queries and chat messages of at most 8192 characters (of
/// any script), integers written as integral floats, an unknown `after` as an unknown run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_limits_are_the_servers_at_their_boundaries() {
    let srv = server(Tokens::none(), None).await;
    let raw = &srv.http;
    let run = |body: Value| raw.post(srv.url("/api/v1/agent/run")).json(&body);
    // Each accepted run is let settle, so that the refusals after it can check that they wrote
    // nothing.
    let engine = &srv.engine;
    let accepted = |req: reqwest::RequestBuilder| async move {
        let res = req.send().await.unwrap();
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert!(status.is_success(), "{status}: {body}");
        let run: RunId = serde_json::from_value(body["run_id"].clone()).unwrap();
        engine.wait_settled(run, WAIT).await.unwrap();
    };
    let q = "강남역 근처 30평대 아파트 매매 시세 알려줘";
    let id64 = "s".repeat(64);
    accepted(run(json!({"query": q, "session_id": id64}))).await;
    accepted(run(json!({"query": q, "session_id": "세션".repeat(32)}))).await;
    for bad in ["s".repeat(65), String::new(), "a\u{0}b".to_owned()] {
        let b = refused_raw(
            &srv,
            run(json!({"query": q, "session_id": bad})),
            422,
            "unprocessable_entity",
        )
        .await;
        assert!(
            b.error
                .message
                .starts_with("session id must be 1..=64 characters"),
            "{b:?}"
        );
    }
    refused_raw(
        &srv,
        raw.get(srv.url(&format!("/api/sessions/{}", "t".repeat(65)))),
        400,
        "bad_request",
    )
    .await;
    refused_raw(
        &srv,
        raw.get(srv.url(&format!("/api/sessions/{}", "t".repeat(64)))),
        404,
        "not_found",
    )
    .await;
    refused_raw(
        &srv,
        raw.post(srv.url(&format!("/api/sessions/{}/resume", "t".repeat(65))))
            .json(&json!({"approve": true})),
        400,
        "bad_request",
    )
    .await;

    // 8192 characters of any script; one more is refused, counted as sent.
    accepted(run(json!({"query": "a".repeat(8192)}))).await;
    accepted(run(json!({"query": "가".repeat(8192)}))).await;
    for too_long in [format!("{} ", "a".repeat(8192)), "가".repeat(8193)] {
        let b = refused_raw(
            &srv,
            run(json!({"query": too_long})),
            422,
            "unprocessable_entity",
        )
        .await;
        assert_eq!(b.error.message, "query of 8193 characters exceeds 8192");
    }
    refused_raw(
        &srv,
        raw.post(srv.url("/chat"))
            .json(&json!({"message": format!("/todos{}", " ".repeat(8190))})),
        422,
        "unprocessable_entity",
    )
    .await;

    // 60000.0 is the JSON Schema integer 60000.
    accepted(run(json!({"query": q, "approval_timeout_ms": 60000.0}))).await;
    // A cursor that names no run is an unknown run.
    let ghost = RunId(uuid::Uuid::now_v7());
    refused_raw(
        &srv,
        raw.get(srv.url(&format!("/api/v1/runs?after={ghost}"))),
        404,
        "not_found",
    )
    .await;
    // Durations of up to 18 digits, the longest ones reaching back past every approval.
    let res = raw
        .get(srv.url("/api/v1/approvals?older_than=999999999999999999d"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    refused_raw(
        &srv,
        raw.get(srv.url("/api/v1/approvals?older_than=9999999999999999999d")),
        400,
        "bad_request",
    )
    .await;
    srv.stop().await;
}

/// `GET /api/v1/agent/{run}/trace`: the run's trace as OTLP JSON, the same every time, its
/// content only when asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_trace_is_served_as_otlp_json() {
    let srv = server(Tokens::none(), None).await;
    let run = srv
        .client
        .start_run(&RunRequest::new(SCENARIO_1))
        .await
        .unwrap()
        .run_id;
    srv.engine.wait_settled(run, WAIT).await.unwrap();
    let get = async |query: &str| -> Value {
        let resp = srv
            .http
            .get(srv.url(&format!("/api/v1/agent/{run}/trace{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    };
    let spans = |doc: &Value| -> Vec<Value> {
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .unwrap()
            .clone()
    };
    let doc = get("").await;
    assert_eq!(doc, get("").await);
    let all = spans(&doc);
    let root: Vec<&Value> = all.iter().filter(|s| s["name"] == "run").collect();
    assert_eq!(root.len(), 1, "{all:#?}");
    assert_eq!(root[0]["parentSpanId"], "");
    assert!(all.iter().all(|s| s["traceId"] == root[0]["traceId"]));
    assert!(
        all.iter()
            .any(|s| s["name"].as_str().unwrap().starts_with("todo "))
    );
    let keys = |s: &Value| -> Vec<String> {
        s["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["key"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!keys(root[0]).contains(&"input.value".to_owned()));
    let with = spans(&get("?content=true").await);
    let root = with.iter().find(|s| s["name"] == "run").unwrap();
    let query = root["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == "input.value")
        .map(|a| a["value"]["stringValue"].clone());
    assert_eq!(query, Some(json!(SCENARIO_1)));
    srv.stop().await;
}
