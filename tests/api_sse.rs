//! The SSE streams, black-box over a real listener, read by the one client: a tool call's approval
//! flow on a run's stream, resume by `Last-Event-ID` and `?from=` without gap or duplicate, 204 for
//! a finished run with nothing newer, the error codes, the all-runs stream with global offsets,
//! keep-alives, the open-streams gauge, and streams ending at shutdown.

use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::{EventStream, EventsFrom, StreamEvent};
use chronicle_schemas::{ApprovalId, HitlMode, RunId};
use chronicle_wire::{DecisionRequest, ErrorBody, RunRequest};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{Server, server, server_with};

/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(20);

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

async fn start(srv: &Server, req: RunRequest) -> RunId {
    srv.client.start_run(&req).await.unwrap().run_id
}

/// A run under `every_todo` with one plan step: it stops at one approval.
async fn gated_run(srv: &Server) -> RunId {
    let req = RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        plan: Some(serde_json::from_value(one_step_plan()).unwrap()),
        ..RunRequest::new("강남구 아파트 시세 알려줘")
    };
    start(srv, req).await
}

async fn stream(srv: &Server, run: RunId, from: EventsFrom) -> EventStream {
    srv.client.run_events(run, from).await.unwrap()
}

async fn next(events: &mut EventStream) -> Option<StreamEvent> {
    tokio::time::timeout(GUARD, events.next())
        .await
        .expect("an SSE message or the end of the stream")
        .map(|e| e.expect("a well-formed event"))
}

/// Reads until a message named `name` (inclusive); returns everything read.
async fn until(events: &mut EventStream, name: &str) -> Vec<StreamEvent> {
    let mut seen = Vec::new();
    loop {
        let e = next(events)
            .await
            .unwrap_or_else(|| panic!("stream ended before {name}: {seen:?}"));
        let done = e.name == name;
        seen.push(e);
        if done {
            return seen;
        }
    }
}

/// Reads to the end of the stream.
async fn rest(events: &mut EventStream) -> Vec<StreamEvent> {
    let mut seen = Vec::new();
    while let Some(e) = next(events).await {
        seen.push(e);
    }
    seen
}

/// The run's stored events as `(seq, kind)`.
async fn log(srv: &Server, run: RunId) -> Vec<(u64, String)> {
    srv.client
        .log(run, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.seq, e.event.kind().to_owned()))
        .collect()
}

/// What the stream said about each message, checked against its own `id:`.
fn seen(events: &[StreamEvent]) -> Vec<(u64, String)> {
    events
        .iter()
        .map(|e| {
            assert_eq!(e.data.seq, e.id, "{e:?}");
            assert!(e.name.contains('.'), "{e:?}");
            (e.id, e.data.kind.clone())
        })
        .collect()
}

/// The approval id of the last event of `events`, an `approval.requested`.
fn approval_asked(events: &[StreamEvent]) -> String {
    let asked = &events.last().unwrap().data.content;
    asked["approval_id"].as_str().unwrap().to_owned()
}

