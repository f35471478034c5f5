//! A run's page: its header (what it waits on), the TODO board at any seq with the scrubber over
//! every seq, its checkpoints with restore, and its timeline.

use askama::Template;
use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalStatus, Envelope, RunId, Subject, SupervisorTodo, Timestamp, TodoStatus,
};
use chronicle_wire::CheckpointEntry;

use super::Chrome;
use super::timeline::Timeline;
use crate::text;

/// The longest answer and query the header shows, in characters.
const HEADER_TEXT_CHARS_MAX: usize = 4_000;
/// The newest errors of the run the header shows.
const ERRORS_SHOWN: usize = 5;
/// The newest checkpoints the page lists (a long run has one per node execution); the slider's
/// ticks mark them all, and `chronicle checkpoints` lists them all.
pub const CHECKPOINTS_SHOWN: usize = 100;

/// The run as its newest state shows it: the page's header.
#[derive(Clone, Debug)]
pub struct RunView {
    pub run_id: String,
    pub status: &'static str,
    pub phase: String,
    pub owner: String,
    pub session_id: String,
    /// The session id as a path segment.
    pub session_path: String,
    pub user: String,
    pub started: String,
    pub ended: String,
    pub query: String,
    pub answer: Option<String>,
    pub errors: Vec<String>,
    /// What the run waits on, one line per pending approval; or what it is doing.
    pub waiting: Vec<String>,
    /// The pending approvals' ids (the header links them to the inbox).
    pub pending: usize,
    pub terminal: bool,
    pub last_seq: u64,
    pub parent: Option<String>,
}

impl RunView {
    pub fn new(run: RunId, head: &RunState, now: Timestamp) -> Self {
        let s = &head.supervisor;
        let pending: Vec<&Approval> = head.approvals.pending().collect();
        let mut waiting: Vec<String> = pending.iter().map(|a| waits_on(a, now)).collect();
        if waiting.is_empty() && !s.run_status.is_terminal() {
            waiting.push(format!("working: {}", super::snake(&s.current_phase)));
        }
        Self {
            run_id: run.to_string(),
            status: s.run_status.as_str(),
            phase: super::snake(&s.current_phase),
            owner: s.owner.clone(),
            session_id: s.session_id.0.clone(),
            session_path: super::runs::encode(&s.session_id.0),
            user: s.user_id.clone().unwrap_or_default(),
            started: s.start_time.map(text::date_time).unwrap_or_default(),
            ended: s.end_time.map(text::date_time).unwrap_or_default(),
            query: text::cut(&s.query, HEADER_TEXT_CHARS_MAX),
            answer: s
                .final_response
                .as_ref()
                .map(|r| text::cut(&chronicle_wire::answer_text(r), HEADER_TEXT_CHARS_MAX)),
            errors: s
                .error_log
                .iter()
                .rev()
                .take(ERRORS_SHOWN)
                .cloned()
                .collect(),
            waiting,
            pending: pending.len(),
            terminal: s.run_status.is_terminal(),
            last_seq: head.last_seq.unwrap_or(0),
            parent: s.parent.as_ref().map(|p| p.run_id.to_string()),
        }
    }
}

/// "waits for approval of todo_002 (apr_…, search) since 3 m".
fn waits_on(a: &Approval, now: Timestamp) -> String {
    let what = match &a.subject {
        Some(Subject::Todo { todo_id }) => todo_id.to_string(),
        Some(Subject::ToolCall { todo_id, .. }) => format!("a {} call of {todo_id}", a.tool_name),
        None => a.tool_name.clone(),
    };
    let expiry = a
        .expires_at
        .map(|t| format!(", expires {}", text::date_time(t)))
        .unwrap_or_default();
    format!(
        "waits for approval of {what} ({}) since {}{expiry}",
        a.approval_id,
        text::wait(a.created_at, now)
    )
}

/// One TODO on the board.
#[derive(Clone, Debug)]
pub struct TodoRow {
    pub id: String,
    pub name: String,
    pub agent: String,
    pub status: &'static str,
    pub dependencies: String,
    pub attempts: u32,
    pub retries: String,
    /// `pending apr_…`, `approved by alice`.
    pub approval: String,
    pub approval_status: &'static str,
    pub error: String,
}

