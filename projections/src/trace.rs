//! A run's trace: the OpenTelemetry spans its events describe, folded from the log.
//!
//! One trace per run. The root span is the run; under it a span per node of the supervisor (a
//! phase), per TODO, per agent attempt, per tool call (a gated call's wait for a person is a
//! span of its own, naming who decided), per model call (in the GenAI semantic conventions), and
//! per restore. Every id is derived from the run id and what the span is (a TODO's id, a tool
//! call's id, an attempt's number...), never from a clock or a counter: folding the same events
//! again, live or long after, gives the same trace, and the engine names the same span ids in
//! the `traceparent` it sends to agents, tool servers and models while the run goes on.
//!
//! A run started with a caller's `traceparent` is part of the caller's trace: its root span is a
//! child of the caller's span. Any other run's trace id is derived from its run id.
//!
//! A step executed again after a restore to a point before it (same TODO, same attempt number)
//! gets the same span ids as the first execution: tools that keep one span per id show the
//! later one.

use std::collections::BTreeMap;

use chronicle_schemas::{
    Envelope, Event, Payload, Phase, RunId, Subject, SupervisorTodo, Timestamp, TodoId, TodoStatus,
};
use serde_json::Value;

/// A trace id: 16 bytes, shown as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub [u8; 16]);

/// A span id: 8 bytes, shown as 16 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(pub [u8; 8]);

impl std::fmt::Display for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::fmt::Display for SpanId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// A W3C trace context (`traceparent`): the trace and the span a callee's work is a child of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
}

/// Why a `traceparent` header is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a traceparent is `00-<32 hex digits of trace id>-<16 hex digits of span id>-<2 hex digits of flags>`, neither id all zeros; got {0:?}"
)]
pub struct BadTraceParent(pub String);

impl TraceParent {
    /// Parses a `traceparent` header (version `00`; a later version's first four fields, as
    /// the W3C recommendation asks).
    pub fn parse(s: &str) -> Result<TraceParent, BadTraceParent> {
        let bad = || BadTraceParent(s.chars().take(80).collect());
        let s = s.trim();
        let mut parts = s.split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let rest = parts.next();
        let lower_hex = |p: &str, n: usize| {
            p.len() == n && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if !lower_hex(version, 2)
            || version == "ff"
            || (version == "00" && rest.is_some())
            || !lower_hex(trace, 32)
            || !lower_hex(span, 16)
            || !lower_hex(flags, 2)
        {
            return Err(bad());
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        decode_hex(trace, &mut trace_id);
        decode_hex(span, &mut span_id);
        if trace_id == [0; 16] || span_id == [0; 8] {
            return Err(bad());
        }
        let flags = u8::from_str_radix(flags, 16).map_err(|_| bad())?;
        Ok(TraceParent {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            sampled: flags & 1 == 1,
        })
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }
}

fn decode_hex(s: &str, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0);
    }
}

/// What a span stands for; its id is derived from this and the run id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SpanKey {
    Run,
    /// A node of the supervisor, entered at `seq`.
    Node {
        seq: u64,
    },
    Todo {
        todo_id: TodoId,
    },
    /// An agent's attempt at a TODO.
    Agent {
        todo_id: TodoId,
        attempt: u32,
    },
    Tool {
        tool_call_id: String,
    },
    /// A person's wait on an approval.
    Approval {
        approval_id: String,
    },
    /// An agent's model call, by its place in the attempt.
    Model {
        todo_id: TodoId,
        attempt: u32,
        index: u32,
    },
    /// A planner's model call (not an agent's), recorded at `seq`.
    PlannerModel {
        seq: u64,
    },
    /// A restore, recorded at `seq`.
    Restore {
        seq: u64,
    },
}

impl SpanKey {
    fn bytes(&self) -> String {
        match self {
            SpanKey::Run => "run".into(),
            SpanKey::Node { seq } => format!("node/{seq}"),
            SpanKey::Todo { todo_id } => format!("todo/{todo_id}"),
            SpanKey::Agent { todo_id, attempt } => format!("agent/{todo_id}/{attempt}"),
            SpanKey::Tool { tool_call_id } => format!("tool/{tool_call_id}"),
            SpanKey::Approval { approval_id } => format!("approval/{approval_id}"),
            SpanKey::Model {
                todo_id,
                attempt,
                index,
            } => format!("model/{todo_id}/{attempt}/{index}"),
            SpanKey::PlannerModel { seq } => format!("planner-model/{seq}"),
            SpanKey::Restore { seq } => format!("restore/{seq}"),
        }
    }
}

/// The trace id of `run`: the caller's when the run started under a recorded `traceparent`,
/// else derived from the run id.
pub fn trace_id(run: RunId, traceparent: Option<&str>) -> TraceId {
    if let Some(p) = traceparent.and_then(|t| TraceParent::parse(t).ok()) {
        return p.trace_id;
    }
    let mut h = blake3::Hasher::new_derive_key("chronicle 2026 run trace id");
    h.update(run.0.as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.finalize().as_bytes()[..16]);
    if id == [0; 16] {
        id[15] = 1;
    }
    TraceId(id)
}

