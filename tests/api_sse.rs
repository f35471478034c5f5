//! The SSE streams, black-box over a real listener: seed 003's approval flow on a run's stream,
//! resume by `Last-Event-ID` and `?from=` without gap or duplicate, 204 for a finished run with
//! nothing newer, the error codes, the all-runs stream with global offsets, keep-alives, the
//! open-streams gauge, and streams ending at shutdown.

use std::pin::Pin;
use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{Server, SseEvent, server, server_with, sse_events};

/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(20);

type Events = Pin<Box<dyn Stream<Item = SseEvent> + Send>>;

fn one_step_plan() -> Value {
    json!([{
        "agent_name": "search_team",
        "team": "search",
        "task": "매물 검색",
        "description": "강남구 아파트 매물 검색",
        "priority": 0,
        "dependencies": [],
        "input_mapping": {"region": "강남구", "property_type": "아파트"},
        "timeout": 30,
        "retry_count": 0,
        "optional": false
    }])
}

async fn start(srv: &Server, body: Value) -> String {
    let resp = srv
        .client
        .post(srv.url("/api/v1/agent/run"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let b: Value = resp.json().await.unwrap();
    b["run_id"].as_str().unwrap().to_owned()
}

/// A run under `every_todo` with one plan step: it stops at one approval.
async fn gated_run(srv: &Server) -> String {
    start(
        srv,
        json!({"query": "강남구 아파트 시세 알려줘", "hitl": "every_todo", "plan": one_step_plan()}),
    )
    .await
}

async fn open(srv: &Server, path: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut req = srv.client.get(srv.url(path));
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id);
    }
    req.send().await.unwrap()
}

async fn stream(srv: &Server, path: &str, last_event_id: Option<&str>) -> Events {
    let resp = open(srv, path, last_event_id).await;
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    Box::pin(sse_events(resp))
}

async fn next(events: &mut Events) -> Option<SseEvent> {
    tokio::time::timeout(GUARD, events.next())
        .await
        .expect("an SSE message or the end of the stream")
}

/// Reads until a message named `name` (inclusive); returns everything read.
async fn until(events: &mut Events, name: &str) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    loop {
        let e = next(events)
            .await
            .unwrap_or_else(|| panic!("stream ended before {name}: {seen:?}"));
        let done = e.event.as_deref() == Some(name);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

/// Reads to the end of the stream.
async fn rest(events: &mut Events) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    while let Some(e) = next(events).await {
        seen.push(e);
    }
    seen
}

