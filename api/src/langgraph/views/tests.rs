//! The views over states folded from the fixture run (two approvals, both approved, answered),
//! its prefixes (running, waiting) and variants (failed, restored, two pending approvals).

use chronicle_projections::fixtures::{envelopes, scenario_1_events};
use chronicle_projections::{RunState, VecSource, replay};
use chronicle_schemas::{
    Actor, Approval, ApprovalId, CheckpointId, Decision, Event, RunId, Subject, TodoId,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::*;

const RUN_A: RunId = RunId::from_u128(0xa);
const RUN_B: RunId = RunId::from_u128(0xb);

fn fold(run: RunId, events: Vec<Event>) -> RunState {
    let src = VecSource {
        events: envelopes(run, events),
        snapshots: vec![],
    };
    let last = src.events.len() as u64 - 1;
    replay(&src, last).unwrap()
}

/// The fixture's events up to and including the first that matches.
fn until(pred: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut ev = scenario_1_events();
    let i = ev.iter().position(pred).expect("the fixture has it");
    ev.truncate(i + 1);
    ev
}

fn waiting() -> Vec<Event> {
    until(|e| matches!(e, Event::RunInterrupted { .. }))
}

fn checkpoint_named(n: &str) -> impl Fn(&Event) -> bool + '_ {
    move |e| matches!(e, Event::CheckpointSaved { checkpoint_id, .. } if checkpoint_id.as_str() == n)
}

/// The waiting fixture with a second approval pending (for the analysis TODO).
fn two_pending() -> RunState {
    let mut ev = waiting();
    ev.push(Event::ApprovalRequested {
        approval_id: ApprovalId("apr_009".into()),
        subject: Subject::Todo {
            todo_id: TodoId("todo_002".into()),
        },
        tool_name: "analysis_team".into(),
        args: json!({"query": "인상률"}),
        preview: json!({}),
        policy: "every_todo".into(),
        message: "analyse?".into(),
        expires_at: None,
        supersedes: None,
    });
    fold(RUN_A, ev)
}

static NO_IDS: GivenIds = GivenIds::new();

const THREAD: ThreadRef<'static> = ThreadRef {
    given: &NO_IDS,
    thread_id: "thread-scenario-1",
    assistant_id: "3dba61cc-373b-5094-96d6-8331cb40a952",
};

#[test]
fn assistant_ids_are_langgraphs() {
    // LangGraph's own default assistant (graph `agent`) has this well-known id.
    assert_eq!(
        assistant_id("agent").to_string(),
        "fe096781-5601-53d2-b2f6-0d3403f7e9ca"
    );
    assert_eq!(
        assistant_id(SUPERVISOR_GRAPH).to_string(),
        THREAD.assistant_id
    );
}

#[test]
fn checkpoint_uuids_are_stable_and_per_run() {
    let cp = CheckpointId("cp_001".into());
    let a = checkpoint_uuid(RUN_A, &cp);
    assert_eq!(a.get_version_num(), 5);
    assert_eq!(
        a,
        Uuid::new_v5(
            &ID_NAMESPACE,
            b"00000000-0000-0000-0000-00000000000a/cp_001"
        )
    );
    // The same value as Python's `uuid.uuid5`, so the id is fixed across processes and versions.
    assert_eq!(a.to_string(), "2f7afc33-b973-5f83-94a5-f09685867dd0");
    assert_ne!(a, checkpoint_uuid(RUN_B, &cp));
    assert_ne!(a, checkpoint_uuid(RUN_A, &CheckpointId("cp_002".into())));
}

fn ids(ms: &[Message]) -> Vec<String> {
    ms.iter().map(|m| m.id.clone()).collect()
}

