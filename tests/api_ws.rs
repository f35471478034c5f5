//! The WebSocket, black-box with a real client: the deposit-increase question under approval of
//! every TODO as one conversation over one socket (`message`, `hitl_request`, `human_response`,
//! `final`), bad frames answered with `error` on a socket that keeps working, decisions named after
//! the authenticated principal, `subscribe` from a seq, feedback as an edit, and the socket closing
//! at shutdown.

use std::time::Duration;

use chronicle_api::Tokens;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

use crate::api_support::{Server, server};

/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(20);

const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn connect(srv: &Server, query: &str) -> Socket {
    let url = format!("{}/ws{query}", srv.base.replacen("http://", "ws://", 1));
    let (ws, _) = tokio::time::timeout(GUARD, connect_async(url))
        .await
        .expect("connect")
        .unwrap();
    ws
}

async fn send(ws: &mut Socket, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

/// The next JSON frame (pings and pongs skipped); `None` when the socket closed.
async fn frame(ws: &mut Socket) -> Option<Value> {
    loop {
        let msg = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("a frame or the end of the socket");
        match msg {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
            Some(Ok(other)) => panic!("unexpected frame {other:?}"),
        }
    }
}

/// Reads frames until one of type `ty` (inclusive); returns them all.
async fn until(ws: &mut Socket, ty: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let f = frame(ws)
            .await
            .unwrap_or_else(|| panic!("socket closed before {ty}: {seen:?}"));
        let done = f["type"] == ty;
        seen.push(f);
        if done {
            return seen;
        }
    }
}

