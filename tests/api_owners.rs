//! Ownership, black-box over a real server with three principals: alice and bob (ordinary) and
//! root (admin). Every route that names a run or a session answers someone else's exactly as it
//! answers one that does not exist (404), writes nothing, and the listings, the inbox, the audit
//! export, the all-runs stream and the WebSocket show nobody what is not theirs. An admin sees
//! and acts on everything. Children of a run belong to its owner; runs from logs written before
//! runs had owners belong to `local`.

use std::time::Duration;

use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Principal, child_run_id};
use chronicle_schemas::{Event, HitlMode, RunConfig, RunId, RunStatus, SessionId};
use futures_util::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::api_support::{
    ALICE, BOB, ROOT, Server, call, get, post, principals, server, server_on,
};
use crate::support::completed;

const WAIT: Duration = Duration::from_secs(20);
const QUERY: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

/// A run of `token`'s, started over the API in `session`.
async fn start(srv: &Server, token: &str, session: &str, hitl: &str) -> RunId {
    let body = json!({"query": QUERY, "session_id": session, "hitl": hitl});
    let (status, started) = post(srv, token, "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    serde_json::from_value(started["run_id"].clone()).unwrap()
}

/// Every route that names a run or a session, aimed at `run` / `session` (with one approval and
/// one checkpoint of the run): method, path, body.
fn routes(
    run: RunId,
    session: &str,
    approval: &str,
    checkpoint: &str,
) -> Vec<(Method, String, Option<Value>)> {
    let r = format!("/api/v1/agent/{run}");
    let get = |p: String| (Method::GET, p, None);
    let post = |p: String, b: Value| (Method::POST, p, Some(b));
    vec![
        get(format!("{r}/status")),
        get(format!("{r}/approvals")),
        get(format!("{r}/approvals/{approval}")),
        get(format!("{r}/todos")),
        get(format!("{r}/state")),
        get(format!("{r}/state?at=0")),
        get(format!("{r}/log")),
        get(format!("{r}/trace")),
        get(format!("{r}/checkpoints")),
        get(format!("{r}/events")),
        get(format!("/api/v1/audit/approvals?run_id={run}")),
        get(format!("/api/sessions/{session}")),
        get(format!("/api/sessions/{session}/checkpoints")),
        post(
            format!("{r}/approvals/{approval}/decision"),
            json!({"decision": "approve"}),
        ),
        post(format!("{r}/commands"), json!({"command": "/todo approve"})),
        post(format!("{r}/checkpoints/{checkpoint}/restore"), json!({})),
        post(format!("{r}/cancel"), json!({"reason": "mine now"})),
        post(
            format!("/api/sessions/{session}/resume"),
            json!({"approve": true}),
        ),
        post(
            "/chat".into(),
            json!({"thread_id": session, "message": "and now?"}),
        ),
        post(
            "/api/v1/agent/run".into(),
            json!({"query": "in your session", "session_id": session}),
        ),
    ]
}

/// The `error.message` with the run id taken out, to compare "not yours" with "not there".
fn shape(body: &Value, run: RunId) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .replace(&run.to_string(), "<run>")
}

struct World {
    srv: Server,
    /// alice's run, waiting for her approval of its first TODO, in session `s-alice`.
    a: RunId,
    approval: String,
    checkpoint: String,
    /// bob's finished run, in session `s-bob`.
    b: RunId,
}

