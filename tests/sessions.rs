//! Sessions as a resource, black-box over a real server with alice and bob (ordinary) and root
//! (admin): listing (newest activity first, paged by an opaque cursor), one session with its
//! turns, the chat session routes over every turn, and deleting one — a recorded tombstone after
//! which every read answers 404, no run starts in it, its approvals leave the inbox, its
//! workspace is removed, and its events stay in a log that still verifies.

use std::time::Duration;

use chronicle_engine::Principal;
use chronicle_schemas::{Actor, Event, RunId, RunStatus};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{ALICE, BOB, ROOT, Server, delete, get, post, principals, server};
use crate::support::first_pending;

const WAIT: Duration = Duration::from_secs(30);
const FIRST: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
const SECOND: &str = "강남구 아파트 시세 알려줘";

/// A run of `token`'s in `session`, started over the API.
async fn start(srv: &Server, token: &str, session: &str, query: &str, hitl: &str) -> RunId {
    let body = json!({"query": query, "session_id": session, "hitl": hitl});
    let (status, started) = post(srv, token, "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    serde_json::from_value(started["run_id"].clone()).unwrap()
}

/// A turn that runs to its end without a human.
async fn turn(srv: &Server, session: &str, query: &str) -> RunId {
    let run = start(srv, ALICE, session, query, "none").await;
    let s = srv
        .engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    assert_eq!(
        s.supervisor.run_status,
        RunStatus::Completed,
        "{:?}",
        s.supervisor.error_log
    );
    run
}

fn ids(list: &Value) -> Vec<String> {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn sessions_are_listed_read_and_deleted_by_their_owner_only() {
    sessions_are_listed_read_and_deleted_by_their_owner_only_test().await;
}

#[tokio::test]
async fn sessions_are_listed_read_and_deleted_by_their_owner_only_on_postgres() {
    crate::api_support::on_postgres(
        sessions_are_listed_read_and_deleted_by_their_owner_only_test(),
    )
    .await;
}

async fn sessions_are_listed_read_and_deleted_by_their_owner_only_test() {
    let srv = server(principals(), None).await;
    let a1 = turn(&srv, "alice-one", FIRST).await;
    let a2 = turn(&srv, "alice-one", SECOND).await;
    let b1 = turn(&srv, "alice-two", SECOND).await;
    let b2 = turn(&srv, "alice-two", FIRST).await;

    // The listing: newest activity first, the first query as title, two turns each.
    let (status, list) = get(&srv, ALICE, "/api/v1/sessions").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(ids(&list), ["alice-two", "alice-one"]);
    let two = &list["sessions"][0];
    assert_eq!(two["title"], SECOND);
    assert_eq!(two["turns"], 2);
    assert_eq!(two["status"], "completed");
    assert_eq!(two["user_id"], "alice");
    assert_eq!(list["sessions"][1]["title"], FIRST);
    assert!(list["next_cursor"].is_null());

    // A page of one, then the cursor reaches the other; a malformed cursor is 400.
    let (_, page) = get(&srv, ALICE, "/api/v1/sessions?limit=1").await;
    assert_eq!(ids(&page), ["alice-two"]);
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let (_, rest) = get(
        &srv,
        ALICE,
        &format!("/api/v1/sessions?limit=1&cursor={cursor}"),
    )
    .await;
    assert_eq!(ids(&rest), ["alice-one"]);
    assert!(rest["next_cursor"].is_null(), "{rest}");
    for bad in ["not-a-cursor", "00ff", "zz00000000000000aa"] {
        let (status, body) = get(&srv, ALICE, &format!("/api/v1/sessions?cursor={bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "bad_request");
    }
    let (status, _) = get(&srv, ALICE, "/api/v1/sessions?limit=101").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, by_user) = get(&srv, ROOT, "/api/v1/sessions?user=alice").await;
    assert_eq!(ids(&by_user), ["alice-two", "alice-one"]);
    let (_, nobody) = get(&srv, ROOT, "/api/v1/sessions?user=carol").await;
    assert_eq!(ids(&nobody), Vec::<String>::new());

    // One session: both turns, oldest first, with status and answer.
    let (status, one) = get(&srv, ALICE, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["session"]["turns"], 2);
    let turns = one["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["run_id"], a1.to_string());
    assert_eq!(turns[0]["query"], FIRST);
    assert_eq!(turns[1]["run_id"], a2.to_string());
    for t in turns {
        assert_eq!(t["status"], "completed");
        assert!(!t["answer"].as_str().unwrap_or_default().is_empty(), "{t}");
    }

    // The chat routes show the latest run as before, and every turn.
    let (_, view) = get(&srv, ALICE, "/api/sessions/alice-two").await;
    assert_eq!(view["run_id"], b2.to_string());
    let turn_runs: Vec<&Value> = view["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["run_id"])
        .collect();
    assert_eq!(turn_runs, [&json!(b1.to_string()), &json!(b2.to_string())]);
    let (_, cps) = get(&srv, ALICE, "/api/sessions/alice-two/checkpoints").await;
    assert_eq!(cps["run_id"], b2.to_string());
    assert!(!cps["checkpoints"].as_array().unwrap().is_empty());
    let by_turn = cps["turns"].as_array().unwrap();
    assert_eq!(by_turn.len(), 2);
    assert_eq!(by_turn[0]["run_id"], b1.to_string());
    assert_eq!(by_turn[0]["query"], SECOND);
    assert!(!by_turn[0]["checkpoints"].as_array().unwrap().is_empty());

    // Bob sees none of it; root sees all.
    let (_, bobs) = get(&srv, BOB, "/api/v1/sessions").await;
    assert_eq!(ids(&bobs), Vec::<String>::new());
    let (status, _) = get(&srv, BOB, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = delete(&srv, BOB, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, roots) = get(&srv, ROOT, "/api/v1/sessions").await;
    assert_eq!(ids(&roots), ["alice-two", "alice-one"]);
    let (status, _) = get(&srv, ROOT, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::OK);

    // Delete: the tombstone on both turns, then 404 everywhere.
    let workspace = srv._dir.path().join("workspaces").join("alice-one");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.md"), "kept by a turn").unwrap();
    let (status, deleted) = delete(&srv, ALICE, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["runs"], json!([a2.to_string(), a1.to_string()]));
    assert_eq!(deleted["cancelled"], json!([]));
    assert!(!workspace.exists(), "the workspace is removed");
    let (status, _) = get(&srv, ALICE, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = get(&srv, ALICE, "/api/v1/sessions").await;
    assert_eq!(ids(&list), ["alice-two"]);
    let (_, roots) = get(&srv, ROOT, "/api/v1/sessions").await;
    assert_eq!(
        ids(&roots),
        ["alice-two"],
        "an admin does not see it either"
    );
    for run in [a1, a2] {
        for path in ["status", "state", "log", "checkpoints", "events"] {
            let (status, _) = get(&srv, ALICE, &format!("/api/v1/agent/{run}/{path}")).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path} of {run}");
        }
    }
    for path in [
        "/api/sessions/alice-one",
        "/api/sessions/alice-one/checkpoints",
    ] {
        let (status, _) = get(&srv, ALICE, path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    let (_, runs) = get(&srv, ROOT, "/api/v1/runs").await;
    let listed: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["run_id"])
        .collect();
    assert!(!listed.contains(&&json!(a1.to_string())) && !listed.contains(&&json!(a2.to_string())));
    assert_eq!(listed.len(), 2);
    let body = json!({"query": SECOND, "session_id": "alice-one", "hitl": "none"});
    let before = srv.offsets();
    let (status, refused) = post(&srv, ALICE, "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let (status, _) = post(
        &srv,
        ALICE,
        "/chat",
        json!({"thread_id": "alice-one", "message": SECOND}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(srv.offsets(), before, "nothing was written");
    let (status, _) = delete(&srv, ALICE, "/api/v1/sessions/alice-one").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a second delete");

    // The events stay: each run ends with its tombstone, and the log verifies.
    let store = srv.engine.store();
    for run in [a1, a2] {
        let head = store.run_head(run).unwrap().unwrap();
        let last = store.get(head.last_offset).unwrap().unwrap();
        assert!(
            matches!(&last.event, Event::SessionDeleted { by } if *by == Actor::user("alice")),
            "{:?}",
            last.event
        );
    }
    assert!(store.verify().unwrap().ok());
    srv.stop().await;
}

#[tokio::test]
async fn deleting_a_session_cancels_its_waiting_run_and_empties_the_inbox() {
    deleting_a_session_cancels_its_waiting_run_and_empties_the_inbox_test().await;
}

#[tokio::test]
async fn deleting_a_session_cancels_its_waiting_run_and_empties_the_inbox_on_postgres() {
    crate::api_support::on_postgres(
        deleting_a_session_cancels_its_waiting_run_and_empties_the_inbox_test(),
    )
    .await;
}

async fn deleting_a_session_cancels_its_waiting_run_and_empties_the_inbox_test() {
    let srv = server(principals(), None).await;
    let run = start(&srv, ALICE, "alice-waits", FIRST, "every_todo").await;
    let s = srv.engine.wait_settled(run, WAIT).await.unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);
    // One decision, so the audit export has a row of this run.
    let approval = first_pending(&s);
    srv.engine
        .decide(
            run,
            approval,
            chronicle_schemas::Decision::Approve,
            None,
            &Principal::user("alice"),
            None,
        )
        .await
        .unwrap();
    srv.engine.wait_settled(run, WAIT).await.unwrap();
    let (_, inbox) = get(&srv, ALICE, "/api/v1/approvals").await;
    assert!(inbox["count"].as_u64().unwrap() > 0, "{inbox}");

    let (status, deleted) = delete(&srv, ALICE, "/api/v1/sessions/alice-waits").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["cancelled"], json!([run.to_string()]));
    let (_, inbox) = get(&srv, ALICE, "/api/v1/approvals").await;
    assert_eq!(inbox["count"], 0, "{inbox}");
    let (_, inbox) = get(&srv, ROOT, "/api/v1/approvals").await;
    assert_eq!(inbox["count"], 0, "{inbox}");

    // The run was cancelled and then tombstoned, in the log; the audit trail keeps the decision.
    let kinds: Vec<&str> = srv
        .engine
        .store()
        .read_run(run, 0, u64::MAX)
        .map(|e| e.unwrap().event.kind())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .take(2)
        .collect();
    assert_eq!(kinds, ["SessionDeleted", "RunCancelled"]);
    let rows = srv
        .http
        .get(srv.url("/api/v1/audit/approvals"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        rows.contains(&run.to_string()),
        "the export keeps the deleted run's decision: {rows}"
    );
    assert!(srv.engine.store().verify().unwrap().ok());
    srv.stop().await;
}
