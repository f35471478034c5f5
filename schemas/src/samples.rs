//! One sample of every `Event` variant, for round-trip tests, the committed golden encoding
//! (`schemas/fixtures/events-v1.msgpack`) and other crates' tests.

use serde_json::json;

use crate::{
    Actor, ApprovalId, BlobRef, CheckpointId, Decision, Event, Follows, Hash, HitlMode, Memory,
    MemoryKind, ModelTurn, ParentLink, Payload, Phase, PlanStep, PriorTurn, RunConfig, RunId,
    RunStatus, SessionId, Source, Strategy, Subject, SupervisorTodo, Timestamp, TodoId,
    TodoPriority, TodoStatus, TokenUsage, ToolCallId,
};

/// Every variant name, in declaration order.
pub const EVENT_KINDS: [&str; 33] = [
    "RunStarted",
    "PhaseChanged",
    "IntentAnalyzed",
    "PlanCreated",
    "TodoAdded",
    "TodoStatusChanged",
    "ApprovalRequested",
    "ApprovalDecided",
    "ApprovalExpired",
    "AgentStarted",
    "AgentCompleted",
    "AgentFailed",
    "ToolCallRequested",
    "ToolCallCompleted",
    "LlmCalled",
    "EvaluationRecorded",
    "ResultsAggregated",
    "ResponseGenerated",
    "CheckpointSaved",
    "CommandReceived",
    "RunInterrupted",
    "RunResumed",
    "RunRestored",
    "Reasoning",
    "RunCompleted",
    "RunFailed",
    "RunCancelled",
    "SessionContextLoaded",
    "MemoryLoaded",
    "MemorySaved",
    "MemoryDeleted",
    "SessionDeleted",
    "ValuesUpdated",
];

