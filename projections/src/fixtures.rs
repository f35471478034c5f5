//! Deterministic fixture runs (fixed ids and times) for tests and snapshot files across crates.

use chronicle_schemas::{
    Actor, ApprovalId, CheckpointId, Decision, Envelope, Event, Hash, HitlMode, Payload, Phase,
    PlanStep, RunConfig, RunId, SessionId, Source, Strategy, Subject, SupervisorTodo, Timestamp,
    TodoId, TodoPriority, TodoStatus, encode_record,
};
use serde_json::json;

/// 2025-10-05T10:00:00Z, when the fixture runs start.
pub const FIXTURE_T0_MICROS: i64 = 1_759_658_400_000_000;

/// Wraps events into envelopes of `run` with real chain hashes; event `i` is at seq and offset
/// `i`, half a second after the previous one.
pub fn envelopes(run: RunId, events: Vec<Event>) -> Vec<Envelope> {
    let mut prev = Hash::ZERO;
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let seq = i as u64;
            let at = Timestamp(FIXTURE_T0_MICROS + 500_000 * i as i64);
            let (_, hash) =
                encode_record(seq, run, seq, at, &prev, &event).expect("fixture encodes");
            let env = Envelope {
                offset: seq,
                run_id: run,
                seq,
                at,
                prev_hash: prev,
                hash,
                event,
            };
            prev = hash;
            env
        })
        .collect()
}

fn step(agent: &str, priority: u32, deps: &[&str], purpose: &str) -> PlanStep {
    PlanStep {
        agent_name: agent.into(),
        team: agent.trim_end_matches("_team").into(),
        task: format!("{agent} 실행"),
        description: purpose.into(),
        priority,
        dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
        input_mapping: json!({"purpose": purpose}),
        timeout: 30,
        retry_count: 2,
        optional: false,
    }
}

/// The plan → TODO converter applied to one step (the engine's converter is tested against this).
fn todo(i: usize, s: &PlanStep, deps: Vec<TodoId>) -> SupervisorTodo {
    SupervisorTodo {
        id: TodoId(format!("todo_{:03}", i + 1)),
        name: format!("{} 실행", s.agent_name),
        description: format!("{}을(를) 실행하여 데이터 수집/분석 수행", s.agent_name),
        agent_name: s.agent_name.clone(),
        team: s.team.clone(),
        category: "general".into(),
        agent_purpose: s.input_mapping["purpose"]
            .as_str()
            .unwrap_or_default()
            .into(),
        priority: TodoPriority::from_plan_priority(s.priority),
        dependencies: deps,
        created_at: Timestamp(FIXTURE_T0_MICROS),
        max_retries: s.retry_count,
        metadata: [
            ("timeout".to_owned(), json!(s.timeout)),
            ("optional".to_owned(), json!(s.optional)),
            ("input_mapping".to_owned(), s.input_mapping.clone()),
            ("original_priority".to_owned(), json!(s.priority)),
        ]
        .into(),
        ..SupervisorTodo::default()
    }
}

fn checkpoint(n: u32, node: &str, done: u32) -> Event {
    Event::CheckpointSaved {
        checkpoint_id: CheckpointId(format!("cp_{n:03}")),
        node: node.into(),
        todos_completed: done,
    }
}

fn status(id: &str, from: TodoStatus, to: TodoStatus, by: Actor) -> Event {
    Event::TodoStatusChanged {
        todo_id: id.into(),
        from,
        to,
        reason: None,
        attempt: 1,
        by,
    }
}