impl TodoRow {
    fn new(t: &SupervisorTodo, s: &RunState) -> Self {
        let approval = t.approval_id.as_ref().map(|id| {
            let a = s.approvals.get(id);
            let status = t.approval_status.unwrap_or(ApprovalStatus::Pending);
            match a.and_then(|a| a.decided_by.as_ref()) {
                Some(by) if status != ApprovalStatus::Pending => {
                    format!("{} by {by}", status.as_str())
                }
                _ => format!("{} {id}", status.as_str()),
            }
        });
        Self {
            id: t.id.to_string(),
            name: t.name.clone(),
            agent: t.agent_name.clone(),
            status: t.status.as_str(),
            dependencies: t
                .dependencies
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            attempts: t.attempts,
            retries: format!("{}/{}", t.retry_count, t.max_retries),
            approval: approval.unwrap_or_default(),
            approval_status: t.approval_status.map_or("", ApprovalStatus::as_str),
            error: t.error.clone().unwrap_or_default(),
        }
    }
}

/// How many TODOs in one status.
#[derive(Clone, Debug)]
pub struct TodoCount {
    pub status: &'static str,
    pub count: usize,
}

/// The board at one seq (the part of the page a scrub or a live event redraws).
#[derive(Clone, Debug)]
pub struct Board {
    pub run_id: String,
    /// The seq it shows the state right after.
    pub seq: u64,
    pub last_seq: u64,
    /// It shows an earlier seq than the newest.
    pub past: bool,
    pub run_status: &'static str,
    pub phase: String,
    pub rows: Vec<TodoRow>,
    pub counts: Vec<TodoCount>,
    /// The event at `seq`, as a line.
    pub event: String,
    /// The event at `seq` lies on a branch a restore abandoned.
    pub abandoned: bool,
    pub prev: Option<u64>,
    pub next: Option<u64>,
    /// The checkpoints' seqs, for the slider's ticks and the `c` key.
    pub ticks: Vec<u64>,
    pub answer: Option<String>,
}

impl Board {
    /// The board of `view`, the state right after `seq` of a run whose newest seq is `last_seq`;
    /// `event` is the event at `seq`.
    pub fn new(
        run: RunId,
        view: &RunState,
        last_seq: u64,
        event: Option<&Envelope>,
        abandoned: bool,
        checkpoints: &[CheckpointEntry],
    ) -> Self {
        let s = &view.supervisor;
        let seq = view.last_seq.unwrap_or(0);
        let todos: &[SupervisorTodo] = s
            .planning_state
            .as_ref()
            .map_or(&[], |p| p.todos.as_slice());
        Self {
            run_id: run.to_string(),
            seq,
            last_seq,
            past: seq < last_seq,
            run_status: s.run_status.as_str(),
            phase: super::snake(&s.current_phase),
            rows: todos.iter().map(|t| TodoRow::new(t, view)).collect(),
            counts: TodoStatus::ALL
                .iter()
                .map(|st| TodoCount {
                    status: st.as_str(),
                    count: todos.iter().filter(|t| t.status == *st).count(),
                })
                .collect(),
            event: event
                .map(|e| {
                    format!(
                        "{} {}",
                        chronicle_wire::names::wire_names(&e.event).0,
                        chronicle_wire::one_line(&chronicle_wire::summary::summary(&e.event), 200)
                    )
                })
                .unwrap_or_default(),
            abandoned,
            prev: seq.checked_sub(1),
            next: (seq < last_seq).then_some(seq + 1),
            ticks: checkpoints.iter().map(|c| c.seq).collect(),
            answer: s
                .final_response
                .as_ref()
                .map(|r| text::cut(&chronicle_wire::answer_text(r), HEADER_TEXT_CHARS_MAX)),
        }
    }

