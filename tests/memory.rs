//! Long-term memory per user, black-box: a preference a user states in one session ("전세만
//! 보여줘") is saved at the end of that turn, loaded by the user's later turns in other sessions
//! (recorded as `MemoryLoaded`), and changes what they search; the routes list and delete it per
//! principal (another principal sees nothing, an admin everything), a deletion is recorded in the
//! run that saved the item, and an engine opened again on the same log rebuilds the index.

use std::time::Duration;

use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Principal, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{Event, MemoryKind, RunId};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{ALICE, BOB, ROOT, Server, delete, get, post, principals, server};
use crate::support::{completed, events, open_engine};

const STATES_ONLY: &str = "강남구 전세만 보여줘";
const PRICES: &str = "강남구 아파트 시세 알려줘";

/// A completed run of `token`'s in `session`.
async fn turn(srv: &Server, token: &str, session: &str, query: &str) -> RunState {
    let body = json!({"query": query, "session_id": session, "hitl": "none"});
    let (status, started) = post(srv, token, "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run: RunId = serde_json::from_value(started["run_id"].clone()).unwrap();
    completed(&srv.engine, run).await
}

/// Every `deal_type` the run's agents answered with (the market rows and listings they found).
fn deal_types(state: &RunState) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    match (k.as_str(), v) {
                        ("deal_type", Value::String(s)) => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for result in state.supervisor.team_results.values() {
        walk(result, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// The default search: sale prices, among others.
fn assert_default_search(state: &RunState) {
    let found = deal_types(state);
    assert!(
        found.contains(&"매매".to_owned()) && found.len() > 1,
        "{found:?}"
    );
}

fn loaded(engine: &Engine, run: RunId) -> Option<Vec<chronicle_schemas::Memory>> {
    events(engine, run).into_iter().find_map(|e| match e.event {
        Event::MemoryLoaded { memories, .. } => Some(memories),
        _ => None,
    })
}

fn notes(engine: &Engine, run: RunId) -> Vec<String> {
    events(engine, run)
        .into_iter()
        .filter_map(|e| match e.event {
            Event::Reasoning { message } => Some(message),
            _ => None,
        })
        .collect()
}

fn memory_ids(list: &Value) -> Vec<String> {
    list["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["memory_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stated_preference_is_remembered_across_sessions_until_it_is_deleted() {
    let srv = server(principals(), None).await;
    let engine = srv.engine.clone();

    // Without memory the same question is answered with sale prices and other deals.
    let plain = turn(&srv, BOB, "bob-1", PRICES).await;
    assert_default_search(&plain);
    assert_eq!(loaded(&engine, plain.run_id.unwrap()), None);

    // Session A: the preference is stated and saved at the end of the turn.
    let a = turn(&srv, ALICE, "alice-a", STATES_ONLY).await;
    let saved = &a.supervisor.saved_memories;
    assert_eq!(saved.len(), 1, "{saved:?}");
    let memory = saved[0].clone();
    assert_eq!(
        (memory.kind, memory.key.as_str(), &memory.value),
        (MemoryKind::Preference, "deal_type", &json!("jeonse"))
    );
    assert_eq!(
        (memory.user_id.as_str(), memory.run_id),
        ("alice", a.run_id.unwrap())
    );
    assert!(memory.memory_id.starts_with("mem_"));

    // Session B of the same user loads it, and searches jeonse only.
    let b = turn(&srv, ALICE, "alice-b", PRICES).await;
    assert_eq!(
        loaded(&engine, b.run_id.unwrap()),
        Some(vec![memory.clone()])
    );
    let loaded_state = b.supervisor.loaded_memories.clone().unwrap();
    assert_eq!(loaded_state[0]["memory_id"], json!(memory.memory_id));
    assert_eq!(
        b.supervisor.user_preferences,
        Some(json!({"deal_type": "jeonse"}))
    );
    assert!(
        notes(&engine, b.run_id.unwrap())
            .contains(&"applied your saved preference: 전세".to_owned())
    );
    assert_eq!(deal_types(&b), ["전세"]);
    // An explicit deal type wins over the preference.
    let explicit = turn(&srv, ALICE, "alice-b", "강남구 아파트 매매 시세 알려줘").await;
    assert_eq!(deal_types(&explicit), ["매매"]);

    // The routes: alice and the admin see it; bob sees nothing and cannot delete it.
    let path = "/api/v1/users/alice/memories";
    let one = format!("{path}/{}", memory.memory_id);
    let (status, list) = get(&srv, ALICE, path).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (list["user_id"].clone(), memory_ids(&list)),
        (json!("alice"), vec![memory.memory_id.clone()])
    );
    assert_eq!(list["memories"][0]["value"], json!("jeonse"));
    let (_, list) = get(&srv, ROOT, path).await;
    assert_eq!(memory_ids(&list), std::slice::from_ref(&memory.memory_id));
    let (status, list) = get(&srv, BOB, path).await;
    assert_eq!((status, memory_ids(&list).len()), (StatusCode::OK, 0));
    let (status, _) = delete(&srv, BOB, &one).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, deleted) = delete(&srv, BOB, path).await;
    assert_eq!((status, memory_ids(&deleted).len()), (StatusCode::OK, 0));
    let (status, _) = delete(&srv, ALICE, &format!("{path}/mem_unknown")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A deletion without a JSON body is refused like every state-changing request's.
    let res = srv
        .http
        .delete(srv.url(&one))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        engine
            .memories(&Principal::user("alice"), "alice")
            .unwrap()
            .len(),
        1
    );

    // Alice deletes it: recorded in the run that saved it, no longer listed nor loaded.
    let (status, deleted) = delete(&srv, ALICE, &one).await;
    assert_eq!(
        (status, deleted["memory_id"].clone()),
        (StatusCode::OK, json!(memory.memory_id))
    );
    let recorded = events(&engine, a.run_id.unwrap())
        .into_iter()
        .find_map(|e| match e.event {
            Event::MemoryDeleted { memory_id, by } => Some((memory_id, by)),
            _ => None,
        });
    assert_eq!(
        recorded,
        Some((
            memory.memory_id.clone(),
            chronicle_schemas::Actor::user("alice")
        ))
    );
    let (_, list) = get(&srv, ALICE, path).await;
    assert!(memory_ids(&list).is_empty());
    let (status, _) = delete(&srv, ALICE, &one).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let c = turn(&srv, ALICE, "alice-c", PRICES).await;
    assert_eq!(loaded(&engine, c.run_id.unwrap()), None);
    assert_eq!(c.supervisor.loaded_memories, None);
    assert_default_search(&c);

    // The admin deletes what alice's runs saved.
    turn(&srv, ALICE, "alice-d", "월세만 보여줘").await;
    let (_, list) = get(&srv, ALICE, path).await;
    let ids = memory_ids(&list);
    assert_eq!(ids.len(), 1);
    let (status, deleted) = delete(&srv, ROOT, path).await;
    assert_eq!((status, memory_ids(&deleted)), (StatusCode::OK, ids));
    let (_, list) = get(&srv, ALICE, path).await;
    assert!(memory_ids(&list).is_empty());
    srv.stop().await;
}

async fn engine_in(dir: &std::path::Path) -> Engine {
    open_engine(dir, chronicle_realestate::settings()).await
}

async fn run_as(engine: &Engine, by: Principal, query: &str) -> RunState {
    let req = StartRun {
        by,
        query: query.into(),
        ..StartRun::default()
    };
    let run = engine.start_run(req).await.unwrap().run_id;
    completed(engine, run).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_opened_again_rebuilds_the_memory_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let p = Principal::user("p");
    let kept = run_as(&engine, p.clone(), "아파트만 보여줘").await;
    let kept = kept.supervisor.saved_memories;
    let gone = run_as(&engine, p.clone(), "전세만 보여줘").await;
    let gone = gone.supervisor.saved_memories;
    engine.forget(&p, "p", &gone[0].memory_id).await.unwrap();
    engine.shutdown().await;
    drop(engine);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let engine = engine_in(dir.path()).await;
    assert_eq!(engine.memories(&p, "p").unwrap(), kept);
    let later = run_as(&engine, p.clone(), PRICES).await;
    assert_eq!(loaded(&engine, later.run_id.unwrap()), Some(kept.clone()));
    assert_eq!(
        later.supervisor.user_preferences,
        Some(json!({"property_type": "apartment"}))
    );
    assert_default_search(&later);
    // Another principal's run for the same user loads nothing of it: memory is kept per owner.
    let req = StartRun {
        by: Principal::admin("root"),
        user_id: Some("p".into()),
        query: PRICES.into(),
        ..StartRun::default()
    };
    let other = engine.start_run(req).await.unwrap().run_id;
    completed(&engine, other).await;
    assert_eq!(loaded(&engine, other), None);
    engine.shutdown().await;
}

/// What a run of a deleted session saved is deleted with it: never listed or loaded again, a
/// deletion of it finds nothing (so nothing is appended after the tombstone), and after a
/// restart the session stays deleted. A log written before that was so (a memory deletion
/// appended after the tombstone) keeps the session deleted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_a_deleted_session_goes_with_it_and_the_session_stays_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_in(dir.path()).await;
    let p = Principal::user("p");
    let session = chronicle_schemas::SessionId::from("p-chat");
    let req = StartRun {
        by: p.clone(),
        query: STATES_ONLY.into(),
        session_id: Some(session.clone()),
        ..StartRun::default()
    };
    let run = engine.start_run(req).await.unwrap().run_id;
    let saved = completed(&engine, run).await.supervisor.saved_memories;
    assert_eq!(saved.len(), 1, "{saved:?}");
    // A second session whose memory stays, and whose run gets a deletion after its tombstone the
    // way older servers wrote it.
    let old = chronicle_schemas::SessionId::from("p-old");
    let req = StartRun {
        by: p.clone(),
        query: "아파트만 보여줘".into(),
        session_id: Some(old.clone()),
        ..StartRun::default()
    };
    let old_run = engine.start_run(req).await.unwrap().run_id;
    let old_saved = completed(&engine, old_run).await.supervisor.saved_memories;
    assert_eq!(engine.memories(&p, "p").unwrap().len(), 2);

    engine.delete_session(&p, &session).await.unwrap();
    let left: Vec<String> = engine
        .memories(&p, "p")
        .unwrap()
        .into_iter()
        .map(|m| m.memory_id)
        .collect();
    assert_eq!(
        left,
        vec![old_saved[0].memory_id.clone()],
        "the deleted session's item is gone"
    );
    assert!(matches!(
        engine.forget(&p, "p", &saved[0].memory_id).await,
        Err(chronicle_engine::Error::MemoryNotFound(_))
    ));
    let later = run_as(&engine, p.clone(), PRICES).await;
    let loaded_ids: Vec<String> = loaded(&engine, later.run_id.unwrap())
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.memory_id)
        .collect();
    assert_eq!(
        loaded_ids, left,
        "a new turn loads nothing of the deleted session"
    );
    let last = events(&engine, run).last().unwrap().event.clone();
    assert!(matches!(last, Event::SessionDeleted { .. }), "{last:?}");
    engine.shutdown().await;
    drop(engine);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The older servers' log: the second session deleted, then a deletion of its memory after
    // its tombstone.
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut live = store.load(old_run).unwrap();
    live.append(vec![Event::SessionDeleted {
        by: chronicle_schemas::Actor::user("p"),
    }])
    .await
    .unwrap();
    live.append(vec![Event::MemoryDeleted {
        memory_id: old_saved[0].memory_id.clone(),
        by: chronicle_schemas::Actor::user("p"),
    }])
    .await
    .unwrap();
    drop(live);
    drop(store);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let engine = engine_in(dir.path()).await;
    for s in [&session, &old] {
        assert!(
            matches!(
                engine.session(&p, s),
                Err(chronicle_engine::Error::SessionNotFound(_))
            ),
            "{s} stays deleted after a restart"
        );
        assert!(engine.session_turns(&p, s).is_err());
    }
    assert!(engine.authorize(&p, old_run).is_err());
    assert!(engine.memories(&p, "p").unwrap().is_empty());
    engine.shutdown().await;
}

/// A planner that plans nothing (as the engine's own) and remembers one fact of every turn.
struct Remembering;

#[async_trait::async_trait]
impl chronicle_engine::Planner for Remembering {
    async fn intent(&self, cx: &chronicle_engine::PlanContext<'_>) -> chronicle_engine::Intent {
        chronicle_engine::NoPlanner.intent(cx).await
    }
    async fn plan(
        &self,
        cx: &chronicle_engine::PlanContext<'_>,
        intent: &chronicle_engine::Intent,
    ) -> chronicle_engine::Plan {
        chronicle_engine::NoPlanner.plan(cx, intent).await
    }
    async fn evaluate(
        &self,
        cx: &chronicle_engine::PlanContext<'_>,
        results: &[chronicle_engine::AgentResult],
    ) -> chronicle_engine::EvaluationOutcome {
        chronicle_engine::NoPlanner.evaluate(cx, results).await
    }
    async fn respond(
        &self,
        cx: &chronicle_engine::PlanContext<'_>,
        intent: &chronicle_engine::Intent,
        results: &[chronicle_engine::AgentResult],
    ) -> Value {
        chronicle_engine::NoPlanner
            .respond(cx, intent, results)
            .await
    }
    async fn remember(
        &self,
        _: &chronicle_engine::PlanContext<'_>,
        _: &chronicle_engine::Intent,
        _: &[chronicle_engine::AgentResult],
    ) -> Vec<chronicle_engine::Remembered> {
        vec![chronicle_engine::Remembered {
            kind: MemoryKind::Fact,
            key: "report_language".into(),
            value: json!("en"),
            text: "reads reports in English".into(),
        }]
    }
}

/// An llm agent's system prompt holds what the turn loaded of the user's memory, and the call
/// records it by hash beside the memory files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_is_told_what_is_remembered_about_the_user() {
    use chronicle_testkit::model::{Reply, TestServer};
    let model = TestServer::start(Some(crate::llm_support::KEY), |_| {
        Reply::Content("Done.".into())
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = crate::llm_support::settings(&model.base_url);
    settings.planner = std::sync::Arc::new(Remembering);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let engine = Engine::open(store, settings).await.unwrap();
    let first = run_as(&engine, Principal::user("p"), "remember me").await;
    assert_eq!(first.supervisor.saved_memories.len(), 1);

    let req = StartRun {
        by: Principal::user("p"),
        query: "How did sales go in March?".into(),
        agent: Some("analyst".into()),
        ..StartRun::default()
    };
    let run = engine.start_run(req).await.unwrap().run_id;
    completed(&engine, run).await;
    let system = model.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("What you remember about the user:\n- reads reports in English"),
        "{system}"
    );
    let loaded = events(&engine, run)
        .into_iter()
        .find_map(|e| match e.event {
            Event::LlmCalled { loaded, .. } => Some(loaded),
            _ => None,
        });
    let text = "What you remember about the user:\n- reads reports in English\n";
    assert_eq!(
        loaded,
        Some(vec![chronicle_schemas::LoadedFile {
            source: "user-memory".into(),
            hash: chronicle_schemas::Hash::of_content(text.as_bytes()),
        }])
    );
    engine.shutdown().await;
}
