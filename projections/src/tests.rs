//! Projection tests: live fold == replay for every prefix (proptest), snapshot replay == from
//! zero, restore == state at `to_seq`, abandoned branches, and the scenario-1 snapshot.

use chronicle_schemas::{
    Actor, ApprovalId, ApprovalStatus, CheckpointId, Decision, Event, Payload, Phase, RunId,
    RunStatus, SessionId, Subject, SupervisorState, SupervisorTodo, TodoId, TodoStatus, ToolCallId,
};
use proptest::prelude::*;
use serde_json::json;

use crate::fixtures::{envelopes, scenario_1_events};
use crate::{RunState, VecSource, replay, replay_from_zero, snapshot};

const RUN: RunId = RunId::from_u128(0xC0FFEE);

/// Applies `events` live, one by one, snapshotting every `k` events through a real
/// encode/decode, and checks after every prefix that live == from-zero replay == snapshot
/// replay, and that every restore reproduces the state at its `to_seq`.
fn check_live_equals_replay(events: Vec<Event>, k: u64) -> RunState {
    let mut src = VecSource::default();
    let mut live = RunState::default();
    for env in envelopes(RUN, events) {
        src.events.push(env.clone());
        live.apply(&env, &src).unwrap();
        if snapshot::is_due(env.seq, k) {
            src.snapshots
                .push(snapshot::decode(&snapshot::encode(&live)).expect("snapshot decodes"));
        }
        let zero = replay_from_zero(&src, env.seq).unwrap();
        assert_eq!(
            live,
            zero,
            "live != replay after seq {} ({})",
            env.seq,
            env.event.kind()
        );
        let snap = replay(&src, env.seq).unwrap();
        assert_eq!(
            snap, zero,
            "snapshot replay != replay after seq {}",
            env.seq
        );
        if let Event::RunRestored {
            checkpoint_id,
            to_seq,
            ..
        } = &env.event
        {
            assert_restored(
                &live.supervisor,
                &replay_from_zero(&src, *to_seq).unwrap().supervisor,
                checkpoint_id,
            );
        }
    }
    live
}

/// Field for field, the restored state is the state at `to_seq`; only `restored_from` differs.
fn assert_restored(after: &SupervisorState, at_to_seq: &SupervisorState, cp: &CheckpointId) {
    assert_eq!(after.restored_from.as_ref(), Some(cp));
    let mut expected = at_to_seq.clone();
    expected.restored_from = Some(cp.clone());
    assert_eq!(after, &expected);
}

