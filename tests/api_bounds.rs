//! The server's bounds, black-box over real sockets: a request head that never comes (or comes a
//! byte at a time), a body that stalls and an idle keep-alive connection are all closed after
//! their timeouts; a connection over the cap and a stream over a cap are answered 503 with
//! `Retry-After`, and a closed one frees its slot; a WebSocket message over the limit gets an
//! `error` frame and a close with 1009.
//!
//! Timeouts are configured small here; each is asserted to happen within a generous bound, never
//! timed.

use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::api_support::{Server, server_with};

/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(20);

/// `GET /healthz`, with the `Host` the server answers to.
fn healthz(srv: &Server) -> Vec<u8> {
    format!("GET /healthz HTTP/1.1\r\nhost: {}\r\n\r\n", addr(srv)).into_bytes()
}

fn addr(srv: &Server) -> String {
    srv.base.trim_start_matches("http://").to_owned()
}

async fn connect(srv: &Server) -> TcpStream {
    TcpStream::connect(addr(srv)).await.unwrap()
}

/// Reads until the server closes the connection (EOF or a reset); what it sent before.
async fn until_closed(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(GUARD, tcp.read(&mut buf))
            .await
            .expect("the server closes the connection");
        match read {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one response whose head ends the bytes read so far and whose body has a
/// `content-length`; returns the head and the body.
async fn response(tcp: &mut TcpStream) -> (String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(GUARD, tcp.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        assert!(n > 0, "closed before a whole response: {got:?}");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            .map_or(0, |v| v.trim().parse().unwrap());
        if body.len() >= length {
            return (head.to_owned(), body.to_owned());
        }
    }
}

/// A server without tokens whose limits `f` sets.
async fn bounded(f: impl FnOnce(&mut ApiConfig)) -> Server {
    let mut config = ApiConfig::default();
    f(&mut config);
    server_with(Tokens::none(), None, config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_socket_and_a_trickled_head_are_closed_after_the_header_timeout() {
    let srv = bounded(|c| c.header_read_timeout_ms = 1500).await;

    let mut silent = connect(&srv).await;
    // One byte a second: the head would take far longer than the timeout.
    let mut trickle = connect(&srv).await;
    let (mut read_half, mut write_half) = trickle.split();
    let writer = async {
        for b in &healthz(&srv) {
            if write_half.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!("the whole head went through");
    };
    let reader = async {
        let mut buf = [0u8; 64];
        tokio::time::timeout(GUARD, read_half.read(&mut buf))
            .await
            .expect("the trickle is cut")
            .map_or(0, |n| n)
    };
    let (cut, ()) = tokio::join!(reader, async {
        tokio::select! { () = writer => {}, () = tokio::time::sleep(GUARD) => {} }
    });
    assert_eq!(cut, 0, "no answer, just the close");
    assert_eq!(until_closed(&mut silent).await, "");

    // A connection that sends its head in time is served.
    let mut ok = connect(&srv).await;
    ok.write_all(&healthz(&srv)).await.unwrap();
    assert!(response(&mut ok).await.0.starts_with("HTTP/1.1 200"));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let srv = bounded(|c| c.idle_timeout_ms = 300).await;
    let mut tcp = connect(&srv).await;
    // Two requests on one connection: it is kept alive between them...
    for _ in 0..2 {
        tcp.write_all(&healthz(&srv)).await.unwrap();
        assert!(response(&mut tcp).await.0.starts_with("HTTP/1.1 200"));
    }
    // ...and closed once it has waited longer than the idle timeout for a third.
    assert_eq!(until_closed(&mut tcp).await, "");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_and_the_connection_closed() {
    let srv = bounded(|c| c.body_read_timeout_ms = 300).await;
    let offsets = srv.offsets();
    let mut tcp = connect(&srv).await;
    let head = format!(
        "POST /api/v1/agent/run HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n",
        addr(&srv)
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(b"{\"query\": ").await.unwrap();
    let answer = until_closed(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert_eq!(srv.offsets(), offsets, "nothing written");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_cap_is_answered_503_and_a_closed_one_frees_its_slot() {
    let srv = bounded(|c| c.connections_max = 2).await;
    let first = connect(&srv).await;
    let mut second = connect(&srv).await;
    second.write_all(&healthz(&srv)).await.unwrap();
    assert!(response(&mut second).await.0.starts_with("HTTP/1.1 200"));

    let mut third = connect(&srv).await;
    third.write_all(&healthz(&srv)).await.unwrap();
    let answer = until_closed(&mut third).await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("\r\nretry-after: "), "{head}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["error"]["code"], "too_many_connections");

    // Closing one frees its slot (once the server has seen the close).
    drop(first);
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let mut next = connect(&srv).await;
        next.write_all(&healthz(&srv)).await.unwrap();
        let (head, _) = response(&mut next).await;
        if head.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no slot freed: {head}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    srv.stop().await;
}

/// Asserts a refusal for a full stream cap: 503, `Retry-After`, the JSON error.
fn too_many_streams(status: StatusCode, headers: &reqwest::header::HeaderMap, body: &[u8]) {
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    let body: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
}

async fn open_sse(srv: &Server, token: &str) -> reqwest::Response {
    srv.http
        .get(srv.url("/api/v1/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_over_a_cap_are_answered_503_and_a_closed_one_frees_its_slot() {
    let tokens =
        Tokens::parse("alice tok-alice-0123456\nbob tok-bob-012345678\ncarol tok-carol-0123456\n")
            .unwrap();
    let config = ApiConfig {
        streams_max: 3,
        streams_per_principal_max: 2,
        ..ApiConfig::default()
    };
    let srv = server_with(tokens, None, config).await;

    // Per principal: alice's third stream is refused, bob's first is not.
    let a1 = open_sse(&srv, "tok-alice-0123456").await;
    let a2 = open_sse(&srv, "tok-alice-0123456").await;
    assert_eq!((a1.status(), a2.status()), (StatusCode::OK, StatusCode::OK));
    let refused = open_sse(&srv, "tok-alice-0123456").await;
    let (status, headers) = (refused.status(), refused.headers().clone());
    too_many_streams(status, &headers, &refused.bytes().await.unwrap());
    let b1 = open_sse(&srv, "tok-bob-012345678").await;
    assert_eq!(b1.status(), StatusCode::OK);

    // In all: three are open, so carol's first is refused, a run's stream and a WebSocket too.
    let refused = open_sse(&srv, "tok-carol-0123456").await;
    let (status, headers) = (refused.status(), refused.headers().clone());
    too_many_streams(status, &headers, &refused.bytes().await.unwrap());
    let run = uuid::Uuid::new_v4();
    let refused = srv
        .http
        .get(srv.url(&format!("/api/v1/agent/{run}/events")))
        .bearer_auth("tok-carol-0123456")
        .send()
        .await
        .unwrap();
    // (An unknown run is still 404: requests are checked before they take a slot.)
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    let url = format!("{}/ws", srv.base.replacen("http://", "ws://", 1));
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer tok-carol-0123456".parse().unwrap());
    match connect_async(req).await {
        Err(tungstenite::Error::Http(res)) => {
            let headers =
                reqwest::header::HeaderMap::from_iter(res.headers().iter().map(|(k, v)| {
                    (
                        k.as_str().parse().unwrap(),
                        v.as_bytes().try_into().unwrap(),
                    )
                }));
            let status = StatusCode::from_u16(res.status().as_u16()).unwrap();
            too_many_streams(status, &headers, res.body().as_deref().unwrap_or_default());
        }
        other => panic!("the WebSocket is refused, got {other:?}"),
    }

    // Closing a stream frees its slot (once the server has seen the close).
    drop(a1);
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let c1 = open_sse(&srv, "tok-carol-0123456").await;
        if c1.status() == StatusCode::OK {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no slot freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((a2, b1));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_message_over_the_limit_gets_an_error_frame_and_close_1009() {
    let srv = bounded(|c| c.ws_message_bytes_max = 1024).await;
    let url = format!("{}/ws", srv.base.replacen("http://", "ws://", 1));
    // Just over the limit (read whole), and far over it (refused at its frame header).
    for size in [1025, 64 * 1024] {
        let (mut ws, _) = connect_async(url.as_str()).await.unwrap();
        let hello = next_text(&mut ws).await;
        assert_eq!(hello["type"], "connected");
        let content = "x".repeat(size);
        let msg = serde_json::json!({"type": "message", "content": content}).to_string();
        ws.send(Message::text(msg)).await.unwrap();
        let err = next_text(&mut ws).await;
        assert_eq!(err["type"], "error", "{err}");
        assert_eq!(err["error"]["code"], "payload_too_large", "{err}");
        let close = loop {
            match tokio::time::timeout(GUARD, ws.next())
                .await
                .expect("a close")
            {
                Some(Ok(Message::Close(frame))) => break frame,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a close frame, got {other:?}"),
            }
        };
        assert_eq!(close.map(|f| f.code), Some(CloseCode::Size), "size {size}");
    }
    srv.stop().await;
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next text frame as JSON (pings and pongs skipped).
async fn next_text(ws: &mut Socket) -> Value {
    loop {
        match tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("a frame")
        {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}

/// A request answered 401 closes its connection once answered: a client without a valid token
/// holds no connection slot (the connection would otherwise wait for its next request for the
/// idle timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_401_closes_its_connection() {
    let srv = server_with(crate::api_support::principals(), None, ApiConfig::default()).await;
    let mut tcp = connect(&srv).await;
    let req = format!("GET /api/v1/runs HTTP/1.1\r\nhost: {}\r\n\r\n", addr(&srv));
    tcp.write_all(req.as_bytes()).await.unwrap();
    let answer = until_closed(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

/// An ordinary principal's writes past its quota (a burst, then a rate) are answered 429 with
/// `Retry-After`, before anything is written; reads are not limited, nor are another
/// principal's writes or an admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_a_principals_quota_are_answered_429() {
    use crate::api_support::{ALICE, BOB, ROOT, get, post, principals};
    let config = ApiConfig {
        writes_per_principal_per_s: 1,
        writes_per_principal_burst: 3,
        ..ApiConfig::default()
    };
    let srv = server_with(principals(), None, config).await;
    let run = |session: &str| serde_json::json!({"query": "강남구 아파트 시세", "session_id": session, "hitl": "every_todo"});
    // The burst, then (a write a second coming back meanwhile) a refusal soon, saying when to
    // try again.
    let mut statuses = Vec::new();
    for i in 0..20 {
        let res = srv
            .http
            .post(srv.url("/api/v1/agent/run"))
            .bearer_auth(BOB)
            .json(&run(&format!("q-{i}")))
            .send()
            .await
            .unwrap();
        let status = res.status();
        statuses.push(status);
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(res.headers().contains_key("retry-after"));
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["code"], "too_many_writes", "{body}");
            break;
        }
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    assert!(statuses.len() > 3, "the burst is 3 writes: {statuses:?}");
    assert_eq!(
        statuses.last(),
        Some(&StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    // Nothing was written for the refused one.
    let (_, runs) = get(&srv, BOB, "/api/v1/runs").await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        statuses.len() - 1,
        "{runs}"
    );
    // Reads go on; alice has her own quota; the admin has none.
    assert_eq!(get(&srv, BOB, "/api/v1/runs").await.0, StatusCode::OK);
    let (status, _) = post(&srv, ALICE, "/api/v1/agent/run", run("a-1")).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    for i in 0..5 {
        let (status, _) = post(&srv, ROOT, "/api/v1/agent/run", run(&format!("r-{i}"))).await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
}

/// The run-actor gauge of `/metrics`.
async fn run_actors(srv: &Server) -> u64 {
    let metrics = srv.client.metrics().await.unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("chronicle_run_actors ")?.parse().ok())
        .unwrap_or_else(|| panic!("no chronicle_run_actors in {metrics}"))
}

/// An ended run leaves nothing of its actor behind: the engine knows as many actors as runs go
/// on, however many were made (a mailbox kept per run ever made held ~10 KiB each, for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_runs_leave_no_actor_behind_however_many_were_made() {
    let srv = crate::api_support::server(Tokens::none(), None).await;
    const RUNS: usize = 40;
    for _ in 0..RUNS {
        let reply = srv
            .client
            .chat(&chronicle_wire::ChatRequest {
                message: "강남역 근처 30평대 아파트 매매 시세 알려줘".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(
            matches!(reply, chronicle_client::ChatReply::Done(_)),
            "{reply:?}"
        );
    }
    // Each actor stops just after its run's answer: wait for the last ones to go.
    let deadline = tokio::time::Instant::now() + GUARD;
    let mut actors = run_actors(&srv).await;
    while actors > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        actors = run_actors(&srv).await;
    }
    assert_eq!(actors, 0, "actors left after {RUNS} ended runs");
    assert_eq!(srv.engine.cache_stats().actors, 0);
    srv.stop().await;
}
