//! The synthetic long run that the replay, restore and memory benchmarks fold.
//!
//! It is shaped like a real `every_todo` run that goes on for a long time: a plan of
//! [`AGENTS`]`.len()` TODOs, then cycles of [`CYCLE_EVENTS`] events, each one TODO execution
//! (checkpoint, approval asked and decided, agent started, an LLM call, a tool call, a lot of
//! reasoning narration, the agent's result, an evaluation). Every tenth execution fails and is
//! retried. The projected state grows only the way a real run's does: one checkpoint, one
//! approval and one tool call per cycle; reasoning, status changes and agent results overwrite.

use std::collections::VecDeque;

use chronicle_schemas::{
    Actor, ApprovalId, CheckpointId, Decision, Event, Hash, HitlMode, Payload, Phase, PlanStep,
    RunConfig, SessionId, Source, Strategy, Subject, SupervisorTodo, Timestamp, TodoId,
    TodoPriority, TodoStatus, ToolCallId,
};
use serde_json::{Value, json};

/// Events in one TODO execution cycle.
pub const CYCLE_EVENTS: usize = 100;

/// The plan's agents, one TODO each (the real-estate domain's teams and agents).
pub const AGENTS: [&str; 7] = [
    "search_team",
    "analysis_team",
    "document_team",
    "property_search",
    "market_analysis",
    "region_comparison",
    "investment_advisor",
];

/// Events of one cycle that are not reasoning narration (see `push_cycle`).
const CYCLE_FIXED_EVENTS: usize = 16;

const REASONING: [&str; 6] = [
    "검색 결과를 분석합니다: 주택임대차보호법 제7조의 차임 증액 청구 한도를 확인하고 있습니다",
    "Comparing the requested increase against the 5% statutory cap for renewals",
    "시세 데이터에서 최근 12개월 동일 평형 전세가 추이를 집계하는 중입니다",
    "The market_analysis agent returned 3 comparable listings; weighting them by distance",
    "계약갱신요구권 행사 가능 여부를 판단하기 위해 계약 기간과 갱신 이력을 확인합니다",
    "Drafting the answer: cite the article, show the computed rate, then list the options",
];

/// An endless iterator over the long run's events; take as many as needed.
#[derive(Debug)]
pub struct LongRun {
    buf: VecDeque<Event>,
    cycle: usize,
    status: Vec<TodoStatus>,
    completed: u32,
}

impl Default for LongRun {
    fn default() -> Self {
        Self::new()
    }
}

impl LongRun {
    pub fn new() -> Self {
        let mut run = LongRun {
            buf: VecDeque::with_capacity(CYCLE_EVENTS + 32),
            cycle: 0,
            status: vec![TodoStatus::Pending; AGENTS.len()],
            completed: 0,
        };
        run.push_header();
        run
    }