#[derive(Clone, Debug)]
enum Op {
    AddTodo,
    Status(usize, TodoStatus),
    Request(usize),
    Decide(usize, Decision),
    Expire(usize),
    Checkpoint,
    Restore(f64),
    AgentStart(usize),
    AgentDone(usize),
    AgentFail(usize, bool),
    Tool(usize),
    Phase(Phase),
    Note,
    Evaluate,
    Aggregate,
    Terminal(u8),
    /// A person's value update (`ValuesUpdated` and its checkpoint); `None` removes the key.
    Values(usize, Option<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    let status = prop::sample::select(TodoStatus::ALL.to_vec());
    let decision = prop::sample::select(vec![Decision::Approve, Decision::Reject, Decision::Edit]);
    let phase = prop::sample::select(vec![Phase::Planning, Phase::Executing, Phase::Aggregation]);
    prop_oneof![
        3 => Just(Op::AddTodo),
        6 => (0..6usize, status).prop_map(|(i, s)| Op::Status(i, s)),
        3 => (0..6usize).prop_map(Op::Request),
        3 => (0..6usize, decision).prop_map(|(i, d)| Op::Decide(i, d)),
        1 => (0..6usize).prop_map(Op::Expire),
        3 => Just(Op::Checkpoint),
        2 => (0.0..1.0f64).prop_map(Op::Restore),
        2 => (0..6usize).prop_map(Op::AgentStart),
        2 => (0..6usize).prop_map(Op::AgentDone),
        1 => (0..6usize, any::<bool>()).prop_map(|(i, r)| Op::AgentFail(i, r)),
        1 => (0..6usize).prop_map(Op::Tool),
        1 => phase.prop_map(Op::Phase),
        1 => Just(Op::Note),
        1 => Just(Op::Evaluate),
        1 => Just(Op::Aggregate),
        1 => (0..3u8).prop_map(Op::Terminal),
        2 => (0..3usize, prop::option::of(any::<u8>())).prop_map(|(k, v)| Op::Values(k, v)),
    ]
}

const AGENTS: [&str; 4] = [
    "search_team",
    "analysis_team",
    "document_team",
    "market_analysis",
];

/// Turns ops into a run's events. Ops may be nonsense (a decision on an unknown approval, an
/// illegal transition): the engine never writes those, but the fold must be total anyway.
fn materialize(ops: Vec<Op>) -> Vec<Event> {
    let mut ev = vec![Event::RunStarted {
        session_id: SessionId::from("s"),
        user_id: None,
        request_id: "r".into(),
        query: "강남구 아파트 시세 조회".into(),
        config: Default::default(),
        parent: None,
        owner: None,
        traceparent: None,
    }];
    let (mut todos, mut approvals, mut cps, mut calls) = (0usize, 0usize, Vec::new(), 0usize);
    let todo_id = |i: usize, n: usize| TodoId(format!("todo_{:03}", i % n.max(1) + 1));
    for op in ops {
        let seq = ev.len() as u64;
        let e = match op {
            Op::AddTodo => {
                todos += 1;
                let deps = if todos > 1 {
                    vec![todo_id(todos - 2, todos)]
                } else {
                    vec![]
                };
                Event::TodoAdded {
                    todo: SupervisorTodo {
                        id: TodoId(format!("todo_{todos:03}")),
                        name: format!("{} 실행", AGENTS[todos % 4]),
                        agent_name: AGENTS[todos % 4].into(),
                        dependencies: deps,
                        max_retries: 2,
                        ..Default::default()
                    },
                    added_by: Actor::Engine,
                }
            }
            Op::Status(i, to) => Event::TodoStatusChanged {
                todo_id: todo_id(i, todos),
                from: TodoStatus::Pending,
                to,
                reason: Some("because".into()),
                attempt: 1,
                by: Actor::Engine,
            },
            Op::Request(i) => {
                approvals += 1;
                Event::ApprovalRequested {
                    approval_id: ApprovalId(format!("apr_{approvals:03}")),
                    subject: Subject::Todo {
                        todo_id: todo_id(i, todos),
                    },
                    tool_name: "search_team".into(),
                    args: json!({"q": i}),
                    preview: json!(null),
                    policy: "every_todo".into(),
                    message: "📋".into(),
                    expires_at: None,
                    supersedes: (i % 3 == 0 && approvals > 1)
                        .then(|| ApprovalId(format!("apr_{:03}", approvals - 1))),
                }
            }
            Op::Decide(i, decision) => Event::ApprovalDecided {
                approval_id: ApprovalId(format!("apr_{:03}", i % approvals.max(1) + 1)),
                decision,
                edited_args: (decision == Decision::Edit).then(|| json!({"q": "edited"})),
                decided_by: "alice".into(),
                comment: None,
            },
            Op::Expire(i) => Event::ApprovalExpired {
                approval_id: ApprovalId(format!("apr_{:03}", i % approvals.max(1) + 1)),
                on_expiry: Decision::Reject,
            },
            Op::Checkpoint => {
                cps.push(seq);
                Event::CheckpointSaved {
                    checkpoint_id: CheckpointId(format!("cp_{:03}", cps.len())),
                    node: "approval".into(),
                    todos_completed: 0,
                }
            }
            Op::Values(k, v) => {
                ev.push(values_updated(json!({ format!("k{k}"): v })));
                cps.push(seq + 1);
                Event::CheckpointSaved {
                    checkpoint_id: CheckpointId(format!("cp_{:03}", cps.len())),
                    node: "update".into(),
                    todos_completed: 0,
                }
            }
            Op::Restore(f) => {
                let to_seq = ((seq - 1) as f64 * f) as u64;
                let cp = cps
                    .iter()
                    .rposition(|s| *s <= to_seq)
                    .map_or("cp_000".into(), |i| format!("cp_{:03}", i + 1));
                Event::RunRestored {
                    checkpoint_id: CheckpointId(cp),
                    to_seq,
                    by: Actor::user("alice"),
                }
            }
            Op::AgentStart(i) => Event::AgentStarted {
                todo_id: todo_id(i, todos),
                agent: AGENTS[i % 4].into(),
                attempt: 1,
                input: json!({}),
            },
            Op::AgentDone(i) => Event::AgentCompleted {
                todo_id: todo_id(i, todos),
                agent: AGENTS[i % 4].into(),
                attempt: 1,
                result: Payload::Inline(json!({"total_results": i, "insights": ["x"]})),
                duration_ms: 10,
            },
            Op::AgentFail(i, retryable) => Event::AgentFailed {
                todo_id: todo_id(i, todos),
                agent: AGENTS[i % 4].into(),
                attempt: 1,
                error: "boom".into(),
                retryable,
            },
            Op::Tool(i) => {
                calls += 1;
                let id = ToolCallId(format!("call_{calls}"));
                ev.push(Event::ToolCallRequested {
                    tool_call_id: id.clone(),
                    todo_id: todo_id(i, todos),
                    tool: "write_file".into(),
                    args: json!({"p": i}),
                    attempt: 1,
                    index: 0,
                    server: None,
                });
                Event::ToolCallCompleted {
                    tool_call_id: id,
                    output: Some(Payload::Inline(json!("ok"))),
                    error: None,
                    duration_ms: 1,
                }
            }
            Op::Phase(p) => Event::PhaseChanged { phase: p },
            Op::Note => Event::Reasoning {
                message: format!("note {seq}"),
            },
            Op::Evaluate => Event::EvaluationRecorded {
                quality_score: 0.5,
                completeness: 0.5,
                needs_retry: true,
                retry_agents: vec!["analysis_team".into()],
                feedback: "more".into(),
                source: Default::default(),
                add_agents: vec![],
            },
            Op::Aggregate => Event::ResultsAggregated {
                aggregated: json!({"n": seq}),
            },
            Op::Terminal(0) => Event::RunCompleted {
                total_execution_time_ms: seq,
            },
            Op::Terminal(1) => Event::RunFailed {
                error: "limit".into(),
            },
            Op::Terminal(_) => Event::RunCancelled {
                by: Actor::user("bob"),
                reason: None,
            },
        };
        ev.push(e);
    }
    ev
}

fn values_updated(values: serde_json::Value) -> Event {
    Event::ValuesUpdated {
        values: values.as_object().cloned().unwrap_or_default(),
        as_node: None,
        by: Actor::user("alice"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn live_fold_equals_replay_for_every_prefix(ops in prop::collection::vec(op(), 1..60), k in 2u64..9) {
        check_live_equals_replay(materialize(ops), k);
    }
}

#[test]
fn scenario_1_state_snapshot() {
    let state = check_live_equals_replay(scenario_1_events(), 1000);
    let s = &state.supervisor;
    assert_eq!(s.run_status, RunStatus::Completed);
    let p = s.planning_state.as_ref().unwrap();
    assert_eq!(
        p.completed_todo_ids,
        [TodoId::from("todo_001"), TodoId::from("todo_002")]
    );
    assert!(
        state
            .approvals
            .list
            .iter()
            .all(|a| a.status == ApprovalStatus::Approved)
    );
    insta::assert_json_snapshot!("scenario_1_state", state);
}

/// Two restores on top of a prefix of the deposit-increase fixture run: to the approval checkpoint
/// that was waiting for todo_002 (`cp_006`), then onto a checkpoint of the abandoned branch.
#[test]
fn restore_equals_state_at_to_seq_including_abandoned_branch() {
    let full = scenario_1_events();
    let cp_seq = |events: &[Event], id: &str| {
        events.iter().position(|e| matches!(e, Event::CheckpointSaved { checkpoint_id, .. } if checkpoint_id.as_str() == id)).unwrap() as u64
    };
    let cp6 = cp_seq(&full, "cp_006");
    let cp9 = cp_seq(&full, "cp_009");
    let mut events = full.clone();
    // Back to the approval gate of todo_002, after the run had completed.
    events.push(Event::RunRestored {
        checkpoint_id: "cp_006".into(),
        to_seq: cp6,
        by: Actor::user("local"),
    });
    events.push(Event::ApprovalRequested {
        approval_id: "apr_003".into(),
        subject: Subject::Todo {
            todo_id: "todo_002".into(),
        },
        tool_name: "analysis_team".into(),
        args: json!({}),
        preview: json!({}),
        policy: "every_todo".into(),
        message: "📋 again".into(),
        expires_at: None,
        supersedes: Some("apr_002".into()),
    });
    events.push(Event::CheckpointSaved {
        checkpoint_id: "cp_011".into(),
        node: "approval".into(),
        todos_completed: 1,
    });
    // cp_009 (aggregate) now lies on the abandoned branch; restore onto it.
    events.push(Event::RunRestored {
        checkpoint_id: "cp_009".into(),
        to_seq: cp9,
        by: Actor::user("local"),
    });
    let state = check_live_equals_replay(events.clone(), 7);

    // After the second restore, the state is the aggregate point of the first history.
    let src = VecSource {
        events: envelopes(RUN, events.clone()),
        snapshots: vec![],
    };
    let at_cp9 = replay_from_zero(&src, cp9).unwrap();
    assert_restored(
        &state.supervisor,
        &at_cp9.supervisor,
        &CheckpointId::from("cp_009"),
    );
    assert_eq!(state.supervisor.current_phase, Phase::Aggregation);
    assert_eq!(state.supervisor.run_status, RunStatus::Running);

    // The checkpoint tree: cp_011 hangs off cp_006 on branch 1 and is now abandoned; cp_009 is
    // on the effective path again; the branch counter says two restores happened.
    let cps = &state.checkpoints;
    let cp11 = cps.get(&"cp_011".into()).unwrap();
    assert_eq!(
        (cp11.parent.as_ref().map(|c| c.as_str()), cp11.branch),
        (Some("cp_006"), 1)
    );
    assert!(cps.is_abandoned(&"cp_011".into()));
    assert!(!cps.is_abandoned(&"cp_009".into()));
    assert!(cps.is_abandoned(&"cp_010".into()));
    assert_eq!(cps.head.as_ref().map(|c| c.as_str()), Some("cp_009"));
    assert_eq!(cps.branch, 2);

    // Approvals: the re-asked apr_003 was pending at the second restore and is cancelled by it;
    // the decided ones keep their decisions in the audit view.
    let a = &state.approvals;
    assert_eq!(
        a.get(&"apr_003".into()).unwrap().status,
        ApprovalStatus::Cancelled
    );
    assert_eq!(
        a.get(&"apr_002".into()).unwrap().status,
        ApprovalStatus::Approved
    );

    // In between: right after the first restore, the run waits on todo_002 again.
    let mid = replay_from_zero(&src, cp6 + (full.len() as u64 - cp6)).unwrap();
    let p = mid.supervisor.planning_state.as_ref().unwrap();
    assert_eq!(
        p.todo(&"todo_002".into()).unwrap().status,
        TodoStatus::WaitingApproval
    );
    assert_eq!(
        mid.supervisor.pending_approval_ids,
        [ApprovalId::from("apr_002")]
    );
    let after_reask = replay_from_zero(&src, full.len() as u64 + 1).unwrap();
    assert_eq!(
        after_reask.supervisor.pending_approval_ids,
        [ApprovalId::from("apr_003")]
    );
    assert_eq!(
        after_reask.approvals.get(&"apr_002".into()).unwrap().status,
        ApprovalStatus::Approved
    );
}

#[test]
fn corrupt_snapshot_is_ignored() {
    let src = VecSource {
        events: envelopes(RUN, scenario_1_events()),
        snapshots: vec![],
    };
    let mut bytes = snapshot::encode(&replay(&src, 10).unwrap());
    assert!(snapshot::decode(&bytes).is_some());
    let mut unknown_format = bytes.clone();
    unknown_format[0] = 3;
    assert!(snapshot::decode(&unknown_format).is_none());
    assert!(snapshot::decode_verified(&unknown_format).is_none());
    // Bytes verified elsewhere skip the checksum: a wrong one does not matter to them.
    let mut other_sum = bytes.clone();
    other_sum[1] ^= 0xff;
    assert!(snapshot::decode(&other_sum).is_none());
    assert_eq!(
        snapshot::decode_verified(&other_sum),
        snapshot::decode(&bytes)
    );
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    assert!(snapshot::decode(&bytes).is_none());
    assert!(snapshot::decode(&bytes[..20]).is_none());
    assert!(snapshot::decode_verified(&bytes[..20]).is_none());
}

/// Team states follow the team an agent declared, whatever the agent is called; a TODO of an
/// older log, without a recorded team, counts in the team its agent's name suggests.
#[test]
fn team_states_are_keyed_by_the_declared_team() {
    let todo = |id: &str, agent: &str, team: &str| Event::TodoAdded {
        todo: SupervisorTodo {
            id: id.into(),
            agent_name: agent.into(),
            team: team.into(),
            ..SupervisorTodo::default()
        },
        added_by: Actor::Engine,
    };
    let started = |id: &str, agent: &str| Event::AgentStarted {
        todo_id: id.into(),
        agent: agent.into(),
        attempt: 1,
        input: json!({"filters": {"city": "Seoul"}}),
    };
    let events = vec![
        scenario_1_events().remove(0),
        todo("todo_001", "forecast", "weather"),
        todo("todo_002", "finder", "search"),
        todo("todo_003", "search_team", ""),
        started("todo_001", "forecast"),
        Event::AgentCompleted {
            todo_id: "todo_001".into(),
            agent: "forecast".into(),
            attempt: 1,
            result: Payload::Inline(json!({"answer": "sunny"})),
            duration_ms: 5,
        },
        started("todo_002", "finder"),
        Event::AgentFailed {
            todo_id: "todo_002".into(),
            agent: "finder".into(),
            attempt: 1,
            error: "down".into(),
            retryable: true,
        },
        started("todo_003", "search_team"),
    ];
    let s = check_live_equals_replay(events, 1000).supervisor;
    let weather = &s.teams["weather"];
    assert_eq!(
        (weather.status.as_str(), weather.agents.as_slice()),
        ("completed", ["forecast".to_owned()].as_slice())
    );
    let search = &s.teams["search"];
    assert_eq!(search.agents, ["finder", "search_team"]);
    assert_eq!(search.status, "in_progress", "the older TODO's agent runs");
    let seed = s.search_team_state.as_ref().unwrap();
    assert_eq!(seed.filters, json!({"city": "Seoul"}));
    assert_eq!(s.team_results["forecast"], json!({"answer": "sunny"}));
    assert!(s.analysis_team_state.is_none() && s.document_team_state.is_none());
}

/// Values a person sets merge key by key: a later update replaces a key, `null` removes it; the
/// state before the first update has none (and serializes without the field); each update's
/// checkpoint is marked as one and does not count as a step.
#[test]
fn values_merge_key_by_key() {
    let mut events = scenario_1_events();
    let before = events.len() as u64 - 1;
    let cp = |n: usize| Event::CheckpointSaved {
        checkpoint_id: CheckpointId(format!("cp_{n:03}")),
        node: "update".into(),
        todos_completed: 0,
    };
    let n = events
        .iter()
        .filter(|e| matches!(e, Event::CheckpointSaved { .. }))
        .count();
    events.extend([
        values_updated(json!({"note": "call back", "budget": 5})),
        cp(n + 1),
        values_updated(json!({"budget": 7, "note": null, "tags": ["a"]})),
        cp(n + 2),
    ]);
    let live = check_live_equals_replay(events.clone(), 3);
    assert_eq!(
        serde_json::Value::Object(live.supervisor.values.clone()),
        json!({"budget": 7, "tags": ["a"]})
    );
    let src = VecSource {
        events: envelopes(RUN, events),
        snapshots: vec![],
    };
    let first = replay(&src, before + 2).unwrap();
    assert_eq!(
        serde_json::Value::Object(first.supervisor.values),
        json!({"note": "call back", "budget": 5})
    );
    let earlier = replay(&src, before).unwrap();
    assert!(earlier.supervisor.values.is_empty());
    let shown = serde_json::to_value(&earlier.supervisor).unwrap();
    assert!(shown.get("values").is_none(), "no values, no field");
    let list = &live.checkpoints;
    let updates: Vec<bool> = list.checkpoints.iter().map(|c| c.update).collect();
    assert_eq!(updates.iter().filter(|u| **u).count(), 2);
    assert!(updates[updates.len() - 2..].iter().all(|u| *u));
    assert_eq!(list.steps(), n);
}

/// The facts fold agrees with the full state after every event (a restore's facts are taken
/// from the state right after it, as the indexer does).
fn check_facts_follow_the_state(events: Vec<Event>) {
    let envs = envelopes(RUN, events);
    let src = VecSource {
        events: envs.clone(),
        snapshots: vec![],
    };
    let mut state = RunState::default();
    let mut facts = crate::RunFacts::default();
    for env in &envs {
        state.apply(env, &src).unwrap();
        facts.apply(env);
        if matches!(env.event, Event::RunRestored { .. }) {
            facts.restored(&state);
        }
        let expected = crate::RunFacts::of_state(&state, facts.created_at, facts.updated_at);
        assert_eq!(
            facts,
            expected,
            "after seq {} ({})",
            env.seq,
            env.event.kind()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn run_facts_follow_the_state_for_every_prefix(ops in prop::collection::vec(op(), 1..60)) {
        check_facts_follow_the_state(materialize(ops));
    }
}

#[test]
fn run_facts_follow_the_state_through_scenario_1() {
    check_facts_follow_the_state(scenario_1_events());
}
