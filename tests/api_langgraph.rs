//! The LangGraph Agent Server routes served at the root (`/info`, `/assistants/...`), over a real
//! server: the assistants, their pages, and errors in LangGraph's `{"detail"}` shape whatever
//! refuses the request (token, Content-Type, body, route), while Chronicle's own routes keep
//! theirs. The real `langgraph-sdk` drives the same routes in tests/langgraph/.

use chronicle_api::Tokens;
use serde_json::{Value, json};

use crate::api_support::{Server, server};

/// Python: `uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "supervisor")`.
const SUPERVISOR_ID: &str = "3dba61cc-373b-5094-96d6-8331cb40a952";

async fn detail(res: reqwest::Response, status: u16) -> String {
    assert_eq!(res.status().as_u16(), status);
    let body: Value = res.json().await.unwrap();
    let obj = body.as_object().unwrap();
    assert_eq!(obj.len(), 1, "{body}");
    obj["detail"].as_str().unwrap().to_owned()
}

/// The JSON body of a GET of `path` without a token.
async fn get_json(srv: &Server, path: &str) -> Value {
    let res = srv.http.get(srv.url(path)).send().await.unwrap();
    res.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assistants_are_found_by_id_graph_id_and_search() {
    let srv = server(Tokens::none(), None).await;
    let info = get_json(&srv, "/info").await;
    assert_eq!(info["flags"]["assistants"], true);
    assert_eq!(info["flags"]["crons"], false);

    let search = |body: Value| {
        srv.http
            .post(srv.url("/assistants/search"))
            .json(&body)
            .send()
    };
    let res = search(json!({"limit": 100, "offset": 0})).await.unwrap();
    let total: usize = res.headers()["x-pagination-total"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(res.headers().get("x-pagination-next").is_none());
    let all: Vec<Value> = res.json().await.unwrap();
    assert_eq!(all.len(), total);
    let agents = srv.engine.settings().registry.names().count();
    assert_eq!(total, 1 + agents, "the supervisor and one per agent");
    let sup = &all[0];
    assert_eq!(sup["assistant_id"], SUPERVISOR_ID);
    assert_eq!(sup["graph_id"], "supervisor");
    assert_eq!(sup["metadata"], json!({"created_by": "system"}));
    assert_eq!(
        (sup["version"].clone(), sup["config"].clone()),
        (json!(1), json!({}))
    );
    assert_eq!(
        sup["created_at"], all[1]["created_at"],
        "made at the server's start"
    );

    // A page: the header counts every match, the next page's offset is given.
    let res = search(json!({"limit": 1, "offset": 1})).await.unwrap();
    assert_eq!(
        res.headers()["x-pagination-total"],
        total.to_string().as_str()
    );
    assert_eq!(res.headers()["x-pagination-next"], "2");
    let page: Vec<Value> = res.json().await.unwrap();
    assert_eq!(page, vec![all[1].clone()]);
    // Filters: graph id, metadata containment.
    let agent = all[1]["graph_id"].as_str().unwrap();
    let only: Vec<Value> = search(json!({"graph_id": agent}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(only, vec![all[1].clone()]);
    let none: Vec<Value> = search(json!({"metadata": {"created_by": "alice"}}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(none.is_empty());
    let res = search(json!({"metadata": {"created_by": "system"}}))
        .await
        .unwrap();
    assert_eq!(
        res.headers()["x-pagination-total"],
        total.to_string().as_str()
    );

    // By id and by graph id: the same assistant.
    for id in [SUPERVISOR_ID, "supervisor"] {
        let got = get_json(&srv, &format!("/assistants/{id}")).await;
        assert_eq!(&got, sup);
    }
    let graph = get_json(&srv, "/assistants/supervisor/graph?xray=false").await;
    let nodes: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes,
        [
            "__start__",
            "initialize",
            "analyze_intent",
            "build_plan",
            "execute_todo",
            "evaluate",
            "aggregate",
            "generate_response",
            "__end__"
        ]
    );
    let schemas = get_json(&srv, &format!("/assistants/{SUPERVISOR_ID}/schemas")).await;
    assert_eq!(schemas["graph_id"], "supervisor");
    assert_eq!(schemas["input_schema"]["type"], "object");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_routes_answer_errors_as_detail() {
    let srv = server(Tokens::single("admin", "tok-admin-123456").unwrap(), None).await;
    let bearer = "Bearer tok-admin-123456";
    let msg = detail(srv.http.get(srv.url("/info")).send().await.unwrap(), 401).await;
    assert!(msg.contains("bearer token"), "{msg}");
    let get = |path: &str| {
        srv.http
            .get(srv.url(path))
            .header("Authorization", bearer)
            .send()
    };
    assert_eq!(get("/info").await.unwrap().status(), 200);
    let msg = detail(get("/assistants/nobody").await.unwrap(), 404).await;
    assert!(msg.contains("nobody"), "{msg}");
    detail(
        get(&format!("/assistants/{}", uuid::Uuid::new_v4()))
            .await
            .unwrap(),
        404,
    )
    .await;
    detail(
        get("/assistants/supervisor/graph?xray=deep").await.unwrap(),
        400,
    )
    .await;
    detail(get("/threads/not-a-uuid").await.unwrap(), 422).await;
    detail(get("/threads/a/b/c/d/e").await.unwrap(), 404).await;

    let post = |body: &'static str, ct: &'static str| {
        srv.http
            .post(srv.url("/assistants/search"))
            .header("Authorization", bearer)
            .header("Content-Type", ct)
            .body(body)
            .send()
    };
    detail(post("{}", "text/plain").await.unwrap(), 415).await;
    detail(post("{", "application/json").await.unwrap(), 400).await;
    detail(
        post(r#"{"limit": "ten"}"#, "application/json")
            .await
            .unwrap(),
        422,
    )
    .await;
    let msg = detail(
        post(r#"{"limit": 1001}"#, "application/json")
            .await
            .unwrap(),
        422,
    )
    .await;
    assert!(msg.contains("1000"), "{msg}");
    detail(
        post(r#"{"limit": 0}"#, "application/json").await.unwrap(),
        422,
    )
    .await;
    let res = srv
        .http
        .delete(srv.url("/info"))
        .header("Authorization", bearer)
        .send()
        .await
        .unwrap();
    detail(res, 405).await;

    // Chronicle's own routes keep their error body.
    let res = srv.http.get(srv.url("/api/v1/runs")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    srv.stop().await;
}
