//! The audit projection: one `AuditRow` (the row type is `schemas`') per approval decision, folded over the *whole* log of a
//! run (abandoned branches included: a decision made on a branch that a restore later abandoned
//! still happened, and stays auditable). Each row carries the decision event's position and
//! chain link, and every field of that event, so an auditor can recompute its hash.
//!
//! The fold also accepts the events of many runs interleaved (the global log in offset order):
//! it keeps, per run, the session id and the approval requests not yet decided, and nothing else.

use std::collections::HashMap;

use chronicle_schemas::{
    ApprovalId, AuditDecision, AuditRow, Decision, Envelope, Event, RunId, SessionId, Subject,
    SubjectKind, Timestamp,
};
use serde_json::Value;

/// `decided_by` of an expiry row: nobody decided, the engine applied the policy.
pub const EXPIRY_DECIDED_BY: &str = "engine";

/// An approval request not decided yet.
#[derive(Clone, Debug)]
struct Request {
    subject: Subject,
    tool_name: String,
    args: Value,
    at: Timestamp,
}

#[derive(Clone, Debug, Default)]
struct RunAudit {
    session_id: SessionId,
    requests: HashMap<ApprovalId, Request>,
}

/// The audit fold. Feed it envelopes in log order (one run's, or the global log's); each decision
/// yields its row at once, so an export can stream rows without holding them.
#[derive(Clone, Debug, Default)]
pub struct Audit {
    runs: HashMap<RunId, RunAudit>,
}

impl Audit {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one event; returns the row it produces (for `ApprovalDecided` and `ApprovalExpired`).
    pub fn apply(&mut self, env: &Envelope) -> Option<AuditRow> {
        let run = self.runs.entry(env.run_id).or_default();
        match &env.event {
            Event::RunStarted { session_id, .. } => {
                run.session_id = session_id.clone();
                None
            }
            Event::ApprovalRequested {
                approval_id,
                subject,
                tool_name,
                args,
                ..
            } => {
                // The first request of an id wins, as in the approvals projection.
                run.requests
                    .entry(approval_id.clone())
                    .or_insert_with(|| Request {
                        subject: subject.clone(),
                        tool_name: tool_name.clone(),
                        args: args.clone(),
                        at: env.at,
                    });
                None
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                edited_args,
                decided_by,
                comment,
            } => {
                // An id carries at most one decision, so its request is no longer needed. A
                // second decision (which the engine never writes) still gets a row, without
                // the request's fields: the audit shows what the log says.
                let req = run.requests.remove(approval_id);
                let requested = req.as_ref().map(|r| &r.args);
                let outcome = Outcome {
                    decision: (*decision).into(),
                    effective_args: decision.effective_args(edited_args.as_ref(), requested),
                    decided_by: decided_by.clone(),
                    comment: comment.clone(),
                    on_expiry: None,
                };
                Some(row(env, &run.session_id, approval_id, req, outcome))
            }
            Event::ApprovalExpired {
                approval_id,
                on_expiry,
            } => {
                let req = run.requests.remove(approval_id);
                let outcome = Outcome {
                    decision: AuditDecision::Expired,
                    effective_args: None,
                    decided_by: EXPIRY_DECIDED_BY.to_owned(),
                    comment: None,
                    on_expiry: Some(*on_expiry),
                };
                Some(row(env, &run.session_id, approval_id, req, outcome))
            }
            _ => None,
        }
    }
}

/// The decision half of a row.
struct Outcome {
    decision: AuditDecision,
    effective_args: Option<Value>,
    decided_by: String,
    comment: Option<String>,
    on_expiry: Option<Decision>,
}

fn row(
    env: &Envelope,
    session_id: &SessionId,
    approval_id: &ApprovalId,
    req: Option<Request>,
    outcome: Outcome,
) -> AuditRow {
    let Outcome {
        decision,
        effective_args,
        decided_by,
        comment,
        on_expiry,
    } = outcome;
    let (subject_kind, subject, todo_id) = match req.as_ref().map(|r| &r.subject) {
        Some(Subject::Todo { todo_id }) => (
            Some(SubjectKind::Todo),
            todo_id.to_string(),
            Some(todo_id.clone()),
        ),
        Some(Subject::ToolCall {
            tool_call_id,
            todo_id,
        }) => (
            Some(SubjectKind::ToolCall),
            tool_call_id.to_string(),
            Some(todo_id.clone()),
        ),
        None => (None, String::new(), None),
    };
    AuditRow {
        run_id: env.run_id,
        session_id: session_id.clone(),
        approval_id: approval_id.clone(),
        subject_kind,
        subject,
        todo_id,
        tool_or_agent: req
            .as_ref()
            .map(|r| r.tool_name.clone())
            .unwrap_or_default(),
        requested_args: req.as_ref().map_or(Value::Null, |r| r.args.clone()),
        decision,
        effective_args,
        decided_by,
        comment,
        on_expiry,
        requested_at: req.as_ref().map(|r| r.at),
        decided_at: env.at,
        seq: env.seq,
        offset: env.offset,
        hash: env.hash,
        prev_hash: env.prev_hash,
    }
}

