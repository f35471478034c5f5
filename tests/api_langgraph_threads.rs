//! LangGraph threads and runs over a real server, for what the SDK suite (tests/langgraph/)
//! does not reach: whose threads are whose (another principal gets 404 everywhere, an admin
//! sees all), the `X-Api-Key` header LangGraph clients send, bad requests that change nothing
//! (neither the log nor the thread records), and thread records that outlive a restart.

use chronicle_engine::store::{Options, Store};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api_support::{ALICE, BOB, ROOT, Server, call, principals, server, server_on};

const QUERY: &str = "강남구 아파트 전세 시세 알려줘";

/// Named records of the LangGraph API in the store (threads and runs).
fn records(srv: &Server) -> usize {
    srv.engine.store().records("langgraph/").unwrap().len()
}

/// A thread of `token`'s with one finished turn (HITL off); its id.
async fn thread_with_a_turn(srv: &Server, token: &str) -> String {
    let (s, t) = call(
        srv,
        token,
        Method::POST,
        "/threads",
        Some(json!({"metadata": {"team": "a"}})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    let id = t["thread_id"].as_str().unwrap().to_owned();
    let body = json!({
        "assistant_id": "supervisor",
        "input": {"messages": [{"type": "human", "content": QUERY}]},
        "config": {"configurable": {"hitl": "none"}},
    });
    let (s, values) = call(
        srv,
        token,
        Method::POST,
        &format!("/threads/{id}/runs/wait"),
        Some(body),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{values}");
    assert_eq!(values["run_status"], "completed", "{values}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_thread_is_not_found_anywhere_and_an_admin_sees_it() {
    let srv = server(principals(), None).await;
    let id = thread_with_a_turn(&srv, ALICE).await;
    let (_, runs) = call(
        &srv,
        ALICE,
        Method::GET,
        &format!("/threads/{id}/runs"),
        None,
    )
    .await;
    let run = runs[0]["run_id"].as_str().unwrap().to_owned();
    let (_, state) = call(
        &srv,
        ALICE,
        Method::GET,
        &format!("/threads/{id}/state"),
        None,
    )
    .await;
    let checkpoint = state["checkpoint"]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before = (srv.offsets(), records(&srv));

    let reads = [
        (Method::GET, format!("/threads/{id}"), None),
        (Method::GET, format!("/threads/{id}/state"), None),
        (
            Method::GET,
            format!("/threads/{id}/state/{checkpoint}"),
            None,
        ),
        (
            Method::POST,
            format!("/threads/{id}/history"),
            Some(json!({})),
        ),
        (Method::POST, format!("/threads/{id}/copy"), Some(json!({}))),
        (Method::GET, format!("/threads/{id}/runs"), None),
        (Method::GET, format!("/threads/{id}/runs/{run}"), None),
        (Method::GET, format!("/threads/{id}/runs/{run}/join"), None),
        (
            Method::POST,
            format!("/threads/{id}/runs/{run}/cancel"),
            Some(json!({})),
        ),
        (Method::DELETE, format!("/threads/{id}/runs/{run}"), None),
        (
            Method::POST,
            format!("/threads/{id}/runs/wait"),
            Some(json!({"assistant_id": "supervisor", "input": {"query": QUERY}})),
        ),
        (Method::DELETE, format!("/threads/{id}"), None),
    ];
    for (method, path, body) in &reads {
        let (s, b) = call(&srv, BOB, method.clone(), path, body.clone()).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method} {path}: {b}");
        assert_eq!(b.as_object().unwrap().len(), 1, "{b}");
        assert!(b["detail"].as_str().unwrap().contains("not found"), "{b}");
    }
    // Bob cannot take the id either, nor see it in a search.
    let (s, _) = call(
        &srv,
        BOB,
        Method::POST,
        "/threads",
        Some(json!({"thread_id": id})),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (_, found) = call(&srv, BOB, Method::POST, "/threads/search", Some(json!({}))).await;
    assert_eq!(found, json!([]));
    assert_eq!(
        (srv.offsets(), records(&srv)),
        before,
        "bob changed nothing"
    );

    // The admin sees Alice's thread, in a search too; Alice sees it with its metadata.
    let (s, t) = call(&srv, ROOT, Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(t["metadata"]["team"], "a");
    assert_eq!(t["metadata"]["graph_id"], "supervisor");
    assert_eq!(t["status"], "idle");
    let (_, found) = call(
        &srv,
        ROOT,
        Method::POST,
        "/threads/search",
        Some(json!({"metadata": {"team": "a"}})),
    )
    .await;
    assert_eq!(found.as_array().unwrap().len(), 1);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_x_api_key_header_is_a_token() {
    let srv = server(principals(), None).await;
    let res = srv
        .http
        .post(srv.url("/threads"))
        .header("x-api-key", ALICE)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let t: Value = res.json().await.unwrap();
    let id = t["thread_id"].as_str().unwrap();
    // It is Alice's: Bob's bearer token does not see it.
    let (s, _) = call(&srv, BOB, Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = call(&srv, ALICE, Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(s, StatusCode::OK);
    let res = srv
        .http
        .get(srv.url(&format!("/threads/{id}")))
        .header("x-api-key", "not-a-known-key-at-all")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_change_nothing() {
    let srv = server(principals(), None).await;
    let id = thread_with_a_turn(&srv, ALICE).await;
    let before = (srv.offsets(), records(&srv));
    let run = |body: Value, status: u16| {
        (
            Method::POST,
            format!("/threads/{id}/runs/wait"),
            Some(body),
            status,
        )
    };
    let cases = [
        // A refused stateless run leaves no thread behind.
        (
            Method::POST,
            "/runs/wait".to_owned(),
            Some(json!({"assistant_id": "supervisor", "input": {"messages": []}})),
            422,
        ),
        (
            Method::POST,
            "/runs".to_owned(),
            Some(json!({"assistant_id": "supervisor", "command": {"goto": "__end__"}})),
            409,
        ),
        (
            Method::POST,
            "/threads".to_owned(),
            Some(json!({"thread_id": "not-a-uuid"})),
            422,
        ),
        (
            Method::POST,
            "/threads".to_owned(),
            Some(json!({"if_exists": "maybe"})),
            422,
        ),
        (
            Method::POST,
            "/threads".to_owned(),
            Some(json!({"thread_id": id})),
            409,
        ),
        (Method::GET, "/threads/not-a-uuid".to_owned(), None, 422),
        (
            Method::GET,
            format!("/threads/{}", uuid::Uuid::new_v4()),
            None,
            404,
        ),
        (
            Method::POST,
            "/threads/search".to_owned(),
            Some(json!({"limit": 0})),
            422,
        ),
        (
            Method::POST,
            format!("/threads/{id}/history"),
            Some(json!({"limit": 1001})),
            422,
        ),
        (
            Method::POST,
            format!("/threads/{id}/history"),
            Some(json!({"before": uuid::Uuid::new_v4().to_string()})),
            404,
        ),
        (
            Method::GET,
            format!("/threads/{id}/state/{}", uuid::Uuid::new_v4()),
            None,
            404,
        ),
        (
            Method::GET,
            format!("/threads/{id}/runs/{}", uuid::Uuid::new_v4()),
            None,
            404,
        ),
        run(
            json!({"assistant_id": "no-such-graph", "input": {"query": QUERY}}),
            404,
        ),
        run(
            json!({"assistant_id": "supervisor", "input": {"messages": [{"type": "ai", "content": "hi"}]}}),
            422,
        ),
        run(
            json!({"assistant_id": "supervisor", "input": {"query": QUERY}, "stream_mode": "everything"}),
            422,
        ),
        run(
            json!({"assistant_id": "supervisor", "input": {"query": QUERY}, "config": {"configurable": {"hitl": "sometimes"}}}),
            422,
        ),
        run(
            json!({"assistant_id": "supervisor", "input": {"query": QUERY}, "command": {"resume": "approve"}}),
            422,
        ),
        run(
            json!({"assistant_id": "supervisor", "command": {"resume": "approve"}}),
            409,
        ),
        run(
            json!({"assistant_id": "supervisor", "command": {"goto": "somewhere"}}),
            422,
        ),
        run(json!({"assistant_id": "supervisor"}), 422),
        run(
            json!({"assistant_id": "supervisor", "input": {"query": "   "}}),
            422,
        ),
        run(
            json!({"assistant_id": "supervisor", "multitask_strategy": "sometimes", "input": {"query": QUERY}}),
            422,
        ),
    ];
    for (method, path, body, want) in cases {
        let (s, b) = call(&srv, ALICE, method.clone(), &path, body.clone()).await;
        assert_eq!(s.as_u16(), want, "{method} {path} {body:?}: {b}");
        assert_eq!(
            b.as_object().map(|o| o.len()),
            Some(1),
            "{method} {path}: {b}"
        );
        assert_eq!(
            (srv.offsets(), records(&srv)),
            before,
            "{method} {path} {body:?} changed something"
        );
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_and_runs_outlive_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let open = || Store::open(data.path(), Options::default()).unwrap();
    let serve = |store| {
        // The data directory is `data`, kept here across both servers.
        server_on(
            tempfile::tempdir().unwrap(),
            store,
            principals(),
            chronicle_realestate::settings(),
            Default::default(),
        )
    };
    let srv = serve(open()).await;
    let (_, empty) = call(
        &srv,
        ALICE,
        Method::POST,
        "/threads",
        Some(json!({"metadata": {"k": [1, 2]}})),
    )
    .await;
    let empty = empty["thread_id"].as_str().unwrap().to_owned();
    let used = thread_with_a_turn(&srv, ALICE).await;
    let (_, runs) = call(
        &srv,
        ALICE,
        Method::GET,
        &format!("/threads/{used}/runs"),
        None,
    )
    .await;
    let history = format!("/threads/{used}/history");
    let all = || Some(json!({"limit": 100}));
    let (_, before) = call(&srv, ALICE, Method::POST, &history, all()).await;
    srv.stop().await;

    let srv = serve(open()).await;
    let (s, t) = call(&srv, ALICE, Method::GET, &format!("/threads/{empty}"), None).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(t["metadata"], json!({"k": [1, 2]}));
    assert_eq!(t["values"], Value::Null);
    let (_, runs_after) = call(
        &srv,
        ALICE,
        Method::GET,
        &format!("/threads/{used}/runs"),
        None,
    )
    .await;
    assert_eq!(runs_after, runs);
    let (_, after) = call(&srv, ALICE, Method::POST, &history, all()).await;
    assert_eq!(after, before, "the same checkpoints, ids and states");
    srv.stop().await;
}

/// The events of a finished SSE body: `(event, data)` in order.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name).map(str::trim_start))
            };
            Some((
                field("event:")?.to_owned(),
                serde_json::from_str(field("data:")?).ok()?,
            ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_streams_error_and_waits_to_an_error_value() {
    // A plan longer than the run's TODO limit fails the run: this query plans two.
    let mut settings = chronicle_realestate::settings();
    settings.defaults.limits.max_todos = 1;
    let srv = crate::api_support::server_settings(principals(), settings, Default::default()).await;
    let (_, t) = call(&srv, ALICE, Method::POST, "/threads", Some(json!({}))).await;
    let id = t["thread_id"].as_str().unwrap().to_owned();
    let body = json!({"assistant_id": "supervisor", "input": {"query": QUERY}, "stream_mode": ["values", "updates"]});
    let res = srv
        .http
        .post(srv.url(&format!("/threads/{id}/runs/stream")))
        .bearer_auth(ALICE)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let location = res.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_owned();
    let events = sse_events(&res.text().await.unwrap());
    assert_eq!(events.first().unwrap().0, "metadata", "{events:?}");
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "error", "{events:?}");
    assert_eq!(data["error"], "RunFailed");
    assert!(!data["message"].as_str().unwrap().is_empty(), "{data}");
    // The run is marked failed by the time the stream closed; so is the thread.
    let (_, run) = call(&srv, ALICE, Method::GET, &location, None).await;
    assert_eq!(run["status"], "error", "{run}");
    let (_, thread) = call(&srv, ALICE, Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(thread["status"], "error");

    // `wait` answers 200 with `__error__`; a stateless one too.
    let (s, values) = call(&srv, ALICE, Method::POST, "/runs/wait", Some(body)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(values["__error__"]["error"], "RunFailed", "{values}");
    assert_eq!(values["__error__"]["message"], data["message"]);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_many_cancels_what_runs_and_only_the_callers() {
    let srv = server(principals(), None).await;
    let (_, t) = call(&srv, ALICE, Method::POST, "/threads", Some(json!({}))).await;
    let id = t["thread_id"].as_str().unwrap().to_owned();
    // A turn that waits for approval stays settled: nothing of it is running.
    let body = json!({"assistant_id": "supervisor", "input": {"query": QUERY},
                      "config": {"configurable": {"hitl": "every_todo"}}});
    let (s, values) = call(
        &srv,
        ALICE,
        Method::POST,
        &format!("/threads/{id}/runs/wait"),
        Some(body),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{values}");
    assert!(values["__interrupt__"].is_array(), "{values}");
    let before = srv.offsets();
    let refused = [
        (json!({}), StatusCode::UNPROCESSABLE_ENTITY),
        (
            json!({"run_ids": [uuid::Uuid::new_v4().to_string()]}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"thread_id": "nope"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"thread_id": uuid::Uuid::new_v4().to_string()}),
            StatusCode::NOT_FOUND,
        ),
    ];
    for (body, status) in refused {
        let (s, b) = call(
            &srv,
            ALICE,
            Method::POST,
            "/runs/cancel",
            Some(body.clone()),
        )
        .await;
        assert_eq!(s, status, "{body}: {b}");
    }
    // Bob's cancel of Alice's thread is not found; everyone's "all" leaves Alice's alone.
    let (s, _) = call(
        &srv,
        BOB,
        Method::POST,
        "/runs/cancel",
        Some(json!({"thread_id": id})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = call(
        &srv,
        BOB,
        Method::POST,
        "/runs/cancel",
        Some(json!({"status": "all"})),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    // Alice's own: the run is settled, so nothing is running to cancel.
    let (s, _) = call(
        &srv,
        ALICE,
        Method::POST,
        "/runs/cancel",
        Some(json!({"thread_id": id, "status": "running"})),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(srv.offsets(), before, "nothing was cancelled");
    let (_, thread) = call(&srv, ALICE, Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(thread["status"], "interrupted");
    srv.stop().await;
}