/// The run's stored events as `(seq, kind)`.
async fn log(srv: &Server, run: &str) -> Vec<(u64, String)> {
    let resp = srv
        .client
        .get(srv.url(&format!("/api/v1/agent/{run}/log?limit=1000")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let events: Vec<Value> = resp.json().await.unwrap();
    events
        .iter()
        .map(|e| {
            let kind = e["event"].as_object().unwrap().keys().next().unwrap();
            (e["seq"].as_u64().unwrap(), kind.clone())
        })
        .collect()
}

/// What the stream said about each message, checked against its own `id:`.
fn seen(events: &[SseEvent]) -> Vec<(u64, String)> {
    events
        .iter()
        .map(|e| {
            let id: u64 = e.id.as_deref().unwrap().parse().unwrap();
            assert_eq!(e.data["seq"], json!(id), "{e:?}");
            assert!(e.event.as_deref().unwrap().contains('.'), "{e:?}");
            (id, e.data["kind"].as_str().unwrap().to_owned())
        })
        .collect()
}

async fn decide(srv: &Server, run: &str, approval: &str, body: Value) {
    let resp = srv
        .client
        .post(srv.url(&format!(
            "/api/v1/agent/{run}/approvals/{approval}/decision"
        )))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

async fn error_code(resp: reqwest::Response) -> (StatusCode, String) {
    let status = resp.status();
    let b: Value = resp.json().await.unwrap();
    (status, b["error"]["code"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_003_approval_flow_over_sse() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;
    let mut events = stream(&srv, &format!("/api/v1/agent/{run}/events"), None).await;

    let before = until(&mut events, "approval.requested").await;
    let asked = before.last().unwrap();
    assert_eq!(
        (asked.data["type"].as_str(), asked.data["subtype"].as_str()),
        (Some("tool"), Some("start"))
    );
    assert_eq!(asked.data["run_id"], json!(run));
    let content = &asked.data["content"];
    assert_eq!(content["approval_required"], json!(true));
    assert_eq!(content["tool"], "search_team");
    assert_eq!(content["subject"]["todo"]["todo_id"], "todo_001");
    let approval = content["approval_id"].as_str().unwrap().to_owned();

    let edited = json!({"region": "서초구", "property_type": "아파트"});
    decide(
        &srv,
        &run,
        &approval,
        json!({"decision": "edit", "edited_args": edited}),
    )
    .await;

    let after = until(&mut events, "approval.decided").await;
    let decided = after.last().unwrap();
    assert_eq!(
        (
            decided.data["type"].as_str(),
            decided.data["subtype"].as_str()
        ),
        (Some("tool"), Some("end"))
    );
    let content = &decided.data["content"];
    assert_eq!(content["approval_id"], json!(approval));
    assert_eq!(content["decision"], "edit");
    assert_eq!(content["tool"], "search_team");
    assert_eq!(content["effective_args"], edited);
    assert_eq!(content["decided_by"], "local");

    let to_final = until(&mut events, "message.final").await;
    let fin = to_final.last().unwrap();
    assert_eq!(
        (fin.data["type"].as_str(), fin.data["subtype"].as_str()),
        (Some("message"), Some("final"))
    );
    assert!(fin.data["content"]["final_response"].is_object(), "{fin:?}");
    let tail = rest(&mut events).await;
    assert_eq!(
        tail.last().unwrap().event.as_deref(),
        Some("run.end"),
        "the stream closes by itself after run.end: {tail:?}"
    );

    // One message per stored event, in order, each once.
    let all: Vec<SseEvent> = [before, after, to_final, tail].concat();
    assert_eq!(seen(&all), log(&srv, &run).await);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_by_last_event_id_and_from_without_gap_or_duplicate() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;
    let path = format!("/api/v1/agent/{run}/events");

    // Read a few events, then drop the connection.
    let mut first = stream(&srv, &path, None).await;
    let mut part = Vec::new();
    for _ in 0..3 {
        part.push(next(&mut first).await.unwrap());
    }
    drop(first);
    let last_id = part.last().unwrap().id.clone().unwrap();

    // Reconnect after the third: history from the fourth, then live through the decision.
    let mut second = stream(&srv, &path, Some(&last_id)).await;
    let mut more = until(&mut second, "approval.requested").await;
    let approval = more.last().unwrap().data["content"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    decide(&srv, &run, &approval, json!({"decision": "approve"})).await;
    more.extend(rest(&mut second).await);
    let decided = more
        .iter()
        .find(|e| e.event.as_deref() == Some("approval.decided"))
        .unwrap();
    assert_eq!(
        decided.data["content"]["effective_args"],
        json!({"region": "강남구", "property_type": "아파트"}),
        "approve keeps the requested args"
    );
    let stored = log(&srv, &run).await;
    assert_eq!(seen(&[part, more].concat()), stored);
    assert_eq!(stored.last().unwrap().1, "RunCompleted");

    // `?from=` starts at that seq, inclusive, and a finished run's stream ends by itself.
    let mut from = stream(&srv, &format!("{path}?from=5"), None).await;
    assert_eq!(seen(&rest(&mut from).await), stored[5..]);

    // The header wins over `?from=`: a browser's EventSource reconnects to the URL it opened.
    let mut late = stream(&srv, &format!("{path}?from=1000"), Some("0")).await;
    let tail = rest(&mut late).await;
    assert_eq!(seen(&tail), stored[1..]);

    // A stream that starts right at the decision has them too.
    let i = tail
        .iter()
        .position(|e| e.event.as_deref() == Some("approval.decided"))
        .unwrap();
    let mut after_decision = stream(&srv, &format!("{path}?from={}", i + 1), None).await;
    let first_after = next(&mut after_decision).await.unwrap();
    assert_eq!(first_after.event.as_deref(), Some("approval.decided"));
    assert_eq!(
        first_after.data["content"]["effective_args"],
        json!({"region": "강남구", "property_type": "아파트"})
    );
    drop(after_decision);

    // Reconnecting to the finished run with nothing newer: 204, by header or by `?from=`.
    let last_seq = stored.last().unwrap().0;
    let resp = open(&srv, &path, Some(&last_seq.to_string())).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = open(&srv, &format!("{path}?from={}", last_seq + 1), None).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = open(&srv, &format!("{path}?from=0"), Some(&last_seq.to_string())).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    // ... unless the client follows on.
    let resp = open(
        &srv,
        &format!("{path}?follow=true"),
        Some(&last_seq.to_string()),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    drop(resp);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_approval_has_no_effective_args() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;
    let mut events = stream(&srv, &format!("/api/v1/agent/{run}/events"), None).await;
    let asked = until(&mut events, "approval.requested").await;
    let approval = asked.last().unwrap().data["content"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    decide(&srv, &run, &approval, json!({"decision": "reject"})).await;
    let decided = until(&mut events, "approval.decided").await;
    let content = &decided.last().unwrap().data["content"];
    assert_eq!(content["decision"], "reject");
    assert_eq!(content["tool"], "search_team");
    assert_eq!(content["effective_args"], Value::Null);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_before_any_stream() {
    let srv = server(Tokens::none(), None).await;
    let unknown = uuid::Uuid::now_v7();
    let cases = [
        (
            format!("/api/v1/agent/{unknown}/events"),
            None,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/agent/not-a-run/events".to_owned(),
            None,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            format!("/api/v1/agent/{unknown}/events?from=x"),
            None,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            format!("/api/v1/agent/{unknown}/events"),
            Some("x"),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/v1/events?from=-1".to_owned(),
            None,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/v1/events".to_owned(),
            Some("x"),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
    ];
    for (path, header, status, code) in cases {
        let got = error_code(open(&srv, &path, header).await).await;
        assert_eq!(got, (status, code.to_owned()), "{path} {header:?}");
    }
    assert_eq!(srv.offsets(), 0, "nothing was written");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_events_stream_has_every_run_with_dense_global_offsets() {
    let srv = server(Tokens::none(), None).await;
    let a = start(&srv, json!({"query": "강남구 아파트 시세 조회"})).await;
    let b = start(&srv, json!({"query": "서초구 아파트 시세 조회"})).await;

    let mut events = stream(&srv, "/api/v1/events?from=0", None).await;
    let mut got: Vec<SseEvent> = Vec::new();
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let e = next(&mut events)
            .await
            .expect("the stream never ends by itself");
        if e.event.as_deref() == Some("run.end") {
            ended.push(e.data["run_id"].as_str().unwrap().to_owned());
        }
        got.push(e);
    }
    drop(events);
    ended.sort();
    let mut runs = vec![a.clone(), b.clone()];
    runs.sort();
    assert_eq!(ended, runs);
    for (i, e) in got.iter().enumerate() {
        assert_eq!(e.id.as_deref(), Some(i.to_string().as_str()), "{e:?}");
        assert_eq!(e.data["offset"], json!(i), "{e:?}");
    }
    // Each run's part of the global stream is exactly its own log.
    for run in [&a, &b] {
        let own: Vec<(u64, String)> = got
            .iter()
            .filter(|e| e.data["run_id"] == json!(run))
            .map(|e| {
                (
                    e.data["seq"].as_u64().unwrap(),
                    e.data["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(own, log(&srv, run).await);
    }

    // `Last-Event-ID` resumes after that offset.
    let mut resumed = stream(&srv, "/api/v1/events?from=0", Some("4")).await;
    let e = next(&mut resumed).await.unwrap();
    assert_eq!(e.id.as_deref(), Some("5"));
    assert_eq!(e.data, got[5].data);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alives_open_stream_gauge_and_shutdown() {
    let config = ApiConfig {
        sse_keepalive_ms: 20,
        ..ApiConfig::default()
    };
    let srv = server_with(Tokens::none(), None, config).await;
    let run = start(&srv, json!({"query": "강남구 아파트 시세 조회"})).await;
    let path = format!("/api/v1/agent/{run}/events");

    // A finished run's stream ends by itself; by then it no longer counts as open.
    let mut done = stream(&srv, &path, None).await;
    assert_eq!(
        rest(&mut done).await.last().unwrap().event.as_deref(),
        Some("run.end")
    );
    assert!(metrics(&srv).await.contains("chronicle_open_streams 0\n"));

    // A following stream stays open after run.end and sends keep-alive comments.
    let resp = open(&srv, &format!("{path}?follow=true"), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut raw = resp.bytes_stream();
    let mut text = String::new();
    while !text.contains("run.end") || !text.lines().any(|l| l.starts_with(':')) {
        let chunk = tokio::time::timeout(GUARD, raw.next())
            .await
            .expect("more bytes")
            .expect("the stream stays open")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let all = stream(&srv, "/api/v1/events", None).await;
    let m = metrics(&srv).await;
    assert!(m.contains("chronicle_open_streams 2\n"), "{m}");

    // Shutdown ends both streams (graceful shutdown would wait for them forever otherwise).
    srv.stop().await;
    // (Keep-alives sent before the shutdown may still be on their way.)
    while let Some(Ok(_)) = tokio::time::timeout(GUARD, raw.next())
        .await
        .expect("an end")
    {}
    let mut all = all;
    assert!(next(&mut all).await.is_none());
}

async fn metrics(srv: &Server) -> String {
    srv.client
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
