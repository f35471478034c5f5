//! LangGraph thread search from the thread index, checked against the full scan it replaced (kept
//! as `chronicle_api::langgraph::thread_search_full_scan`): the same page, total and next offset
//! for every filter, sort, order and page boundary, for an owner, another owner and an admin, on
//! a store whose index was built at start from thread records written before it.

use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::Principal;
use chronicle_engine::store::{Options, RecordOp, RecordRange, Store};
use chronicle_wire::langgraph::ThreadSearch;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{ALICE, BOB, ROOT, Server, post, principals, server, server_on};

const INDEX: &str = "langgraph-index/";

/// A search as the server answers it: status, body, total and next.
async fn searched(
    srv: &Server,
    token: &str,
    body: &Value,
) -> (u16, Value, Option<String>, Option<String>) {
    let res = srv
        .http
        .post(srv.url("/threads/search"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let header = |n: &str| res.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
    let (total, next) = (header("x-pagination-total"), header("x-pagination-next"));
    let status = res.status().as_u16();
    (status, res.json().await.unwrap(), total, next)
}

/// The same search by the full scan.
async fn scanned(
    st: &AppState,
    who: &Principal,
    body: &Value,
) -> (u16, Value, Option<String>, Option<String>) {
    let q: ThreadSearch = serde_json::from_value(body.clone()).unwrap();
    let res = match chronicle_api::langgraph::thread_search_full_scan(st, who, &q) {
        Ok(r) => r,
        Err(e) => axum::response::IntoResponse::into_response(e),
    };
    let header = |n: &str| res.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
    let (total, next) = (header("x-pagination-total"), header("x-pagination-next"));
    let status = res.status().as_u16();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap(), total, next)
}

/// Makes `n` threads of Alice's and Bob's with metadata of every kind the index treats apart.
async fn make_threads(srv: &Server, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(16) {
        let made = futures_util::future::join_all(chunk.iter().map(|&i| {
            let token = if i % 3 == 0 { BOB } else { ALICE };
            let team = ["a", "b", "c"][i % 3];
            let mut metadata = json!({
                "team": team,
                "n": i % 5,
                "flag": i % 2 == 0,
                "tags": if i % 4 == 0 { json!(["x", "y"]) } else { json!(["y"]) },
                "o": {"p": i % 2},
            });
            if i % 7 == 0 {
                metadata["none"] = Value::Null;
                metadata["f"] = json!(1.0);
            }
            if i % 11 == 0 {
                metadata["long"] = json!("z".repeat(2000));
            }
            if i % 50 == 1 {
                // More scalar keys than one thread's entries index: a wide thread.
                for k in 0..70 {
                    metadata[format!("k{k:02}")] = json!(k);
                }
            }
            post(srv, token, "/threads", json!({ "metadata": metadata }))
        }))
        .await;
        for (s, t) in made {
            assert_eq!(s, StatusCode::OK, "{t}");
            ids.push(t["thread_id"].as_str().unwrap().to_owned());
        }
    }
    ids
}

fn searches(ids: &[String]) -> Vec<Value> {
    let filters = [
        json!({}),
        json!({"metadata": {}}),
        json!({"metadata": {"team": "a"}}),
        json!({"metadata": {"team": "b", "n": 1}}),
        json!({"metadata": {"n": 3, "tags": ["x"]}}),
        json!({"metadata": {"tags": ["x"]}}),
        json!({"metadata": {"o": {"p": 1}}}),
        json!({"metadata": {"none": null}}),
        json!({"metadata": {"f": 1.0}}),
        json!({"metadata": {"f": 1}}),
        json!({"metadata": {"flag": false}}),
        json!({"metadata": {"k05": 5}}),
        json!({"metadata": {"long": "z".repeat(2000)}}),
        json!({"metadata": {"team": "nobody"}}),
        json!({"ids": [ids[0], ids[1], ids[5], "not-a-uuid", ids[7]]}),
        json!({"ids": []}),
        json!({"status": "idle"}),
        json!({"status": "idle", "metadata": {"team": "c"}}),
        json!({"values": {"messages": []}}),
        json!({"status": "busy"}),
    ];
    let mut out = Vec::new();
    for f in filters {
        for sort in ["created_at", "updated_at", "thread_id", "status"] {
            for order in ["asc", "desc"] {
                for (offset, limit) in [(0, 10), (0, 1000), (3, 7), (95, 10), (200, 1), (1000, 5)] {
                    let mut q = f.clone();
                    q["sort_by"] = json!(sort);
                    q["sort_order"] = json!(order);
                    q["offset"] = json!(offset);
                    q["limit"] = json!(limit);
                    out.push(q);
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_search_answers_as_the_full_scan_did_on_a_store_indexed_at_start() {
    let mut srv = server(principals(), None).await;
    let mut ids = make_threads(&srv, 230).await;
    ids.sort();
    // A deleted thread leaves no entry behind.
    let (s, _) = crate::api_support::delete(&srv, ROOT, &format!("/threads/{}", ids[2])).await;
    assert_eq!(s, StatusCode::NO_CONTENT);

    // The store as a server before the index left it: thread records and no index.
    let dir = std::mem::replace(&mut srv._dir, tempfile::tempdir().unwrap());
    srv.stop().await;
    let store = Store::open(dir.path(), Options::default()).unwrap();
    loop {
        let page = store
            .records_range(&RecordRange::prefix(INDEX, 1000))
            .unwrap();
        if page.is_empty() {
            break;
        }
        let ops: Vec<RecordOp> = page.into_iter().map(|(k, _)| RecordOp::Delete(k)).collect();
        store.records_apply(&ops).unwrap();
    }
    let settings = chronicle_realestate::settings();
    let srv = server_on(dir, store, principals(), settings, ApiConfig::default()).await;
    let built = srv.engine.store().records(INDEX).unwrap().len();
    assert!(
        built > 230 * 6,
        "the index was built at start: {built} entries"
    );
    // Built once: a second state over the same store reads only the version.
    let oracle = AppState::new(srv.engine.clone(), Tokens::none(), ApiConfig::default());
    assert_eq!(srv.engine.store().records(INDEX).unwrap().len(), built);

    // Threads written after the build, and one with a turn (its record updated), are indexed too.
    let later = make_threads(&srv, 3).await;
    let body = json!({
        "assistant_id": "supervisor",
        "input": {"messages": [{"type": "human", "content": "hello"}]},
        "config": {"configurable": {"hitl": "none"}},
    });
    let (s, v) = post(
        &srv,
        ALICE,
        &format!("/threads/{}/runs/wait", later[1]),
        body,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");

    let whos = [
        (
            ALICE,
            Principal {
                name: "alice".into(),
                admin: false,
            },
        ),
        (
            BOB,
            Principal {
                name: "bob".into(),
                admin: false,
            },
        ),
        (
            ROOT,
            Principal {
                name: "root".into(),
                admin: true,
            },
        ),
    ];
    let (mut compared, mut pages) = (0, 0);
    for q in searches(&ids) {
        for (token, who) in &whos {
            let want = scanned(&oracle, who, &q).await;
            let got = searched(&srv, token, &q).await;
            assert_eq!(got, want, "{token} {q}");
            compared += 1;
            if got.0 == 200 && got.1.as_array().is_some_and(|a| !a.is_empty()) {
                pages += 1;
            }
        }
    }
    assert!(compared > 2000);
    assert!(
        pages > compared / 3,
        "{pages} of {compared} pages hold threads"
    );
}
