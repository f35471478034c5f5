//! Request bodies and query strings: what a client sends, exactly as the API reads it. Bodies
//! refuse unknown fields, so a misspelt or smuggled field (`decided_by`) is an error instead of
//! being ignored.

use chronicle_schemas::{Decision, HitlMode, PlanStep, RunId, RunStatus, Strategy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /api/v1/agent/run`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "every_todo"))]
    pub hitl: Option<HitlMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "dag"))]
    pub strategy: Option<Strategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_ms: Option<u64>,
    /// A fixed plan to execute instead of planning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<PlanStepRequest>>,
}

/// One step of a fixed plan: the agent that runs it (by name), and optionally what the step is,
/// its input and how it is run. Unknown keys are refused (`{"agent": "weather"}` is a mistake,
/// not a step without an agent).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanStepRequest {
    /// The registered agent that runs the step.
    pub agent_name: String,
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub task: String,
    #[serde(default)]
    pub description: String,
    /// 0 → high, 1 → medium, else low.
    #[serde(default)]
    pub priority: u32,
    /// Agents (of this plan) whose steps must complete first.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// The agent's input.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input_mapping: Value,
    /// Seconds.
    #[serde(default)]
    pub timeout: u64,
    /// Retries after a failure.
    #[serde(default)]
    pub retry_count: u32,
    /// A failure skips the step instead of failing the run.
    #[serde(default)]
    pub optional: bool,
}

impl From<PlanStepRequest> for PlanStep {
    fn from(r: PlanStepRequest) -> PlanStep {
        PlanStep {
            agent_name: r.agent_name,
            team: r.team,
            task: r.task,
            description: r.description,
            priority: r.priority,
            dependencies: r.dependencies,
            input_mapping: r.input_mapping,
            timeout: r.timeout,
            retry_count: r.retry_count,
            optional: r.optional,
        }
    }
}

impl From<PlanStep> for PlanStepRequest {
    fn from(s: PlanStep) -> PlanStepRequest {
        PlanStepRequest {
            agent_name: s.agent_name,
            team: s.team,
            task: s.task,
            description: s.description,
            priority: s.priority,
            dependencies: s.dependencies,
            input_mapping: s.input_mapping,
            timeout: s.timeout,
            retry_count: s.retry_count,
            optional: s.optional,
        }
    }
}

impl RunRequest {
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            ..Self::default()
        }
    }
}

/// `POST /chat`: one turn of a conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "every_todo"))]
    pub hitl: Option<HitlMode>,
}

/// `POST /api/sessions/{thread_id}/resume`: `{"approve": bool}` or `{"response": "..."}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<bool>,
    /// A `/command`, or feedback passed to the agent as an edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
}

/// `POST /api/v1/agent/{run_id}/commands`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CommandRequest {
    pub command: String,
}

/// `POST /api/v1/agent/{run_id}/cancel`: `{}`, `{"reason": "..."}`, or `null` (no reason).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Recorded with the cancellation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `POST /api/v1/agent/{run_id}/checkpoints/{checkpoint_id}/restore`: `{}` (the checkpoint is
/// in the path; the body leaves room for options without another route).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {}

/// What a human decides about an approval. Only an edit carries args, and it must.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Approve,
    Reject,
    /// Run with these args instead of the requested ones.
    Edit {
        edited_args: Value,
    },
}

impl Verdict {
    pub fn decision(&self) -> Decision {
        match self {
            Verdict::Approve => Decision::Approve,
            Verdict::Reject => Decision::Reject,
            Verdict::Edit { .. } => Decision::Edit,
        }
    }
}

/// `POST /api/v1/agent/{run_id}/approvals/{approval_id}/decision`:
/// `{"decision": "approve" | "reject" | "edit", "edited_args": {...}, "comment": "..."}`, where
/// `edited_args` comes with `edit` and only with it (both refused at decoding otherwise).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "DecisionBody", into = "DecisionBody")]
pub struct DecisionRequest {
    pub verdict: Verdict,
    pub comment: Option<String>,
}

