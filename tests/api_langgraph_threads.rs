//! LangGraph threads and runs over a real server, for what the SDK suite (tests/langgraph/)
//! does not reach: whose threads are whose (another principal gets 404 everywhere, an admin
//! sees all), the `X-Api-Key` header LangGraph clients send, bad requests that change nothing
//! (neither the log nor the thread records), and thread records that outlive a restart.

use chronicle_engine::store::{Options, Store};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api_support::{
    ALICE, BOB, ROOT, Server, call, get, post, principals, server, server_on,
};

const QUERY: &str = "강남구 아파트 전세 시세 알려줘";

/// Named records of the LangGraph API in the store (threads and runs).
fn records(srv: &Server) -> usize {
    srv.engine.store().records("langgraph/").unwrap().len()
}

/// A new empty thread of Alice's; its id.
async fn new_thread(srv: &Server) -> String {
    let (_, t) = post(srv, ALICE, "/threads", json!({})).await;
    t["thread_id"].as_str().unwrap().to_owned()
}

/// A thread of `token`'s with one finished turn (HITL off); its id.
async fn thread_with_a_turn(srv: &Server, token: &str) -> String {
    let (s, t) = post(srv, token, "/threads", json!({"metadata": {"team": "a"}})).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    let id = t["thread_id"].as_str().unwrap().to_owned();
    let body = json!({
        "assistant_id": "supervisor",
        "input": {"messages": [{"type": "human", "content": QUERY}]},
        "config": {"configurable": {"hitl": "none"}},
    });
    let (s, values) = post(srv, token, &format!("/threads/{id}/runs/wait"), body).await;
    assert_eq!(s, StatusCode::OK, "{values}");
    assert_eq!(values["run_status"], "completed", "{values}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_thread_is_not_found_anywhere_and_an_admin_sees_it() {
    another_principals_thread_is_not_found_anywhere_and_an_admin_sees_it_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_thread_is_not_found_anywhere_and_an_admin_sees_it_on_postgres() {
    crate::api_support::on_postgres(
        another_principals_thread_is_not_found_anywhere_and_an_admin_sees_it_test(),
    )
    .await;
}

async fn another_principals_thread_is_not_found_anywhere_and_an_admin_sees_it_test() {
    let srv = server(principals(), None).await;
    let id = thread_with_a_turn(&srv, ALICE).await;
    let (_, runs) = get(&srv, ALICE, &format!("/threads/{id}/runs")).await;
    let run = runs[0]["run_id"].as_str().unwrap().to_owned();
    let (_, state) = get(&srv, ALICE, &format!("/threads/{id}/state")).await;
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
    let (s, _) = post(&srv, BOB, "/threads", json!({"thread_id": id})).await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (_, found) = post(&srv, BOB, "/threads/search", json!({})).await;
    assert_eq!(found, json!([]));
    assert_eq!(
        (srv.offsets(), records(&srv)),
        before,
        "bob changed nothing"
    );

    // The admin sees Alice's thread, in a search too; Alice sees it with its metadata.
    let (s, t) = get(&srv, ROOT, &format!("/threads/{id}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(t["metadata"]["team"], "a");
    assert_eq!(t["metadata"]["graph_id"], "supervisor");
    assert_eq!(t["status"], "idle");
    let (_, found) = post(
        &srv,
        ROOT,
        "/threads/search",
        json!({"metadata": {"team": "a"}}),
    )
    .await;
    assert_eq!(found.as_array().unwrap().len(), 1);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_x_api_key_header_is_a_token() {
    the_x_api_key_header_is_a_token_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_x_api_key_header_is_a_token_on_postgres() {
    crate::api_support::on_postgres(the_x_api_key_header_is_a_token_test()).await;
}

async fn the_x_api_key_header_is_a_token_test() {
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
    let (s, _) = get(&srv, BOB, &format!("/threads/{id}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = get(&srv, ALICE, &format!("/threads/{id}")).await;
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
    bad_requests_change_nothing_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_change_nothing_on_postgres() {
    crate::api_support::on_postgres(bad_requests_change_nothing_test()).await;
}

async fn bad_requests_change_nothing_test() {
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
    let (_, empty) = post(&srv, ALICE, "/threads", json!({"metadata": {"k": [1, 2]}})).await;
    let empty = empty["thread_id"].as_str().unwrap().to_owned();
    let used = thread_with_a_turn(&srv, ALICE).await;
    let (_, runs) = get(&srv, ALICE, &format!("/threads/{used}/runs")).await;
    let history = format!("/threads/{used}/history");
    let all = || Some(json!({"limit": 100}));
    let (_, before) = call(&srv, ALICE, Method::POST, &history, all()).await;
    srv.stop().await;

    let srv = serve(open()).await;
    let (s, t) = get(&srv, ALICE, &format!("/threads/{empty}")).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(t["metadata"], json!({"k": [1, 2]}));
    assert_eq!(t["values"], Value::Null);
    let (_, runs_after) = get(&srv, ALICE, &format!("/threads/{used}/runs")).await;
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
    a_failing_run_streams_error_and_waits_to_an_error_value_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_streams_error_and_waits_to_an_error_value_on_postgres() {
    crate::api_support::on_postgres(a_failing_run_streams_error_and_waits_to_an_error_value_test())
        .await;
}

async fn a_failing_run_streams_error_and_waits_to_an_error_value_test() {
    // A plan longer than the run's TODO limit fails the run: this query plans two.
    let mut settings = chronicle_realestate::settings();
    settings.defaults.limits.max_todos = 1;
    let srv = crate::api_support::server_settings(principals(), settings, Default::default()).await;
    let id = new_thread(&srv).await;
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
    let (_, run) = get(&srv, ALICE, &location).await;
    assert_eq!(run["status"], "error", "{run}");
    let (_, thread) = get(&srv, ALICE, &format!("/threads/{id}")).await;
    assert_eq!(thread["status"], "error");

    // `wait` answers 200 with `__error__`; a stateless one too.
    let (s, values) = post(&srv, ALICE, "/runs/wait", body).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(values["__error__"]["error"], "RunFailed", "{values}");
    assert_eq!(values["__error__"]["message"], data["message"]);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_many_cancels_what_runs_and_only_the_callers() {
    cancel_many_cancels_what_runs_and_only_the_callers_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_many_cancels_what_runs_and_only_the_callers_on_postgres() {
    crate::api_support::on_postgres(cancel_many_cancels_what_runs_and_only_the_callers_test())
        .await;
}

async fn cancel_many_cancels_what_runs_and_only_the_callers_test() {
    let srv = server(principals(), None).await;
    let id = new_thread(&srv).await;
    // A turn that waits for approval stays settled: nothing of it is running.
    let body = json!({"assistant_id": "supervisor", "input": {"query": QUERY},
                      "config": {"configurable": {"hitl": "every_todo"}}});
    let (s, values) = post(&srv, ALICE, &format!("/threads/{id}/runs/wait"), body).await;
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
        let (s, b) = post(&srv, ALICE, "/runs/cancel", body.clone()).await;
        assert_eq!(s, status, "{body}: {b}");
    }
    // Bob's cancel of Alice's thread is not found; everyone's "all" leaves Alice's alone.
    let (s, _) = post(&srv, BOB, "/runs/cancel", json!({"thread_id": id})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = post(&srv, BOB, "/runs/cancel", json!({"status": "all"})).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    // Alice's own: the run is settled, so nothing is running to cancel.
    let (s, _) = post(
        &srv,
        ALICE,
        "/runs/cancel",
        json!({"thread_id": id, "status": "running"}),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(srv.offsets(), before, "nothing was cancelled");
    let (_, thread) = get(&srv, ALICE, &format!("/threads/{id}")).await;
    assert_eq!(thread["status"], "interrupted");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_refused_for_the_stream_cap_starts_no_run() {
    a_stream_refused_for_the_stream_cap_starts_no_run_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_refused_for_the_stream_cap_starts_no_run_on_postgres() {
    crate::api_support::on_postgres(a_stream_refused_for_the_stream_cap_starts_no_run_test()).await;
}

async fn a_stream_refused_for_the_stream_cap_starts_no_run_test() {
    let config = chronicle_api::ApiConfig {
        streams_per_principal_max: 0,
        ..Default::default()
    };
    let srv = crate::api_support::server_with(principals(), None, config).await;
    let id = new_thread(&srv).await;
    let before = (srv.offsets(), records(&srv));
    let run = json!({"assistant_id": "supervisor", "input": {"query": QUERY}});
    for path in [
        format!("/threads/{id}/runs/stream"),
        "/runs/stream".to_owned(),
    ] {
        let (s, b) = post(&srv, ALICE, &path, run.clone()).await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{path}: {b}");
        assert!(b["detail"].as_str().unwrap().contains("streams"), "{b}");
    }
    assert_eq!(
        (srv.offsets(), records(&srv)),
        before,
        "a refused stream started a run"
    );
    let (_, runs) = get(&srv, ALICE, &format!("/threads/{id}/runs")).await;
    assert_eq!(runs, json!([]));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_does_not_serve_the_turns_of_a_deleted_thread() {
    a_copy_does_not_serve_the_turns_of_a_deleted_thread_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_does_not_serve_the_turns_of_a_deleted_thread_on_postgres() {
    crate::api_support::on_postgres(a_copy_does_not_serve_the_turns_of_a_deleted_thread_test())
        .await;
}

async fn a_copy_does_not_serve_the_turns_of_a_deleted_thread_test() {
    let srv = server(principals(), None).await;
    let id = thread_with_a_turn(&srv, ALICE).await;
    let (s, copy) = post(&srv, ALICE, &format!("/threads/{id}/copy"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{copy}");
    let copy = copy["thread_id"].as_str().unwrap().to_owned();
    assert!(copy_shows(&srv, &copy).await.contains(QUERY), "copied");
    let (s, _) = call(&srv, ALICE, Method::DELETE, &format!("/threads/{id}"), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);

    // The copy is still there, with nothing of the deleted thread's turns.
    let shown = copy_shows(&srv, &copy).await;
    assert!(
        !shown.contains(QUERY),
        "the copy serves a deleted turn: {shown}"
    );
    let (_, t) = get(&srv, ALICE, &format!("/threads/{copy}")).await;
    assert_eq!(
        (t["status"].clone(), t["values"].clone()),
        (json!("idle"), Value::Null)
    );
    // And it goes on by itself.
    let body = json!({"assistant_id": "supervisor", "input": {"query": "마포구 아파트 매매 시세 알려줘"},
                      "config": {"configurable": {"hitl": "none"}}});
    let (s, values) = post(&srv, ALICE, &format!("/threads/{copy}/runs/wait"), body).await;
    assert_eq!(s, StatusCode::OK, "{values}");
    assert!(!values.to_string().contains(QUERY), "{values}");
    srv.stop().await;
}

/// Everything a LangGraph client reads of thread `id`: the thread, its state, its history.
async fn copy_shows(srv: &Server, id: &str) -> String {
    let mut all = String::new();
    for (method, path, body) in [
        (Method::GET, format!("/threads/{id}"), None),
        (Method::GET, format!("/threads/{id}/state"), None),
        (
            Method::POST,
            format!("/threads/{id}/history"),
            Some(json!({"limit": 1000})),
        ),
    ] {
        let (s, b) = call(srv, ALICE, method, &path, body).await;
        assert_eq!(s, StatusCode::OK, "{path}: {b}");
        all.push_str(&b.to_string());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threads_values_and_each_history_answer_are_bounded() {
    a_threads_values_and_each_history_answer_are_bounded_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threads_values_and_each_history_answer_are_bounded_on_postgres() {
    crate::api_support::on_postgres(a_threads_values_and_each_history_answer_are_bounded_test())
        .await;
}

async fn a_threads_values_and_each_history_answer_are_bounded_test() {
    use chronicle_wire::langgraph::HISTORY_BYTES_MAX;
    let srv = server(principals(), None).await;
    let id = thread_with_a_turn(&srv, ALICE).await;
    let state = format!("/threads/{id}/state");
    let set = |values: Value| post(&srv, ALICE, &state, json!({ "values": values }));
    // 60 KiB a key: four fit in a thread's values (256 KiB in all), a fifth does not.
    let big = "x".repeat(60 * 1024);
    for k in 0..4 {
        let (s, b) = set(json!({ format!("k{k}"): big })).await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }
    let before = srv.offsets();
    let (s, b) = set(json!({ "k4": big })).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert!(b["detail"].as_str().unwrap().contains("262144"), "{b}");
    assert_eq!(srv.offsets(), before, "a refused update wrote nothing");
    // Replacing a key is measured after the merge.
    let (s, b) = set(json!({ "k3": big })).await;
    assert_eq!(s, StatusCode::OK, "{b}");

    // Many small updates: each makes a checkpoint whose state carries the ~240 KiB of values.
    let updates = 40;
    for i in 0..updates {
        let (s, b) = set(json!({ "n": i })).await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }
    // Asked for 1000, each answer holds at most HISTORY_BYTES_MAX bytes; `before` pages on
    // through every checkpoint, each once.
    let mut seen = std::collections::HashSet::new();
    let mut pages = 0;
    let mut body = json!({"limit": 1000});
    loop {
        let res = srv
            .http
            .post(srv.url(&format!("/threads/{id}/history")))
            .bearer_auth(ALICE)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let bytes = res.bytes().await.unwrap();
        assert!(
            bytes.len() <= HISTORY_BYTES_MAX,
            "an answer of {} bytes",
            bytes.len()
        );
        let page: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
        let Some(last) = page.last() else { break };
        pages += 1;
        for s in &page {
            assert!(
                seen.insert(s["checkpoint"]["checkpoint_id"].clone()),
                "twice: {}",
                s["checkpoint"]
            );
        }
        body = json!({"limit": 1000, "before": last["checkpoint"]});
    }
    assert!(pages > 1, "one answer held every state");
    assert!(seen.len() > updates, "{} states", seen.len());
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containment_filters_are_bounded_and_match_within_the_bounds() {
    containment_filters_are_bounded_and_match_within_the_bounds_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containment_filters_are_bounded_and_match_within_the_bounds_on_postgres() {
    crate::api_support::on_postgres(
        containment_filters_are_bounded_and_match_within_the_bounds_test(),
    )
    .await;
}

async fn containment_filters_are_bounded_and_match_within_the_bounds_test() {
    use chronicle_wire::langgraph::{FILTER_BYTES_MAX, FILTER_DEPTH_MAX, FILTER_VALUES_MAX};
    let srv = server(principals(), None).await;
    // A thread with a large metadata array, and filters just within and just over the bounds.
    let tags: Vec<String> = (0..2000).map(|i| format!("tag-{i}")).collect();
    let (s, t) = post(&srv, ALICE, "/threads", json!({"metadata": {"tags": tags}})).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    let id = thread_with_a_turn(&srv, ALICE).await;
    let search = |body: Value| post(&srv, ALICE, "/threads/search", body);
    let wanted: Vec<String> = (0..FILTER_VALUES_MAX - 2)
        .map(|i| format!("tag-{}", 1999 - i))
        .collect();
    let (s, found) = search(json!({"metadata": {"tags": wanted}})).await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found.as_array().unwrap().len(), 1);
    let mut deep = json!("x");
    for _ in 0..FILTER_DEPTH_MAX {
        deep = json!({ "k": deep });
    }
    let too_many: Vec<u32> = (0..=FILTER_VALUES_MAX as u32).collect();
    let over = [
        ("metadata", json!({"metadata": {"tags": too_many}})),
        ("values", json!({"values": {"messages": too_many}})),
        ("values", json!({"values": deep})),
        (
            "metadata",
            json!({"metadata": {"k": "x".repeat(FILTER_BYTES_MAX)}}),
        ),
    ];
    for (field, body) in over {
        let (s, b) = search(body).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
        let detail = b["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("`{field}` filter")), "{detail}");
    }
    // The same bounds for a history's metadata filter.
    let (s, b) = post(
        &srv,
        ALICE,
        &format!("/threads/{id}/history"),
        json!({"metadata": {"k": (0..=FILTER_VALUES_MAX).collect::<Vec<_>>()}}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_input_beside_a_command_is_no_input() {
    an_empty_input_beside_a_command_is_no_input_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_input_beside_a_command_is_no_input_on_postgres() {
    crate::api_support::on_postgres(an_empty_input_beside_a_command_is_no_input_test()).await;
}

async fn an_empty_input_beside_a_command_is_no_input_test() {
    // What agent-chat-ui's buttons send: `useStream().submit({}, {command})`.
    let srv = server(principals(), None).await;
    let id = new_thread(&srv).await;
    let wait = format!("/threads/{id}/runs/wait");
    let body = json!({"assistant_id": "supervisor", "input": {"query": QUERY},
                      "config": {"configurable": {"hitl": "every_todo"}}});
    let (s, values) = post(&srv, ALICE, &wait, body).await;
    assert_eq!(s, StatusCode::OK, "{values}");
    let approve = json!({"assistant_id": "supervisor", "input": {},
                         "command": {"resume": {"decisions": [{"type": "approve"}]}}});
    let (s, values) = post(&srv, ALICE, &wait, approve).await;
    assert_eq!(s, StatusCode::OK, "{values}");
    let [next] = values["__interrupt__"].as_array().unwrap().as_slice() else {
        panic!("{values}")
    };
    assert_eq!(
        next["value"]["action_requests"][0]["name"],
        "market_analysis"
    );
    let end = json!({"assistant_id": "supervisor", "input": null, "command": {"goto": "__end__"}});
    let (s, _) = post(&srv, ALICE, &wait, end).await;
    assert_eq!(s, StatusCode::OK);
    let (_, t) = get(&srv, ALICE, &format!("/threads/{id}")).await;
    assert_eq!(t["status"], "idle");
    // An empty input alone is no run.
    let (s, b) = post(
        &srv,
        ALICE,
        &wait,
        json!({"assistant_id": "supervisor", "input": {}}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    srv.stop().await;
}

/// A thread made with `POST /threads` is its maker's before its first run: another principal
/// cannot start a run in its session (404, as for anyone's session), so cannot take it over, and
/// its maker then runs on it as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_made_before_its_first_run_cannot_be_taken_over() {
    a_thread_made_before_its_first_run_cannot_be_taken_over_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_made_before_its_first_run_cannot_be_taken_over_on_postgres() {
    crate::api_support::on_postgres(a_thread_made_before_its_first_run_cannot_be_taken_over_test())
        .await;
}

async fn a_thread_made_before_its_first_run_cannot_be_taken_over_test() {
    let srv = server(principals(), None).await;
    let (status, made) = post(&srv, ALICE, "/threads", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let thread = made["thread_id"].as_str().unwrap().to_owned();
    let body = json!({"query": "강남구 아파트 시세", "session_id": thread});
    let (status, _) = post(&srv, BOB, "/api/v1/agent/run", body.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let chat = json!({"message": "강남구 아파트 시세", "thread_id": thread});
    let (status, _) = post(&srv, BOB, "/chat", chat).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Bob creating the same id is refused too.
    let (status, _) = post(&srv, BOB, "/threads", json!({"thread_id": thread})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // Alice's thread is hers as before.
    let (status, got) = get(&srv, ALICE, &format!("/threads/{thread}")).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let (status, started) = post(&srv, ALICE, "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let (status, got) = get(&srv, ALICE, &format!("/threads/{thread}")).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let (status, _) = get(&srv, BOB, &format!("/threads/{thread}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A LangGraph run created again with its `Idempotency-Key` (on a thread, or stateless) is the
/// run the first request created: no second run, no second thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_created_again_with_its_idempotency_key_is_the_same_run() {
    let srv = server(principals(), None).await;
    let body = json!({
        "assistant_id": "supervisor",
        "input": {"messages": [{"type": "human", "content": QUERY}]},
        "config": {"configurable": {"hitl": "none"}},
    });
    let create = |path: String, key: &'static str| {
        srv.http
            .post(srv.url(&path))
            .bearer_auth(ALICE)
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let id = new_thread(&srv).await;
    let first: Value = create(format!("/threads/{id}/runs"), "lg-1")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let again: Value = create(format!("/threads/{id}/runs"), "lg-1")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["run_id"], first["run_id"], "{again}");
    let (_, runs) = get(&srv, ALICE, &format!("/threads/{id}/runs")).await;
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");

    let threads_before = records(&srv);
    let one: Value = create("/runs".into(), "lg-2")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let two: Value = create("/runs".into(), "lg-2")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(two["run_id"], one["run_id"], "{two}");
    assert_eq!(two["thread_id"], one["thread_id"], "{two}");
    // One thread and one run record more, not two of each.
    assert_eq!(records(&srv), threads_before + 2);
}