#[test]
fn a_finished_turn_reads_as_question_tool_calls_results_and_answer() {
    let done = fold(RUN_A, scenario_1_events());
    let ms = messages(&[&done], &NO_IDS);
    let kinds: Vec<&str> = ms.iter().map(|m| m.kind.as_str()).collect();
    assert_eq!(kinds, ["human", "ai", "tool", "ai", "tool", "ai"]);
    assert_eq!(ms[0].content, json!(done.supervisor.query));
    let call = &ms[1].tool_calls.as_ref().unwrap()[0];
    assert_eq!(call.name, "search_team");
    assert_eq!(call.kind, "tool_call");
    // The input the agent ran with, as its `AgentStarted` recorded it (not the plan's input
    // mapping, `{"purpose": "법률 정보 검색"}`: what people chose for earlier steps can change it).
    assert_eq!(call.args, json!({"query": "전세금 인상"}));
    assert_eq!(ms[2].tool_call_id.as_deref(), Some(call.id.as_str()));
    assert_eq!(ms[2].status.as_deref(), Some("success"));
    assert_eq!(ms[2].name.as_deref(), Some("search_team"));
    // No summary or answer in the result: its compact JSON.
    let result: Value = serde_json::from_str(ms[2].content.as_str().unwrap()).unwrap();
    assert_eq!(result["total_results"], 1);
    assert_eq!(ms[3].tool_calls.as_ref().unwrap()[0].name, "analysis_team");
    assert_eq!(
        ms[5].content,
        json!("3억 → 10억은 233.3% 인상으로, 주택임대차보호법상 5% 상한을 초과합니다.")
    );
    assert!(ms[5].tool_calls.is_none());
    let mut unique = ids(&ms);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ms.len(), "every message has its own id");
}

#[test]
fn message_ids_survive_a_reload_and_differ_between_turns() {
    let a = fold(RUN_A, scenario_1_events());
    let b = fold(RUN_B, scenario_1_events());
    let once = messages(&[&a, &b], &NO_IDS);
    assert_eq!(ids(&once), ids(&messages(&[&a, &b], &NO_IDS)));
    assert_eq!(once.len(), 12);
    assert_ne!(once[0].id, once[6].id);
    assert_eq!(once[6].kind, "human");
    // A turn still waiting shows its question only, with the id it keeps once it finished.
    let w = fold(RUN_A, waiting());
    let early = messages(&[&w], &NO_IDS);
    assert_eq!(ids(&early), vec![once[0].id.clone()]);
}

#[test]
fn a_failed_agent_is_an_error_tool_message() {
    let mut ev = until(|e| matches!(e, Event::AgentStarted { .. }));
    ev.push(Event::AgentFailed {
        todo_id: TodoId("todo_001".into()),
        agent: "search_team".into(),
        attempt: 1,
        error: "timeout".into(),
        retryable: false,
    });
    ev.push(Event::TodoStatusChanged {
        todo_id: "todo_001".into(),
        from: chronicle_schemas::TodoStatus::InProgress,
        to: chronicle_schemas::TodoStatus::Failed,
        reason: Some("timeout".into()),
        attempt: 1,
        by: Actor::Engine,
    });
    let ms = messages(&[&fold(RUN_A, ev)], &NO_IDS);
    let tool = ms.last().unwrap();
    assert_eq!(tool.kind, "tool");
    assert_eq!(tool.status.as_deref(), Some("error"));
    assert_eq!(tool.content, json!("timeout"));
}

#[test]
fn values_carry_the_state_the_messages_and_pending_interrupts() {
    let w = fold(RUN_A, waiting());
    let v = values(&w, &messages(&[&w], &NO_IDS));
    assert_eq!(v["query"], json!(w.supervisor.query));
    assert_eq!(v["messages"][0]["type"], "human");
    assert_eq!(v["__interrupt__"], json!(interrupts(&w)));
    assert_eq!(v["__interrupt__"].as_array().unwrap().len(), 1);
    let done = fold(RUN_A, scenario_1_events());
    assert!(values(&done, &[]).get("__interrupt__").is_none());
}