impl DecisionRequest {
    pub fn new(verdict: Verdict) -> Self {
        Self {
            verdict,
            comment: None,
        }
    }
    pub fn approve() -> Self {
        Self::new(Verdict::Approve)
    }
    pub fn reject() -> Self {
        Self::new(Verdict::Reject)
    }
    pub fn edit(edited_args: Value) -> Self {
        Self::new(Verdict::Edit { edited_args })
    }
    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
    /// `(decision, edited_args, comment)`, the engine's terms.
    pub fn into_parts(self) -> (Decision, Option<Value>, Option<String>) {
        let decision = self.verdict.decision();
        let edited = match self.verdict {
            Verdict::Edit { edited_args } => Some(edited_args),
            Verdict::Approve | Verdict::Reject => None,
        };
        (decision, edited, self.comment)
    }
}

/// A human's decision on an approval: `approve`, `reject`, or `edit` with `edited_args`.
// The request's form on the wire (flat, as the API has always taken it); `DecisionRequest` is
// made from it, refusing args out of place.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "approve"))]
    decision: Decision,
    /// The args to run with instead of the requested ones: required with `edit`, refused with
    /// `approve` and `reject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    edited_args: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
}

impl TryFrom<DecisionBody> for DecisionRequest {
    type Error = String;
    fn try_from(b: DecisionBody) -> Result<Self, String> {
        // `"edited_args": null` counts as absent, as any other optional field.
        let verdict = match (b.decision, b.edited_args.filter(|a| !a.is_null())) {
            (Decision::Edit, Some(edited_args)) => Verdict::Edit { edited_args },
            (Decision::Edit, None) => {
                return Err(
                    "\"decision\": \"edit\" needs edited_args (the args to run with)".into(),
                );
            }
            (d, Some(_)) => {
                return Err(format!(
                    "edited_args goes only with \"decision\": \"edit\", not with {:?}",
                    d.as_str()
                ));
            }
            (Decision::Approve, None) => Verdict::Approve,
            (Decision::Reject, None) => Verdict::Reject,
        };
        Ok(DecisionRequest {
            verdict,
            comment: b.comment,
        })
    }
}

impl From<DecisionRequest> for DecisionBody {
    fn from(r: DecisionRequest) -> Self {
        let (decision, edited_args, comment) = r.into_parts();
        DecisionBody {
            decision,
            edited_args,
            comment,
        }
    }
}

/// The OpenAPI schema of the request is the one of its flat form.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for DecisionRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <DecisionBody as utoipa::PartialSchema>::schema()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for DecisionRequest {}

/// `GET .../state?at=SEQ`: the state right after `at` (default: now).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