/// One event of each variant, with every optional field filled.
pub fn sample_events() -> Vec<Event> {
    let todo = TodoId::from("todo_001");
    let approval = ApprovalId::from("apr_0001");
    let call = ToolCallId::from("call_0001");
    vec![
        Event::RunStarted {
            session_id: SessionId::from("thread-1"),
            user_id: Some("42".into()),
            request_id: "req_20251005100000".into(),
            query: "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘".into(),
            config: RunConfig {
                hitl: HitlMode::EveryTodo,
                hitl_categories: vec!["contract".into()],
                hitl_tools: vec!["write_file".into(), "dbt_*".into()],
                strategy: Some(Strategy::Dag),
                max_retries: 2,
                approval_timeout_ms: Some(60_000),
                agent_catalogue_version: "builtin-1".into(),
                agent: Some("analyst".into()),
                subagent_depth: 1,
                follows: Follows::Turn(RunId::from_u128(5)),
                ..RunConfig::default()
            },
            parent: Some(ParentLink {
                run_id: RunId::from_u128(7),
                tool_call_id: ToolCallId::from("call_parent"),
            }),
            owner: Some("alice".into()),
            traceparent: None,
        },
        Event::PhaseChanged {
            phase: Phase::Planning,
        },
        Event::IntentAnalyzed {
            intent_type: "legal_consult".into(),
            confidence: 0.95,
            keywords: vec!["전세금".into(), "5%".into()],
            entities: json!({"금액": ["3억", "10억"], "계약유형": ["전세"]}),
            source: Source::Rules,
        },
        Event::PlanCreated {
            strategy: Strategy::Sequential,
            steps: vec![PlanStep {
                agent_name: "search_team".into(),
                team: "search".into(),
                task: "법률 정보 검색".into(),
                description: "법률 관련 정보 및 판례 검색".into(),
                priority: 1,
                dependencies: vec![],
                input_mapping: json!({"purpose": "법률 검색"}),
                timeout: 30,
                retry_count: 2,
                optional: false,
            }],
            parallel_groups: vec![vec!["search_team".into()]],
            estimated_total_time: 12.5,
            available_agents: vec!["search_team".into(), "analysis_team".into()],
            available_teams: vec!["search".into(), "analysis".into()],
            source: Source::Llm,
        },
        Event::TodoAdded {
            todo: SupervisorTodo {
                id: todo.clone(),
                name: "search_team 실행".into(),
                description: "search_team을(를) 실행하여 데이터 수집/분석 수행".into(),
                agent_name: "search_team".into(),
                priority: TodoPriority::Medium,
                created_at: Timestamp(1_759_658_400_000_000),
                max_retries: 2,
                ..SupervisorTodo::default()
            },
            added_by: Actor::Engine,
        },
        Event::TodoStatusChanged {
            todo_id: todo.clone(),
            from: TodoStatus::Pending,
            to: TodoStatus::WaitingApproval,
            reason: Some("policy every_todo".into()),
            attempt: 1,
            by: Actor::user("alice"),
        },
        Event::ApprovalRequested {
            approval_id: approval.clone(),
            subject: Subject::ToolCall {
                tool_call_id: call.clone(),
                todo_id: todo.clone(),
            },
            tool_name: "write_file".into(),
            args: json!({"file_path": "/workspace/a.md", "content": "x"}),
            preview: json!({"file_path": "/workspace/a.md", "line_count": 1}),
            policy: "tools".into(),
            message: "📋 다음 작업을 실행하시겠습니까?".into(),
            expires_at: Some(Timestamp(1_759_658_460_000_000)),
            supersedes: Some(ApprovalId::from("apr_0000")),
        },
        Event::ApprovalDecided {
            approval_id: approval.clone(),
            decision: Decision::Edit,
            edited_args: Some(json!({"file_path": "/workspace/b.md", "content": "y"})),
            decided_by: "alice".into(),
            comment: Some("use b.md".into()),
        },
        Event::ApprovalExpired {
            approval_id: approval.clone(),
            on_expiry: Decision::Reject,
        },
        Event::AgentStarted {
            todo_id: todo.clone(),
            agent: "search_team".into(),
            attempt: 1,
            input: json!({"query": "전세금 인상"}),
        },
        Event::AgentCompleted {
            todo_id: todo.clone(),
            agent: "search_team".into(),
            attempt: 1,
            result: Payload::Inline(json!({"legal_results": [{"law_name": "주택임대차보호법"}]})),
            duration_ms: 8500,
        },
        Event::AgentFailed {
            todo_id: todo.clone(),
            agent: "analysis_team".into(),
            attempt: 2,
            error: "timeout after 30000 ms".into(),
            retryable: true,
        },
        Event::ToolCallRequested {
            tool_call_id: call.clone(),
            todo_id: todo.clone(),
            tool: "write_file".into(),
            args: json!({"file_path": "/workspace/a.md"}),
            attempt: 1,
            index: 0,
            server: Some("files".into()),
        },
        Event::ToolCallCompleted {
            tool_call_id: call,
            output: Some(Payload::Blob(BlobRef {
                hash: Hash::of_content(b"big"),
                bytes: 3,
            })),
            error: Some("partial".into()),
            duration_ms: 3,
        },
        Event::LlmCalled {
            purpose: "intent".into(),
            model: "gpt-4o-mini".into(),
            prompt_hash: Hash::of_content(b"prompt"),
            response: Payload::Inline(json!("{\"intent_type\":\"search\"}")),
            duration_ms: 420,
            error: Some("bad json".into()),
            turn: Some(ModelTurn {
                todo_id: todo.clone(),
                attempt: 1,
                index: 2,
                plan_edits_seen: 1,
            }),
            usage: Some(TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
            }),
            notice: Some("todo_002 was skipped by user:alice".into()),
            loaded: Vec::new(),
        },
        Event::EvaluationRecorded {
            quality_score: 0.8,
            completeness: 1.0,
            needs_retry: true,
            retry_agents: vec!["analysis_team".into()],
            feedback: "분석 결과 부족".into(),
            source: Source::Rules,
            add_agents: vec!["market_analysis".into()],
        },
        Event::ResultsAggregated {
            aggregated: json!({"search_team": {"total_results": 3}}),
        },
        Event::ResponseGenerated {
            final_response: json!({"answer": "5% 상한 초과"}),
        },
        Event::CheckpointSaved {
            checkpoint_id: CheckpointId::from("cp_001"),
            node: "planning".into(),
            todos_completed: 0,
        },
        Event::CommandReceived {
            command: "/todos".into(),
            by: Actor::user("alice"),
            accepted: true,
            said: None,
        },
        Event::RunInterrupted {
            reason: "waiting for approval".into(),
            approval_id: Some(approval),
        },
        Event::RunResumed {
            by: Actor::user("alice"),
        },
        Event::RunRestored {
            checkpoint_id: CheckpointId::from("cp_004"),
            to_seq: 17,
            by: Actor::user("alice"),
        },
        Event::Reasoning {
            message: "검색 결과를 분석합니다".into(),
        },
        Event::RunCompleted {
            total_execution_time_ms: 12_345,
        },
        Event::RunFailed {
            error: "todo_002 failed after 3 attempts".into(),
        },
        Event::RunCancelled {
            by: Actor::user("bob"),
            reason: Some("no longer needed".into()),
        },
        Event::SessionContextLoaded {
            turns: vec![PriorTurn {
                run_id: RunId(uuid::Uuid::from_u128(7)),
                seq: 41,
                query: "강남구 아파트 시세 알려줘".into(),
                answer: "강남구 아파트 매매 평균 14억 5,000만 원".into(),
                status: RunStatus::Completed,
            }],
            omitted: 0,
        },
        Event::MemoryLoaded {
            user_id: "alice".into(),
            memories: vec![sample_memory()],
        },
        Event::MemorySaved {
            memory: sample_memory(),
        },
        Event::MemoryDeleted {
            memory_id: "mem_1".into(),
            by: Actor::user("alice"),
        },
        Event::SessionDeleted {
            by: Actor::user("alice"),
        },
        Event::ValuesUpdated {
            values: json!({"note": "call me back", "budget": 5})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            as_node: Some("approval".into()),
            by: Actor::user("alice"),
        },
    ]
}

