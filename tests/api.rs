//! The REST API, black-box: seed 004's flow, every error code of DESIGN §6 with the store
//! unchanged after each bad request, bearer principals, and the OpenAPI document.

use chronicle_api::{ApiConfig, Tokens};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{Server, server, server_with};

const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

async fn body(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_004_rest_flow() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let (status, b) = body(
        c.post(srv.url("/chat"))
            .json(&json!({"message": SCENARIO_1, "thread_id": "t1", "hitl": "every_todo"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{b}");
    assert_eq!(b["error"]["code"], "waiting_for_human");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("- TODO ID: todo_001")
    );
    assert_eq!(b["approval"]["subject"]["todo"]["todo_id"], "todo_001");
    assert_eq!(b["thread_id"], "t1");

    let (status, s) = body(c.get(srv.url("/api/sessions/t1")).send().await.unwrap()).await;
    assert_eq!(
        (status, s["status"].as_str()),
        (StatusCode::OK, Some("waiting_human"))
    );

    let (status, b) = body(
        c.post(srv.url("/api/sessions/t1/resume"))
            .json(&json!({"approve": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{b}");
    assert_eq!(b["approval"]["subject"]["todo"]["todo_id"], "todo_002");

    let (status, b) = body(
        c.post(srv.url("/api/sessions/t1/resume"))
            .json(&json!({"approve": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{b}");
    assert_eq!(b["status"], "completed");
    assert!(
        b["response"]["answer"].as_str().unwrap().contains("233.3%"),
        "{b}"
    );

    let (_, s) = body(c.get(srv.url("/api/sessions/t1")).send().await.unwrap()).await;
    assert_eq!(s["status"], "completed");
    let (status, cps) = body(
        c.get(srv.url("/api/sessions/t1/checkpoints"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let nodes: Vec<&str> = cps["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes.iter().filter(|n| **n == "approval").count(),
        2,
        "{nodes:?}"
    );
    assert_eq!(nodes.last(), Some(&"generate_response"));

    // A slash command through /chat goes to the session's latest run.
    let (status, b) = body(
        c.post(srv.url("/chat"))
            .json(&json!({"message": "/todos", "thread_id": "t1"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(b["result"]["summary"]["completed"], 2);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hitl_none_chat_answers_at_once() {
    let srv = server(Tokens::none(), None).await;
    let (status, b) = body(
        srv.client
            .post(srv.url("/chat"))
            .json(&json!({"message": "강남역 근처 30평대 아파트 매매 시세 알려줘"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{b}");
    assert!(!b["response"]["listings"].as_array().unwrap().is_empty());
    srv.stop().await;
}

/// Sends a request that must fail with `status`/`code` and write nothing.
async fn refused(
    srv: &Server,
    req: reqwest::RequestBuilder,
    status: StatusCode,
    code: &str,
) -> Value {
    let before = srv.offsets();
    let (got, b) = body(req.send().await.unwrap()).await;
    assert_eq!(got, status, "{b}");
    assert_eq!(b["error"]["code"], code, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{b}"
    );
    assert_eq!(
        srv.offsets(),
        before,
        "a refused request wrote to the store: {b}"
    );
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_code_and_nothing_written() {
    let config = ApiConfig {
        request_body_bytes_max: 4096,
        ..ApiConfig::default()
    };
    let srv = server_with(Tokens::none(), None, config).await;
    let c = &srv.client;
    // A run waiting for approval of todo_001, to aim the bad requests at.
    let (_, started) = body(
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": SCENARIO_1, "hitl": "every_todo"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let run = started["run_id"].as_str().unwrap().to_owned();
    let state = srv
        .engine
        .wait_settled(run.parse().unwrap(), std::time::Duration::from_secs(20))
        .await
        .unwrap();
    let approval = state
        .approvals
        .pending()
        .next()
        .unwrap()
        .approval_id
        .to_string();
    let u = |p: &str| srv.url(&format!("/api/v1/agent/{run}{p}"));

    // 400: malformed JSON, a malformed id, a bad query parameter, a bad command.
    refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run"))
            .header("content-type", "application/json")
            .body("{\"query\": "),
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    refused(
        &srv,
        c.get(srv.url("/api/v1/agent/not-a-uuid/status")),
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    refused(
        &srv,
        c.get(u("/state?at=abc")),
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    let b = refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run")).body("query=x"),
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("content-type"),
        "{b}"
    );
    // A bad command is refused but, like every command, recorded (CommandReceived): one event.
    let before = srv.offsets();
    let (status, b) = body(
        c.post(u("/commands"))
            .json(&json!({"command": "/frobnicate"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    assert!(b["help"].as_str().unwrap().contains("/todos"));
    let kinds: Vec<String> = srv
        .engine
        .store()
        .read_range(before, srv.offsets())
        .map(|e| {
            let e = e.unwrap();
            format!("{}:{}", e.seq, e.event.kind())
        })
        .collect();
    assert_eq!(srv.offsets(), before + 1, "{kinds:?}");

    // 404: unknown run, approval, checkpoint, session, route.
    let ghost = uuid::Uuid::now_v7();
    refused(
        &srv,
        c.get(srv.url(&format!("/api/v1/agent/{ghost}/status"))),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    refused(
        &srv,
        c.post(u("/approvals/nope/decision"))
            .json(&json!({"decision": "approve"})),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    refused(
        &srv,
        c.post(u("/checkpoints/cp_999/restore")),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    refused(
        &srv,
        c.get(srv.url("/api/sessions/ghost")),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    refused(
        &srv,
        c.get(srv.url("/api/v2/nothing")),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;

    // 422: empty query, wrong types, unknown fields, edit without args, seq out of range, bad limit.
    refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": "   "})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": 5})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": "x", "hitl": "sometimes"})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    refused(
        &srv,
        c.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "approve", "decided_by": "mallory"})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    refused(
        &srv,
        c.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "edit"})),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    refused(
        &srv,
        c.get(u("/state?at=100000")),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    refused(
        &srv,
        c.get(u("/log?limit=0")),
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;

    // 413: a body over the limit.
    let big = json!({"query": "x".repeat(10_000)});
    refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run")).json(&big),
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;

    // 409: a second decision; an illegal transition; cancelling a finished run.
    let (status, _) = body(
        c.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "reject"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Let the run settle (todo_002 is blocked by the rejection; the run then completes).
    let done = srv
        .engine
        .wait_until(
            run.parse().unwrap(),
            std::time::Duration::from_secs(20),
            |s| s.supervisor.run_status.is_terminal(),
        )
        .await
        .unwrap();
    assert!(done.supervisor.run_status.is_terminal());
    refused(
        &srv,
        c.post(u(&format!("/approvals/{approval}/decision")))
            .json(&json!({"decision": "approve"})),
        StatusCode::CONFLICT,
        "conflict",
    )
    .await;
    refused(&srv, c.post(u("/cancel")), StatusCode::CONFLICT, "conflict").await;
    // An illegal transition by command: refused, recorded as a command, nothing else written.
    let before = srv.offsets();
    let (status, b) = body(
        c.post(u("/commands"))
            .json(&json!({"command": "/todo update todo_001 in_progress"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        b["error"]["message"],
        "illegal transition todo_001: skipped -> in_progress"
    );
    assert_eq!(srv.offsets(), before + 1);

    // 503: the engine is shut down underneath the server (not the caller's fault: try later).
    srv.engine.shutdown().await;
    let b = refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": "x"})),
        StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
    )
    .await;
    assert_eq!(b["error"]["message"], "the engine is shutting down", "{b}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_name_the_principal_and_are_required() {
    let tokens = Tokens::parse("alice tok-alice-1234\nbob tok-bob-12345").unwrap();
    let srv = server(tokens, None).await;
    let c = &srv.client;
    // 401 without a token or with a wrong one; /healthz stays open.
    refused(
        &srv,
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": "x"})),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    refused(
        &srv,
        c.get(srv.url("/api/sessions/x"))
            .bearer_auth("tok-wrong-0000"),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert_eq!(
        c.get(srv.url("/healthz")).send().await.unwrap().status(),
        StatusCode::OK
    );

    let (status, b) = body(
        c.post(srv.url("/api/v1/agent/run"))
            .bearer_auth("tok-alice-1234")
            .json(&json!({"query": SCENARIO_1, "hitl": "every_todo"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let run = b["run_id"].as_str().unwrap().to_owned();
    srv.engine
        .wait_settled(run.parse().unwrap(), std::time::Duration::from_secs(20))
        .await
        .unwrap();
    let (status, out) = body(
        c.post(srv.url(&format!("/api/v1/agent/{run}/commands")))
            .bearer_auth("tok-bob-12345")
            .json(&json!({"command": "/todo approve"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (_, approvals) = body(
        c.get(srv.url(&format!("/api/v1/agent/{run}/approvals")))
            .bearer_auth("tok-alice-1234")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(approvals[0]["decided_by"], "bob");
    let (_, log) = body(
        c.get(srv.url(&format!("/api/v1/agent/{run}/log")))
            .bearer_auth("tok-alice-1234")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let by: Vec<&Value> = log
        .as_array()
        .unwrap()
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
        chronicle_api::check_bind(public, &Tokens::single("admin", "tok-admin-1234"), false)
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
    let (_, b) = body(
        c.post(srv.url("/api/v1/agent/run"))
            .json(&json!({"query": SCENARIO_1, "hitl": "every_todo"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let run = b["run_id"].as_str().unwrap().to_owned();
    srv.engine
        .wait_settled(run.parse().unwrap(), std::time::Duration::from_secs(20))
        .await
        .unwrap();
    let u = |p: &str| srv.url(&format!("/api/v1/agent/{run}{p}"));
    let (_, st) = body(c.get(u("/status")).send().await.unwrap()).await;
    assert_eq!(st["state"], "waiting_for_approval");
    assert!(st["pending_approval_id"].is_string());
    let (_, todos) = body(c.get(u("/todos")).send().await.unwrap()).await;
    assert_eq!(todos["summary"]["total"], 2);
    let (_, at0) = body(c.get(u("/state?at=0")).send().await.unwrap()).await;
    assert_eq!(at0["last_seq"], 0);
    assert_eq!(at0["supervisor"]["planning_state"], Value::Null);
    let (_, log) = body(c.get(u("/log?from=2&limit=3")).send().await.unwrap()).await;
    let seqs: Vec<u64> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 3, 4]);
    let (status, out) = body(
        c.post(u("/cancel"))
            .json(&json!({"reason": "changed my mind"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, out["status"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    let (_, st) = body(c.get(u("/status")).send().await.unwrap()).await;
    assert_eq!(st["state"], "cancelled");
    let metrics = c
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("chronicle_runs_started_total 1"),
        "{metrics}"
    );
    srv.stop().await;
}

/// The OpenAPI document is generated from the handlers; its snapshot makes every change to the
/// API's surface a visible, reviewed diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document() {
    let srv = server(Tokens::none(), None).await;
    let (status, doc) = body(
        srv.client
            .get(srv.url("/openapi.json"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let paths = doc["paths"].as_object().unwrap();
    for route in [
        "/chat",
        "/api/v1/agent/run",
        "/api/v1/agent/{run_id}/events",
        "/api/v1/audit/approvals",
        "/ws",
    ] {
        assert!(
            paths.contains_key(route),
            "{route} missing from the OpenAPI document"
        );
    }
    insta::assert_json_snapshot!("openapi", doc, {".info.version" => "[version]"});
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
        let big = |c: &str| Event::Reasoning {
            message: c.repeat(20_000),
        };
        let events = vec![
            crate::support::run_started("s"),
            big("a"),
            big("b"),
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
    for path in ["log", "status", "state"] {
        let res = srv
            .client
            .get(srv.url(&format!("/api/v1/agent/{run}/{path}")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 500, "{path}");
        let b: Value = res.json().await.unwrap();
        assert_eq!(b["error"]["code"], "corrupt_log", "{path}: {b}");
        let msg = b["error"]["message"].as_str().unwrap();
        assert!(msg.contains("offset 1"), "{path}: {msg}");
        assert!(msg.contains("chronicle verify"), "{path}: {msg}");
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_plan_naming_an_unknown_agent_is_422_at_submission_and_writes_nothing() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let step = |agent: &str, deps: &[&str]| {
        json!({"agent_name": agent, "team": "x", "task": "t", "description": "d", "priority": 0,
               "dependencies": deps, "input_mapping": {}, "timeout": 30, "retry_count": 0,
               "optional": false})
    };
    let cases = [
        (json!([step("weather", &[])]), "unknown agent \"weather\""),
        (json!([{"agent": "weather"}]), "has no `agent_name`"),
        (
            json!([step("search_team", &["analysis_team"])]),
            "depends on \"analysis_team\"",
        ),
    ];
    for (plan, says) in cases {
        let b = refused(
            &srv,
            c.post(srv.url("/api/v1/agent/run"))
                .json(&json!({"query": "서울 날씨", "plan": plan})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        let msg = b["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{msg}");
    }
    // A valid fixed plan is still accepted.
    let res = c
        .post(srv.url("/api/v1/agent/run"))
        .json(&json!({"query": "강남구 아파트 시세", "plan": [step("search_team", &[])]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    srv.stop().await;
}