async fn decide(srv: &Server, run: RunId, approval: &str, req: DecisionRequest) {
    srv.client
        .decide(run, &ApprovalId::from(approval), &req)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_approval_flow_over_sse() {
    tool_approval_flow_over_sse_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_approval_flow_over_sse_on_postgres() {
    crate::api_support::on_postgres(tool_approval_flow_over_sse_test()).await;
}

async fn tool_approval_flow_over_sse_test() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;
    let mut events = stream(&srv, run, EventsFrom::default()).await;

    let before = until(&mut events, "approval.requested").await;
    let asked = &before.last().unwrap().data;
    assert_eq!(
        (asked.kind_type.as_str(), asked.subtype.as_str()),
        ("tool", "start")
    );
    assert_eq!(asked.run_id, run);
    let content = &asked.content;
    assert_eq!(content["approval_required"], json!(true));
    assert_eq!(content["tool"], "search_team");
    assert_eq!(content["subject"]["todo"]["todo_id"], "todo_001");
    let approval = content["approval_id"].as_str().unwrap().to_owned();

    let edited = json!({"region": "서초구", "property_type": "아파트"});
    decide(&srv, run, &approval, DecisionRequest::edit(edited.clone())).await;

    let after = until(&mut events, "approval.decided").await;
    let decided = &after.last().unwrap().data;
    assert_eq!(
        (decided.kind_type.as_str(), decided.subtype.as_str()),
        ("tool", "end")
    );
    let content = &decided.content;
    assert_eq!(content["approval_id"], json!(approval));
    assert_eq!(content["decision"], "edit");
    assert_eq!(content["tool"], "search_team");
    assert_eq!(content["effective_args"], edited);
    assert_eq!(content["decided_by"], "local");

    let to_final = until(&mut events, "message.final").await;
    let fin = &to_final.last().unwrap().data;
    assert_eq!(
        (fin.kind_type.as_str(), fin.subtype.as_str()),
        ("message", "final")
    );
    assert!(fin.content["final_response"].is_object(), "{fin:?}");
    let tail = rest(&mut events).await;
    assert_eq!(
        tail.last().unwrap().name,
        "run.end",
        "the stream closes by itself after run.end: {tail:?}"
    );

    // One message per stored event, in order, each once.
    let all: Vec<StreamEvent> = [before, after, to_final, tail].concat();
    assert_eq!(seen(&all), log(&srv, run).await);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_by_last_event_id_and_from_without_gap_or_duplicate() {
    resume_by_last_event_id_and_from_without_gap_or_duplicate_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_by_last_event_id_and_from_without_gap_or_duplicate_on_postgres() {
    crate::api_support::on_postgres(
        resume_by_last_event_id_and_from_without_gap_or_duplicate_test(),
    )
    .await;
}

async fn resume_by_last_event_id_and_from_without_gap_or_duplicate_test() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;

    // Read a few events, then drop the connection.
    let mut first = stream(&srv, run, EventsFrom::default()).await;
    let mut part = Vec::new();
    for _ in 0..3 {
        part.push(next(&mut first).await.unwrap());
    }
    drop(first);
    let last_id = part.last().unwrap().id;

    // Reconnect after the third: history from the fourth, then live through the decision.
    let after_third = EventsFrom {
        last_event_id: Some(last_id),
        ..EventsFrom::default()
    };
    let mut second = stream(&srv, run, after_third).await;
    let mut more = until(&mut second, "approval.requested").await;
    let approval = approval_asked(&more);
    decide(&srv, run, &approval, DecisionRequest::approve()).await;
    more.extend(rest(&mut second).await);
    let decided = more.iter().find(|e| e.name == "approval.decided").unwrap();
    assert_eq!(
        decided.data.content["effective_args"],
        json!({"region": "강남구", "property_type": "아파트"}),
        "approve keeps the requested args"
    );
    let stored = log(&srv, run).await;
    assert_eq!(seen(&[part, more].concat()), stored);
    assert_eq!(stored.last().unwrap().1, "RunCompleted");

    // `?from=` starts at that seq, inclusive, and a finished run's stream ends by itself.
    let mut from = stream(&srv, run, EventsFrom::seq(5)).await;
    assert_eq!(seen(&rest(&mut from).await), stored[5..]);

    // The header wins over `?from=`: a browser's EventSource reconnects to the URL it opened.
    let header_wins = EventsFrom {
        from: Some(1000),
        last_event_id: Some(0),
        follow: false,
    };
    let mut late = stream(&srv, run, header_wins).await;
    let tail = rest(&mut late).await;
    assert_eq!(seen(&tail), stored[1..]);

    // A stream that starts right at the decision has them too.
    let i = tail
        .iter()
        .position(|e| e.name == "approval.decided")
        .unwrap();
    let mut after_decision = stream(&srv, run, EventsFrom::seq(i as u64 + 1)).await;
    let first_after = next(&mut after_decision).await.unwrap();
    assert_eq!(first_after.name, "approval.decided");
    assert_eq!(
        first_after.data.content["effective_args"],
        json!({"region": "강남구", "property_type": "아파트"})
    );
    drop(after_decision);

    // Reconnecting to the finished run with nothing newer: 204 (an empty stream), by header or
    // by `?from=`, unless the client follows on.
    let last_seq = stored.last().unwrap().0;
    for (from, last_event_id) in [
        (None, Some(last_seq)),
        (Some(last_seq + 1), None),
        (Some(0), Some(last_seq)),
    ] {
        let from = EventsFrom {
            from,
            last_event_id,
            follow: false,
        };
        let mut s = stream(&srv, run, from).await;
        assert!(s.is_finished(), "{from:?}");
        assert!(next(&mut s).await.is_none());
    }
    let following = EventsFrom {
        last_event_id: Some(last_seq),
        follow: true,
        ..EventsFrom::default()
    };
    assert!(!stream(&srv, run, following).await.is_finished());
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_approval_has_no_effective_args() {
    a_rejected_approval_has_no_effective_args_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_approval_has_no_effective_args_on_postgres() {
    crate::api_support::on_postgres(a_rejected_approval_has_no_effective_args_test()).await;
}

async fn a_rejected_approval_has_no_effective_args_test() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;
    let mut events = stream(&srv, run, EventsFrom::default()).await;
    let asked = until(&mut events, "approval.requested").await;
    let approval = approval_asked(&asked);
    decide(&srv, run, &approval, DecisionRequest::reject()).await;
    let decided = until(&mut events, "approval.decided").await;
    let content = &decided.last().unwrap().data.content;
    assert_eq!(content["decision"], "reject");
    assert_eq!(content["tool"], "search_team");
    assert_eq!(content["effective_args"], Value::Null);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_before_any_stream() {
    bad_requests_get_json_errors_before_any_stream_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_before_any_stream_on_postgres() {
    crate::api_support::on_postgres(bad_requests_get_json_errors_before_any_stream_test()).await;
}

async fn bad_requests_get_json_errors_before_any_stream_test() {
    let srv = server(Tokens::none(), None).await;
    let unknown = RunId(uuid::Uuid::now_v7());
    let e = srv
        .client
        .run_events(unknown, EventsFrom::default())
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(404), Some("not_found")));
    // What the typed client cannot send: bad ids, query values and headers.
    let cases = [
        ("/api/v1/agent/not-a-run/events".to_owned(), None),
        (format!("/api/v1/agent/{unknown}/events?from=x"), None),
        (format!("/api/v1/agent/{unknown}/events"), Some("x")),
        ("/api/v1/events?from=-1".to_owned(), None),
        ("/api/v1/events".to_owned(), Some("x")),
    ];
    for (path, header) in cases {
        let mut req = srv.http.get(srv.url(&path));
        if let Some(id) = header {
            req = req.header("Last-Event-ID", id);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        let body: ErrorBody = res.json().await.unwrap();
        assert_eq!(
            (status, body.error.code.as_str()),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{path} {header:?}"
        );
    }
    assert_eq!(srv.offsets(), 0, "nothing was written");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_events_stream_has_every_run_with_dense_global_offsets() {
    all_events_stream_has_every_run_with_dense_global_offsets_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_events_stream_has_every_run_with_dense_global_offsets_on_postgres() {
    crate::api_support::on_postgres(
        all_events_stream_has_every_run_with_dense_global_offsets_test(),
    )
    .await;
}

async fn all_events_stream_has_every_run_with_dense_global_offsets_test() {
    let srv = server(Tokens::none(), None).await;
    let a = start(&srv, RunRequest::new("강남구 아파트 시세 조회")).await;
    let b = start(&srv, RunRequest::new("서초구 아파트 시세 조회")).await;

    let mut events = srv.client.all_events(EventsFrom::seq(0)).await.unwrap();
    let mut got: Vec<StreamEvent> = Vec::new();
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let e = next(&mut events)
            .await
            .expect("the stream never ends by itself");
        if e.name == "run.end" {
            ended.push(e.data.run_id);
        }
        got.push(e);
    }
    drop(events);
    ended.sort();
    let mut runs = vec![a, b];
    runs.sort();
    assert_eq!(ended, runs);
    for (i, e) in got.iter().enumerate() {
        assert_eq!(e.id, i as u64, "{e:?}");
        assert_eq!(e.data.offset, i as u64, "{e:?}");
    }
    // Each run's part of the global stream is exactly its own log.
    for run in [a, b] {
        let own: Vec<(u64, String)> = got
            .iter()
            .filter(|e| e.data.run_id == run)
            .map(|e| (e.data.seq, e.data.kind.clone()))
            .collect();
        assert_eq!(own, log(&srv, run).await);
    }

    // `Last-Event-ID` resumes after that offset.
    let after_four = EventsFrom {
        from: Some(0),
        last_event_id: Some(4),
        follow: false,
    };
    let mut resumed = srv.client.all_events(after_four).await.unwrap();
    let e = next(&mut resumed).await.unwrap();
    assert_eq!(e.id, 5);
    assert_eq!(e.data, got[5].data);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alives_open_stream_gauge_and_shutdown() {
    keep_alives_open_stream_gauge_and_shutdown_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alives_open_stream_gauge_and_shutdown_on_postgres() {
    crate::api_support::on_postgres(keep_alives_open_stream_gauge_and_shutdown_test()).await;
}

async fn keep_alives_open_stream_gauge_and_shutdown_test() {
    let config = ApiConfig {
        sse_keepalive_ms: 20,
        ..ApiConfig::default()
    };
    let srv = server_with(Tokens::none(), None, config).await;
    let run = start(&srv, RunRequest::new("강남구 아파트 시세 조회")).await;

    // A finished run's stream ends by itself; by then it no longer counts as open.
    let mut done = stream(&srv, run, EventsFrom::default()).await;
    assert_eq!(rest(&mut done).await.last().unwrap().name, "run.end");
    assert!(metrics(&srv).await.contains("chronicle_open_streams 0\n"));

    // A following stream stays open after run.end and sends keep-alive comments (read raw: the
    // client skips comments, as it should).
    let path = format!("/api/v1/agent/{run}/events?follow=true");
    let resp = srv.http.get(srv.url(&path)).send().await.unwrap();
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
    let mut all = srv.client.all_events(EventsFrom::default()).await.unwrap();
    let m = metrics(&srv).await;
    assert!(m.contains("chronicle_open_streams 2\n"), "{m}");

    // Shutdown ends both streams (graceful shutdown would wait for them forever otherwise).
    srv.stop().await;
    // (Keep-alives sent before the shutdown may still be on their way.)
    while let Some(Ok(_)) = tokio::time::timeout(GUARD, raw.next())
        .await
        .expect("an end")
    {}
    // The client's stream ends too: its reconnection finds no server.
    let end = tokio::time::timeout(GUARD, all.next())
        .await
        .expect("an end");
    assert!(matches!(end, None | Some(Err(_))), "{end:?}");
}

async fn metrics(srv: &Server) -> String {
    srv.client.metrics().await.unwrap()
}

/// A restore after the run ended: the run's stream (raw SSE and the client's reader) replays the
/// abandoned branch marked `abandoned`, does not stop at its old `run.end`, and delivers the
/// `run.restored` and the new approval request of the live branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restore_the_stream_follows_the_live_branch() {
    after_a_restore_the_stream_follows_the_live_branch_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restore_the_stream_follows_the_live_branch_on_postgres() {
    crate::api_support::on_postgres(after_a_restore_the_stream_follows_the_live_branch_test())
        .await;
}

async fn after_a_restore_the_stream_follows_the_live_branch_test() {
    let srv = server(Tokens::none(), None).await;
    let run = gated_run(&srv).await;
    let mut events = stream(&srv, run, EventsFrom::default()).await;
    let asked = until(&mut events, "approval.requested").await;
    let approval = approval_asked(&asked);
    let at_approval = asked.last().unwrap().id;
    decide(&srv, run, &approval, DecisionRequest::approve()).await;
    let first = rest(&mut events).await;
    assert_eq!(first.last().unwrap().name, "run.end", "{first:?}");
    let old_end = first.last().unwrap().id;

    // Back to the checkpoint saved while the approval waited: the run waits again.
    let cps = srv.client.checkpoints(run).await.unwrap();
    let cp = cps
        .checkpoints
        .iter()
        .find(|c| c.node == "approval")
        .expect("the approval's checkpoint")
        .checkpoint_id
        .clone();
    srv.client.restore(run, &cp).await.unwrap();

    // The client's reader, from the start.
    let mut events = stream(&srv, run, EventsFrom::default()).await;
    let replay = until(&mut events, "approval.requested").await;
    let replay = if replay.last().unwrap().id <= at_approval {
        // The first request, on the live branch before the checkpoint: read on to the new one.
        [replay, until(&mut events, "approval.requested").await].concat()
    } else {
        replay
    };
    let names: Vec<&str> = replay.iter().map(|e| e.name.as_str()).collect();
    let restored = replay
        .iter()
        .position(|e| e.name == "run.restored")
        .unwrap_or_else(|| panic!("no run.restored: {names:?}"));
    let new_request = replay.last().unwrap();
    assert!(new_request.id > replay[restored].id, "{names:?}");
    assert!(!new_request.data.abandoned);
    // Everything after the checkpoint and before the restore is marked; nothing else is.
    let to_seq = replay[restored].data.content["to_seq"].as_u64().unwrap();
    for e in &replay {
        let left = e.id > to_seq && e.id < replay[restored].id;
        assert_eq!(e.data.abandoned, left, "{} {}", e.id, e.name);
    }
    assert!(replay.iter().any(|e| e.id == old_end && e.data.abandoned));
    assert!(
        !events.is_finished(),
        "the stream goes on while the run waits"
    );

    // Raw SSE, as `curl -N` reads it: the old end is marked and the stream goes on past it.
    let res = srv
        .http
        .get(format!("{}/api/v1/agent/{run}/events", srv.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut body = res.bytes_stream();
    let mut text = String::new();
    let want = format!("id: {}\n", new_request.id);
    while !text.contains(&want) {
        let chunk = tokio::time::timeout(GUARD, body.next())
            .await
            .expect("more of the stream")
            .unwrap_or_else(|| panic!("the stream closed before the new approval: {text}"))
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let old = text
        .split("\n\n")
        .find(|m| m.starts_with(&format!("id: {old_end}\n")))
        .unwrap();
    assert!(
        old.contains("event: run.end") && old.contains("\"abandoned\":true"),
        "{old}"
    );
    assert!(text.contains("event: run.restored"), "{text}");

    // Deciding the new request runs the live branch to its real end, where the stream stops.
    let again = new_request.data.content["approval_id"].as_str().unwrap();
    decide(&srv, run, again, DecisionRequest::approve()).await;
    let tail = rest(&mut events).await;
    let end = tail.last().unwrap();
    assert_eq!((end.name.as_str(), end.data.abandoned), ("run.end", false));
    srv.stop().await;
}