    /// The `?at=` of a link to `seq` (none for the newest, which is the page's own).
    pub fn at(&self, seq: &u64) -> String {
        if *seq >= self.last_seq {
            String::new()
        } else {
            format!("?at={seq}")
        }
    }
}

/// One checkpoint, and what restoring it would leave behind.
#[derive(Clone, Debug)]
pub struct CheckpointRow {
    pub id: String,
    pub node: String,
    pub seq: u64,
    pub todos_completed: u32,
    pub time: String,
    pub branch: u32,
    pub abandoned: bool,
    pub head: bool,
    /// The confirmation a restore asks: what it abandons.
    pub confirm: String,
}

impl CheckpointRow {
    fn new(c: &CheckpointEntry, head: Option<&str>, last_seq: u64) -> Self {
        let after = last_seq.saturating_sub(c.seq);
        let confirm = if after == 0 {
            format!(
                "Restore {} (seq {})? Nothing comes after it yet; the run goes on from there under the same id.",
                c.checkpoint_id, c.seq
            )
        } else {
            format!(
                "Restore {} (seq {})? Seqs {} to {last_seq} ({after} events) become an abandoned branch: they stay in the log and the timeline, and the run goes on from seq {} under the same id.",
                c.checkpoint_id,
                c.seq,
                c.seq + 1,
                c.seq
            )
        };
        Self {
            id: c.checkpoint_id.to_string(),
            node: c.node.clone(),
            seq: c.seq,
            todos_completed: c.todos_completed,
            time: text::clock(c.timestamp),
            branch: c.branch,
            abandoned: c.abandoned,
            head: head == Some(c.checkpoint_id.as_str()),
            confirm,
        }
    }
}

/// The checkpoints table (refreshed after a restore).
#[derive(Clone, Debug)]
pub struct Checkpoints {
    pub run_id: String,
    pub checkpoints: Vec<CheckpointRow>,
    /// How many are on abandoned branches.
    pub abandoned: usize,
    /// Older ones not listed (past [`CHECKPOINTS_SHOWN`]).
    pub older: usize,
}

impl Checkpoints {
    pub fn new(run: RunId, head: &RunState, checkpoints: &[CheckpointEntry]) -> Self {
        let last_seq = head.last_seq.unwrap_or(0);
        let head_id = head.checkpoints.head.as_ref().map(|c| c.as_str());
        let older = checkpoints.len().saturating_sub(CHECKPOINTS_SHOWN);
        Self {
            run_id: run.to_string(),
            checkpoints: checkpoints[older..]
                .iter()
                .map(|c| CheckpointRow::new(c, head_id, last_seq))
                .collect(),
            abandoned: checkpoints.iter().filter(|c| c.abandoned).count(),
            older,
        }
    }
}

/// The checkpoints alone, for a refresh after a restore.
#[derive(Clone, Debug, Template)]
#[template(path = "checkpoints.html")]
pub struct CheckpointsFragment {
    pub checkpoints: Checkpoints,
}

/// The board alone, for a scrub step or a live refresh.
#[derive(Clone, Debug, Template)]
#[template(path = "board.html")]
pub struct BoardFragment {
    pub board: Board,
}

/// `/console/runs/{id}`.
#[derive(Clone, Debug, Template)]
#[template(path = "run.html")]
pub struct RunPage {
    pub chrome: Chrome,
    pub run: RunView,
    pub board: Board,
    pub checkpoints: Checkpoints,
    pub timeline: Timeline,
    /// The CLI command that shows what the page shows.
    pub cli: String,
}

impl RunPage {
    pub fn new(
        chrome: Chrome,
        run: RunId,
        head: &RunState,
        board: BoardFragment,
        checkpoints: &[CheckpointEntry],
        timeline: Timeline,
        now: Timestamp,
    ) -> Self {
        let board = board.board;
        let cli = if board.past {
            format!("chronicle replay {run} --to {}", board.seq)
        } else {
            format!("chronicle replay {run}")
        };
        Self {
            chrome,
            run: RunView::new(run, head, now),
            checkpoints: Checkpoints::new(run, head, checkpoints),
            board,
            timeline,
            cli,
        }
    }
}