#[test]
fn an_interrupt_is_an_actionable_request_with_a_stable_hex_id() {
    let w = fold(RUN_A, waiting());
    let [i] = interrupts(&w).try_into().unwrap();
    assert_eq!(i.id.len(), 32);
    assert!(
        i.id.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(i.id, interrupt_id(RUN_A, &ApprovalId("apr_001".into())));
    assert_eq!(i.value["action_requests"][0]["name"], "search_team");
    assert_eq!(
        i.value["action_requests"][0]["args"],
        json!({"query": "전세금 인상"})
    );
    assert!(
        i.value["action_requests"][0]["description"]
            .as_str()
            .unwrap()
            .contains("todo_001")
    );
    assert_eq!(
        i.value["review_configs"],
        json!([{"action_name": "search_team", "allowed_decisions": ["approve", "edit", "reject"]}])
    );
    let both = interrupts(&two_pending());
    assert_eq!(both.len(), 2);
    assert_eq!(both[0], i);
    assert_eq!(both[1].value["action_requests"][0]["name"], "analysis_team");
    assert_ne!(both[0].id, both[1].id);
}

#[test]
fn thread_status_follows_the_latest_turn() {
    assert_eq!(thread_status(None), ThreadStatus::Idle);
    let running = fold(RUN_A, until(checkpoint_named("cp_002")));
    assert_eq!(thread_status(Some(&running)), ThreadStatus::Busy);
    assert_eq!(
        thread_status(Some(&fold(RUN_A, waiting()))),
        ThreadStatus::Interrupted
    );
    assert_eq!(
        thread_status(Some(&fold(RUN_A, scenario_1_events()))),
        ThreadStatus::Idle
    );
    let mut ev = waiting();
    ev.push(Event::RunFailed {
        error: "boom".into(),
    });
    assert_eq!(thread_status(Some(&fold(RUN_A, ev))), ThreadStatus::Error);
    let mut ev = waiting();
    ev.push(Event::RunCancelled {
        by: Actor::Engine,
        reason: None,
    });
    assert_eq!(thread_status(Some(&fold(RUN_A, ev))), ThreadStatus::Idle);
}

fn point<'a>(turns: &Turns<'a>, turn: usize, cp: &str) -> Point<'a> {
    let checkpoint = turns.states()[turn]
        .checkpoints
        .get(&CheckpointId(cp.into()))
        .expect("the checkpoint exists");
    Point { turn, checkpoint }
}

/// The state of a fixture run folded up to a checkpoint (what the routes replay).
fn at(run: RunId, cp: &str) -> RunState {
    fold(run, until(checkpoint_named(cp)))
}

fn uuid_of(run: RunId, cp: &str) -> String {
    checkpoint_uuid(run, &CheckpointId(cp.into())).to_string()
}

/// Which checkpoints a history shows, newest first: `(turn, checkpoint id)`.
fn shown_points(turns: &Turns<'_>, before: Option<Uuid>) -> Vec<(usize, String)> {
    history(turns, before)
        .unwrap()
        .iter()
        .map(|p| (p.turn, p.checkpoint.checkpoint_id.0.clone()))
        .collect()
}

fn names(want: &[(usize, &str)]) -> Vec<(usize, String)> {
    want.iter().map(|(t, s)| (*t, (*s).to_owned())).collect()
}

#[test]
fn a_turns_input_is_the_thread_before_its_question_and_follows_the_previous_head() {
    let a = fold(RUN_A, scenario_1_events());
    let b = fold(RUN_B, scenario_1_events());
    let turns = Turns::new(vec![&a, &b], 0);
    let input = point(&turns, 1, "cp_001");
    assert!(input.is_input());
    let s = input_state(THREAD, &turns, input);
    assert_eq!(s.metadata.source, "input");
    assert_eq!(
        s.parent_checkpoint
            .expect("the previous turn's head")
            .checkpoint_id,
        uuid_of(RUN_A, "cp_010")
    );
    assert_eq!(
        s.metadata.step, 1,
        "the first turn's input and head before it"
    );
    assert_eq!(s.metadata.run_id, RUN_B.0.to_string());
    assert_eq!(s.metadata.graph_id, "supervisor");
    assert_eq!(s.metadata.assistant_id, THREAD.assistant_id);
    assert_eq!(s.next, ["__start__"]);
    assert_eq!(s.tasks[0].name, "__start__");
    assert!(s.interrupts.is_empty() && s.tasks[0].interrupts.is_empty());
    // The values are the first turn's, as it ended: this turn's question is still to come.
    let ms = s.values["messages"].as_array().unwrap();
    assert_eq!(ms.len(), 6);
    assert_eq!(s.values["query"], json!(a.supervisor.query));

    let first = input_state(THREAD, &turns, point(&turns, 0, "cp_001"));
    assert_eq!(first.metadata.step, -1);
    assert_eq!(first.parent_checkpoint, None);
    assert_eq!(first.values, json!({"messages": []}));
    // The question comes in the turn's next shown checkpoint, its head: its parent is the input.
    let head_b = head(&turns).unwrap();
    let hs = thread_state_at(THREAD, &turns, head_b, &b);
    assert_eq!(hs.metadata.source, "loop");
    assert_eq!(hs.metadata.step, 2);
    assert_eq!(hs.parent_checkpoint.unwrap(), s.checkpoint);
    assert_eq!(hs.values["messages"].as_array().unwrap().len(), 12);
    assert_eq!(hs.checkpoint.checkpoint_ns, "");
    assert!(hs.created_at.starts_with("2025-10-05T10:00:"));
}

