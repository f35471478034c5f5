//! A run's timeline: its events a page at a time (seq, time, name, actor, what it says), a tool
//! or model call with its duration and tokens beside its request, filtered by kind, the events a
//! restore abandoned marked.

use askama::Template;
use chronicle_schemas::{Actor, Envelope, Event, RunId, ToolCallId};
use chronicle_wire::names::wire_names;

use crate::text;

/// Events on one timeline page.
pub const TIMELINE_PAGE_EVENTS: usize = 200;

/// The kinds a timeline filters by: the first part of an event's dotted name.
const KINDS: [&str; 13] = [
    "run",
    "todo",
    "approval",
    "agent",
    "tool",
    "llm",
    "checkpoint",
    "plan",
    "message",
    "evaluation",
    "command",
    "memory",
    "values",
];

/// Which page of the timeline a request asks for.
#[derive(Clone, Debug, Default)]
pub struct TimelineRequest {
    /// The first seq (default: the newest page).
    pub from: Option<u64>,
    /// Only events of this kind ([`TimelineRequest::kind_ok`]).
    pub kind: Option<String>,
}

impl TimelineRequest {
    /// Whether `kind` is one the timeline filters by.
    pub fn kind_ok(kind: &str) -> bool {
        KINDS.contains(&kind)
    }

    /// Whether `env` passes the kind filter.
    pub fn wants(&self, env: &Envelope) -> bool {
        self.kind
            .as_deref()
            .is_none_or(|k| kind_of(&env.event) == k)
    }

    /// Where the page starts for a run whose newest seq is `last_seq`.
    pub fn start(&self, last_seq: u64) -> u64 {
        self.from.unwrap_or_else(|| {
            if self.kind.is_some() {
                0
            } else {
                (last_seq + 1).saturating_sub(TIMELINE_PAGE_EVENTS as u64)
            }
        })
    }
}

fn kind_of(e: &Event) -> &'static str {
    let name = wire_names(e).0;
    match e {
        Event::TodoAdded { .. } | Event::TodoStatusChanged { .. } => "todo",
        Event::LlmCalled { .. } => "llm",
        Event::ResponseGenerated { .. } => "message",
        _ => name.split('.').next().unwrap_or(name),
    }
}

/// Who did what an event records.
fn actor(e: &Event) -> String {
    let of = |a: &Actor| a.to_string();
    match e {
        Event::RunStarted { owner, .. } => format!("user:{}", owner.as_deref().unwrap_or("local")),
        Event::TodoAdded { added_by, .. } => of(added_by),
        Event::TodoStatusChanged { by, .. }
        | Event::CommandReceived { by, .. }
        | Event::RunResumed { by }
        | Event::RunRestored { by, .. }
        | Event::RunCancelled { by, .. }
        | Event::MemoryDeleted { by, .. }
        | Event::SessionDeleted { by }
        | Event::ValuesUpdated { by, .. } => of(by),
        Event::ApprovalDecided { decided_by, .. } => format!("user:{decided_by}"),
        Event::AgentStarted { agent, .. }
        | Event::AgentCompleted { agent, .. }
        | Event::AgentFailed { agent, .. } => format!("agent:{agent}"),
        Event::ToolCallRequested { tool, .. } => format!("tool:{tool}"),
        Event::LlmCalled { model, .. } => format!("model:{model}"),
        _ => "engine".into(),
    }
}

/// One event of the timeline.
#[derive(Clone, Debug)]
pub struct EventRow {
    pub seq: u64,
    pub time: String,
    pub name: &'static str,
    pub kind: &'static str,
    pub actor: String,
    pub summary: String,
    /// Duration, tokens and the request of a call's result.
    pub detail: String,
    /// A tool or model call's result, shown under its request.
    pub call: bool,
    pub abandoned: bool,
}

/// One page of the timeline.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub run_id: String,
    pub rows: Vec<EventRow>,
    pub kind: String,
    pub kinds: [&'static str; 13],
    pub from: u64,
    pub last_seq: u64,
    /// Where the page before starts.
    pub older: Option<u64>,
    /// Where the page after starts.
    pub newer: Option<u64>,
    /// The page reaches the newest event (a live event refreshes it).
    pub tail: bool,
}

impl Timeline {
    /// The page of `events` (those the filter passed, in seq order) read from `from` through
    /// `read_to` of a run whose newest seq is `last_seq`.
    pub fn new(
        run: RunId,
        request: &TimelineRequest,
        events: &[Envelope],
        read_to: u64,
        last_seq: u64,
        abandoned: &dyn Fn(u64) -> bool,
    ) -> Self {
        let from = request.start(last_seq);
        let mut requested: Vec<(&ToolCallId, u64)> = Vec::new();
        let rows = events
            .iter()
            .map(|env| {
                let (call, detail) = call_detail(&env.event, &requested);
                if let Event::ToolCallRequested { tool_call_id, .. } = &env.event {
                    requested.push((tool_call_id, env.seq));
                }
                EventRow {
                    seq: env.seq,
                    time: text::clock(env.at),
                    name: wire_names(&env.event).0,
                    kind: kind_of(&env.event),
                    actor: actor(&env.event),
                    summary: chronicle_wire::one_line(
                        &chronicle_wire::summary::summary(&env.event),
                        240,
                    ),
                    detail,
                    call,
                    abandoned: abandoned(env.seq),
                }
            })
            .collect();
        let page = TIMELINE_PAGE_EVENTS as u64;
        Self {
            run_id: run.to_string(),
            rows,
            kind: request.kind.clone().unwrap_or_default(),
            kinds: KINDS,
            from,
            last_seq,
            older: (from > 0 && request.kind.is_none()).then(|| from.saturating_sub(page)),
            newer: (read_to < last_seq).then_some(read_to + 1),
            tail: read_to >= last_seq,
        }
    }

    /// The query string of a page of this timeline starting at `from`.
    pub fn page(&self, from: &u64) -> String {
        if self.kind.is_empty() {
            format!("?from={from}")
        } else {
            format!("?from={from}&kind={}", self.kind)
        }
    }
}

/// Whether an event is a call's result, and its duration, tokens and request.
fn call_detail(e: &Event, requested: &[(&ToolCallId, u64)]) -> (bool, String) {
    match e {
        Event::ToolCallCompleted {
            tool_call_id,
            duration_ms,
            error,
            ..
        } => {
            let at = requested
                .iter()
                .find(|(id, _)| *id == tool_call_id)
                .map(|(_, seq)| format!(", asked at seq {seq}"))
                .unwrap_or_default();
            let outcome = if error.is_some() { "failed" } else { "ok" };
            (true, format!("{outcome}, {duration_ms} ms{at}"))
        }
        Event::LlmCalled {
            duration_ms, usage, ..
        } => {
            let tokens = usage
                .as_ref()
                .map(|u| {
                    format!(
                        ", {} tokens in, {} out",
                        u.prompt_tokens, u.completion_tokens
                    )
                })
                .unwrap_or_default();
            (true, format!("{duration_ms} ms{tokens}"))
        }
        Event::AgentCompleted { duration_ms, .. } => (false, format!("{duration_ms} ms")),
        _ => (false, String::new()),
    }
}

/// The timeline alone, for a page turn or a live refresh.
#[derive(Clone, Debug, Template)]
#[template(path = "timeline.html")]
pub struct TimelineFragment {
    pub timeline: Timeline,
}