fn sample_memory() -> Memory {
    Memory {
        memory_id: "mem_1".into(),
        kind: MemoryKind::Preference,
        key: "deal_type".into(),
        value: json!("jeonse"),
        text: "전세만".into(),
        user_id: "alice".into(),
        run_id: RunId(uuid::Uuid::from_u128(7)),
        saved_at: Some(Timestamp::from_micros(1_700_000_000_000_000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Envelope, decode_record, encode_record};

    /// Frozen: the first format ever written. Must decode forever.
    const V1: &[u8] = include_bytes!("../fixtures/events-v1.msgpack");
    /// Today's encoding of the samples; re-blessed deliberately when a variant changes.
    const CURRENT: &[u8] = include_bytes!("../fixtures/events-current.msgpack");

    fn sample_envelopes() -> Vec<Envelope> {
        let run = RunId::from_u128(0x1234);
        let mut prev = Hash::ZERO;
        sample_events()
            .into_iter()
            .enumerate()
            .map(|(i, event)| {
                let at = Timestamp(1_759_658_400_000_000 + i as i64);
                let (_, hash) = encode_record(i as u64, run, i as u64, at, &prev, &event).unwrap();
                let env = Envelope {
                    offset: i as u64,
                    run_id: run,
                    seq: i as u64,
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

    fn golden_bytes(envs: &[Envelope]) -> Vec<u8> {
        // Length-prefixed records, so the fixture is exactly what the store keeps per event.
        let mut out = Vec::new();
        for e in envs {
            let rec = e.encode().unwrap();
            out.extend_from_slice(&(rec.len() as u32).to_be_bytes());
            out.extend_from_slice(&rec);
        }
        out
    }

    #[test]
    fn samples_cover_every_variant_once() {
        let kinds: Vec<&str> = sample_events().iter().map(Event::kind).collect();
        assert_eq!(kinds, EVENT_KINDS);
    }

    #[test]
    fn every_variant_round_trips_through_msgpack_and_json() {
        for env in sample_envelopes() {
            let bytes = env.encode().unwrap();
            let back = decode_record(&bytes).unwrap();
            assert_eq!(back, env, "{}", env.event.kind());
            let json = serde_json::to_string(&env.event).unwrap();
            let from_json: Event = serde_json::from_str(&json).unwrap();
            assert_eq!(from_json, env.event, "{}", env.event.kind());
        }
    }

    #[test]
    fn msgpack_uses_named_fields() {
        let bytes = rmp_serde::to_vec_named(&Event::Reasoning {
            message: "m".into(),
        })
        .unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("Reasoning") && text.contains("message"),
            "{text}"
        );
    }

    fn decode_all(mut rest: &[u8]) -> Vec<Envelope> {
        let mut decoded = Vec::new();
        while !rest.is_empty() {
            let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            decoded.push(decode_record(&rest[4..4 + len]).unwrap());
            rest = &rest[4 + len..];
        }
        decoded
    }

    /// Old logs keep decoding: the frozen v1 records decode to today's samples (fields added
    /// since then take their defaults, which the samples leave at default — except a run's
    /// `owner`, which v1 did not record: such a run belongs to [`OWNER_OF_OLD_RUNS`]; its config's
    /// `agent`, `subagent_depth` (a supervisor's root run) and `follows` (the run before it); and a
    /// model call's `turn`, `usage` and `notice`, which v1 did not record: a planner's call; and
    /// an evaluation's `add_agents`; and a tool call's `server`).
    #[test]
    fn v1_records_still_decode() {
        let old = decode_all(V1);
        let mut now = sample_envelopes();
        for n in &mut now {
            if let Event::RunStarted { owner, config, .. } = &mut n.event {
                assert!(owner.is_some(), "the sample records an owner");
                *owner = None;
                (config.agent, config.subagent_depth) = (None, 0);
                config.follows = Follows::Previous;
            }
            if let Event::LlmCalled {
                turn,
                usage,
                notice,
                ..
            } = &mut n.event
            {
                assert!(turn.is_some() && usage.is_some() && notice.is_some());
                (*turn, *usage, *notice) = (None, None, None);
            }
            if let Event::ToolCallRequested { server, .. } = &mut n.event {
                assert!(server.is_some());
                *server = None;
            }
            if let Event::EvaluationRecorded { add_agents, .. } = &mut n.event {
                assert!(!add_agents.is_empty());
                add_agents.clear();
            }
        }
        // Variants added since v1 are at the end.
        now.truncate(old.len());
        assert_eq!(old.len(), 27);
        for (o, n) in old.iter().zip(&now) {
            assert_eq!(
                (&o.event, o.seq, o.offset, o.run_id, o.at),
                (&n.event, n.seq, n.offset, n.run_id, n.at)
            );
        }
    }

    /// The committed encoding pins the on-disk format, so a change of any variant's encoding is a
    /// deliberate act: re-bless with `CHRONICLE_BLESS=1 cargo test -p chronicle-schemas`.
    #[test]
    fn current_encoding_is_pinned() {
        let envs = sample_envelopes();
        let now = golden_bytes(&envs);
        if std::env::var_os("CHRONICLE_BLESS").is_some() {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/fixtures/events-current.msgpack"
            );
            std::fs::write(path, &now).unwrap();
            return;
        }
        assert_eq!(decode_all(CURRENT), envs);
        assert!(
            now == CURRENT,
            "event encoding changed: re-bless deliberately (see doc comment)"
        );
    }

    #[test]
    fn tampered_body_is_a_hash_mismatch() {
        let env = &sample_envelopes()[3];
        let mut bytes = env.encode().unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        assert!(matches!(
            decode_record(&bytes),
            Err(crate::Error::HashMismatch { .. })
        ));
    }

    #[test]
    fn oversized_event_is_refused() {
        let big = Event::Reasoning {
            message: "x".repeat(70_000),
        };
        let err =
            encode_record(0, RunId::from_u128(1), 0, Timestamp(0), &Hash::ZERO, &big).unwrap_err();
        assert!(err.to_string().contains("exceeds 65536"), "{err}");
    }

    #[test]
    fn todo_transition_table() {
        use TodoStatus::*;
        assert!(Pending.can_transition_to(InProgress));
        assert!(Failed.can_transition_to(Pending));
        assert!(!Completed.can_transition_to(InProgress));
        assert!(!Skipped.can_transition_to(Pending));
        for s in TodoStatus::ALL {
            assert!(
                !s.can_transition_to(s),
                "{s} -> {s} must not be a transition"
            );
            if s.is_final() {
                assert!(TodoStatus::ALL.iter().all(|t| !s.can_transition_to(*t)));
            }
            assert_eq!(TodoStatus::parse(s.as_str()), Some(s));
        }
    }
}