/// The id of the span `key` of `run`.
pub fn span_id(run: RunId, key: &SpanKey) -> SpanId {
    let mut h = blake3::Hasher::new_derive_key("chronicle 2026 run span id");
    h.update(run.0.as_bytes());
    h.update(key.bytes().as_bytes());
    let mut id = [0u8; 8];
    id.copy_from_slice(&h.finalize().as_bytes()[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    SpanId(id)
}

/// The `traceparent` a call made for span `key` of `run` carries: the callee's work becomes a
/// child of that span.
pub fn traceparent_of(run: RunId, recorded: Option<&str>, key: &SpanKey) -> TraceParent {
    TraceParent {
        trace_id: trace_id(run, recorded),
        span_id: span_id(run, key),
        sampled: true,
    }
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
    StrList(Vec<String>),
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        AttrValue::Str(s.to_owned())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        AttrValue::Str(s)
    }
}

impl From<u64> for AttrValue {
    fn from(n: u64) -> Self {
        AttrValue::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for AttrValue {
    fn from(n: u32) -> Self {
        AttrValue::Int(n.into())
    }
}

impl From<bool> for AttrValue {
    fn from(b: bool) -> Self {
        AttrValue::Bool(b)
    }
}

/// How a span ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SpanStatus {
    #[default]
    Unset,
    Ok,
    Error(String),
}

/// Whether a span is the engine's own work or a call to something outside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpanKind {
    #[default]
    Internal,
    Client,
}

/// A point in a span's life (an interruption, a command, a retry).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    pub name: String,
    pub at: Timestamp,
    pub attributes: Vec<(&'static str, AttrValue)>,
}

/// One finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// `None` for the root of a run started without a caller's trace.
    pub parent: Option<SpanId>,
    /// Set on the root of a run started with a caller's `traceparent`: its parent is the
    /// caller's span, in another process.
    pub remote_parent: bool,
    pub name: String,
    pub kind: SpanKind,
    pub start: Timestamp,
    pub end: Timestamp,
    pub attributes: Vec<(&'static str, AttrValue)>,
    pub events: Vec<SpanEvent>,
    pub status: SpanStatus,
}

impl Span {
    pub fn attribute(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find_map(|(k, v)| (*k == key).then_some(v))
    }
}

/// What the spans may carry beyond the facts of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// The user's query, the model's answers and the tools' arguments and results (content a
    /// team may not want in its observability tool). Off unless the operator turns it on.
    pub content: bool,
}

/// Bytes of one content attribute kept (a model's answer, a tool's output).
pub const CONTENT_ATTR_BYTES_MAX: usize = 16 * 1024;

/// An open span and the seq of the event that opened it.
#[derive(Clone, Debug)]
struct Open {
    span: Span,
    start_seq: u64,
}

/// The fold of one run's events into its spans. [`RunTrace::apply`] returns the spans an event
/// ends; [`RunTrace::open_spans`] the ones still going. What it holds is bounded by what is in
/// flight in the run (TODOs, calls, approvals), which the engine bounds.
#[derive(Clone, Debug)]
pub struct RunTrace {
    run_id: RunId,
    opts: TraceOptions,
    trace_id: TraceId,
    root: SpanId,
    /// Attributes every span of the run carries.
    common: Vec<(&'static str, AttrValue)>,
    open: BTreeMap<SpanKey, Open>,
    node: Option<SpanKey>,
    root_closed: bool,
    last: Timestamp,
    last_seq: u64,
}

const RUN_ID: &str = "chronicle.run_id";
const SESSION_ID: &str = "session.id";
const CHRONICLE_SESSION_ID: &str = "chronicle.session_id";
const PRINCIPAL: &str = "chronicle.principal";
const TODO_ID: &str = "chronicle.todo_id";
const SEQ_START: &str = "chronicle.seq.start";
const SEQ_END: &str = "chronicle.seq.end";
const ATTEMPT: &str = "chronicle.attempt";
/// The span kind Arize Phoenix and other OpenInference tools sort spans by.
const OI_KIND: &str = "openinference.span.kind";

impl RunTrace {
    pub fn new(run_id: RunId, opts: TraceOptions) -> RunTrace {
        RunTrace {
            run_id,
            opts,
            trace_id: trace_id(run_id, None),
            root: span_id(run_id, &SpanKey::Run),
            common: vec![(RUN_ID, run_id.to_string().into())],
            open: BTreeMap::new(),
            node: None,
            root_closed: false,
            last: Timestamp::default(),
            last_seq: 0,
        }
    }

    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    /// The run's session, once its start is folded.
    pub fn session_id(&self) -> Option<&str> {
        self.common.iter().find_map(|(k, v)| match v {
            AttrValue::Str(s) if *k == CHRONICLE_SESSION_ID => Some(s.as_str()),
            _ => None,
        })
    }

    fn id(&self, key: &SpanKey) -> SpanId {
        span_id(self.run_id, key)
    }