#[test]
fn a_finished_turn_shows_its_input_and_its_head_and_the_rest_is_found_by_id() {
    let a = fold(RUN_A, scenario_1_events());
    let w = fold(RUN_B, waiting());
    let turns = Turns::new(vec![&a, &w], 0);
    assert_eq!(
        shown_points(&turns, None),
        names(&[(1, "cp_003"), (1, "cp_001"), (0, "cp_010"), (0, "cp_001")])
    );
    // A checkpoint that is not shown is still found, and its parent is the shown one before it.
    let hidden = point(&turns, 0, "cp_005");
    assert!(!turns.is_shown(hidden));
    assert_eq!(find(&turns, hidden.uuid(&turns)), Some(hidden));
    assert_eq!(parent(&turns, hidden), Some(point(&turns, 0, "cp_001")));
    let s = thread_state_at(THREAD, &turns, hidden, &at(RUN_A, "cp_005"));
    assert_eq!(s.metadata.step, 0);
    // `before` may name any checkpoint: the page goes on with the shown ones older than it.
    assert_eq!(
        shown_points(&turns, Some(hidden.uuid(&turns))),
        names(&[(0, "cp_001")])
    );
    assert_eq!(
        shown_points(&turns, Some(point(&turns, 1, "cp_001").uuid(&turns))),
        names(&[(0, "cp_010"), (0, "cp_001")])
    );
    assert_eq!(history(&turns, Some(Uuid::nil())), None);
    assert_eq!(find(&turns, Uuid::nil()), None);
}

#[test]
fn a_waiting_head_has_the_approval_next_with_its_interrupts() {
    let w = fold(RUN_A, waiting());
    let turns = Turns::new(vec![&w], 0);
    let head = head(&turns).unwrap();
    assert_eq!(head.checkpoint.checkpoint_id.as_str(), "cp_003");
    let s = thread_state_at(THREAD, &turns, head, &w);
    assert_eq!(s.next, ["approval"]);
    assert_eq!(s.tasks.len(), 1);
    assert_eq!(s.tasks[0].interrupts, interrupts(&w));
    assert_eq!(s.interrupts, interrupts(&w));
    assert_eq!(s.values["__interrupt__"], json!(interrupts(&w)));
    // The same task id on every read.
    assert_eq!(
        s.tasks[0].id,
        thread_state_at(THREAD, &turns, head, &w).tasks[0].id
    );
}

#[test]
fn next_follows_the_supervisor_graph_and_is_empty_when_finished() {
    let done = fold(RUN_A, scenario_1_events());
    let turns = Turns::new(vec![&done], 0);
    let s = thread_state_at(THREAD, &turns, head(&turns).unwrap(), &done);
    assert_eq!(s.next, Vec::<String>::new());
    assert!(s.tasks.is_empty());
    let cases = [
        ("cp_002", "build_plan"),
        ("cp_005", "approval"), // the next TODO waits for its approval
        ("cp_007", "evaluate"),
        ("cp_008", "aggregate"),
        ("cp_009", "generate_response"),
    ];
    for (cp, next) in cases {
        let state = at(RUN_A, cp);
        let p = point(&turns, 0, cp);
        assert_eq!(next_nodes(&p.checkpoint.node, &state), [next], "after {cp}");
    }
}

