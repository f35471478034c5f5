//! `llm` agents against the scripted model on loopback: agent mode through the real server (the
//! model's `write_todos` is the run's TODO list), model calls answered from the log after a
//! real SIGKILL, a gated call a person rejects, delegation between llm agents and its depth
//! limit, and a restore into the middle of an agent loop (the cancelled call the model is told
//! of).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::Error as ClientError;
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Principal, RestoreTarget, StartRun, child_run_id};
use chronicle_projections::RunState;
use chronicle_schemas::{
    Actor, CheckpointId, Decision, Envelope, Event, HitlMode, RunId, RunStatus, TodoStatus,
};
use chronicle_testkit::model::{Reply, Seen, TestServer};
use chronicle_wire::RunRequest;
use serde_json::{Value, json};

use crate::api_support::server_settings;
use crate::llm_support::{
    self, ANSWER, KEY, REPORT, agent_of, analyst, calls, last_results, turn_of,
};
use crate::support::{
    announced_run, completed, engine_child, events, first_pending, open_engine, pending_call,
    reject,
};

const WAIT: Duration = Duration::from_secs(30);

async fn engine(dir: &Path, model: &TestServer) -> Engine {
    open_engine(dir, llm_support::settings(&model.base_url)).await
}

/// The run's `LlmCalled` events of agents' turns.
fn turns(evs: &[Envelope]) -> Vec<Envelope> {
    evs.iter()
        .filter(|e| matches!(&e.event, Event::LlmCalled { turn: Some(_), .. }))
        .cloned()
        .collect()
}

/// The requests the model got for `agent`'s turn `turn`.
fn asked(model: &TestServer, agent: &str, turn: usize) -> Vec<Seen> {
    model
        .requests()
        .into_iter()
        .filter(|r| agent_of(&r.body) == agent && turn_of(&r.body) == turn)
        .collect()
}