    /// Opens span `key` at `env`, under `parent` (the root when that span is not open).
    fn open(
        &mut self,
        key: SpanKey,
        parent: Option<&SpanKey>,
        name: String,
        kind: SpanKind,
        env: &Envelope,
        mut attributes: Vec<(&'static str, AttrValue)>,
    ) {
        let parent = parent
            .filter(|p| self.open.contains_key(*p))
            .map_or(self.root, |p| self.id(p));
        let mut all = self.common.clone();
        all.append(&mut attributes);
        let span = Span {
            trace_id: self.trace_id,
            span_id: self.id(&key),
            parent: Some(parent),
            remote_parent: false,
            name,
            kind,
            start: env.at,
            end: env.at,
            attributes: all,
            events: Vec::new(),
            status: SpanStatus::Unset,
        };
        self.open.insert(
            key,
            Open {
                span,
                start_seq: env.seq,
            },
        );
    }

    /// Ends span `key` at `env`, if it is open.
    fn close(
        &mut self,
        key: &SpanKey,
        env: &Envelope,
        status: SpanStatus,
        mut attributes: Vec<(&'static str, AttrValue)>,
    ) -> Option<Span> {
        let Open {
            mut span,
            start_seq,
        } = self.open.remove(key)?;
        span.end = env.at.max(span.start);
        if status != SpanStatus::Unset {
            span.status = status;
        }
        span.attributes.append(&mut attributes);
        span.attributes.push((SEQ_START, start_seq.into()));
        span.attributes.push((SEQ_END, env.seq.into()));
        Some(span)
    }

    fn event_on(&mut self, key: &SpanKey, event: SpanEvent) {
        if let Some(o) = self.open.get_mut(key) {
            o.span.events.push(event);
        }
    }

    /// Folds one event of the run (in seq order) and returns the spans it ends.
    pub fn apply(&mut self, env: &Envelope) -> Vec<Span> {
        self.last = env.at;
        self.last_seq = env.seq;
        let mut done = Vec::new();
        match &env.event {
            Event::RunStarted {
                session_id,
                query,
                parent,
                owner,
                traceparent,
                user_id,
                ..
            } => {
                let caller = traceparent
                    .as_deref()
                    .and_then(|t| TraceParent::parse(t).ok());
                self.trace_id = trace_id(self.run_id, traceparent.as_deref());
                self.common = vec![
                    (RUN_ID, self.run_id.to_string().into()),
                    (SESSION_ID, session_id.as_str().into()),
                    (CHRONICLE_SESSION_ID, session_id.as_str().into()),
                    (
                        PRINCIPAL,
                        owner
                            .as_deref()
                            .unwrap_or(chronicle_schemas::OWNER_OF_OLD_RUNS)
                            .into(),
                    ),
                ];
                let mut attrs = vec![(OI_KIND, "CHAIN".into())];
                if let Some(u) = user_id {
                    attrs.push(("user.id", u.clone().into()));
                }
                if let Some(p) = parent {
                    attrs.push(("chronicle.parent_run_id", p.run_id.to_string().into()));
                    attrs.push((
                        "chronicle.parent_tool_call_id",
                        p.tool_call_id.0.clone().into(),
                    ));
                }
                if self.opts.content {
                    attrs.push(("input.value", clip(query).into()));
                }
                self.open(
                    SpanKey::Run,
                    None,
                    "run".into(),
                    SpanKind::Internal,
                    env,
                    attrs,
                );
                if let Some(root) = self.open.get_mut(&SpanKey::Run) {
                    root.span.parent = caller.map(|c| c.span_id);
                    root.span.remote_parent = caller.is_some();
                }
            }
            Event::PhaseChanged { phase } => {
                if let Some(node) = self.node.take() {
                    done.extend(self.close(&node, env, SpanStatus::Unset, vec![]));
                }
                if *phase != Phase::Finished {
                    let key = SpanKey::Node { seq: env.seq };
                    self.open(
                        key.clone(),
                        Some(&SpanKey::Run),
                        format!("node {}", phase.as_str()),
                        SpanKind::Internal,
                        env,
                        vec![
                            (OI_KIND, "CHAIN".into()),
                            ("chronicle.node", phase.as_str().into()),
                        ],
                    );
                    self.node = Some(key);
                }
            }
            Event::TodoAdded { todo, added_by } => {
                self.open_todo(todo, env, added_by.to_string());
            }
            Event::TodoStatusChanged {
                todo_id,
                to,
                reason,
                attempt,
                by,
                from,
            } => {
                let key = SpanKey::Todo {
                    todo_id: todo_id.clone(),
                };
                self.event_on(
                    &key,
                    SpanEvent {
                        name: format!("{from} → {to}"),
                        at: env.at,
                        attributes: vec![
                            (ATTEMPT, (*attempt).into()),
                            ("chronicle.by", by.to_string().into()),
                            (
                                "chronicle.reason",
                                reason.clone().unwrap_or_default().into(),
                            ),
                        ],
                    },
                );
                if to.is_final() {
                    let status = match to {
                        TodoStatus::Completed => SpanStatus::Ok,
                        _ => SpanStatus::Unset,
                    };
                    done.extend(self.close(
                        &key,
                        env,
                        status,
                        vec![
                            ("chronicle.todo.status", to.as_str().into()),
                            ("chronicle.attempts", (*attempt).into()),
                        ],
                    ));
                } else if let Some(o) = self.open.get_mut(&key) {
                    // A failed TODO may be tried again; if it is not, its span ends with the
                    // run, failed.
                    o.span.status = match to {
                        TodoStatus::Failed => {
                            SpanStatus::Error(reason.clone().unwrap_or_else(|| "failed".into()))
                        }
                        _ => SpanStatus::Unset,
                    };
                }
            }
            Event::AgentStarted {
                todo_id,
                agent,
                attempt,
                input,
            } => {
                let mut attrs = vec![
                    (OI_KIND, "AGENT".into()),
                    ("gen_ai.operation.name", "invoke_agent".into()),
                    ("gen_ai.agent.name", agent.as_str().into()),
                    (TODO_ID, todo_id.as_str().into()),
                    (ATTEMPT, (*attempt).into()),
                ];
                if *attempt > 1 {
                    attrs.push(("chronicle.retry", true.into()));
                }
                if self.opts.content {
                    attrs.push(("input.value", clip(&input.to_string()).into()));
                }
                self.open(
                    SpanKey::Agent {
                        todo_id: todo_id.clone(),
                        attempt: *attempt,
                    },
                    Some(&SpanKey::Todo {
                        todo_id: todo_id.clone(),
                    }),
                    format!("invoke_agent {agent}"),
                    SpanKind::Internal,
                    env,
                    attrs,
                );
            }
            Event::AgentCompleted {
                todo_id,
                attempt,
                result,
                ..
            } => {
                let mut attrs = vec![];
                if self.opts.content
                    && let Some(v) = result.inline()
                {
                    attrs.push(("output.value", clip(&v.to_string()).into()));
                }
                let key = SpanKey::Agent {
                    todo_id: todo_id.clone(),
                    attempt: *attempt,
                };
                done.extend(self.close(&key, env, SpanStatus::Ok, attrs));
            }
            Event::AgentFailed {
                todo_id,
                attempt,
                error,
                retryable,
                ..
            } => {
                let key = SpanKey::Agent {
                    todo_id: todo_id.clone(),
                    attempt: *attempt,
                };
                done.extend(self.close(
                    &key,
                    env,
                    SpanStatus::Error(error.clone()),
                    vec![("chronicle.retryable", (*retryable).into())],
                ));
            }
            Event::ToolCallRequested {
                tool_call_id,
                todo_id,
                tool,
                args,
                attempt,
                index,
                server,
            } => {
                let mut attrs = vec![
                    (OI_KIND, "TOOL".into()),
                    ("gen_ai.operation.name", "execute_tool".into()),
                    ("gen_ai.tool.name", tool.as_str().into()),
                    ("gen_ai.tool.call.id", tool_call_id.0.clone().into()),
                    (TODO_ID, todo_id.as_str().into()),
                    (ATTEMPT, (*attempt).into()),
                    ("chronicle.tool.index", (*index).into()),
                ];
                if let Some(s) = server {
                    attrs.push(("chronicle.mcp.server", s.as_str().into()));
                }
                if self.opts.content {
                    attrs.push(("gen_ai.tool.call.arguments", clip(&args.to_string()).into()));
                }
                let kind = match server {
                    Some(_) => SpanKind::Client,
                    None => SpanKind::Internal,
                };
                self.open(
                    SpanKey::Tool {
                        tool_call_id: tool_call_id.0.clone(),
                    },
                    Some(&SpanKey::Agent {
                        todo_id: todo_id.clone(),
                        attempt: *attempt,
                    }),
                    format!("execute_tool {tool}"),
                    kind,
                    env,
                    attrs,
                );
            }
            Event::ToolCallCompleted {
                tool_call_id,
                output,
                error,
                duration_ms,
            } => {
                let mut attrs = vec![("chronicle.duration_ms", (*duration_ms).into())];
                if self.opts.content
                    && let Some(v) = output.as_ref().and_then(Payload::inline)
                {
                    attrs.push(("gen_ai.tool.call.result", clip(&v.to_string()).into()));
                }
                let status = match error {
                    Some(e) => SpanStatus::Error(e.clone()),
                    None => SpanStatus::Ok,
                };
                let key = SpanKey::Tool {
                    tool_call_id: tool_call_id.0.clone(),
                };
                done.extend(self.close(&key, env, status, attrs));
            }
            Event::ApprovalRequested {
                approval_id,
                subject,
                tool_name,
                policy,
                expires_at,
                supersedes,
                ..
            } => {
                if let Some(old) = supersedes {
                    let key = SpanKey::Approval {
                        approval_id: old.0.clone(),
                    };
                    done.extend(self.close(
                        &key,
                        env,
                        SpanStatus::Unset,
                        vec![("chronicle.approval.outcome", "superseded".into())],
                    ));
                }
                let parent = match subject {
                    Subject::ToolCall { tool_call_id, .. } => SpanKey::Tool {
                        tool_call_id: tool_call_id.0.clone(),
                    },
                    Subject::Todo { todo_id } => SpanKey::Todo {
                        todo_id: todo_id.clone(),
                    },
                };
                let mut attrs = vec![
                    ("chronicle.approval_id", approval_id.0.clone().into()),
                    ("chronicle.approval.policy", policy.as_str().into()),
                    ("chronicle.approval.tool", tool_name.as_str().into()),
                    (TODO_ID, subject.todo_id().as_str().into()),
                ];
                if let Some(at) = expires_at {
                    attrs.push(("chronicle.approval.expires_at", at.to_string().into()));
                }
                self.open(
                    SpanKey::Approval {
                        approval_id: approval_id.0.clone(),
                    },
                    Some(&parent),
                    format!("wait_for_approval {tool_name}"),
                    SpanKind::Internal,
                    env,
                    attrs,
                );
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                decided_by,
                comment,
                ..
            } => {
                let key = SpanKey::Approval {
                    approval_id: approval_id.0.clone(),
                };
                let mut attrs = vec![
                    ("chronicle.approval.decision", decision.as_str().into()),
                    ("chronicle.approval.decided_by", decided_by.as_str().into()),
                    ("chronicle.approval.outcome", "decided".into()),
                ];
                if self.opts.content
                    && let Some(c) = comment
                {
                    attrs.push(("chronicle.approval.comment", clip(c).into()));
                }
                done.extend(self.close(&key, env, SpanStatus::Ok, attrs));
            }
            Event::ApprovalExpired {
                approval_id,
                on_expiry,
            } => {
                let key = SpanKey::Approval {
                    approval_id: approval_id.0.clone(),
                };
                done.extend(self.close(
                    &key,
                    env,
                    SpanStatus::Unset,
                    vec![
                        ("chronicle.approval.decision", on_expiry.as_str().into()),
                        ("chronicle.approval.outcome", "expired".into()),
                    ],
                ));
            }
            Event::LlmCalled {
                purpose,
                model,
                prompt_hash,
                response,
                duration_ms,
                error,
                turn,
                usage,
                ..
            } => done.push(self.model_span(
                env,
                purpose,
                model,
                &prompt_hash.to_string(),
                response,
                *duration_ms,
                error.as_deref(),
                turn.as_ref(),
                usage.as_ref(),
            )),
            Event::RunInterrupted {
                reason,
                approval_id,
            } => {
                let mut attrs = vec![("chronicle.reason", reason.clone().into())];
                if let Some(a) = approval_id {
                    attrs.push(("chronicle.approval_id", a.0.clone().into()));
                }
                self.event_on(
                    &SpanKey::Run,
                    SpanEvent {
                        name: "interrupted".into(),
                        at: env.at,
                        attributes: attrs,
                    },
                );
            }
            Event::RunResumed { by } => self.event_on(
                &SpanKey::Run,
                SpanEvent {
                    name: "resumed".into(),
                    at: env.at,
                    attributes: vec![("chronicle.by", by.to_string().into())],
                },
            ),
            Event::CommandReceived {
                command,
                by,
                accepted,
                ..
            } => self.event_on(
                &SpanKey::Run,
                SpanEvent {
                    name: "command".into(),
                    at: env.at,
                    attributes: vec![
                        ("chronicle.command", command.clone().into()),
                        ("chronicle.by", by.to_string().into()),
                        ("chronicle.accepted", (*accepted).into()),
                    ],
                },
            ),
            Event::RunRestored {
                checkpoint_id,
                to_seq,
                by,
            } => {
                // What was going on in the abandoned branch ends here.
                let abandoned: Vec<SpanKey> = self
                    .open
                    .keys()
                    .filter(|k| **k != SpanKey::Run)
                    .cloned()
                    .collect();
                for key in abandoned {
                    done.extend(self.close(
                        &key,
                        env,
                        SpanStatus::Unset,
                        vec![("chronicle.abandoned", true.into())],
                    ));
                }
                self.node = None;
                let key = SpanKey::Restore { seq: env.seq };
                self.open(
                    key.clone(),
                    Some(&SpanKey::Run),
                    "restore".into(),
                    SpanKind::Internal,
                    env,
                    vec![
                        ("chronicle.checkpoint_id", checkpoint_id.0.clone().into()),
                        ("chronicle.restore.to_seq", (*to_seq).into()),
                        ("chronicle.by", by.to_string().into()),
                    ],
                );
                done.extend(self.close(&key, env, SpanStatus::Ok, vec![]));
            }
            Event::RunCompleted { .. } => done.extend(self.end(env, SpanStatus::Ok, "completed")),
            Event::RunFailed { error } => {
                done.extend(self.end(env, SpanStatus::Error(error.clone()), "failed"));
            }
            Event::RunCancelled { .. } => {
                done.extend(self.end(env, SpanStatus::Unset, "cancelled"));
            }
            Event::ResponseGenerated { final_response } => {
                if self.opts.content
                    && let Some(root) = self.open.get_mut(&SpanKey::Run)
                {
                    root.span
                        .attributes
                        .push(("output.value", clip(&final_response.to_string()).into()));
                }
            }
            _ => {}
        }
        done
    }

    fn open_todo(&mut self, todo: &SupervisorTodo, env: &Envelope, added_by: String) {
        self.open(
            SpanKey::Todo {
                todo_id: todo.id.clone(),
            },
            Some(&SpanKey::Run),
            format!("todo {}", todo.agent_name),
            SpanKind::Internal,
            env,
            vec![
                (OI_KIND, "CHAIN".into()),
                (TODO_ID, todo.id.as_str().into()),
                ("chronicle.todo.agent", todo.agent_name.as_str().into()),
                ("chronicle.todo.added_by", added_by.into()),
            ],
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn model_span(
        &mut self,
        env: &Envelope,
        purpose: &str,
        model: &str,
        prompt_hash: &str,
        response: &Payload,
        duration_ms: u64,
        error: Option<&str>,
        turn: Option<&chronicle_schemas::ModelTurn>,
        usage: Option<&chronicle_schemas::TokenUsage>,
    ) -> Span {
        let (key, parent) = match turn {
            Some(t) => (
                SpanKey::Model {
                    todo_id: t.todo_id.clone(),
                    attempt: t.attempt,
                    index: t.index,
                },
                Some(SpanKey::Agent {
                    todo_id: t.todo_id.clone(),
                    attempt: t.attempt,
                }),
            ),
            None => (SpanKey::PlannerModel { seq: env.seq }, self.node.clone()),
        };
        let mut attrs = vec![
            (OI_KIND, "LLM".into()),
            ("gen_ai.operation.name", "chat".into()),
            ("gen_ai.provider.name", "openai".into()),
            ("gen_ai.request.model", model.into()),
            ("llm.model_name", model.into()),
            ("chronicle.purpose", purpose.into()),
            ("chronicle.prompt_hash", prompt_hash.into()),
        ];
        if let Some(t) = turn {
            attrs.push((TODO_ID, t.todo_id.as_str().into()));
            attrs.push((ATTEMPT, t.attempt.into()));
            attrs.push(("chronicle.model.index", t.index.into()));
        }
        if let Some(u) = usage {
            attrs.push(("gen_ai.usage.input_tokens", u.prompt_tokens.into()));
            attrs.push(("gen_ai.usage.output_tokens", u.completion_tokens.into()));
            attrs.push(("llm.token_count.prompt", u.prompt_tokens.into()));
            attrs.push(("llm.token_count.completion", u.completion_tokens.into()));
            attrs.push(("llm.token_count.total", u.total_tokens.into()));
        }
        let answer = response.inline();
        if let Some(reason) = answer
            .and_then(|v| v.get("finish_reason"))
            .and_then(Value::as_str)
        {
            attrs.push((
                "gen_ai.response.finish_reasons",
                AttrValue::StrList(vec![reason.to_owned()]),
            ));
        }
        if self.opts.content
            && let Some(v) = answer
        {
            let text = match v {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            attrs.push(("output.value", clip(&text).into()));
            attrs.push(("gen_ai.output.messages", clip(&output_messages(v)).into()));
        }
        let parent_id = parent
            .as_ref()
            .filter(|p| self.open.contains_key(*p))
            .map_or(self.root, |p| self.id(p));
        let mut all = self.common.clone();
        all.append(&mut attrs);
        all.push((SEQ_START, env.seq.into()));
        all.push((SEQ_END, env.seq.into()));
        let duration_us = i64::try_from(duration_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
        Span {
            trace_id: self.trace_id,
            span_id: self.id(&key),
            parent: Some(parent_id),
            remote_parent: false,
            name: format!("chat {model}"),
            kind: SpanKind::Client,
            start: Timestamp(env.at.0.saturating_sub(duration_us)),
            end: env.at,
            attributes: all,
            events: Vec::new(),
            status: match error {
                Some(e) => SpanStatus::Error(e.to_owned()),
                None => SpanStatus::Ok,
            },
        }
    }

    /// The run's end: everything still open ends with it, the root last.
    fn end(&mut self, env: &Envelope, status: SpanStatus, outcome: &str) -> Vec<Span> {
        let mut done = Vec::new();
        let inner: Vec<SpanKey> = self
            .open
            .keys()
            .filter(|k| **k != SpanKey::Run)
            .cloned()
            .collect();
        for key in inner {
            done.extend(self.close(&key, env, SpanStatus::Unset, vec![]));
        }
        self.node = None;
        if !self.root_closed {
            self.root_closed = true;
            done.extend(self.close(
                &SpanKey::Run,
                env,
                status,
                vec![("chronicle.run.status", outcome.into())],
            ));
        }
        done
    }

    /// The spans still open, ended at the last event folded (for a look at a run in flight).
    /// They end later, with other attributes: the live export sends only ended spans.
    pub fn open_spans(&self) -> Vec<Span> {
        self.open
            .values()
            .map(|o| {
                let mut span = o.span.clone();
                span.end = self.last.max(span.start);
                span.attributes.push((SEQ_START, o.start_seq.into()));
                span.attributes.push((SEQ_END, self.last_seq.into()));
                span.attributes.push(("chronicle.in_flight", true.into()));
                span
            })
            .collect()
    }

    /// Whether the run ended (its root span is out).
    pub fn ended(&self) -> bool {
        self.root_closed
    }
}

/// Every span of a run's events: those they end, then those still open.
pub fn spans_of<'a>(
    run: RunId,
    events: impl IntoIterator<Item = &'a Envelope>,
    opts: TraceOptions,
) -> Vec<Span> {
    let mut trace = RunTrace::new(run, opts);
    let mut spans: Vec<Span> = events.into_iter().flat_map(|e| trace.apply(e)).collect();
    spans.extend(trace.open_spans());
    spans
}

/// A model's recorded answer as the GenAI conventions' output messages.
fn output_messages(answer: &Value) -> String {
    let (content, finish) = match answer {
        Value::String(s) => (Some(s.as_str()), None),
        v => (
            v.get("content").and_then(Value::as_str),
            v.get("finish_reason").and_then(Value::as_str),
        ),
    };
    let mut parts = Vec::new();
    if let Some(c) = content {
        parts.push(serde_json::json!({"type": "text", "content": c}));
    }
    for call in answer
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(serde_json::json!({
            "type": "tool_call",
            "id": call.get("id"),
            "name": call.get("name"),
            "arguments": call.get("arguments"),
        }));
    }
    serde_json::json!([{"role": "assistant", "parts": parts, "finish_reason": finish}]).to_string()
}

/// `s` cut to at most [`CONTENT_ATTR_BYTES_MAX`] bytes, on a character boundary.
fn clip(s: &str) -> String {
    if s.len() <= CONTENT_ATTR_BYTES_MAX {
        return s.to_owned();
    }
    let mut end = CONTENT_ATTR_BYTES_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{
        Actor, ApprovalId, Decision, Hash, ModelTurn, SessionId, TokenUsage, ToolCallId,
    };
    use serde_json::json;

    use super::*;
    use crate::fixtures::envelopes;

    const CALLER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn run() -> RunId {
        RunId(uuid::Uuid::from_u128(
            0x01a2_2809_544a_7639_9d92_f8fe_d69b_4c6f,
        ))
    }

    /// A run under a caller's trace: an agent's model call, then a gated tool call decided by
    /// alice, then the end.
    fn events() -> Vec<Event> {
        let todo = TodoId::from("todo_001");
        let call = ToolCallId::from("call_1");
        let approval = ApprovalId::from("apr_1");
        vec![
            Event::RunStarted {
                session_id: SessionId::from("s"),
                user_id: None,
                request_id: "r".into(),
                query: "write the notes".into(),
                config: Default::default(),
                parent: None,
                owner: Some("alice".into()),
                traceparent: Some(CALLER.into()),
            },
            Event::PhaseChanged {
                phase: Phase::Executing,
            },
            Event::TodoAdded {
                todo: SupervisorTodo {
                    id: todo.clone(),
                    agent_name: "analyst".into(),
                    ..Default::default()
                },
                added_by: Actor::Engine,
            },
            Event::AgentStarted {
                todo_id: todo.clone(),
                agent: "analyst".into(),
                attempt: 1,
                input: json!({}),
            },
            Event::LlmCalled {
                purpose: "agent".into(),
                model: "gpt-test".into(),
                prompt_hash: Hash::ZERO,
                response: Payload::Inline(
                    json!({"content": "the notes", "finish_reason": "tool_calls"}),
                ),
                duration_ms: 250,
                error: None,
                turn: Some(ModelTurn {
                    todo_id: todo.clone(),
                    attempt: 1,
                    index: 0,
                    plan_edits_seen: 0,
                }),
                usage: Some(TokenUsage {
                    prompt_tokens: 42,
                    completion_tokens: 7,
                    total_tokens: 49,
                }),
                notice: None,
                loaded: vec![],
            },
            Event::ToolCallRequested {
                tool_call_id: call.clone(),
                todo_id: todo.clone(),
                tool: "write_file".into(),
                args: json!({"file_path": "/workspace/n.md"}),
                attempt: 1,
                index: 1,
                server: None,
            },
            Event::ApprovalRequested {
                approval_id: approval.clone(),
                subject: Subject::ToolCall {
                    tool_call_id: call.clone(),
                    todo_id: todo.clone(),
                },
                tool_name: "write_file".into(),
                args: json!({}),
                preview: json!({}),
                policy: "tools".into(),
                message: "m".into(),
                expires_at: None,
                supersedes: None,
            },
            Event::ApprovalDecided {
                approval_id: approval,
                decision: Decision::Approve,
                edited_args: None,
                decided_by: "alice".into(),
                comment: None,
            },
            Event::ToolCallCompleted {
                tool_call_id: call,
                output: Some(Payload::Inline(json!("written"))),
                error: None,
                duration_ms: 3,
            },
            Event::AgentCompleted {
                todo_id: todo.clone(),
                agent: "analyst".into(),
                attempt: 1,
                result: Payload::Inline(json!({"answer": "done"})),
                duration_ms: 9,
            },
            Event::TodoStatusChanged {
                todo_id: todo,
                from: TodoStatus::InProgress,
                to: TodoStatus::Completed,
                reason: None,
                attempt: 1,
                by: Actor::Engine,
            },
            Event::RunCompleted {
                total_execution_time_ms: 10,
            },
        ]
    }

    fn by_name<'a>(spans: &'a [Span], name: &str) -> &'a Span {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    }

    #[test]
    fn the_tree_of_a_run_continues_its_callers_trace() {
        let log = envelopes(run(), events());
        let spans = spans_of(run(), &log, TraceOptions::default());
        let caller = TraceParent::parse(CALLER).unwrap();
        assert!(spans.iter().all(|s| s.trace_id == caller.trace_id));
        let root = by_name(&spans, "run");
        assert_eq!(root.parent, Some(caller.span_id));
        assert!(root.remote_parent);
        assert_eq!(root.status, SpanStatus::Ok);
        let todo = by_name(&spans, "todo analyst");
        let agent = by_name(&spans, "invoke_agent analyst");
        let model = by_name(&spans, "chat gpt-test");
        let tool = by_name(&spans, "execute_tool write_file");
        let wait = by_name(&spans, "wait_for_approval write_file");
        assert_eq!(todo.parent, Some(root.span_id));
        assert_eq!(agent.parent, Some(todo.span_id));
        assert_eq!(model.parent, Some(agent.span_id));
        assert_eq!(tool.parent, Some(agent.span_id));
        assert_eq!(wait.parent, Some(tool.span_id));
        assert_eq!(
            wait.attribute("chronicle.approval.decided_by"),
            Some(&"alice".into())
        );
        // The model call lasted what was recorded, and ended when it was recorded.
        assert_eq!(model.end.0 - model.start.0, 250_000);
        assert_eq!(
            model.attribute("gen_ai.usage.input_tokens"),
            Some(&AttrValue::Int(42))
        );
        assert_eq!(
            model.attribute("gen_ai.usage.output_tokens"),
            Some(&AttrValue::Int(7))
        );
        assert_eq!(
            model.attribute("gen_ai.response.finish_reasons"),
            Some(&AttrValue::StrList(vec!["tool_calls".into()]))
        );
        assert!(
            spans
                .iter()
                .all(|s| s.attribute("chronicle.principal") == Some(&"alice".into()))
        );
        // Ids are distinct, and what the engine names in its calls is the span the fold makes.
        let ids: std::collections::BTreeSet<_> = spans.iter().map(|s| s.span_id).collect();
        assert_eq!(ids.len(), spans.len());
        let key = SpanKey::Model {
            todo_id: TodoId::from("todo_001"),
            attempt: 1,
            index: 0,
        };
        assert_eq!(
            traceparent_of(run(), Some(CALLER), &key).span_id,
            model.span_id
        );
    }

    #[test]
    fn folding_again_gives_the_same_trace_and_content_only_when_asked() {
        let log = envelopes(run(), events());
        let once = spans_of(run(), &log, TraceOptions::default());
        assert_eq!(once, spans_of(run(), &log, TraceOptions::default()));
        let text = format!("{once:?}");
        assert!(!text.contains("the notes") && !text.contains("write the notes"));
        let with = spans_of(run(), &log, TraceOptions { content: true });
        let model = by_name(&with, "chat gpt-test");
        assert!(
            matches!(model.attribute("output.value"), Some(AttrValue::Str(s)) if s.contains("the notes"))
        );
        // A run without a caller has a trace of its own, derived from its id.
        let mut events = events();
        if let Event::RunStarted { traceparent, .. } = &mut events[0] {
            *traceparent = None;
        }
        let own = spans_of(run(), &envelopes(run(), events), TraceOptions::default());
        assert_eq!(own[0].trace_id, trace_id(run(), None));
        assert_eq!(by_name(&own, "run").parent, None);
    }

    #[test]
    fn a_run_in_flight_shows_its_open_spans() {
        let log = envelopes(run(), events());
        let mut trace = RunTrace::new(run(), TraceOptions::default());
        let ended: Vec<Span> = log[..7].iter().flat_map(|e| trace.apply(e)).collect();
        assert_eq!(ended.len(), 1, "only the model call ended: {ended:#?}");
        let open = trace.open_spans();
        let names: std::collections::BTreeSet<&str> =
            open.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "execute_tool write_file",
                "invoke_agent analyst",
                "node executing",
                "run",
                "todo analyst",
                "wait_for_approval write_file"
            ]
            .into()
        );
        assert!(!trace.ended());
    }

    #[test]
    fn traceparents_parse_as_the_w3c_says() {
        let p = TraceParent::parse(CALLER).unwrap();
        assert_eq!(p.to_string(), CALLER);
        assert!(p.sampled);
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        ] {
            assert!(TraceParent::parse(bad).is_err(), "{bad:?}");
        }
        // A later version's first four fields are read.
        assert!(
            TraceParent::parse("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-x").is_ok()
        );
    }
}