    fn push_header(&mut self) {
        let steps: Vec<PlanStep> = AGENTS
            .iter()
            .enumerate()
            .map(|(i, a)| PlanStep {
                agent_name: (*a).into(),
                team: a.trim_end_matches("_team").into(),
                task: format!("{a} 실행"),
                description: format!("{a}을(를) 실행하여 데이터 수집/분석 수행"),
                priority: (i % 3) as u32,
                dependencies: if i == 0 {
                    vec![]
                } else {
                    vec![AGENTS[i - 1].into()]
                },
                input_mapping: json!({"purpose": format!("{a} 단계")}),
                timeout: 30,
                retry_count: 2,
                optional: i == AGENTS.len() - 1,
            })
            .collect();
        self.buf.extend([
            Event::RunStarted {
                session_id: SessionId::from("bench-session"),
                user_id: Some("bench".into()),
                request_id: "req_bench_long_run".into(),
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
            Event::CheckpointSaved {
                checkpoint_id: CheckpointId::from("cp_init"),
                node: "initialize".into(),
                todos_completed: 0,
            },
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
            Event::PlanCreated {
                strategy: Strategy::Sequential,
                steps: steps.clone(),
                parallel_groups: vec![],
                estimated_total_time: 120.0,
                available_agents: AGENTS.iter().map(|a| (*a).to_owned()).collect(),
                available_teams: vec!["search".into(), "analysis".into(), "document".into()],
                source: Source::Rules,
            },
        ]);
        for (i, s) in steps.iter().enumerate() {
            self.buf.push_back(Event::TodoAdded {
                todo: SupervisorTodo {
                    id: todo_id(i),
                    name: s.task.clone(),
                    description: s.description.clone(),
                    agent_name: s.agent_name.clone(),
                    agent_purpose: format!("{} 단계", s.agent_name),
                    priority: TodoPriority::from_plan_priority(s.priority),
                    dependencies: if i == 0 { vec![] } else { vec![todo_id(i - 1)] },
                    created_at: Timestamp(1_759_658_400_000_000),
                    max_retries: s.retry_count,
                    metadata: [
                        ("timeout".to_owned(), json!(s.timeout)),
                        ("optional".to_owned(), json!(s.optional)),
                        ("input_mapping".to_owned(), s.input_mapping.clone()),
                        ("original_priority".to_owned(), json!(s.priority)),
                    ]
                    .into(),
                    ..SupervisorTodo::default()
                },
                added_by: Actor::Engine,
            });
        }
        self.buf.push_back(Event::PhaseChanged {
            phase: Phase::Executing,
        });
    }

    /// One TODO execution: exactly [`CYCLE_EVENTS`] events.
    fn push_cycle(&mut self) {
        let k = self.cycle;
        self.cycle += 1;
        let j = k % AGENTS.len();
        let agent = AGENTS[j];
        let todo = todo_id(j);
        let approval = ApprovalId(format!("apr_{k:07}"));
        let call = ToolCallId(format!("call_{k:07}"));
        let fails = k % 10 == 9;
        let user = || Actor::user("bench");
        let before = self.buf.len();

        let back_to_pending = match self.status[j] {
            // A failed TODO is retried; a completed one is re-run by a manual override.
            TodoStatus::Failed => (Actor::Engine, Some("retry".to_owned())),
            _ => (user(), Some("re-run requested".to_owned())),
        };
        let status = |from, to, reason: Option<String>, by| Event::TodoStatusChanged {
            todo_id: todo.clone(),
            from,
            to,
            reason,
            attempt: 1,
            by,
        };
        self.buf.extend([
            Event::CheckpointSaved {
                checkpoint_id: CheckpointId(format!("cp_{k:07}")),
                node: "approval".into(),
                todos_completed: self.completed,
            },
            status(self.status[j], TodoStatus::Pending, back_to_pending.1, back_to_pending.0),
            status(
                TodoStatus::Pending,
                TodoStatus::WaitingApproval,
                Some("policy every_todo".into()),
                Actor::Engine,
            ),
            Event::ApprovalRequested {
                approval_id: approval.clone(),
                subject: Subject::Todo { todo_id: todo.clone() },
                tool_name: agent.into(),
                args: json!({"query": "전세금 인상", "cycle": k}),
                preview: json!({"todo_id": todo, "agent": agent}),
                policy: "every_todo".into(),
                message: format!(
                    "📋 다음 작업을 실행하시겠습니까?\n\n- TODO ID: {todo}\n- 작업명: {agent} 실행\n- Agent: {agent}\n\n명령어:\n  /todo approve    - 승인\n  /todo skip {todo}  - 건너뛰기"
                ),
                expires_at: None,
                supersedes: None,
            },
            Event::RunInterrupted { reason: "waiting for approval".into(), approval_id: Some(approval.clone()) },
            Event::CommandReceived { command: format!("/todo approve {approval}"), by: user(), accepted: true, said: None },
            if k % 7 == 3 {
                Event::ApprovalDecided {
                    approval_id: approval.clone(),
                    decision: Decision::Edit,
                    edited_args: Some(json!({"query": "전세금 인상 5% 상한", "cycle": k})),
                    decided_by: "bench".into(),
                    comment: Some("narrow the query".into()),
                }
            } else {
                Event::ApprovalDecided {
                    approval_id: approval,
                    decision: Decision::Approve,
                    edited_args: None,
                    decided_by: "bench".into(),
                    comment: None,
                }
            },
            Event::RunResumed { by: user() },
            status(TodoStatus::WaitingApproval, TodoStatus::InProgress, None, Actor::Engine),
            Event::AgentStarted {
                todo_id: todo.clone(),
                agent: agent.into(),
                attempt: 1,
                input: json!({"query": "전세금 인상", "filters": {"region": "서울", "type": "전세"}}),
            },
            Event::LlmCalled {
                purpose: "agent".into(),
                model: "gpt-4o-mini".into(),
                prompt_hash: Hash::of_content(&(k as u64).to_be_bytes()),
                response: Payload::Inline(json!("{\"next\": \"call read_file\", \"confidence\": 0.82}")),
                duration_ms: 420,
                error: None,
                turn: None,
                usage: None,
                notice: None,
                loaded: Vec::new(),
            },
            Event::ToolCallRequested {
                tool_call_id: call.clone(),
                todo_id: todo.clone(),
                tool: "read_file".into(),
                args: json!({"file_path": format!("/workspace/notes_{j}.md")}),
                attempt: 1,
                index: 0,
                server: None,
            },
            Event::ToolCallCompleted {
                tool_call_id: call,
                output: Some(Payload::Inline(json!({"content": "# 메모\n- 계약 만료: 2025-12-31\n- 현재 보증금: 3억", "lines": 3}))),
                error: None,
                duration_ms: 3,
            },
        ]);
        let reasoning = CYCLE_EVENTS - CYCLE_FIXED_EVENTS;
        for r in 0..reasoning {
            self.buf.push_back(Event::Reasoning {
                message: format!("[{agent} #{r}] {}", REASONING[(k + r) % REASONING.len()]),
            });
        }
        if fails {
            self.buf.extend([
                Event::AgentFailed {
                    todo_id: todo.clone(),
                    agent: agent.into(),
                    attempt: 1,
                    error: "timeout after 30000 ms".into(),
                    retryable: true,
                },
                status(
                    TodoStatus::InProgress,
                    TodoStatus::Failed,
                    Some("timeout after 30000 ms".into()),
                    Actor::Engine,
                ),
            ]);
            self.status[j] = TodoStatus::Failed;
        } else {
            self.buf.extend([
                Event::AgentCompleted {
                    todo_id: todo.clone(),
                    agent: agent.into(),
                    attempt: 1,
                    result: Payload::Inline(agent_result(agent, k)),
                    duration_ms: 8500,
                },
                status(
                    TodoStatus::InProgress,
                    TodoStatus::Completed,
                    None,
                    Actor::Engine,
                ),
            ]);
            self.status[j] = TodoStatus::Completed;
            self.completed = self.completed.saturating_add(1);
        }
        self.buf.push_back(Event::EvaluationRecorded {
            quality_score: if fails { 0.4 } else { 0.9 },
            completeness: 1.0,
            needs_retry: fails,
            retry_agents: if fails { vec![agent.into()] } else { vec![] },
            feedback: if fails {
                "에이전트 시간 초과".into()
            } else {
                "모든 작업이 완료되었습니다".into()
            },
            source: Source::Rules,
            add_agents: vec![],
        });
        debug_assert_eq!(self.buf.len() - before, CYCLE_EVENTS);
    }
}

impl Iterator for LongRun {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        if self.buf.is_empty() {
            self.push_cycle();
        }
        self.buf.pop_front()
    }
}