async fn start_agent(engine: &Engine, agent: &str, hitl: HitlMode, session: &str) -> RunId {
    engine
        .start_run(StartRun {
            query: "How did sales go in March? Write a report.".into(),
            session_id: Some(session.into()),
            hitl: Some(hitl),
            agent: Some(agent.into()),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .run_id
}

/// The TODOs the agent planned: (id, name, status, who added it).
fn planned(s: &RunState, evs: &[Envelope]) -> Vec<(String, String, TodoStatus, String)> {
    let added_by = |id: &str| {
        evs.iter()
            .find_map(|e| match &e.event {
                Event::TodoAdded { todo, added_by } if todo.id.as_str() == id => {
                    Some(added_by.to_string())
                }
                _ => None,
            })
            .unwrap_or_default()
    };
    let p = s.supervisor.planning_state.as_ref().unwrap();
    p.todos
        .iter()
        .filter(|t| t.planned_by().is_some())
        .map(|t| {
            let id = t.id.to_string();
            let by = added_by(&id);
            (id, t.name.clone(), t.status, by)
        })
        .collect()
}

fn expected_plan() -> Vec<(String, String, TodoStatus, String)> {
    [
        ("todo_002", "Read the data", TodoStatus::Completed),
        ("todo_003", "Write the report", TodoStatus::Completed),
        ("todo_004", "Check the report", TodoStatus::InProgress),
    ]
    .into_iter()
    .map(|(id, name, st)| (id.into(), name.into(), st, "agent:analyst".into()))
    .collect()
}

#[tokio::test]
async fn agent_mode_the_models_plan_is_the_runs_todo_list() {
    let model = TestServer::start(Some(KEY), analyst).await;
    let srv = server_settings(
        Tokens::none(),
        llm_support::settings(&model.base_url),
        ApiConfig::default(),
    )
    .await;
    // An agent the server does not have: 422 naming it, nothing written.
    let before = srv.offsets();
    let bad = RunRequest {
        agent: Some("nobody".into()),
        ..RunRequest::new("anything")
    };
    match srv.client.start_run(&bad).await {
        Err(ClientError::Http { status, body }) => {
            assert_eq!(status, 422);
            let message = body.error.message;
            assert!(
                message.starts_with("unknown agent \"nobody\" (`agent`); known: analyst"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(srv.offsets(), before, "nothing was written");
    // A plan beside the agent may only be its one step.
    let beside = RunRequest {
        agent: Some("analyst".into()),
        plan: Some(vec![chronicle_wire::PlanStepRequest {
            agent_name: "helper".into(),
            ..Default::default()
        }]),
        ..RunRequest::new("anything")
    };
    match srv.client.start_run(&beside).await {
        Err(ClientError::Http { status, body }) => {
            assert_eq!(status, 422);
            assert_eq!(
                body.error.message,
                "`agent` \"analyst\" drives the run alone: a `plan` may only be its one step"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(srv.offsets(), before, "nothing was written");

    // The all-runs stream, open before the run starts: the model's answer arrives live.
    let mut live = srv
        .client
        .all_events(chronicle_client::EventsFrom::default())
        .await
        .unwrap();
    let req = RunRequest {
        agent: Some("analyst".into()),
        hitl: Some(HitlMode::None),
        ..RunRequest::new("How did sales go in March? Write a report.")
    };
    let started = srv.client.start_run(&req).await.unwrap();
    let run = started.run_id;
    let s = completed(&srv.engine, run).await;
    let evs = events(&srv.engine, run);

    // Over SSE: the answer as `message.chunk`s of the agent's TODO (no `id:`, never stored),
    // before the durable response that holds the whole of it.
    let mut items = Vec::new();
    loop {
        let item = tokio::time::timeout(WAIT, live.next_item())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let end = matches!(&item, chronicle_client::StreamItem::Event(e) if e.name == "run.end");
        items.push(item);
        if end {
            break;
        }
    }
    let chunks: Vec<(usize, &chronicle_wire::ChunkData)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            chronicle_client::StreamItem::Chunk(c) => Some((i, c)),
            chronicle_client::StreamItem::Event(_) => None,
        })
        .collect();
    assert!(!chunks.is_empty(), "{items:?}");
    let text: String = chunks
        .iter()
        .filter(|(_, c)| c.kind_type == chronicle_wire::names::ChunkType::Message)
        .map(|(_, c)| c.content.text.as_str())
        .collect();
    assert_eq!(text, ANSWER);
    assert!(chunks.iter().all(|(_, c)| c.run_id == run
        && c.content.agent.as_deref() == Some("analyst")
        && c.content.todo_id.as_ref().map(|t| t.as_str()) == Some("todo_001")));
    let response = items
        .iter()
        .position(|i| {
            matches!(i, chronicle_client::StreamItem::Event(e)
            if matches!(e.data.event(), Ok(Event::ResponseGenerated { .. })))
        })
        .unwrap();
    assert!(chunks.iter().all(|(i, _)| *i < response), "{items:?}");

    // The model's plan is the run's TODO list, with the statuses it gave them.
    assert_eq!(planned(&s, &evs), expected_plan());
    let todos = srv.client.todos(run).await.unwrap();
    let listed: Vec<(String, TodoStatus)> = todos
        .todos
        .iter()
        .filter(|t| t.planned_by().is_some())
        .map(|t| (t.name.clone(), t.status))
        .collect();
    assert_eq!(
        listed,
        [
            ("Read the data".to_owned(), TodoStatus::Completed),
            ("Write the report".to_owned(), TodoStatus::Completed),
            ("Check the report".to_owned(), TodoStatus::InProgress),
        ]
    );
    assert_eq!(todos.todos[0].agent_name, "analyst", "the agent's own TODO");
    assert_eq!(todos.todos[0].status, TodoStatus::Completed);
    assert!(evs.iter().any(|e| matches!(
        &e.event,
        Event::TodoStatusChanged { todo_id, to: TodoStatus::Completed, by: Actor::Agent(a), .. }
            if todo_id.as_str() == "todo_002" && a == "analyst"
    )));

    // The file the model wrote, through the host, is in the session's workspace.
    let file = srv
        ._dir
        .path()
        .join("workspaces")
        .join(started.session_id.as_str())
        .join("report.md");
    assert_eq!(std::fs::read_to_string(file).unwrap(), REPORT);

    // The answer is the model's; the model was asked four times, each a recorded turn.
    assert_eq!(
        s.supervisor.final_response.as_ref().unwrap()["answer"],
        ANSWER
    );
    let seen = model.requests();
    assert_eq!(seen.len(), 4);
    assert!(last_results(&seen[3].body)[0].contains("sales rose 12%"));
    assert_eq!(turns(&evs).len(), 4);
    assert_eq!(s.supervisor.model_turns.len(), 4);
    let log = format!("{evs:?}");
    assert!(!log.contains(KEY), "the key is never recorded");
    // Agent mode asks no planner: every model call is a turn of the agent.
    assert_eq!(s.supervisor.llm_calls, 4);
    srv.stop().await;
}

/// The run and the model's requests for one turn: `Some(body)` once the child asked for it.
fn wait_for_request(model: &TestServer, agent: &str, turn: usize) {
    let deadline = std::time::Instant::now() + WAIT;
    while asked(model, agent, turn).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "turn {turn} never asked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_two_turns_then_the_model_is_asked_only_the_rest() {
    // Turn 3 hangs while the child lives, so the kill comes after turns 1–2 were recorded and
    // while the model works on turn 3.
    let hang = Arc::new(AtomicBool::new(true));
    let hang_now = hang.clone();
    let model = TestServer::start(Some(KEY), move |body| {
        let reply = analyst(body);
        if turn_of(body) == 3 && hang_now.load(Ordering::SeqCst) {
            Reply::Delay(Duration::from_secs(3600), Box::new(reply))
        } else {
            reply
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = engine_child(&["llm", dir.path().to_str().unwrap(), &model.base_url]);
    let run = announced_run(&mut child);
    let model_ref = &model;
    tokio::task::block_in_place(|| wait_for_request(model_ref, "analyst", 3));
    child.kill().unwrap();
    child.wait().unwrap();
    hang.store(false, Ordering::SeqCst);

    let before: Vec<Envelope> = {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        store
            .read_run(run, 0, u64::MAX)
            .map(|e| e.unwrap())
            .collect()
    };
    let turns_before = turns(&before);
    assert_eq!(turns_before.len(), 2, "two turns recorded before the kill");
    let per_turn = |t| asked(&model, "analyst", t).len();
    assert_eq!((per_turn(1), per_turn(2), per_turn(3)), (1, 1, 1));

    let engine = engine(dir.path(), &model).await;
    let s = completed(&engine, run).await;
    // After the restart the model got no request for turns 1–2: they were answered from the log.
    assert_eq!(
        (per_turn(1), per_turn(2), per_turn(3), per_turn(4)),
        (1, 1, 2, 1)
    );
    let after = events(&engine, run);
    let turns_after = turns(&after);
    assert_eq!(turns_after.len(), 4);
    assert_eq!(
        turns_after[..2],
        turns_before[..],
        "the recorded turns are the same"
    );
    // The same attempt ran twice; the tool calls of turns 1–2 were not made again.
    let starts: Vec<u32> = after
        .iter()
        .filter_map(|e| match &e.event {
            Event::AgentStarted { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [1, 1]);
    let requested = after
        .iter()
        .filter(|e| e.event.kind() == "ToolCallRequested")
        .count();
    assert_eq!(
        requested, 4,
        "write_todos, write_file, read_file, write_todos"
    );
    assert_eq!(planned(&s, &after), expected_plan());
    assert_eq!(
        s.supervisor.final_response.as_ref().unwrap()["answer"],
        ANSWER
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_rejected_write_is_the_models_tool_result_and_is_not_made_again() {
    let args = json!({"file_path": "/workspace/notes.md", "content": "draft\n"});
    let write = args.clone();
    let model = TestServer::start(Some(KEY), move |body| match turn_of(body) {
        1 | 2 => calls(&[("write_file", write.clone())]),
        _ => Reply::Content("I could not write the notes.".into()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), &model).await;
    let run = start_agent(&engine, "analyst", HitlMode::Tools, "reject").await;
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let call = pending_call(&s, "write_file");
    reject(&engine, run, call.approval_id, "alice", Some("not now")).await;
    let s = completed(&engine, run).await;
    let seen = model.requests();
    assert_eq!(seen.len(), 3);
    let rejected = &last_results(&seen[1].body)[0];
    assert!(rejected.starts_with("rejected: "), "{rejected}");
    assert!(rejected.contains("not now"), "{rejected}");
    let refused = &last_results(&seen[2].body)[0];
    assert_eq!(
        refused,
        "refused: a human rejected write_file with these args in this attempt; it is not called again"
    );
    let evs = events(&engine, run);
    let asks = evs
        .iter()
        .filter(|e| e.event.kind() == "ApprovalRequested")
        .count();
    assert_eq!(asks, 1, "the repeat was refused without asking again");
    assert!(
        !dir.path().join("workspaces/reject/notes.md").exists(),
        "nothing was written"
    );
    assert_eq!(
        s.supervisor.final_response.as_ref().unwrap()["answer"],
        "I could not write the notes."
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_persons_skip_is_told_to_the_model_on_its_next_turn() {
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => analyst(body),
        // Gated under `tools`: the run waits here while a person edits the plan.
        2 => calls(&[(
            "write_file",
            json!({"file_path": "/workspace/report.md", "content": REPORT}),
        )]),
        3 => calls(&[(
            "write_todos",
            json!({"todos": [
                {"content": "Read the data", "status": "completed"},
                {"content": "Write the report", "status": "completed"},
                {"content": "Check the report", "status": "pending"},
            ]}),
        )]),
        _ => Reply::Content(ANSWER.into()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), &model).await;
    let run = start_agent(&engine, "analyst", HitlMode::Tools, "edits").await;
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let approval = first_pending(&s);
    let alice = Principal::admin("alice");
    engine
        .command(run, "/todo skip todo_004 not needed", &alice)
        .await
        .unwrap();
    engine
        .decide(run, approval, Decision::Approve, None, &alice, None)
        .await
        .unwrap();
    let s = completed(&engine, run).await;
    let seen = model.requests();
    assert_eq!(seen.len(), 4);
    // Turn 3 carries the person's change after the tool's result, and only turn 3 does.
    let notice = |body: &Value| {
        llm_support::messages(body)
            .last()
            .filter(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .map(str::to_owned)
    };
    let told = notice(&seen[2].body).expect("turn 3 is told of the skip");
    assert!(
        told.contains(
            "todo_004 \"Check the report\": pending -> skipped by user:alice (not needed)"
        ),
        "{told}"
    );
    assert_eq!(notice(&seen[1].body), None);
    assert!(
        llm_support::messages(&seen[3].body)
            .iter()
            .any(|m| m["content"] == told.as_str()),
        "the notice stays in the conversation"
    );
    // The model cannot undo a person's skip; it is told so.
    let answer: Value = serde_json::from_str(&last_results(&seen[3].body)[0]).unwrap();
    assert_eq!(
        answer["notes"],
        json!(["todo_004 is skipped: not changed to pending"])
    );
    let evs = events(&engine, run);
    let recorded: Vec<Option<String>> = turns(&evs)
        .iter()
        .map(|e| match &e.event {
            Event::LlmCalled { notice, .. } => notice.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, [None, None, Some(told), None]);
    let skipped = planned(&s, &evs)
        .into_iter()
        .find(|t| t.0 == "todo_004")
        .unwrap();
    assert_eq!(skipped.2, TodoStatus::Skipped);
    assert_eq!(s.supervisor.plan_edits_told, 1);
    engine.shutdown().await;
}

/// Lead delegates to helper; recurser delegates to itself until the depth limit.
fn delegating(body: &Value) -> Reply {
    let results = last_results(body);
    match (agent_of(body).as_str(), turn_of(body)) {
        ("lead", 1) => calls(&[(
            "task",
            json!({"description": "Summarise the notes", "subagent_type": "helper"}),
        )]),
        ("lead", _) => Reply::Content(format!("Lead: {}", results[0])),
        ("helper", _) => Reply::Content("Helper's summary".into()),
        ("recurser", 1) => calls(&[(
            "task",
            json!({"description": "go deeper", "subagent_type": "recurser"}),
        )]),
        (_, _) => Reply::Content(format!("below me: {}", results[0])),
    }
}

/// The child run of the run's one `task` call.
fn child_of(engine: &Engine, run: RunId) -> RunId {
    let s = engine.state(run, None).unwrap();
    let call = s
        .supervisor
        .tool_calls
        .iter()
        .find(|c| c.tool == "task")
        .expect("a task call");
    child_run_id(run, &call.tool_call_id)
}

#[tokio::test]
async fn an_llm_agent_delegates_to_another_and_nesting_stops_at_the_depth_limit() {
    let model = TestServer::start(Some(KEY), delegating).await;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), &model).await;
    let run = start_agent(&engine, "lead", HitlMode::None, "delegate").await;
    let s = completed(&engine, run).await;
    let child = child_of(&engine, run);
    let cs = completed(&engine, child).await;
    assert_eq!(cs.supervisor.config.agent.as_deref(), Some("helper"));
    assert_eq!(cs.supervisor.config.subagent_depth, 1);
    assert_eq!(cs.supervisor.parent.as_ref().unwrap().run_id, run);
    assert_eq!(
        cs.supervisor.final_response.as_ref().unwrap()["answer"],
        "Helper's summary"
    );
    let answer = s.supervisor.final_response.as_ref().unwrap()["answer"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer.starts_with("Lead: {"), "{answer}");
    assert!(
        answer.contains("\"answer\":\"Helper's summary\""),
        "{answer}"
    );

    // The recurser nests until the limit (3 levels below the root): the deepest run's call
    // fails with a clear error, which its model reads, and every run completes.
    let root = start_agent(&engine, "recurser", HitlMode::None, "deep").await;
    let mut chain = vec![root];
    for _ in 0..3 {
        completed(&engine, *chain.last().unwrap()).await;
        chain.push(child_of(&engine, *chain.last().unwrap()));
    }
    let deepest = completed(&engine, chain[3]).await;
    assert_eq!(deepest.supervisor.config.subagent_depth, 3);
    let call = deepest
        .supervisor
        .tool_calls
        .iter()
        .find(|c| c.tool == "task")
        .unwrap();
    let error = call.error.as_deref().unwrap_or_default();
    assert_eq!(
        error,
        "failed: sub-agent depth limit of 3 reached: this run is 3 level(s) below its root run, so it cannot delegate further"
    );
    assert!(
        engine
            .state(child_run_id(chain[3], &call.tool_call_id), None)
            .is_err(),
        "no fourth level was started"
    );
    let top = completed(&engine, root).await;
    let answer = top.supervisor.final_response.as_ref().unwrap()["answer"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        answer.contains("sub-agent depth limit of 3 reached"),
        "{answer}"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_restore_into_the_loop_continues_and_the_cut_call_is_answered_cancelled() {
    let model = TestServer::start(Some(KEY), analyst).await;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), &model).await;
    let run = start_agent(&engine, "analyst", HitlMode::None, "restore").await;
    completed(&engine, run).await;
    // The checkpoint of turn 2: the model had asked for write_file, which had not run yet.
    let s = engine.state(run, None).unwrap();
    let turn_cps: Vec<CheckpointId> = s
        .checkpoints
        .checkpoints
        .iter()
        .filter(|c| c.node == "agent_turn")
        .map(|c| c.checkpoint_id.clone())
        .collect();
    assert_eq!(turn_cps.len(), 4, "one checkpoint per turn");
    let cp = turn_cps[1].clone();
    engine
        .restore(
            run,
            RestoreTarget::Checkpoint(cp.clone()),
            &Principal::admin("alice"),
        )
        .await
        .unwrap();
    let s = completed(&engine, run).await;
    assert_eq!(s.supervisor.restored_from, Some(cp));
    assert_eq!(s.supervisor.run_status, RunStatus::Completed);
    // Turns 1–2 came from the log; turn 3 was asked again, told the write was cancelled.
    let per_turn = |t| asked(&model, "analyst", t).len();
    assert_eq!(
        (per_turn(1), per_turn(2), per_turn(3), per_turn(4)),
        (1, 1, 2, 2)
    );
    let again = &asked(&model, "analyst", 3)[1].body;
    let patched = &last_results(again)[0];
    assert!(
        patched.starts_with("cancelled: the run stopped or was restored"),
        "{patched}"
    );
    let evs = events(&engine, run);
    let restored_at = evs
        .iter()
        .position(|e| e.event.kind() == "RunRestored")
        .unwrap();
    let cancelled = evs[restored_at..].iter().any(|e| {
        matches!(&e.event, Event::ToolCallCompleted { error: Some(err), .. } if err.starts_with("cancelled: "))
    });
    assert!(cancelled, "the cancelled call is recorded");
    assert_eq!(
        s.supervisor.final_response.as_ref().unwrap()["answer"],
        ANSWER
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_models_evaluation_adds_a_todo_in_supervisor_mode() {
    let evaluations = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = evaluations.clone();
    let model = TestServer::start(Some(KEY), move |body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        let answer = |v: Value| Reply::Content(v.to_string());
        if system.starts_with("You decide which") {
            answer(json!({"agents": [{"name": "helper", "score": 0.9}], "keywords": ["notes"], "confidence": 0.9}))
        } else if system.starts_with("You plan") {
            answer(json!({"agents": [{"name": "helper", "task": "summarise the notes"}]}))
        } else if system.starts_with("You judge") {
            match count.fetch_add(1, Ordering::SeqCst) {
                0 => answer(json!({"quality_score": 0.5, "needs_retry": false,
                    "add_agents": ["analyst"], "feedback": "a report is missing"})),
                _ => answer(json!({"quality_score": 0.9, "needs_retry": false, "feedback": "done"})),
            }
        } else if system.starts_with("You write the final answer") {
            answer(json!({"answer": "Summary and report."}))
        } else {
            Reply::Content(format!("{}'s part", agent_of(body)))
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), &model).await;
    let run = engine
        .start_run(StartRun {
            query: "Summarise the notes".into(),
            hitl: Some(HitlMode::None),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .run_id;
    let s = completed(&engine, run).await;
    let p = s.supervisor.planning_state.as_ref().unwrap();
    let todos: Vec<(&str, TodoStatus)> = p
        .todos
        .iter()
        .map(|t| (t.agent_name.as_str(), t.status))
        .collect();
    assert_eq!(
        todos,
        [
            ("helper", TodoStatus::Completed),
            ("analyst", TodoStatus::Completed)
        ]
    );
    let added = &p.todos[1];
    assert_eq!(added.metadata["added_by"], "llm");
    assert_eq!(added.metadata["round"], 1);
    let evs = events(&engine, run);
    assert!(evs.iter().any(|e| matches!(
        &e.event,
        Event::TodoAdded { todo, added_by: Actor::Llm } if todo.agent_name == "analyst"
    )));
    assert_eq!(s.supervisor.evaluation_rounds, 2);
    assert_eq!(evaluations.load(Ordering::SeqCst), 2);
    assert_eq!(
        s.supervisor.team_results["analyst"]["answer"],
        "analyst's part"
    );
    engine.shutdown().await;
}

/// Past its context budget the agent has its older turns summarised by a model call of its own,
/// recorded like every turn, and its next request carries the summary instead of them.
#[tokio::test]
async fn past_the_context_budget_older_turns_are_summarised_and_replaced() {
    const SUMMARY: &str = "data.csv holds 2400 x; read it twice.";
    let model = TestServer::start(Some(KEY), |body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.starts_with("You summarise") {
            return Reply::Content(SUMMARY.into());
        }
        if body
            .to_string()
            .contains("[Summary of the conversation so far]")
        {
            return Reply::Content("The data is all x.".into());
        }
        calls(&[("read_file", json!({"file_path": "/workspace/data.csv"}))])
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspaces/summary");
    std::fs::create_dir_all(&workspace).unwrap();
    // ~600 tokens a read: two reads and the prompt are over the budget of 1000.
    std::fs::write(workspace.join("data.csv"), "x".repeat(2400)).unwrap();
    let engine = engine(dir.path(), &model).await;
    let run = start_agent(&engine, "reader", HitlMode::None, "summary").await;
    let s = completed(&engine, run).await;
    assert_eq!(
        s.supervisor.final_response.as_ref().unwrap()["answer"],
        "The data is all x."
    );

    let seen = model.requests();
    let is_summary = |r: &Seen| {
        r.body["messages"][0]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("You summarise"))
    };
    let summaries: Vec<&Seen> = seen.iter().filter(|r| is_summary(r)).collect();
    assert_eq!(summaries.len(), 1, "one summary call");
    let at = seen.iter().position(is_summary).unwrap();
    // What was summarised: the query and the oldest turns, as a transcript.
    let transcript = summaries[0].body["messages"][1]["content"]
        .as_str()
        .unwrap();
    assert!(
        transcript.starts_with("user: How did sales go"),
        "{transcript}"
    );
    assert!(transcript.contains("called read_file"), "{transcript}");
    // The request after it: the system prompt, the summary, then only the recent turns.
    let next = &seen[at + 1].body["messages"];
    let before = &seen[at - 1].body["messages"];
    assert_eq!(next[0], before[0], "the system prompt stays");
    assert_eq!(
        next[1]["content"],
        format!("[Summary of the conversation so far]\n{SUMMARY}")
    );
    assert!(
        !next.as_array().unwrap().iter().any(|m| m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("How did sales go"))),
        "the query is only in the summary now: {next}"
    );
    assert!(next.as_array().unwrap().len() < before.as_array().unwrap().len() + 2);

    // Every model call, the summary's included, is recorded, so a replay asks nothing.
    let evs = events(&engine, run);
    assert_eq!(turns(&evs).len(), seen.len());
    engine.shutdown().await;
}

/// The system prompt the model gets lists the skills (the server's and the session's, names and
/// descriptions, never the bodies) and holds the memory files' text, read at every turn; the
/// call records what was loaded by hash.
#[tokio::test]
async fn skills_and_memory_files_go_into_the_system_prompt_and_are_recorded_by_hash() {
    let model = TestServer::start(Some(KEY), |body| match turn_of(body) {
        1 => calls(&[(
            "write_file",
            json!({"file_path": "/workspace/AGENTS.md", "content": "Reports are in English.\n"}),
        )]),
        _ => Reply::Content("Done.".into()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let skill = home.join("skills/sales-report");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: sales-report\ndescription: Writes a monthly sales report\n---\nSECRET-BODY: use a table.\n",
    )
    .unwrap();
    std::fs::write(home.join("AGENTS.md"), "Always cite the data file.\n").unwrap();
    let mut settings = llm_support::settings(&model.base_url);
    settings.skills_dir = Some(home.join("skills"));
    settings.memory_dir = Some(home.clone());
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let engine = Engine::open(store, settings).await.unwrap();
    let run = start_agent(&engine, "analyst", HitlMode::None, "skills").await;
    completed(&engine, run).await;

    let seen = model.requests();
    assert_eq!(seen.len(), 2);
    let system = |i: usize| {
        seen[i].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = system(0);
    assert!(first.starts_with("You are the analyst."), "{first}");
    assert!(
        first.contains(
            "sales-report: Writes a monthly sales report (/workspace/skills/sales-report/SKILL.md)"
        ),
        "{first}"
    );
    assert!(
        !first.contains("SECRET-BODY"),
        "the body is read on demand: {first}"
    );
    assert!(first.contains("Always cite the data file."), "{first}");
    assert!(!first.contains("Reports are in English."), "{first}");
    // The session's memory file, written by the model in turn 1, is read at turn 2.
    let second = system(1);
    assert!(second.contains("Always cite the data file."), "{second}");
    assert!(second.contains("Reports are in English."), "{second}");
    // The skill is the session's now, where read_file reaches it.
    assert!(
        dir.path()
            .join("workspaces/skills/skills/sales-report/SKILL.md")
            .exists()
    );

    let loaded: Vec<Vec<String>> = turns(&events(&engine, run))
        .iter()
        .map(|e| match &e.event {
            Event::LlmCalled { loaded, .. } => loaded.iter().map(|f| f.source.clone()).collect(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        loaded,
        [
            vec![
                "server:AGENTS.md",
                "/workspace/skills/sales-report/SKILL.md"
            ],
            vec![
                "server:AGENTS.md",
                "/workspace/AGENTS.md",
                "/workspace/skills/sales-report/SKILL.md"
            ],
        ]
    );
    engine.shutdown().await;
}
