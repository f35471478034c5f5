//! Request bodies and query strings: what a client sends, exactly as the API reads it. Bodies
//! refuse unknown fields, so a misspelt or smuggled field (`decided_by`) is an error instead of
//! being ignored.

use chronicle_schemas::{Decision, HitlMode, OnReject, PlanStep, RunId, RunStatus, Strategy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /api/v1/agent/run`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// What the run is asked: something besides whitespace, at most 8192 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 8192,
            pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
        )
    )]
    pub query: String,
    /// The session the run joins (a new one when absent): 1..=64 characters without NUL; a
    /// session belongs to the principal of its first run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::optional_session_id))]
    pub session_id: Option<String>,
    /// Whom the run is for: the caller's own name unless the caller is an admin (default: the
    /// caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// When a human must approve (default: the server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hitl: Option<HitlMode>,
    /// What a rejected approval does: `skip` what it gated and carry on, or `end_turn` with an
    /// answer saying what was rejected (default: the server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_reject: Option<OnReject>,
    /// How ready TODOs are scheduled (default: the plan's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// How long an approval waits for a human before it expires, in milliseconds: 1000 (a
    /// second) ..= 2592000000 (30 days). Default: the server's (none: approvals wait).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integral::option_u64"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1000, maximum = 2592000000_u64))]
    pub approval_timeout_ms: Option<u64>,
    /// A fixed plan to execute instead of planning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<PlanStepRequest>>,
    /// Agent mode: this agent drives the whole run (its TODO list is the run's, its answer the
    /// run's) instead of the supervisor planning. A `plan` beside it may only be its one step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
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
    #[serde(default, deserialize_with = "integral::u32")]
    pub priority: u32,
    /// Agents (of this plan) whose steps must complete first.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// The agent's input (any JSON value).
    #[serde(default)]
    pub input_mapping: Value,
    /// Seconds the agent may work (0 or absent: the run's agent timeout).
    #[serde(default, deserialize_with = "integral::u64")]
    pub timeout: u64,
    /// Retries after a failure.
    #[serde(default, deserialize_with = "integral::u32")]
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
    /// A question (it starts a run in the session), or a `/command` on the session's latest
    /// run: something besides whitespace, at most 8192 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 8192,
            pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
        )
    )]
    pub message: String,
    /// The session: 1..=64 characters without NUL (default: a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::optional_session_id))]
    pub thread_id: Option<String>,
    /// Whom a run the turn starts is for (see `RunRequest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The HITL policy of a run the turn starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hitl: Option<HitlMode>,
    /// What a rejected approval does in a run the turn starts (see `RunRequest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_reject: Option<OnReject>,
}

/// `POST /api/sessions/{thread_id}/resume`: `{"approve": bool}` or `{"response": "..."}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// `DELETE /api/v1/sessions/{session_id}`: `{}` (a request that changes state sends JSON, also
/// without fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DeleteSessionRequest {}

/// `POST /api/v1/stream-tickets`: `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StreamTicketRequest {}

/// `DELETE /api/v1/users/{user}/memories[/{memory_id}]`: `{}` (what is deleted is in the path;
/// a state-changing request sends JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {}

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
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: Decision,
    /// The args to run with instead of the requested ones: a JSON object, required with `edit`,
    /// refused with `approve` and `reject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    edited_args: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
}

impl TryFrom<DecisionBody> for DecisionRequest {
    type Error = String;
    fn try_from(b: DecisionBody) -> Result<Self, String> {
        // `"edited_args": null` counts as absent, as any other optional field.
        let verdict = match (b.decision, b.edited_args.filter(|a| !a.is_null())) {
            (Decision::Edit, Some(edited_args @ Value::Object(_))) => Verdict::Edit { edited_args },
            (Decision::Edit, _) => {
                return Err(
                    "\"decision\": \"edit\" needs edited_args (the args to run with, a JSON object)"
                        .into(),
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

/// Unsigned integers as JSON means them: `1000` and `1000.0` are the same number (and the same
/// JSON Schema `integer`), while serde takes only the first for an integer type. Anything else
/// that is not an integer in range is refused as serde refuses it.
pub(crate) mod integral {
    use serde::Deserialize;
    use serde::de::{Deserializer, Error, Unexpected};

    pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        if let Some(u) = n.as_u64() {
            return Ok(u);
        }
        match n.as_f64() {
            // 2^64 is the first float beyond u64 (u64::MAX itself is not a float).
            Some(f) if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) =>
            {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok(f as u64)
            }
            Some(f) => Err(D::Error::invalid_value(
                Unexpected::Float(f),
                &"an unsigned integer",
            )),
            None => Err(D::Error::invalid_value(
                Unexpected::Other(&n.to_string()),
                &"an unsigned integer",
            )),
        }
    }

    pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let n = u64(d)?;
        u32::try_from(n).map_err(|_| {
            D::Error::invalid_value(Unexpected::Unsigned(n), &"an integer of 0..=4294967295")
        })
    }

    pub fn option_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(deserialize_with = "u64")] u64);
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

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

/// Which way a list goes: `asc`, oldest first (the default), or `desc`, newest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Order {
    #[default]
    Asc,
    Desc,
}