fn events(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| &f["data"])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposit_question_over_one_socket() {
    let srv = server(Tokens::single("alice", "tok-alice-1234567").unwrap(), None).await;

    // The upgrade is authenticated like any request: a token never rides in the URL; a client
    // that cannot set the header (a browser) uses a one-time stream ticket.
    let refused = |query: String| {
        let url = format!("{}/ws{query}", srv.base.replacen("http://", "ws://", 1));
        async move {
            match connect_async(url).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
                other => panic!(
                    "expected a refusal, got {:?}",
                    other.map(|(_, r)| r.status())
                ),
            }
        }
    };
    assert_eq!(refused(String::new()).await, 401);
    assert_eq!(refused("?token=tok-alice-1234567".into()).await, 401);
    let ticket = srv
        .client_as("tok-alice-1234567")
        .stream_ticket()
        .await
        .unwrap();
    assert_eq!(ticket.expires_in_ms, 60_000);
    let mut ws = connect(&srv, &format!("?ticket={}&thread_id=t-ws", ticket.ticket)).await;
    // Used up: the same ticket opens nothing more.
    assert_eq!(refused(format!("?ticket={}", ticket.ticket)).await, 401);
    let hello = frame(&mut ws).await.unwrap();
    assert_eq!(
        hello,
        json!({"type": "connected", "session_id": "t-ws", "principal": "alice"})
    );

    // Bad frames get an `error`, and the socket keeps working.
    ws.send(Message::text("{not json")).await.unwrap();
    let e = frame(&mut ws).await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["error"]["code"].as_str()),
        (Some("error"), Some("bad_request")),
        "{e}"
    );
    send(&mut ws, json!({"type": "dance"})).await;
    assert_eq!(
        frame(&mut ws).await.unwrap()["error"]["code"],
        "bad_request"
    );
    send(&mut ws, json!({"type": "message"})).await;
    assert_eq!(
        frame(&mut ws).await.unwrap()["error"]["code"],
        "unprocessable_entity"
    );
    send(&mut ws, json!({"type": "human_response", "approve": true})).await;
    assert_eq!(frame(&mut ws).await.unwrap()["error"]["code"], "conflict");
    ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert_eq!(
        frame(&mut ws).await.unwrap()["error"]["code"],
        "bad_request"
    );

    send(
        &mut ws,
        json!({"type": "message", "content": SCENARIO_1, "hitl": "every_todo"}),
    )
    .await;
    let mut frames = until(&mut ws, "hitl_request").await;
    let ask = frames.last().unwrap().clone();
    assert_eq!(ask["approval"]["subject"]["todo"]["todo_id"], "todo_001");
    assert_eq!(ask["approval"]["status"], "pending");
    let run = ask["run_id"].as_str().unwrap().to_owned();
    assert_eq!(ask["approval"]["run_id"], json!(run));
    let msg = ask["message"].as_str().unwrap();
    assert!(
        msg.starts_with("todo_001: search_team을(를) 실행할까요?") && !msg.contains("/todo"),
        "{msg}"
    );
    let started = events(&frames)[0];
    assert_eq!(
        (
            started["kind"].as_str(),
            started["content"]["session_id"].as_str()
        ),
        (Some("RunStarted"), Some("t-ws"))
    );

    send(&mut ws, json!({"type": "command", "command": "/todos"})).await;
    let more = until(&mut ws, "command_result").await;
    let result = &more.last().unwrap()["result"];
    assert_eq!(result["summary"]["total"], 2, "{result}");
    assert_eq!(result["todos"].as_array().unwrap().len(), 2);
    assert_eq!(result["current_todo_id"], "todo_001");
    frames.extend(more);

    // An unknown command is an error with help, and the socket carries on.
    send(
        &mut ws,
        json!({"type": "command", "command": "/frobnicate"}),
    )
    .await;
    let more = until(&mut ws, "error").await;
    let e = more.last().unwrap();
    assert_eq!(e["error"]["code"], "bad_request");
    assert!(!e["help"].is_null(), "{e}");
    frames.extend(more);

    send(&mut ws, json!({"type": "human_response", "approve": true})).await;
    let more = until(&mut ws, "hitl_request").await;
    assert_eq!(
        more.last().unwrap()["approval"]["subject"]["todo"]["todo_id"],
        "todo_002"
    );
    frames.extend(more);

    send(&mut ws, json!({"type": "human_response", "approve": true})).await;
    let more = until(&mut ws, "final").await;
    let fin = more.last().unwrap().clone();
    frames.extend(more);
    assert_eq!(fin["run_id"], json!(run));
    let answer = fin["content"]["answer"].as_str().unwrap();
    assert!(answer.contains("233.3%"), "{answer}");

    // Every decision names the authenticated principal.
    let evs = events(&frames);
    let decided: Vec<&str> = evs
        .iter()
        .filter(|e| e["kind"] == "ApprovalDecided")
        .map(|e| e["content"]["decided_by"].as_str().unwrap())
        .collect();
    assert_eq!(decided, ["alice", "alice"]);
    // The events so far are the run's, each once and in order.
    for (i, e) in evs.iter().enumerate() {
        assert_eq!(
            (e["run_id"].as_str(), e["seq"].as_u64()),
            (Some(run.as_str()), Some(i as u64))
        );
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_from_a_seq_feedback_as_edit_and_close_at_shutdown() {
    let srv = server(Tokens::none(), None).await;
    let req = chronicle_wire::RunRequest {
        hitl: Some(chronicle_schemas::HitlMode::EveryTodo),
        ..chronicle_wire::RunRequest::new("강남구 아파트 시세 조회")
    };
    let run = srv.client.start_run(&req).await.unwrap().run_id.to_string();

    let mut ws = connect(&srv, "").await;
    let hello = frame(&mut ws).await.unwrap();
    assert_eq!(hello["principal"], "local");
    assert!(hello["session_id"].as_str().is_some_and(|s| !s.is_empty()));

    send(&mut ws, json!({"type": "subscribe", "run_id": "nope"})).await;
    assert_eq!(
        frame(&mut ws).await.unwrap()["error"]["code"],
        "bad_request"
    );
    let unknown = uuid::Uuid::now_v7().to_string();
    send(&mut ws, json!({"type": "subscribe", "run_id": unknown})).await;
    assert_eq!(frame(&mut ws).await.unwrap()["error"]["code"], "not_found");

    send(
        &mut ws,
        json!({"type": "subscribe", "run_id": run, "from_seq": 0}),
    )
    .await;
    let frames = until(&mut ws, "hitl_request").await;
    let ask = frames.last().unwrap();
    let requested = ask["approval"]["request_args"].clone();
    let approval = ask["approval"]["id"].as_str().unwrap().to_owned();

    // Text that is not a command is feedback: an edit of the requested args.
    send(
        &mut ws,
        json!({"type": "human_response", "response": "최신 시세 위주로"}),
    )
    .await;
    let more = until(&mut ws, "final").await;
    let decided = events(&more)
        .into_iter()
        .find(|e| e["kind"] == "ApprovalDecided")
        .unwrap()
        .clone();
    let mut expected = requested.as_object().cloned().unwrap_or_default();
    expected.insert("feedback".into(), json!("최신 시세 위주로"));
    assert_eq!(decided["content"]["approval_id"], json!(approval));
    assert_eq!(decided["content"]["decision"], "edit");
    assert_eq!(
        decided["content"]["effective_args"],
        Value::Object(expected)
    );

    // Let the run finish streaming, so what follows answers only what is sent next.
    while !events(&until(&mut ws, "event").await)
        .iter()
        .any(|e| e["kind"] == "RunCompleted")
    {}

    // Nothing is pending any more.
    send(&mut ws, json!({"type": "human_response", "approve": true})).await;
    assert_eq!(
        until(&mut ws, "error").await.last().unwrap()["error"]["code"],
        "conflict"
    );

    // `subscribe` from a seq replays from exactly there.
    send(
        &mut ws,
        json!({"type": "subscribe", "run_id": run, "from_seq": 3}),
    )
    .await;
    let f = until(&mut ws, "event").await;
    let first = &f.last().unwrap()["data"];
    assert_eq!(
        (first["run_id"].as_str(), first["seq"].as_u64()),
        (Some(run.as_str()), Some(3))
    );

    // Shutdown closes the socket.
    srv.stop().await;
    let mut closed = false;
    for _ in 0..10_000 {
        if frame(&mut ws).await.is_none() {
            closed = true;
            break;
        }
    }
    assert!(closed);
}

/// A socket of `token`'s principal on the session `thread`, past its `connected` frame.
async fn connect_as(srv: &Server, token: &str, thread: &str) -> Socket {
    let ticket = srv.client_as(token).stream_ticket().await.unwrap();
    let mut ws = connect(
        srv,
        &format!("?ticket={}&thread_id={thread}", ticket.ticket),
    )
    .await;
    let hello = frame(&mut ws).await.unwrap();
    assert_eq!(hello["type"], "connected", "{hello}");
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_to_a_waiting_session_asks_again_and_answers_without_subscribing() {
    let tokens = Tokens::parse("alice tok-alice-123456\nbob tok-bob-123456789").unwrap();
    let srv = server(tokens, None).await;
    let mut ws = connect_as(&srv, "tok-alice-123456", "t-back").await;
    send(
        &mut ws,
        json!({"type": "message", "content": SCENARIO_1, "hitl": "every_todo"}),
    )
    .await;
    let asked = until(&mut ws, "hitl_request").await.pop().unwrap();
    ws.close(None).await.unwrap();
    drop(ws);

    // Back on the session: the pending request comes again, in the same shape, right after
    // `connected`.
    let mut ws = connect_as(&srv, "tok-alice-123456", "t-back").await;
    let again = frame(&mut ws).await.unwrap();
    assert_eq!(again, asked);

    // Another principal naming the session sees nothing of it and cannot answer it.
    let mut bob = connect_as(&srv, "tok-bob-123456789", "t-back").await;
    send(&mut bob, json!({"type": "human_response", "approve": true})).await;
    let refused = frame(&mut bob).await.unwrap();
    assert_eq!(refused["type"], "error", "no hitl_request first: {refused}");
    assert_eq!(refused["error"]["code"], "not_found", "{refused}");
    send(
        &mut bob,
        json!({"type": "command", "command": "/todo approve"}),
    )
    .await;
    assert_eq!(frame(&mut bob).await.unwrap()["error"]["code"], "not_found");
    let run: chronicle_schemas::RunId = asked["run_id"].as_str().unwrap().parse().unwrap();
    let s = srv.engine.state(run, None).unwrap();
    assert_eq!(s.approvals.pending().count(), 1, "bob decided nothing");

    // Alice answers on the new socket without subscribing: the run goes on, and she follows it.
    send(&mut ws, json!({"type": "human_response", "approve": true})).await;
    let next = until(&mut ws, "hitl_request").await.pop().unwrap();
    assert_eq!(next["approval"]["subject"]["todo"]["todo_id"], "todo_002");
    send(&mut ws, json!({"type": "human_response", "approve": true})).await;
    let fin = until(&mut ws, "final").await.pop().unwrap();
    assert_eq!(fin["run_id"], asked["run_id"]);
    assert!(
        fin["content"]["answer"]
            .as_str()
            .unwrap()
            .contains("233.3%"),
        "{fin}"
    );

    // A "no" on the socket to a run started with `on_reject: end_turn` ends the turn: the
    // `final` frame is the rejection.
    send(
        &mut ws,
        json!({"type": "message", "content": SCENARIO_1, "hitl": "every_todo", "on_reject": "end_turn"}),
    )
    .await;
    until(&mut ws, "hitl_request").await;
    send(
        &mut ws,
        json!({"type": "human_response", "decision": "reject", "comment": "no thanks"}),
    )
    .await;
    let fin = until(&mut ws, "final").await.pop().unwrap();
    assert_eq!(fin["content"]["type"], "rejected", "{fin}");
    assert_eq!(fin["content"]["rejected"]["decided_by"], "alice", "{fin}");
    assert_eq!(fin["content"]["rejected"]["comment"], "no thanks", "{fin}");
    srv.stop().await;
}

/// A subscription to a run restored after it ended: the abandoned branch's events come marked
/// `abandoned`, its old answer sends no `final` and its old request no `hitl_request`; the
/// `run.restored` follows, and the approval asked again is a `hitl_request`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_after_a_restore_marks_the_abandoned_branch() {
    let srv = server(Tokens::none(), None).await;
    let req = chronicle_wire::RunRequest {
        hitl: Some(chronicle_schemas::HitlMode::EveryTodo),
        ..chronicle_wire::RunRequest::new("강남구 아파트 시세 조회")
    };
    let run = srv.client.start_run(&req).await.unwrap().run_id;
    loop {
        let s = srv
            .engine
            .wait_until(run, GUARD, |s| {
                s.approvals.pending().next().is_some() || s.supervisor.run_status.is_terminal()
            })
            .await
            .unwrap();
        let Some(a) = s.approvals.pending().next() else {
            break;
        };
        let yes = chronicle_wire::DecisionRequest::approve();
        srv.client.decide(run, &a.approval_id, &yes).await.unwrap();
    }
    let cps = srv.client.checkpoints(run).await.unwrap();
    let cp = cps
        .checkpoints
        .iter()
        .find(|c| c.node == "approval")
        .unwrap();
    srv.client.restore(run, &cp.checkpoint_id).await.unwrap();

    let mut ws = connect(&srv, "").await;
    frame(&mut ws).await.unwrap();
    send(
        &mut ws,
        json!({"type": "subscribe", "run_id": run, "from_seq": 0}),
    )
    .await;
    let mut frames = until(&mut ws, "event").await;
    loop {
        let f = frame(&mut ws).await.unwrap();
        let again = f["type"] == "hitl_request";
        frames.push(f);
        if again {
            break;
        }
    }
    let restored = frames
        .iter()
        .position(|f| f["data"]["kind"] == "RunRestored")
        .expect("run.restored");
    let to_seq = frames[restored]["data"]["content"]["to_seq"]
        .as_u64()
        .unwrap();
    for f in events(&frames) {
        let seq = f["seq"].as_u64().unwrap();
        let left = seq > to_seq && seq < frames[restored]["data"]["seq"].as_u64().unwrap();
        assert_eq!(f["abandoned"] == json!(true), left, "{f}");
    }
    assert!(
        !frames.iter().any(|f| f["type"] == "final"),
        "the abandoned answer is no final: {frames:?}"
    );
    // The one hitl_request is the new one, after the restore.
    let asks: Vec<usize> = (0..frames.len())
        .filter(|i| frames[*i]["type"] == "hitl_request")
        .collect();
    assert_eq!(asks.len(), 1, "{frames:?}");
    assert!(asks[0] > restored);
    srv.stop().await;
}