/// `GET .../log?from=SEQ&limit=N`: one page of a run's stored events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `GET /api/v1/approvals`: the inbox. The server checks the values (and names a bad one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxQuery {
    /// `pending` (default), `approved`, `rejected`, `edited`, `expired` or `cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// A duration (`30s`, `5m`, `2h`, `1d`, `250ms`) or an RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `GET /api/v1/audit/approvals`: the audit export. The server checks the values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportQuery {
    /// `jsonl` (default) or `csv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// RFC 3339: rows decided at or after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// RFC 3339: rows decided before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// `GET /api/v1/runs`: one page of the runs, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunsQuery {
    /// Only the runs of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only runs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// Continue after this run (a page's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<RunId>,
    /// Look at most at this many runs (1..=[`crate::RUNS_PAGE_MAX`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `GET .../events?from=SEQ&follow=BOOL`: a run's event stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsQuery {
    /// Start at this seq (the all-runs stream: this offset), inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// Keep the stream open after `run.end` / `run.error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow: Option<bool>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(v: Value) -> Result<DecisionRequest, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn decisions_keep_their_json_and_an_edit_its_args() {
        let cases = [
            (json!({"decision": "approve"}), DecisionRequest::approve()),
            (
                json!({"decision": "reject", "comment": "too risky"}),
                DecisionRequest::reject().with_comment("too risky"),
            ),
            (
                json!({"decision": "edit", "edited_args": {"region": "서초구"}, "comment": "narrowed"}),
                DecisionRequest::edit(json!({"region": "서초구"})).with_comment("narrowed"),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(decode(v.clone()).unwrap(), want, "{v}");
            assert_eq!(serde_json::to_value(&want).unwrap(), v);
        }
        let (d, args, comment) = DecisionRequest::edit(json!({"a": 1})).into_parts();
        assert_eq!(
            (d, args, comment),
            (Decision::Edit, Some(json!({"a": 1})), None)
        );
        // A null comment or args is the same as none.
        assert_eq!(
            decode(json!({"decision": "approve", "edited_args": null, "comment": null})).unwrap(),
            DecisionRequest::approve()
        );
    }

    #[test]
    fn decisions_refuse_args_out_of_place_and_unknown_fields() {
        let e = decode(json!({"decision": "approve", "edited_args": {"a": 1}})).unwrap_err();
        assert!(
            e.contains("edited_args goes only with \"decision\": \"edit\", not with \"approve\""),
            "{e}"
        );
        let e = decode(json!({"decision": "reject", "edited_args": {}})).unwrap_err();
        assert!(e.contains("not with \"reject\""), "{e}");
        let e = decode(json!({"decision": "edit"})).unwrap_err();
        assert!(e.contains("\"edit\" needs edited_args"), "{e}");
        let e = decode(json!({"decision": "approve", "decided_by": "mallory"})).unwrap_err();
        assert!(e.contains("unknown field `decided_by`"), "{e}");
        let e = decode(json!({"decision": "maybe"})).unwrap_err();
        assert!(e.contains("unknown variant `maybe`"), "{e}");
        assert!(
            decode(json!({"comment": "x"}))
                .unwrap_err()
                .contains("missing field `decision`")
        );
    }

    #[test]
    fn bodies_round_trip_and_refuse_unknown_fields() {
        let run = RunRequest {
            hitl: Some(HitlMode::EveryTodo),
            strategy: Some(Strategy::Dag),
            session_id: Some("s".into()),
            ..RunRequest::new("q")
        };
        let v = serde_json::to_value(&run).unwrap();
        assert_eq!(
            v,
            json!({"query": "q", "hitl": "every_todo", "strategy": "dag", "session_id": "s"})
        );
        assert_eq!(serde_json::from_value::<RunRequest>(v).unwrap(), run);
        assert!(serde_json::from_value::<RunRequest>(json!({"query": "q", "x": 1})).is_err());
        let chat = ChatRequest {
            message: "m".into(),
            thread_id: Some("t".into()),
            ..ChatRequest::default()
        };
        assert_eq!(
            serde_json::to_value(&chat).unwrap(),
            json!({"message": "m", "thread_id": "t"})
        );
        assert_eq!(
            serde_json::to_value(ResumeRequest {
                approve: Some(true),
                response: None
            })
            .unwrap(),
            json!({"approve": true})
        );
        assert_eq!(
            serde_json::to_value(CommandRequest {
                command: "/todos".into()
            })
            .unwrap(),
            json!({"command": "/todos"})
        );
        assert_eq!(
            serde_json::to_value(CancelRequest::default()).unwrap(),
            json!({})
        );
        // A cancel's body may be `null`: no reason.
        assert_eq!(
            serde_json::from_value::<Option<CancelRequest>>(Value::Null).unwrap(),
            None
        );
        assert_eq!(serde_json::to_value(RestoreRequest {}).unwrap(), json!({}));
        assert_eq!(
            serde_json::from_value::<RestoreRequest>(json!({})).unwrap(),
            RestoreRequest {}
        );
        for (ty, bad) in [
            ("chat", json!({"message": "m", "thread": "t"})),
            ("resume", json!({"approve": true, "by": "x"})),
            ("command", json!({"command": "/todos", "run": 1})),
            ("cancel", json!({"why": "x"})),
            ("restore", json!({"to": "cp_001"})),
        ] {
            let refused = match ty {
                "chat" => serde_json::from_value::<ChatRequest>(bad).is_err(),
                "resume" => serde_json::from_value::<ResumeRequest>(bad).is_err(),
                "command" => serde_json::from_value::<CommandRequest>(bad).is_err(),
                "restore" => serde_json::from_value::<RestoreRequest>(bad).is_err(),
                _ => serde_json::from_value::<CancelRequest>(bad).is_err(),
            };
            assert!(refused, "{ty}");
        }
    }
}
