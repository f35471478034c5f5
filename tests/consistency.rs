//! Read-your-writes: once an answer has said a run reached a state, every later read on that
//! server shows at least that state, and one response never mixes two states. Many sessions at
//! once, each driven through `POST /chat` and `resume` under approval of every TODO, with every
//! read made right after each answer held against it.

use chronicle_api::Tokens;
use chronicle_client::{ChatReply, Client};
use chronicle_schemas::{HitlMode, RunId, TodoStatus};
use chronicle_wire::{ChatRequest, ResumeRequest, SessionStatus};

use crate::api_support::server;

const QUERY: &str = "강남구 아파트 전세 시세 알려줘";
/// Sessions driven at once, and the turns each takes.
const SESSIONS: usize = 8;
const ROUNDS: usize = 12;

/// What an answer said: the run, and how far it got (its status and the seq it was read at).
fn rank(status: SessionStatus) -> u8 {
    match status {
        SessionStatus::InProgress => 0,
        SessionStatus::WaitingHuman => 1,
        _ => 2,
    }
}

/// Every read of the session and its run, made right after an answer that said `said` of `run`.
async fn check_reads(c: &Client, thread: &str, run: RunId, said: SessionStatus, answered: bool) {
    let s = c.session(thread).await.unwrap();
    assert_eq!(s.run_id, run, "{thread}: the session's latest run");
    let turn = s.turns.last().expect("the session has its turn");
    // One response never mixes two states: the top and the latest turn say the same.
    assert_eq!(
        s.status,
        SessionStatus::from(turn.status),
        "{thread}: the session's status and its latest turn disagree in one response: {s:?}"
    );
    assert!(
        rank(s.status) >= rank(said),
        "{thread}: the answer said {said:?}, a read right after says {:?}",
        s.status
    );
    if said == SessionStatus::Completed {
        assert_eq!(s.status, SessionStatus::Completed, "{thread}: {s:?}");
        assert!(s.final_response.is_some(), "{thread}: the answer is gone");
        assert_eq!(s.final_response.is_some(), answered);
    }
    let st = c.status(run).await.unwrap();
    if said == SessionStatus::Completed {
        assert!(
            st.state.is_terminal(),
            "{thread}: the answer said completed, the status route says {:?}",
            st.state
        );
        let todos = c.todos(run).await.unwrap();
        assert!(
            todos.todos.iter().all(|t| !matches!(
                t.status,
                TodoStatus::InProgress | TodoStatus::Pending | TodoStatus::WaitingApproval
            )),
            "{thread}: a TODO still going after the answer said completed: {todos:?}"
        );
        let detail = c.session_detail(thread).await.unwrap();
        assert_eq!(
            SessionStatus::from(detail.turns.last().unwrap().status),
            SessionStatus::Completed,
            "{thread}"
        );
    } else if said == SessionStatus::WaitingHuman {
        assert!(
            st.pending_approval_id.is_some() || st.state.is_terminal(),
            "{thread}: the answer said the run waits, the status route says {st:?}"
        );
    }
}

async fn drive(c: Client, thread: String) {
    let approve = ResumeRequest {
        approve: Some(true),
        response: None,
    };
    let mut reply = c
        .chat(&ChatRequest {
            message: QUERY.into(),
            thread_id: Some(thread.clone()),
            hitl: Some(HitlMode::EveryTodo),
            ..ChatRequest::default()
        })
        .await
        .unwrap();
    for _ in 0..32 {
        match reply {
            ChatReply::Waiting { waiting, .. } => {
                let run = waiting.turn.run_id;
                check_reads(&c, &thread, run, SessionStatus::WaitingHuman, false).await;
                reply = c.resume(&thread, &approve).await.unwrap();
            }
            ChatReply::Done(turn) => {
                assert_eq!(turn.status, SessionStatus::Completed, "{turn:?}");
                check_reads(&c, &thread, turn.run_id, SessionStatus::Completed, true).await;
                return;
            }
            other => panic!("{thread}: unexpected answer {other:?}"),
        }
    }
    panic!("{thread}: the run did not end after 32 approvals");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_after_an_answer_shows_at_least_what_it_said() {
    let srv = server(Tokens::none(), None).await;
    for round in 0..ROUNDS {
        let mut sessions = tokio::task::JoinSet::new();
        for i in 0..SESSIONS {
            let c = srv.client.clone();
            sessions.spawn(drive(c, format!("ryw-{round}-{i}")));
        }
        while let Some(done) = sessions.join_next().await {
            done.unwrap();
        }
    }
}