/// `GET /api/v1/runs`: one page of the runs, oldest first (or newest first).
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
    /// By creation time, oldest first (`asc`, the default) or newest first (`desc`); `after`
    /// continues the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    /// Only the runs of this owner (an admin: any; another principal: its own name only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// `GET /api/v1/sessions?user=&limit=&cursor=`: one page of sessions, the most recently
/// active first. The server checks the values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsQuery {
    /// Only the sessions of this `user_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// At most this many sessions (1..=[`crate::SESSIONS_PAGE_MAX`], default
    /// [`crate::SESSIONS_PAGE_DEFAULT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where the page starts: the previous page's `next_cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Only the sessions of this owner (an admin: any; another principal: its own name only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// `GET /api/v1/users/{user}/memories?limit=&before=`: one page of a user's memory, newest
/// first. The server checks the values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoriesQuery {
    /// At most this many items (1..=[`crate::MEMORIES_PAGE_MAX`], default the max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only items saved before this position: the previous page's `next_before`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
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
    fn a_runs_query_says_its_order_and_owner_in_the_query_string_words() {
        let q: RunsQuery =
            serde_json::from_value(json!({"order": "desc", "owner": "bob"})).unwrap();
        assert_eq!(
            (q.order, q.owner.as_deref()),
            (Some(Order::Desc), Some("bob"))
        );
        assert_eq!(serde_json::to_value(Order::Asc).unwrap(), json!("asc"));
        assert!(serde_json::from_value::<RunsQuery>(json!({"order": "up"})).is_err());
        // Unset, they are left out, as before.
        assert_eq!(
            serde_json::to_value(RunsQuery::default()).unwrap(),
            json!({})
        );
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
        let e = decode(json!({"decision": "edit", "edited_args": [1]})).unwrap_err();
        assert!(e.contains("a JSON object"), "{e}");
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
    fn integers_may_be_written_as_integral_floats_and_nothing_else() {
        let timeout = |v: Value| {
            serde_json::from_value::<RunRequest>(json!({"query": "q", "approval_timeout_ms": v}))
                .map(|r| r.approval_timeout_ms)
                .map_err(|e| e.to_string())
        };
        assert_eq!(timeout(json!(60000)), Ok(Some(60000)));
        assert_eq!(timeout(json!(60000.0)), Ok(Some(60000)));
        assert_eq!(timeout(Value::Null), Ok(None));
        assert_eq!(timeout(json!(u64::MAX)), Ok(Some(u64::MAX)));
        for bad in [
            json!(1.5),
            json!(-1),
            json!(-1.0),
            json!(1.8446744073709552e19),
            json!("5"),
        ] {
            let e = timeout(bad.clone()).unwrap_err();
            assert!(
                e.contains("unsigned integer") || e.contains("invalid type"),
                "{bad}: {e}"
            );
        }
        let step = |v: Value| {
            serde_json::from_value::<PlanStepRequest>(json!({"agent_name": "a", "priority": v}))
                .map(|s| s.priority)
                .map_err(|e| e.to_string())
        };
        assert_eq!(step(json!(4_294_967_295_u32)), Ok(u32::MAX));
        assert_eq!(step(json!(2.0)), Ok(2));
        assert!(
            step(json!(4_294_967_296_u64))
                .unwrap_err()
                .contains("0..=4294967295")
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