fn todo_id(i: usize) -> TodoId {
    TodoId(format!("todo_{:03}", i + 1))
}

/// Results shaped like the built-in agents' (the fold reads team states out of them).
fn agent_result(agent: &str, k: usize) -> Value {
    match agent {
        "search_team" => json!({
            "legal_results": [
                {"law_name": "주택임대차보호법", "article": "제7조", "content": "차임 등의 증액청구는 약정한 차임이나 보증금의 20분의 1의 금액을 초과하지 못한다"},
                {"law_name": "주택임대차보호법", "article": "제6조의3", "content": "계약갱신 요구 등"}
            ],
            "total_results": 2,
            "search_time": 0.42,
        }),
        "analysis_team" => json!({
            "metrics": {"increase_rate_pct": 233.3, "legal_cap_pct": 5.0, "cycle": k},
            "insights": ["인상률 233.3%는 법정 상한 5%를 초과합니다"],
            "confidence_score": 0.9,
        }),
        "document_team" => json!({
            "document_type": "내용증명",
            "content": "임대인에게: 주택임대차보호법 제7조에 따라 5%를 초과하는 증액 요구에 응할 수 없음을 알립니다.",
        }),
        _ => json!({
            "summary": format!("{agent} finished cycle {k}"),
            "items": [{"id": 1, "price": 300_000_000u64}, {"id": 2, "price": 310_000_000u64}],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_have_their_declared_length_and_the_run_starts_properly() {
        let events: Vec<Event> = LongRun::new().take(5_000).collect();
        assert!(matches!(events[0], Event::RunStarted { .. }));
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, Event::RunStarted { .. }))
                .count(),
            1
        );
        let checkpoints = events
            .iter()
            .filter(|e| matches!(e, Event::CheckpointSaved { .. }))
            .count();
        // One per cycle plus the header's.
        let header = 7 + AGENTS.len();
        assert_eq!(checkpoints, 1 + (5_000 - header).div_ceil(CYCLE_EVENTS));
        assert!(!events.iter().any(Event::is_terminal));
    }
}