/// Every row of `events` (in log order), in log order.
pub fn audit_rows<'a>(events: impl IntoIterator<Item = &'a Envelope>) -> Vec<AuditRow> {
    let mut audit = Audit::new();
    events.into_iter().filter_map(|e| audit.apply(e)).collect()
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{Actor, CheckpointId, TodoId, ToolCallId};
    use serde_json::json;

    use super::*;
    use crate::fixtures::{envelopes, scenario_1_events};
    use crate::{VecSource, replay_from_zero};

    const RUN: RunId = RunId::from_u128(0xA0D17);

    fn request(id: &str, subject: Subject, tool: &str, args: Value) -> Event {
        Event::ApprovalRequested {
            approval_id: id.into(),
            subject,
            tool_name: tool.into(),
            args,
            preview: Value::Null,
            policy: "every_todo".into(),
            message: String::new(),
            expires_at: None,
            supersedes: None,
        }
    }

    fn todo(id: &str) -> Subject {
        Subject::Todo { todo_id: id.into() }
    }

    fn decided(id: &str, decision: Decision, edited: Option<Value>, by: &str) -> Event {
        Event::ApprovalDecided {
            approval_id: id.into(),
            decision,
            edited_args: edited,
            decided_by: by.into(),
            comment: Some(format!("{} by {by}", decision.as_str())),
        }
    }

    #[test]
    fn scenario_1_has_one_row_per_decision() {
        let envs = envelopes(RUN, scenario_1_events());
        let rows = audit_rows(&envs);
        assert_eq!(rows.len(), 2);
        for (row, (apr, todo_id, agent)) in rows.iter().zip([
            ("apr_001", "todo_001", "search_team"),
            ("apr_002", "todo_002", "analysis_team"),
        ]) {
            assert_eq!(row.approval_id, *apr);
            assert_eq!(row.run_id, RUN);
            assert_eq!(row.session_id, *"thread-scenario-1");
            assert_eq!(row.subject_kind, Some(SubjectKind::Todo));
            assert_eq!(row.subject, todo_id);
            assert_eq!(row.todo_id.as_ref().map(TodoId::as_str), Some(todo_id));
            assert_eq!(row.tool_or_agent, agent);
            assert_eq!(row.decision, AuditDecision::Approve);
            assert_eq!(row.decided_by, "local");
            assert_eq!(row.requested_args, json!({"query": "전세금 인상"}));
            assert_eq!(row.effective_args, Some(row.requested_args.clone()));
            let env = &envs[row.seq as usize];
            assert!(matches!(env.event, Event::ApprovalDecided { .. }));
            assert_eq!(
                (row.offset, row.hash, row.prev_hash, row.decided_at),
                (env.offset, env.hash, env.prev_hash, env.at)
            );
            assert!(row.requested_at.unwrap() < row.decided_at);
            assert!(row.hash_recomputes(), "{row:?}");
        }
        // Rows agree with the approvals projection.
        let state = replay_from_zero(
            &VecSource {
                events: envs.clone(),
                snapshots: vec![],
            },
            envs.len() as u64 - 1,
        )
        .unwrap();
        for row in &rows {
            let a = state.approvals.get(&row.approval_id).unwrap();
            assert_eq!(a.decided_seq, Some(row.seq));
            assert_eq!(a.created_at, row.requested_at.unwrap());
            assert_eq!(a.effective_args, row.effective_args);
        }
    }

    #[test]
    fn every_kind_of_decision_on_every_branch_and_tampering_shows() {
        let tool_call = Subject::ToolCall {
            tool_call_id: ToolCallId::from("call_1"),
            todo_id: "todo_002".into(),
        };
        let events = vec![
            Event::RunStarted {
                session_id: "s-1".into(),
                user_id: None,
                request_id: "r".into(),
                query: "q".into(),
                config: Default::default(),
                parent: None,
                owner: None,
                traceparent: None,
            },
            request("a1", todo("todo_001"), "search_team", json!({"q": 1})),
            request(
                "a2",
                tool_call,
                "write_file",
                json!({"path": "/workspace/x"}),
            ),
            decided("a1", Decision::Approve, None, "alice"),
            decided(
                "a2",
                Decision::Edit,
                Some(json!({"path": "/workspace/y"})),
                "bob",
            ),
            request("a3", todo("todo_003"), "analysis_team", json!({})),
            decided("a3", Decision::Reject, None, "carol"),
            request("a4", todo("todo_004"), "document_team", json!({"d": true})),
            Event::ApprovalExpired {
                approval_id: "a4".into(),
                on_expiry: Decision::Reject,
            },
            // A restore abandons what came after seq 2; the decisions there stay in the audit.
            Event::RunRestored {
                checkpoint_id: CheckpointId::from("cp_001"),
                to_seq: 2,
                by: Actor::user("alice"),
            },
            request("a5", todo("todo_003"), "analysis_team", json!({})),
            decided("a5", Decision::Approve, None, "dave"),
        ];
        let envs = envelopes(RUN, events);
        let rows = audit_rows(&envs);
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.approval_id.as_str(),
                    r.decision.as_str(),
                    r.decided_by.as_str(),
                    r.seq,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a1", "approve", "alice", 3),
                ("a2", "edit", "bob", 4),
                ("a3", "reject", "carol", 6),
                ("a4", "expired", "engine", 8),
                ("a5", "approve", "dave", 11),
            ]
        );
        assert_eq!(rows[0].effective_args, Some(json!({"q": 1})));
        assert_eq!(rows[1].subject_kind, Some(SubjectKind::ToolCall));
        assert_eq!(rows[1].subject, "call_1");
        assert_eq!(rows[1].todo_id, Some("todo_002".into()));
        assert_eq!(rows[1].tool_or_agent, "write_file");
        assert_eq!(rows[1].requested_args, json!({"path": "/workspace/x"}));
        assert_eq!(
            rows[1].effective_args,
            Some(json!({"path": "/workspace/y"}))
        );
        assert_eq!(rows[2].effective_args, None);
        assert_eq!(rows[3].effective_args, None);
        assert_eq!(rows[3].on_expiry, Some(Decision::Reject));
        assert_eq!(rows[3].comment, None);
        assert!(rows.iter().all(|r| r.session_id == *"s-1"));
        assert!(rows.iter().all(AuditRow::hash_recomputes));

        // Changing any stated fact breaks the hash.
        let tampered = [
            AuditRow {
                decided_by: "mallory".into(),
                ..rows[0].clone()
            },
            AuditRow {
                effective_args: Some(json!({"path": "/etc/passwd"})),
                ..rows[1].clone()
            },
            AuditRow {
                decision: AuditDecision::Approve,
                ..rows[2].clone()
            },
            AuditRow {
                on_expiry: Some(Decision::Approve),
                ..rows[3].clone()
            },
            AuditRow {
                decided_at: Timestamp(rows[4].decided_at.0 + 1),
                ..rows[4].clone()
            },
        ];
        for t in &tampered {
            assert!(!t.hash_recomputes(), "tampered row still recomputes: {t:?}");
        }
    }

    #[test]
    fn interleaved_runs_keep_their_own_requests_and_sessions() {
        let other = RunId::from_u128(0xB0B);
        let started = |s: &str| Event::RunStarted {
            session_id: s.into(),
            user_id: None,
            request_id: "r".into(),
            query: "q".into(),
            config: Default::default(),
            parent: None,
            owner: None,
            traceparent: None,
        };
        let mut a = envelopes(
            RUN,
            vec![
                started("sa"),
                request("x", todo("todo_001"), "search_team", json!({"run": "a"})),
                decided("x", Decision::Approve, None, "alice"),
            ],
        );
        let mut b = envelopes(
            other,
            vec![
                started("sb"),
                request("x", todo("todo_001"), "analysis_team", json!({"run": "b"})),
                decided("x", Decision::Reject, None, "bob"),
            ],
        );
        // Global offsets: a0 b0 a1 b1 a2 b2 (the hashes stay those of offset = seq, which this
        // fold does not check).
        for (i, e) in a.iter_mut().enumerate() {
            e.offset = 2 * i as u64;
        }
        for (i, e) in b.iter_mut().enumerate() {
            e.offset = 2 * i as u64 + 1;
        }
        let mut log: Vec<Envelope> = a.into_iter().chain(b).collect();
        log.sort_by_key(|e| e.offset);
        let rows = audit_rows(&log);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].run_id, rows[0].session_id.as_str(), rows[0].offset),
            (RUN, "sa", 4)
        );
        assert_eq!(rows[0].tool_or_agent, "search_team");
        assert_eq!(
            (rows[1].run_id, rows[1].session_id.as_str(), rows[1].offset),
            (other, "sb", 5)
        );
        assert_eq!(rows[1].requested_args, json!({"run": "b"}));
        assert_eq!(rows[1].decision, AuditDecision::Reject);
    }

    #[test]
    fn a_decision_without_its_request_still_gets_a_row() {
        let envs = envelopes(
            RUN,
            vec![decided("ghost", Decision::Approve, None, "alice")],
        );
        let rows = audit_rows(&envs);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].subject_kind, None);
        assert_eq!(rows[0].requested_at, None);
        assert_eq!(rows[0].effective_args, None);
        assert!(rows[0].hash_recomputes());
    }

    #[test]
    fn row_json_round_trips() {
        let rows = audit_rows(&envelopes(RUN, scenario_1_events()));
        let json = serde_json::to_string(&rows[0]).unwrap();
        assert!(json.contains("\"decision\":\"approve\""), "{json}");
        assert!(json.contains("\"subject_kind\":\"todo\""), "{json}");
        assert!(
            json.contains("\"decided_at\":\"2025-10-05T10:00:"),
            "RFC 3339: {json}"
        );
        let back: AuditRow = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rows[0]);
        assert!(back.hash_recomputes());
    }
}