fn approval_message(t: &SupervisorTodo) -> String {
    let deps = if t.dependencies.is_empty() {
        "없음".to_owned()
    } else {
        t.dependencies
            .iter()
            .map(|d| d.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "📋 다음 작업을 실행하시겠습니까?\n\n- TODO ID: {id}\n- 작업명: {name}\n- Agent: {agent}\n- 우선순위: {prio}\n- 의존성: {deps}\n\n명령어:\n  /todo approve    - 승인\n  /todo skip {id}  - 건너뛰기\n  /todos           - TODO 목록 조회",
        id = t.id,
        name = t.name,
        agent = t.agent_name,
        prio = t.priority.as_str(),
    )
}

/// The deposit-increase question ("집주인이 전세금 3억을 10억으로 올려달래...", the landlord
/// wants to raise the deposit from 300 to 1,000 million won) planned as search_team →
/// analysis_team under `every_todo`, both approved by `local`, both completed, answered.
pub fn scenario_1_events() -> Vec<Event> {
    use TodoStatus::*;
    let steps = vec![
        step("search_team", 1, &[], "법률 정보 검색"),
        step("analysis_team", 2, &["search_team"], "전세금 인상률 분석"),
    ];
    let t1 = todo(0, &steps[0], vec![]);
    let t2 = todo(1, &steps[1], vec!["todo_001".into()]);
    let user = || Actor::user("local");
    let mut ev = vec![
        Event::RunStarted {
            session_id: SessionId::from("thread-scenario-1"),
            user_id: Some("1".into()),
            request_id: "req_fixture_1".into(),
            query: "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘".into(),
            config: RunConfig {
                hitl: HitlMode::EveryTodo,
                max_retries: 2,
                ..RunConfig::default()
            },
            parent: None,
            owner: None,
            traceparent: None,
        },
        Event::PhaseChanged {
            phase: Phase::Initialization,
        },
        checkpoint(1, "initialize", 0),
        Event::PhaseChanged {
            phase: Phase::Planning,
        },
        Event::IntentAnalyzed {
            intent_type: "comprehensive".into(),
            confidence: 0.9,
            keywords: vec!["전세금".into(), "인상".into(), "법적".into()],
            entities: json!({"금액": ["3억", "10억"], "계약유형": ["전세"]}),
            source: Source::Rules,
        },
        checkpoint(2, "analyze_intent", 0),
        Event::PlanCreated {
            strategy: Strategy::Sequential,
            steps: steps.clone(),
            parallel_groups: vec![],
            estimated_total_time: 20.0,
            available_agents: vec![
                "search_team".into(),
                "analysis_team".into(),
                "document_team".into(),
            ],
            available_teams: vec!["search".into(), "analysis".into(), "document".into()],
            source: Source::Rules,
        },
        Event::TodoAdded {
            todo: t1.clone(),
            added_by: Actor::Engine,
        },
        Event::TodoAdded {
            todo: t2.clone(),
            added_by: Actor::Engine,
        },
        checkpoint(3, "build_plan", 0),
    ];
    for (n, (t, result)) in [
        (&t1, json!({"legal_results": [{"law_name": "주택임대차보호법", "article": "제7조"}], "total_results": 1})),
        (&t2, json!({"metrics": {"increase_rate_pct": 233.3, "legal_cap_pct": 5.0}, "insights": ["인상률 233.3%는 법정 상한 5%를 초과합니다"], "confidence_score": 0.9})),
    ]
    .into_iter()
    .enumerate()
    {
        let id = t.id.as_str();
        let apr = ApprovalId(format!("apr_{:03}", n + 1));
        let done = n as u32;
        ev.extend([
            status(id, Pending, WaitingApproval, Actor::Engine),
            Event::ApprovalRequested {
                approval_id: apr.clone(),
                subject: Subject::Todo { todo_id: t.id.clone() },
                tool_name: t.agent_name.clone(),
                args: json!({"query": "전세금 인상"}),
                preview: json!({"todo_id": id, "agent": t.agent_name}),
                policy: "every_todo".into(),
                message: approval_message(t),
                expires_at: None,
                supersedes: None,
            },
            Event::RunInterrupted { reason: "waiting for approval".into(), approval_id: Some(apr.clone()) },
            checkpoint(4 + 2 * done, "approval", done),
            Event::CommandReceived { command: "/todos".into(), by: user(), accepted: true, said: None },
            Event::CommandReceived { command: "/todo approve".into(), by: user(), accepted: true, said: None },
            Event::ApprovalDecided {
                approval_id: apr,
                decision: Decision::Approve,
                edited_args: None,
                decided_by: "local".into(),
                comment: None,
            },
            Event::RunResumed { by: user() },
            Event::PhaseChanged { phase: Phase::Executing },
            status(id, WaitingApproval, InProgress, Actor::Engine),
            Event::AgentStarted { todo_id: t.id.clone(), agent: t.agent_name.clone(), attempt: 1, input: json!({"query": "전세금 인상"}) },
            Event::AgentCompleted { todo_id: t.id.clone(), agent: t.agent_name.clone(), attempt: 1, result: Payload::Inline(result), duration_ms: 8500 },
            status(id, InProgress, Completed, Actor::Engine),
            checkpoint(5 + 2 * done, "execute_todo", done + 1),
        ]);
    }
    ev.extend([
        Event::EvaluationRecorded {
            quality_score: 0.9,
            completeness: 1.0,
            needs_retry: false,
            retry_agents: vec![],
            feedback: "모든 작업이 완료되었습니다".into(),
            source: Source::Rules,
            add_agents: vec![],
        },
        checkpoint(8, "evaluate", 2),
        Event::PhaseChanged { phase: Phase::Aggregation },
        Event::ResultsAggregated { aggregated: json!({"search_team": {"total_results": 1}, "analysis_team": {"increase_rate_pct": 233.3}}) },
        checkpoint(9, "aggregate", 2),
        Event::PhaseChanged { phase: Phase::ResponseGeneration },
        Event::ResponseGenerated { final_response: json!({"type": "answer", "answer": "3억 → 10억은 233.3% 인상으로, 주택임대차보호법상 5% 상한을 초과합니다."}) },
        checkpoint(10, "generate_response", 2),
        Event::RunCompleted { total_execution_time_ms: 29_500 },
    ]);
    ev
}