/// The fixture run restored to `cp_003` after its first TODO ran, then a new checkpoint.
fn restored(run: RunId) -> RunState {
    let mut ev = until(checkpoint_named("cp_005"));
    let to_seq = scenario_1_events()
        .iter()
        .position(checkpoint_named("cp_003"))
        .unwrap() as u64;
    ev.push(Event::RunRestored {
        checkpoint_id: CheckpointId("cp_003".into()),
        to_seq,
        by: Actor::user("local"),
    });
    ev.push(Event::CheckpointSaved {
        checkpoint_id: CheckpointId("cp_006".into()),
        node: "approval".into(),
        todos_completed: 0,
    });
    fold(run, ev)
}

#[test]
fn a_restore_shows_where_the_branches_part_and_where_each_ends() {
    let a = fold(RUN_A, scenario_1_events());
    let r = restored(RUN_B);
    let turns = Turns::new(vec![&a, &r], 0);
    assert_eq!(
        shown_points(&turns, None),
        names(&[
            (1, "cp_006"),
            (1, "cp_005"),
            (1, "cp_003"),
            (1, "cp_001"),
            (0, "cp_010"),
            (0, "cp_001"),
        ]),
        "the new branch's head, the old branch's end, the restored checkpoint, the input"
    );
    let fork = point(&turns, 1, "cp_006");
    assert_eq!(head(&turns).unwrap(), fork);
    assert_eq!(source(&turns, fork), "fork");
    let s = thread_state_at(THREAD, &turns, fork, &r);
    assert_eq!(s.metadata.source, "fork");
    assert_eq!(
        s.parent_checkpoint.unwrap().checkpoint_id,
        uuid_of(RUN_B, "cp_003")
    );
    assert_eq!(s.metadata.step, 3, "after a's two, b's input and cp_003");
    // The abandoned branch ends at cp_005, which follows cp_003 on its own branch.
    let old = point(&turns, 1, "cp_005");
    assert_eq!(source(&turns, old), "loop");
    assert_eq!(parent(&turns, old), Some(point(&turns, 1, "cp_003")));
}

const RUN_C: RunId = RunId::from_u128(0xc);

#[test]
fn a_turn_that_follows_an_earlier_turn_branches_the_conversation() {
    let a = fold(RUN_A, scenario_1_events());
    let b = fold(RUN_B, scenario_1_events());
    let mut c = fold(RUN_C, scenario_1_events());
    c.supervisor.config.follows = Follows::Turn(RUN_A);
    let turns = Turns::new(vec![&a, &b, &c], 0);
    assert_eq!(
        (turns.parent_turn(1), turns.parent_turn(2)),
        (Some(0), Some(0))
    );
    assert_eq!(turns.chain(2), [0, 2]);
    // c's input follows a's head, as b's does: a fork there, c's branch the thread's head.
    let input_c = point(&turns, 2, "cp_001");
    let input_b = point(&turns, 1, "cp_001");
    assert_eq!(parent(&turns, input_c), parent(&turns, input_b));
    assert_eq!(parent(&turns, input_c), Some(point(&turns, 0, "cp_010")));
    let hs = thread_state_at(THREAD, &turns, head(&turns).unwrap(), &c);
    assert_eq!(hs.metadata.step, 2);
    // Its messages are a's and its own, none of b's.
    let ids: Vec<&str> = hs.values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let want: Vec<String> = messages(&[&a, &c], &NO_IDS)
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, want);
    // A turn that starts over follows nothing; copied turns follow one another whatever they say.
    c.supervisor.config.follows = Follows::Start;
    let turns = Turns::new(vec![&a, &b, &c], 0);
    assert_eq!(turns.parent_turn(2), None);
    assert_eq!(
        input_state(THREAD, &turns, point(&turns, 2, "cp_001")).values,
        json!({"messages": []})
    );
    let turns = Turns::new(vec![&a, &c, &b], 2);
    assert_eq!(
        (turns.parent_turn(1), turns.parent_turn(2)),
        (Some(0), Some(1))
    );
}

