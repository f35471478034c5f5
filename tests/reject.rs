//! What a rejection does, over a real server: under `on_reject: end_turn` it ends the turn (the
//! run completes with an answer naming what was rejected and why, the TODOs that did not run
//! skipped), through `POST .../decide` and through the chat's `resume {approve: false}`; under
//! the default `skip` the rejected TODO is skipped and the run carries on; an unknown value is
//! refused with nothing written.

use chronicle_api::Tokens;
use chronicle_client::ChatReply;
use chronicle_projections::RunState;
use chronicle_schemas::{Event, HitlMode, OnReject, RunStatus, TodoStatus};
use chronicle_wire::{ChatRequest, DecisionRequest, ResumeRequest, RunRequest, SessionStatus};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api_support::{Server, server};
use crate::support::{
    WAIT, completed, events, open_engine, pending_call, reject, todo_status, waiting,
};

const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

fn agent_of(s: &RunState, todo: &str) -> String {
    let p = s.supervisor.planning_state.as_ref().unwrap();
    p.todo(&todo.into()).unwrap().agent_name.clone()
}

/// The reasons the run recorded for moving `todo` to skipped.
fn skip_reasons(srv: &Server, run: chronicle_schemas::RunId, todo: &str) -> Vec<String> {
    events(&srv.engine, run)
        .into_iter()
        .filter_map(|e| match e.event {
            Event::TodoStatusChanged {
                todo_id,
                to: TodoStatus::Skipped,
                reason,
                ..
            } if todo_id.as_str() == todo => reason,
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_turn_a_rejection_answers_with_it_and_skips_the_rest() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let req = RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        on_reject: Some(OnReject::EndTurn),
        ..RunRequest::new(SCENARIO_1)
    };
    let run = c.start_run(&req).await.unwrap().run_id;
    waiting(&srv.engine, run).await;
    let asked = c.approvals(run).await.unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let reject = DecisionRequest {
        comment: Some("법률 상담은 다음에 받을게요".into()),
        ..DecisionRequest::reject()
    };
    c.decide(run, &asked[0].id, &reject).await.unwrap();

    let s = completed(&srv.engine, run).await;
    assert_eq!(c.status(run).await.unwrap().state, RunStatus::Completed);
    let agent = agent_of(&s, "todo_001");
    let answer = s.supervisor.final_response.clone().unwrap();
    assert_eq!(answer["type"], "rejected", "{answer}");
    let text = answer["answer"].as_str().unwrap();
    for said in ["todo_001", agent.as_str(), "법률 상담은 다음에 받을게요"] {
        assert!(text.contains(said), "{said:?} in {text}");
    }
    assert_eq!(answer["rejected"]["todo_id"], "todo_001");
    assert_eq!(answer["rejected"]["agent"], json!(agent));
    assert_eq!(answer["rejected"]["comment"], "법률 상담은 다음에 받을게요");
    // Nothing ran after the rejection: the next TODO was skipped with the reason.
    assert_eq!(todo_status(&s, "todo_002"), TodoStatus::Skipped);
    assert_eq!(
        skip_reasons(&srv, run, "todo_002"),
        vec!["the turn ended: todo_001 was rejected".to_owned()]
    );
    let evs = events(&srv.engine, run);
    assert!(
        !evs.iter()
            .any(|e| matches!(e.event, Event::AgentStarted { .. })),
        "no agent ran"
    );
    assert!(matches!(
        evs.last().unwrap().event,
        Event::RunCompleted { .. }
    ));

    // The chat's "no" ends the turn the same way, and the chat answers with the rejection.
    let first = c
        .chat(&ChatRequest {
            message: SCENARIO_1.into(),
            thread_id: Some("t-no".into()),
            hitl: Some(HitlMode::EveryTodo),
            on_reject: Some(OnReject::EndTurn),
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    assert!(matches!(first, ChatReply::Waiting { .. }), "{first:?}");
    let no = ResumeRequest {
        approve: Some(false),
        response: None,
    };
    let reply = c.resume("t-no", &no).await.unwrap();
    let ChatReply::Done(done) = reply else {
        panic!("the rejection ends the turn: {reply:?}");
    };
    assert_eq!(done.status, SessionStatus::Completed);
    let answer = done.response.unwrap();
    assert_eq!(answer["type"], "rejected", "{answer}");
    assert!(
        answer["answer"].as_str().unwrap().contains("todo_001"),
        "{answer}"
    );

    // `/todo reject <reason>` too: the reason is the decision's comment, said in the answer.
    let first = c
        .chat(&ChatRequest {
            message: SCENARIO_1.into(),
            thread_id: Some("t-cmd".into()),
            hitl: Some(HitlMode::EveryTodo),
            on_reject: Some(OnReject::EndTurn),
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    let ChatReply::Waiting { waiting, .. } = first else {
        panic!("the run waits: {first:?}");
    };
    let reply = c
        .command(waiting.turn.run_id, "/todo reject 나중에 할게요")
        .await
        .unwrap();
    let s = completed(&srv.engine, waiting.turn.run_id).await;
    let answer = s.supervisor.final_response.unwrap();
    assert_eq!(answer["type"], "rejected", "{answer} after {reply:?}");
    assert!(
        answer["answer"].as_str().unwrap().contains("나중에 할게요"),
        "{answer}"
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_by_default_a_rejected_todo_is_skipped_and_the_run_carries_on() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    let first = c
        .chat(&ChatRequest {
            message: SCENARIO_1.into(),
            thread_id: Some("t-skip".into()),
            hitl: Some(HitlMode::EveryTodo),
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    let ChatReply::Waiting { waiting, .. } = first else {
        panic!("the run waits: {first:?}");
    };
    let run = waiting.turn.run_id;
    let no = ResumeRequest {
        approve: Some(false),
        response: None,
    };
    let mut reply = c.resume("t-skip", &no).await.unwrap();
    // Whatever else the plan asks for is approved: the run goes on to its own answer.
    while let ChatReply::Waiting { .. } = reply {
        let yes = ResumeRequest {
            approve: Some(true),
            response: None,
        };
        reply = c.resume("t-skip", &yes).await.unwrap();
    }
    let ChatReply::Done(done) = reply else {
        panic!("the run ends: {reply:?}");
    };
    let s = completed(&srv.engine, run).await;
    assert_eq!(s.supervisor.config.on_reject, OnReject::Skip);
    assert_eq!(todo_status(&s, "todo_001"), TodoStatus::Skipped);
    assert_ne!(done.response.unwrap()["type"], "rejected");
    assert!(
        skip_reasons(&srv, run, "todo_001")[0].starts_with("rejected by "),
        "{:?}",
        skip_reasons(&srv, run, "todo_001")
    );
    srv.stop().await;
}

/// Under the default `skip` the answer says what was rejected and why, in the query's language,
/// instead of what the other agents (did not) find; and the approval a person was asked is a
/// description in that language with no terminal commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_the_answer_says_what_was_rejected_and_why() {
    let srv = server(Tokens::none(), None).await;
    let c = &srv.client;
    /// The answer's first sentence when `agent`'s TODO was rejected, by the query's language.
    fn said(english: bool, agent: &str) -> String {
        if english {
            format!("local rejected todo_001 ({agent}): not this one. It did not run.")
        } else {
            format!(
                "local님이 todo_001({agent}) 실행을 거절했습니다 (사유: not this one). 이 작업은 실행되지 않았습니다."
            )
        }
    }
    let queries = [
        "Find apartments for sale in Gangnam and analyze the price trend",
        "강남구 아파트 매매 시세 분석해줘",
    ];
    for query in queries {
        let req = RunRequest {
            hitl: Some(HitlMode::EveryTodo),
            ..RunRequest::new(query)
        };
        let run = c.start_run(&req).await.unwrap().run_id;
        waiting(&srv.engine, run).await;
        let asked = c.approvals(run).await.unwrap();
        let (agent, message) = (&asked[0].approval.tool_name, &asked[0].approval.message);
        assert!(!message.contains("/todo"), "{message}");
        if query.is_ascii() {
            assert!(
                message.starts_with(&format!("Run {agent} for todo_001?"))
                    && message.contains("in Gangnam-gu, Seoul"),
                "{message}"
            );
        } else {
            let asks = format!("todo_001: {agent}을(를) 실행할까요?");
            assert!(message.starts_with(&asks), "{message}");
        }
        let reject = DecisionRequest {
            comment: Some("not this one".into()),
            ..DecisionRequest::reject()
        };
        c.decide(run, &asked[0].id, &reject).await.unwrap();
        let s = finished_answer(&srv, run).await;
        let answer = s.supervisor.final_response.clone().unwrap();
        let text = answer["answer"].as_str().unwrap();
        assert!(text.starts_with(&said(query.is_ascii(), agent)), "{text}");
        assert!(!text.contains("Search complete"), "{text}");
        assert_eq!(answer["rejected"][0]["todo_id"], "todo_001", "{answer}");
        assert_eq!(answer["rejected"][0]["comment"], "not this one", "{answer}");
        assert_eq!(answer["rejected"][0]["decided_by"], "local", "{answer}");
    }
    srv.stop().await;
}

/// Approves whatever else the run asks for, to its end.
async fn finished_answer(srv: &Server, run: chronicle_schemas::RunId) -> RunState {
    loop {
        let s = srv
            .engine
            .wait_until(run, WAIT, |s| {
                s.supervisor.run_status == RunStatus::WaitingForApproval
                    || s.supervisor.run_status.is_terminal()
            })
            .await
            .unwrap();
        let Some(a) = s.approvals.pending().next() else {
            return completed(&srv.engine, run).await;
        };
        srv.client
            .decide(run, &a.approval_id, &DecisionRequest::approve())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_on_reject_is_refused_and_nothing_is_written() {
    let srv = server(Tokens::none(), None).await;
    let before = srv.offsets();
    let bodies = [
        (
            "/api/v1/agent/run",
            json!({"query": "q", "on_reject": "maybe"}),
        ),
        ("/chat", json!({"message": "q", "on_reject": "end"})),
    ];
    for (path, body) in bodies {
        let resp = srv
            .http
            .post(srv.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path} {body}"
        );
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"]["code"], "unprocessable_entity", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains("end_turn"), "the values are named: {err}");
    }
    assert_eq!(srv.offsets(), before, "nothing was written");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_turn_a_rejected_tool_call_stops_its_agent_and_ends_the_turn() {
    use chronicle_engine::StartRun;

    use chronicle_testkit::model::{Reply, TestServer};

    use crate::llm_support::{self, KEY, calls, turn_of};

    let write = json!({"file_path": "/workspace/notes.md", "content": "draft\n"});
    let model = TestServer::start(Some(KEY), move |body| match turn_of(body) {
        1 => calls(&[("write_file", write.clone())]),
        _ => Reply::Content("I could not write the notes.".into()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(dir.path(), llm_support::settings(&model.base_url)).await;
    let run = engine
        .start_run(StartRun {
            query: "Write the notes.".into(),
            session_id: Some("t-tool".into()),
            hitl: Some(HitlMode::Tools),
            on_reject: Some(OnReject::EndTurn),
            agent: Some("analyst".into()),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .run_id;
    let s = engine.wait_settled(run, WAIT).await.unwrap();
    let call = pending_call(&s, "write_file");
    reject(&engine, run, call.approval_id, "alice", Some("not now")).await;
    let s = completed(&engine, run).await;
    let answer = s.supervisor.final_response.clone().unwrap();
    assert_eq!(answer["type"], "rejected", "{answer}");
    assert_eq!(answer["rejected"]["tool"], "write_file", "{answer}");
    assert_eq!(answer["rejected"]["todo_id"], "todo_001", "{answer}");
    let text = answer["answer"].as_str().unwrap();
    assert!(
        text.contains("write_file") && text.contains("not now"),
        "{text}"
    );
    // The agent was stopped: its TODO is skipped and the model was not asked again.
    assert_eq!(todo_status(&s, "todo_001"), TodoStatus::Skipped);
    assert_eq!(model.requests().len(), 1, "no turn after the rejection");
    engine.shutdown().await;
}