async fn world() -> World {
    let srv = server(principals(), None).await;
    let a = start(&srv, ALICE, "s-alice", "every_todo").await;
    let s = srv.engine.wait_settled(a, WAIT).await.unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);
    let approval = s.approvals.pending().next().unwrap().approval_id.0.clone();
    let checkpoint = s.checkpoints.head.clone().unwrap().0;
    let b = start(&srv, BOB, "s-bob", "none").await;
    let s = srv.engine.wait_settled(b, WAIT).await.unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    World {
        srv,
        a,
        approval,
        checkpoint,
        b,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_run_is_not_there() {
    let w = world().await;
    let srv = &w.srv;
    let ghost = RunId(uuid::Uuid::now_v7());
    let mine = routes(w.a, "s-alice", &w.approval, &w.checkpoint);
    let nobodys = routes(ghost, "s-nobody", &w.approval, &w.checkpoint);
    let before = srv.offsets();
    for ((method, path, body), (_, ghost_path, ghost_body)) in mine.iter().zip(&nobodys) {
        let (status, refused) = call(srv, BOB, method.clone(), path, body.clone()).await;
        // A session that does not exist is where a new run may start; someone else's is
        // refused as unknown.
        if path == "/api/v1/agent/run" || path == "/chat" {
            assert_eq!(
                (status, refused["error"]["code"].as_str()),
                (StatusCode::NOT_FOUND, Some("not_found")),
                "{path}: {refused}"
            );
            assert_eq!(refused["error"]["message"], "session s-alice not found");
            continue;
        }
        let (ghost_status, absent) =
            call(srv, BOB, method.clone(), ghost_path, ghost_body.clone()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {refused}");
        assert_eq!(refused["error"]["code"], "not_found", "{method} {path}");
        assert_eq!(
            ghost_status,
            StatusCode::NOT_FOUND,
            "{method} {ghost_path}: {absent}"
        );
        assert_eq!(
            shape(&refused, w.a).replace("s-alice", "<session>"),
            shape(&absent, ghost).replace("s-nobody", "<session>"),
            "{method} {path}: someone else's answers like nothing"
        );
    }
    assert_eq!(srv.offsets(), before, "a refused request wrote something");
    // Still waiting for alice, undecided.
    let s = srv.engine.state(w.a, None).unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);

    // alice cannot reach bob's either.
    let (status, _) = get(srv, ALICE, &format!("/api/v1/agent/{}/status", w.b)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Naming another user is an admin's right only.
    let (status, body) = post(
        srv,
        BOB,
        "/api/v1/agent/run",
        json!({"query": "x", "user_id": "alice"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("unprocessable_entity")
        ),
        "{body}"
    );
    assert_eq!(srv.offsets(), before);
    srv.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_and_an_admin_reach_everything() {
    let w = world().await;
    let srv = &w.srv;
    for token in [ALICE, ROOT] {
        for (method, path, body) in routes(w.a, "s-alice", &w.approval, &w.checkpoint) {
            if method != Method::GET {
                continue;
            }
            let (status, body) = call(srv, token, method, &path, body).await;
            assert_eq!(status, StatusCode::OK, "{token} GET {path}: {body}");
        }
    }
    // root decides alice's approval and the log says so; alice's run goes on.
    let path = format!("/api/v1/agent/{}/approvals/{}/decision", w.a, w.approval);
    let (status, body) = post(srv, ROOT, &path, json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["approval"]["decided_by"], "root");
    // alice answers her own next approval in her own session.
    srv.engine
        .wait_until(w.a, WAIT, |s| {
            s.approvals.pending().count() == 1
                && s.supervisor.run_status == RunStatus::WaitingForApproval
        })
        .await
        .unwrap();
    let (status, body) = post(
        srv,
        ALICE,
        "/api/sessions/s-alice/resume",
        json!({"approve": true}),
    )
    .await;
    assert!(
        status == StatusCode::OK
            || status == StatusCode::ACCEPTED
            || status == StatusCode::CONFLICT,
        "{status} {body}"
    );
    let (status, body) = post(
        srv,
        ALICE,
        &format!("/api/v1/agent/{}/cancel", w.a),
        json!({}),
    )
    .await;
    assert!(
        status == StatusCode::OK || status == StatusCode::CONFLICT,
        "{status} {body}"
    );

    // An admin may start a run for another user; it is the admin's run, working for alice.
    let (status, body) = post(
        srv,
        ROOT,
        "/api/v1/agent/run",
        json!({"query": QUERY, "user_id": "alice", "hitl": "none"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let r: RunId = serde_json::from_value(body["run_id"].clone()).unwrap();
    let s = srv.engine.wait_settled(r, WAIT).await.unwrap();
    assert_eq!(
        (s.supervisor.owner.as_str(), s.supervisor.user_id.as_deref()),
        ("root", Some("alice"))
    );
    // An ordinary principal's runs work for themselves.
    assert_eq!(
        srv.engine
            .state(w.b, None)
            .unwrap()
            .supervisor
            .user_id
            .as_deref(),
        Some("bob")
    );
    let (status, _) = get(srv, ALICE, &format!("/api/v1/agent/{r}/status")).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "root's run is root's, not alice's"
    );
    srv.engine.shutdown().await;
}

/// The run ids a listing answer names.
fn run_ids(v: &Value, list: &str, key: &str) -> Vec<RunId> {
    v[list]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|r| serde_json::from_value(r[key].clone()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_show_each_their_own() {
    let w = world().await;
    let srv = &w.srv;
    // A decided approval of alice's, so the audit export has a row of hers.
    let path = format!("/api/v1/agent/{}/approvals/{}/decision", w.a, w.approval);
    let (status, _) = post(
        srv,
        ALICE,
        &path,
        json!({"decision": "approve", "comment": "go"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    srv.engine
        .wait_until(w.a, WAIT, |s| s.approvals.pending().count() == 1)
        .await
        .unwrap();

    let runs = |token| async move { get(srv, token, "/api/v1/runs").await.1 };
    assert_eq!(run_ids(&runs(ALICE).await, "runs", "run_id"), [w.a]);
    assert_eq!(run_ids(&runs(BOB).await, "runs", "run_id"), [w.b]);
    let all = runs(ROOT).await;
    assert_eq!(run_ids(&all, "runs", "run_id"), [w.a, w.b]);
    assert_eq!(
        (
            all["runs"][0]["owner"].as_str(),
            all["runs"][1]["owner"].as_str()
        ),
        (Some("alice"), Some("bob"))
    );
    let (_, by_session) = get(srv, BOB, "/api/v1/runs?session_id=s-alice").await;
    assert_eq!(run_ids(&by_session, "runs", "run_id"), []);
    // A page cursor of someone else's run is not among the caller's runs: as an unknown run, 404.
    let (status, _) = get(srv, BOB, &format!("/api/v1/runs?after={}", w.a)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let inbox = |token, q: &'static str| async move {
        get(srv, token, &format!("/api/v1/approvals{q}")).await.1
    };
    assert_eq!(
        run_ids(&inbox(ALICE, "").await, "approvals", "run_id"),
        [w.a]
    );
    assert_eq!(run_ids(&inbox(BOB, "").await, "approvals", "run_id"), []);
    assert_eq!(
        run_ids(&inbox(ROOT, "").await, "approvals", "run_id"),
        [w.a]
    );
    assert_eq!(
        run_ids(&inbox(BOB, "?status=approved").await, "approvals", "run_id"),
        []
    );
    assert_eq!(
        run_ids(
            &inbox(ALICE, "?status=approved").await,
            "approvals",
            "run_id"
        ),
        [w.a]
    );

    let export = |token| async move {
        let res = srv
            .http
            .get(srv.url("/api/v1/audit/approvals"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.text()
            .await
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["run_id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(export(ALICE).await, [json!(w.a)]);
    assert_eq!(export(BOB).await, Vec::<Value>::new());
    assert_eq!(export(ROOT).await, [json!(w.a)]);
    srv.engine.shutdown().await;
}

/// The run ids of the all-runs stream from offset 0, until an event of `until` arrives.
async fn stream_runs(srv: &Server, token: &str, until: RunId) -> Vec<RunId> {
    let mut res = srv
        .http
        .get(srv.url("/api/v1/events?from=0"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (mut seen, mut buf) = (Vec::new(), String::new());
    loop {
        let chunk = tokio::time::timeout(WAIT, res.chunk())
            .await
            .expect("an event")
            .unwrap()
            .expect("the stream goes on");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let msg: String = buf.drain(..end + 2).collect();
            let Some(data) = msg.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            let run: RunId = serde_json::from_value(
                serde_json::from_str::<Value>(data.trim()).unwrap()["run_id"].clone(),
            )
            .unwrap();
            seen.push(run);
            if run == until {
                return seen;
            }
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next JSON frame of a socket.
async fn next(ws: &mut Socket) -> Value {
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame")
        {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
            Some(Ok(_)) => {}
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_all_runs_stream_and_the_websocket_show_each_their_own() {
    let w = world().await;
    let srv = &w.srv;
    // bob's stream: his run only (alice's came first in the log).
    let bobs = stream_runs(srv, BOB, w.b).await;
    assert!(bobs.iter().all(|r| *r == w.b), "{bobs:?}");
    // alice's stream, up to a run she starts after bob's: never bob's.
    let later = start(srv, ALICE, "s-alice-2", "none").await;
    // Ended before the socket's part below, which counts what was written meanwhile.
    srv.engine.wait_settled(later, WAIT).await.unwrap();
    let alices = stream_runs(srv, ALICE, later).await;
    assert!(
        alices.contains(&w.a) && !alices.contains(&w.b),
        "{alices:?}"
    );
    let roots = stream_runs(srv, ROOT, w.b).await;
    assert!(roots.contains(&w.a) && roots.contains(&w.b));

    // The WebSocket: bob cannot subscribe to alice's run nor talk in her session.
    let url = format!("{}/ws", srv.base.replacen("http://", "ws://", 1));
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {BOB}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(next(&mut ws).await["principal"], "bob");
    let before = srv.offsets();
    for frame in [
        json!({"type": "subscribe", "run_id": w.a}),
        json!({"type": "message", "content": "hi", "thread_id": "s-alice"}),
    ] {
        ws.send(Message::text(frame.to_string())).await.unwrap();
        let reply = next(&mut ws).await;
        assert_eq!(
            (reply["type"].as_str(), reply["error"]["code"].as_str()),
            (Some("error"), Some("not_found")),
            "{frame}: {reply}"
        );
    }
    // Nothing on the socket became current, and the session it named is alice's: a command
    // finds no run of bob's to act on.
    ws.send(Message::text(
        json!({"type": "command", "command": "/todo approve"}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(next(&mut ws).await["error"]["code"], "not_found");
    assert_eq!(srv.offsets(), before);
    srv.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_run_belongs_to_its_parents_owner() {
    let srv = server(
        principals(),
        Some(crate::tool_agents::registry(None, false)),
    )
    .await;
    let calls = json!([{"tool": "task", "args": {"description": "look it up", "subagent_type": "sub_worker"}}]);
    let body = json!({"query": "delegate", "hitl": "none", "plan": [{"agent_name": "tool_runner", "input_mapping": {"calls": calls}, "timeout": 30}]});
    let (status, started) = post(&srv, ALICE, "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run: RunId = serde_json::from_value(started["run_id"].clone()).unwrap();
    let s = completed(&srv.engine, run).await;
    let child = child_run_id(run, &s.supervisor.tool_calls[0].tool_call_id);
    let cs = srv.engine.state(child, None).unwrap().supervisor;
    assert_eq!(
        (cs.owner.as_str(), cs.user_id.as_deref()),
        ("alice", Some("alice"))
    );
    let path = format!("/api/v1/agent/{child}/status");
    assert_eq!(get(&srv, ALICE, &path).await.0, StatusCode::OK);
    assert_eq!(get(&srv, BOB, &path).await.0, StatusCode::NOT_FOUND);
    let (_, list) = get(&srv, ALICE, "/api/v1/runs").await;
    assert_eq!(run_ids(&list, "runs", "run_id"), [run, child]);
    srv.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_from_before_owners_belong_to_local() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    // A run as an older version wrote it: no owner recorded.
    let old = RunId(uuid::Uuid::now_v7());
    store
        .append(
            old,
            0,
            vec![Event::RunStarted {
                session_id: SessionId("s-old".into()),
                user_id: Some("42".into()),
                request_id: "req_old".into(),
                query: QUERY.into(),
                config: RunConfig {
                    hitl: HitlMode::None,
                    ..RunConfig::default()
                },
                parent: None,
                owner: None,
                traceparent: None,
            }],
        )
        .await
        .unwrap();
    let srv = server_on(
        dir,
        store,
        principals(),
        chronicle_realestate::settings(),
        Default::default(),
    )
    .await;
    let s = srv.engine.wait_settled(old, WAIT).await.unwrap();
    assert_eq!(s.supervisor.owner, "local");
    assert_eq!(srv.engine.owner(old).unwrap().as_deref(), Some("local"));
    let path = format!("/api/v1/agent/{old}/status");
    assert_eq!(get(&srv, ALICE, &path).await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&srv, ROOT, &path).await.0, StatusCode::OK);
    // A server without tokens is `local`'s: the old run is its own.
    assert!(Principal::local().may_access("local"));
    assert!(srv.engine.authorize(&Principal::local(), old).is_ok());
    assert!(srv.engine.authorize(&Principal::user("local"), old).is_ok());
    assert!(
        srv.engine
            .authorize(&Principal::user("alice"), old)
            .is_err()
    );
    srv.engine.shutdown().await;
}

/// Two principals start the first run of one session at the same moment (released together by
/// a barrier), over `/api/v1/agent/run` and over `POST /chat`, many times: exactly one gets its
/// run, the other 404 (as for someone else's session), and the session shows its owner only
/// their own run, on every read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_first_runs_of_one_session_at_once_one_wins() {
    const TRIES: usize = 40;
    let srv = std::sync::Arc::new(server(principals(), None).await);
    for i in 0..TRIES {
        let session = format!("race-{i}");
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let racers = [ALICE, BOB].map(|token| {
            let (srv, barrier, session) = (srv.clone(), barrier.clone(), session.clone());
            tokio::spawn(async move {
                let (path, body) = match i % 2 {
                    0 => (
                        "/api/v1/agent/run",
                        json!({"query": QUERY, "session_id": session, "hitl": "every_todo"}),
                    ),
                    _ => (
                        "/chat",
                        json!({"message": QUERY, "thread_id": session, "hitl": "every_todo"}),
                    ),
                };
                barrier.wait().await;
                post(&srv, token, path, body).await
            })
        });
        let mut won = Vec::new();
        for (token, racer) in [ALICE, BOB].into_iter().zip(racers) {
            let (status, body) = racer.await.unwrap();
            match status {
                StatusCode::ACCEPTED | StatusCode::OK | StatusCode::CONFLICT
                    if body.get("run_id").is_some() || body.get("turn").is_some() =>
                {
                    won.push(token)
                }
                StatusCode::NOT_FOUND => {}
                other => panic!("{session}: {other} {body}"),
            }
        }
        assert_eq!(won.len(), 1, "{session}: exactly one first run: {won:?}");
        let (winner, loser) = match won[0] {
            ALICE => (ALICE, BOB),
            _ => (BOB, ALICE),
        };
        let (status, view) = get(&srv, winner, &format!("/api/sessions/{session}")).await;
        assert_eq!(status, StatusCode::OK, "{view}");
        let owner = if winner == ALICE { "alice" } else { "bob" };
        assert_eq!(view["state"]["owner"], owner, "{session}: {view}");
        assert_eq!(view["turns"].as_array().unwrap().len(), 1, "{view}");
        let (status, _) = get(&srv, loser, &format!("/api/sessions/{session}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{session}");
        let (status, runs) = get(&srv, winner, &format!("/api/v1/runs?session_id={session}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    }
}

/// A session holding another principal's run (as a race before claims could leave it, or an
/// admin's run in a user's session): its owner's reads of the session never show that run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_shows_its_reader_only_the_runs_they_may_read() {
    let srv = server(principals(), None).await;
    let mine = start(&srv, ALICE, "shared-s", "none").await;
    completed(&srv.engine, mine).await;
    // An admin may start a run in anyone's session.
    let admins = start(&srv, ROOT, "shared-s", "none").await;
    completed(&srv.engine, admins).await;
    let (status, view) = get(&srv, ALICE, "/api/sessions/shared-s").await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["run_id"], json!(mine), "{view}");
    let turns: Vec<&Value> = view["turns"].as_array().unwrap().iter().collect();
    assert_eq!(turns.len(), 1, "{view}");
    let (_, detail) = get(&srv, ALICE, "/api/v1/sessions/shared-s").await;
    assert_eq!(detail["turns"].as_array().unwrap().len(), 1, "{detail}");
    // The admin sees both.
    let (_, detail) = get(&srv, ROOT, "/api/v1/sessions/shared-s").await;
    assert_eq!(detail["turns"].as_array().unwrap().len(), 2, "{detail}");
}

/// One principal holding its most stream tickets gets 503 for the next, and every other
/// principal still gets theirs (the global cap is not one principal's to fill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_cannot_take_everyones_stream_tickets() {
    let srv = server(principals(), None).await;
    let ticket = |token: &'static str| {
        let srv = &srv;
        async move {
            let res = srv
                .http
                .post(srv.url("/api/v1/stream-tickets"))
                .bearer_auth(token)
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let retry = res.headers().get("retry-after").cloned();
            (res.status(), retry, res.json::<Value>().await.unwrap())
        }
    };
    for _ in 0..chronicle_api::TICKETS_PER_PRINCIPAL_MAX {
        assert_eq!(ticket(BOB).await.0, StatusCode::CREATED);
    }
    let (status, retry, body) = ticket(BOB).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "too_many_tickets", "{body}");
    assert!(retry.is_some());
    let (status, _, body) = ticket(ALICE).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