fn approvals(state: &RunState) -> Vec<&Approval> {
    state.approvals.pending().collect()
}

fn decide(value: Value, state: &RunState) -> Result<Vec<ResumeDecision>, String> {
    decisions_from_resume(RUN_A, &value, &approvals(state))
}

#[test]
fn resume_reads_words_and_agent_chat_ui_decisions() {
    let w = fold(RUN_A, waiting());
    let apr = ApprovalId("apr_001".into());
    let one = |decision, edited_args, comment: Option<&str>| {
        Ok(vec![ResumeDecision {
            approval_id: apr.clone(),
            decision,
            edited_args,
            comment: comment.map(str::to_owned),
        }])
    };
    assert_eq!(
        decide(json!("approve"), &w),
        one(Decision::Approve, None, None)
    );
    assert_eq!(
        decide(json!("reject"), &w),
        one(Decision::Reject, None, None)
    );
    assert_eq!(
        decide(json!({"decisions": [{"type": "approve"}]}), &w),
        one(Decision::Approve, None, None)
    );
    assert_eq!(
        decide(
            json!({"decisions": [{"type": "reject", "message": "not now"}]}),
            &w
        ),
        one(Decision::Reject, None, Some("not now"))
    );
    let edit = json!({"decisions": [{"type": "edit",
        "edited_action": {"name": "search_team", "args": {"query": "월세"}}}]});
    assert_eq!(
        decide(edit, &w),
        one(Decision::Edit, Some(json!({"query": "월세"})), None)
    );
}

#[test]
fn several_pending_approvals_are_resumed_by_interrupt_id() {
    let two = two_pending();
    let ids: Vec<String> = interrupts(&two).into_iter().map(|i| i.id).collect();
    let got = decide(
        json!({ids[0].clone(): "approve", ids[1].clone(): {"decisions": [{"type": "reject"}]}}),
        &two,
    )
    .unwrap();
    let summary: Vec<(&str, Decision)> = got
        .iter()
        .map(|d| (d.approval_id.as_str(), d.decision))
        .collect();
    let mut summary = summary;
    summary.sort_by_key(|(id, _)| *id);
    assert_eq!(
        summary,
        [
            ("apr_001", Decision::Approve),
            ("apr_009", Decision::Reject)
        ]
    );
    let err = decide(json!("approve"), &two).unwrap_err();
    assert!(err.contains("2 interrupts are pending"), "{err}");
    let err = decide(json!({"0123456789abcdef0123456789abcdef": "approve"}), &two).unwrap_err();
    assert!(err.contains("no pending interrupt"), "{err}");
}

#[test]
fn bad_resume_values_are_refused_with_a_reason() {
    let w = fold(RUN_A, waiting());
    let bad = [
        (json!("maybe"), "not \"maybe\""),
        (json!(42), "resume with"),
        (json!(null), "resume with"),
        (json!({"decisions": []}), "got 0"),
        (
            json!({"decisions": [{"type": "approve"}, {"type": "approve"}]}),
            "got 2",
        ),
        (json!({"decisions": [{"type": "ignore"}]}), "\"type\""),
        (json!({"decisions": [{"type": "edit"}]}), "edited_action"),
        (
            json!({"decisions": [{"type": "edit", "edited_action": {"name": "search_team", "args": "x"}}]}),
            "must be an object",
        ),
        (
            json!({"decisions": [{"type": "edit", "edited_action": {"name": "rm_rf", "args": {}}}]}),
            "\"rm_rf\"",
        ),
    ];
    for (value, says) in bad {
        let err = decide(value.clone(), &w).unwrap_err();
        assert!(err.contains(says), "{value}: {err}");
    }
    let done = fold(RUN_A, scenario_1_events());
    let err = decide(json!("approve"), &done).unwrap_err();
    assert!(err.contains("no interrupt"), "{err}");
}
