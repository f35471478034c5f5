//! What the read routes answer, and the replies of the write routes: one type per JSON shape,
//! shared by the server that sends it and every client that reads it.

use chronicle_schemas::{
    Approval, ApprovalId, ApprovalStatus, Checkpoint, CheckpointId, ParentLink, Phase, RunId,
    RunStatus, SessionId, SupervisorState, SupervisorTodo, Timestamp, TodoId, ToolCallId,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tag;

/// The default and the largest page of `GET /api/v1/users/{user}/memories`.
pub const MEMORIES_PAGE_MAX: usize = 1_000;

/// `GET /api/v1/users/{user}/memories`: one page of a user's long-term memory as the caller may
/// see it, newest first; `DELETE` of the same path answers with the items it deleted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserMemories {
    pub user_id: String,
    pub memories: Vec<chronicle_schemas::Memory>,
    /// Pass it as `before` for the next page; null on the last page (and in a `DELETE`'s
    /// answer).
    #[serde(default)]
    pub next_before: Option<u64>,
}

/// `201 {ticket, expires_in_ms}`: a stream ticket, good for one stream (`?ticket=`) until it
/// expires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamTicket {
    pub ticket: String,
    pub expires_in_ms: u64,
}

/// `202 {run_id, session_id}`: a run was started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Started {
    pub run_id: RunId,
    pub session_id: SessionId,
}

/// `GET .../status`: where a run is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Status {
    pub run_id: RunId,
    pub state: RunStatus,
    /// The oldest approval waiting for a human.
    pub pending_approval_id: Option<ApprovalId>,
    pub phase: Phase,
    /// The seq of the run's newest durable event.
    pub last_seq: Option<u64>,
}

/// An approval as the API shows it: the approval's own fields, plus `id` (its approval id, as
/// the original API named it) and its run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalView {
    #[serde(flatten)]
    pub approval: Approval,
    pub id: ApprovalId,
    pub run_id: RunId,
}

impl ApprovalView {
    pub fn new(run_id: RunId, approval: Approval) -> Self {
        Self {
            id: approval.approval_id.clone(),
            approval,
            run_id,
        }
    }
}

/// `POST .../decision` answers `{status: "accepted", approval_id, run_id, approval}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecisionAccepted {
    pub status: tag::Accepted,
    pub approval_id: ApprovalId,
    pub run_id: RunId,
    pub approval: ApprovalView,
}

/// `POST .../cancel` answers `{status: "cancelled", run_id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCancelled {
    pub status: tag::Cancelled,
    pub run_id: RunId,
}

/// One approval in the inbox: the approval with its run, session and user, and how long it has
/// waited (pending ones only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxItem {
    #[serde(flatten)]
    pub approval: ApprovalView,
    pub session_id: SessionId,
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_ms: Option<i64>,
}

/// `GET /api/v1/approvals`: what waits on a human across every run, oldest request first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Inbox {
    pub status: ApprovalStatus,
    pub now: Timestamp,
    pub count: usize,
    /// More approvals matched than the answer lists.
    pub truncated: bool,
    pub approvals: Vec<InboxItem>,
}

/// One checkpoint of the tree, with whether a restore left it behind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckpointEntry {
    pub checkpoint_id: CheckpointId,
    pub timestamp: Timestamp,
    pub node: String,
    pub todos_completed: u32,
    pub seq: u64,
    pub parent: Option<CheckpointId>,
    pub branch: u32,
    pub abandoned: bool,
}

impl CheckpointEntry {
    pub fn new(c: &Checkpoint, abandoned: bool) -> Self {
        Self {
            checkpoint_id: c.checkpoint_id.clone(),
            timestamp: c.at,
            node: c.node.clone(),
            todos_completed: c.todos_completed,
            seq: c.seq,
            parent: c.parent.clone(),
            branch: c.branch,
            abandoned,
        }
    }
}

/// `GET .../checkpoints`: a run's checkpoint tree in log order, and the head of its effective
/// history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckpointList {
    pub run_id: RunId,
    pub checkpoints: Vec<CheckpointEntry>,
    pub head: Option<CheckpointId>,
}

impl CheckpointList {
    /// From the checkpoints in log order, each with whether it is abandoned.
    pub fn new<'a>(
        run_id: RunId,
        head: Option<CheckpointId>,
        checkpoints: impl IntoIterator<Item = (&'a Checkpoint, bool)>,
    ) -> Self {
        Self {
            run_id,
            checkpoints: checkpoints
                .into_iter()
                .map(|(c, abandoned)| CheckpointEntry::new(c, abandoned))
                .collect(),
            head,
        }
    }
}

/// How many TODOs are in each status (`pending` counts those waiting for approval too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TodoSummary {
    pub total: usize,
    pub pending: usize,
    pub in_progress: usize,
    pub completed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub blocked: usize,
    pub waiting_approval: usize,
}

/// A sub-agent run started by a `task` tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubRun {
    pub todo_id: TodoId,
    pub tool_call_id: ToolCallId,
    pub run_id: RunId,
    /// The child's run status, or `not_started` while the call waits for its approval.
    pub status: String,
    pub phase: Option<Phase>,
}

/// The TODO ids by outcome, as the planning state keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TodoIds {
    pub completed_todo_ids: Vec<TodoId>,
    pub failed_todo_ids: Vec<TodoId>,
    pub skipped_todo_ids: Vec<TodoId>,
}

/// `GET .../todos`: the TODO list with its summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TodoList {
    pub todos: Vec<SupervisorTodo>,
    pub sub_runs: Vec<SubRun>,
    pub summary: TodoSummary,
    pub current_todo_id: Option<TodoId>,
    pub execution_strategy: String,
    pub planning_state: TodoIds,
}

/// One run in `GET /api/v1/runs` (and `chronicle runs --json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSummary {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub status: RunStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub last_seq: u64,
    pub query: String,
    /// The run and tool call that started this one, for a sub-agent run.
    pub parent: Option<ParentLink>,
    /// The principal the run belongs to.
    #[serde(default)]
    pub owner: String,
}

/// The most runs one `GET /api/v1/runs` looks at.
pub const RUNS_PAGE_MAX: usize = 1_000;

/// `GET /api/v1/runs`: one page of runs, oldest first (by creation, then id).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    /// Where the next page starts (pass it as `after`); `None` on the last page.
    pub next: Option<RunId>,
    /// Runs of the page that could not be read because what the store holds of them is
    /// damaged (whatever the `status` asked for: theirs is unknown); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<DamagedRun>,
}

/// A run a listing could not read: its records are damaged (`chronicle verify` names them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DamagedRun {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub created_at: Timestamp,
    /// What reading it found, naming the offset of the damage.
    pub error: String,
}

/// A session's status as the chat routes report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    WaitingHuman,
    InProgress,
    Completed,
    Failed,
    Cancelled,
}

impl From<RunStatus> for SessionStatus {
    fn from(s: RunStatus) -> Self {
        match s {
            RunStatus::WaitingForApproval => SessionStatus::WaitingHuman,
            RunStatus::Running => SessionStatus::InProgress,
            RunStatus::Completed => SessionStatus::Completed,
            RunStatus::Failed => SessionStatus::Failed,
            RunStatus::Cancelled => SessionStatus::Cancelled,
        }
    }
}

/// `GET /api/sessions/{thread_id}`: the session's latest run, and every turn of the session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionView {
    pub thread_id: String,
    pub run_id: RunId,
    pub status: SessionStatus,
    pub pending_approval: Option<ApprovalView>,
    pub final_response: Option<Value>,
    /// The run's whole supervisor state (the same as `state.supervisor` of `GET .../state`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub state: SupervisorState,
    /// Every turn of the session, oldest first (the latest is the run above).
    #[serde(default)]
    pub turns: Vec<SessionTurn>,
}

/// The text of a final response: its `answer` field when it has one, else the response itself.
/// Every surface that shows an answer (the session routes, the CLI) shows this one text.
pub fn answer_text(final_response: &Value) -> String {
    match final_response.get("answer").and_then(Value::as_str) {
        Some(a) => a.to_owned(),
        None => match final_response {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
    }
}

/// Longest session title, in characters (the first turn's query, cut).
pub const SESSION_TITLE_CHARS_MAX: usize = 80;

/// A session's title: the first turn's query on one line, cut to [`SESSION_TITLE_CHARS_MAX`]
/// characters.
pub fn session_title(first_query: &str) -> String {
    one_line(first_query, SESSION_TITLE_CHARS_MAX)
}

/// `HH:MM:SS.mmm` (UTC): the time of an event in a readable line (the CLI's, the console's).
pub fn clock(at: Timestamp) -> String {
    at.to_datetime().format("%H:%M:%S%.3f").to_string()
}

/// `YYYY-MM-DD HH:MM:SS` (UTC), for tables.
pub fn date_time(at: Timestamp) -> String {
    at.to_datetime().format("%Y-%m-%d %H:%M:%S").to_string()
}

/// One line of free text: whitespace runs folded to one space, cut at `max` characters with
/// `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let folded: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() <= max {
        folded
    } else {
        let mut cut: String = folded.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// One turn of a session: a root run (sub-agent runs belong to the turn that started them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionTurn {
    pub run_id: RunId,
    pub query: String,
    pub status: RunStatus,
    /// The final response's answer text ([`answer_text`]), once the run has one.
    pub answer: Option<String>,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One session in `GET /api/v1/sessions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    pub session_id: SessionId,
    /// The first turn's query, cut to 80 characters.
    pub title: String,
    /// How many turns (root runs) the session has.
    pub turns: usize,
    /// When any run of the session last changed.
    pub last_activity: Timestamp,
    /// The latest turn's run status.
    pub status: RunStatus,
    /// The user the session's first run works for.
    pub user_id: Option<String>,
    /// The principal the session belongs to.
    pub owner: String,
    pub created_at: Timestamp,
}

/// The default and the largest page of `GET /api/v1/sessions`.
pub const SESSIONS_PAGE_DEFAULT: usize = 20;
pub const SESSIONS_PAGE_MAX: usize = 100;

/// `GET /api/v1/sessions`: one page of sessions, the most recently active first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    /// Pass it as `cursor` for the next page; null on the last page. Opaque.
    pub next_cursor: Option<String>,
}

/// `GET /api/v1/sessions/{session_id}`: a session and all its turns, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionDetail {
    pub session: SessionSummary,
    pub turns: Vec<SessionTurn>,
}

/// `DELETE /api/v1/sessions/{session_id}`: what the tombstone covered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionDeletedView {
    pub session_id: SessionId,
    /// Every run that got the tombstone (`SessionDeleted`): the turns and their sub-agent runs.
    pub runs: Vec<RunId>,
    /// The runs that were still going and were cancelled first.
    pub cancelled: Vec<RunId>,
}

/// One turn's checkpoints in `GET /api/sessions/{thread_id}/checkpoints`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnCheckpoints {
    pub run_id: RunId,
    pub query: String,
    pub checkpoints: Vec<CheckpointEntry>,
    pub head: Option<CheckpointId>,
}

/// `GET /api/sessions/{thread_id}/checkpoints`: the latest run's tree (the fields of
/// `CheckpointList`, as before), and every turn's, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionCheckpoints {
    #[serde(flatten)]
    pub latest: CheckpointList,
    pub turns: Vec<TurnCheckpoints>,
}

/// The answer to a chat turn (`POST /chat`, `resume`): 200 when the run ended, 202 while it is
/// still working.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatTurn {
    pub thread_id: String,
    pub run_id: RunId,
    pub status: SessionStatus,
    pub response: Option<Value>,
    /// Why the run failed (only when it did).
    pub failure: Option<String>,
}

/// The fields beside the error of a turn answered 409 `waiting_for_human`: the turn, and the
/// approvals the run waits for (the oldest as `approval`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatWaiting {
    #[serde(flatten)]
    pub turn: ChatTurn,
    pub approval: Option<ApprovalView>,
    pub approvals: Vec<ApprovalView>,
}

/// A slash command sent as a chat message: the command's outcome on the session's latest run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatCommand {
    pub thread_id: String,
    pub run_id: RunId,
    /// The command carried out: as sent, or as read from plain words (`interpreted_from`).
    #[serde(default)]
    pub command: String,
    pub result: crate::CommandOutcome,
    /// The message the command was interpreted from, when it was plain words said to a run
    /// that waits for a human ("분석도 추가해줘" → `/todo add analysis_team`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreted_from: Option<String>,
}

/// `ok`, `degraded` (the disk is full) or `failed` (the store stopped after a failed fsync).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Degraded,
    Failed,
}

/// Whether the store takes appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StorageState {
    Ok,
    Full,
    Failed,
}

/// `GET /healthz` (200 with `storage: ok`, 503 otherwise, with the same body).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    pub status: HealthStatus,
    pub storage: StorageState,
    pub durable_next_offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// The free space the store keeps (`chronicle serve --disk-reserve-mib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_bytes: Option<u64>,
    /// What one event of the largest size needs above the reserve: `storage` is `full` while
    /// less than `reserve_bytes + needed_bytes` is available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_bytes: Option<u64>,
    /// Why the store stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::Subject;
    use serde_json::json;

    use super::*;

    const RUN: RunId = RunId::from_u128(0x51);

    fn round_trip<T>(value: &T, want: Value)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let got = serde_json::to_value(value).unwrap();
        assert_eq!(got, want);
        let back: T = serde_json::from_value(got).unwrap();
        assert_eq!(&back, value);
    }

    fn approval() -> Approval {
        Approval {
            approval_id: "apr_001".into(),
            subject: Some(Subject::Todo {
                todo_id: "todo_001".into(),
            }),
            tool_name: "search_team".into(),
            request_args: json!({"q": 1}),
            status: ApprovalStatus::Pending,
            created_at: Timestamp(1_759_658_400_000_000),
            requested_seq: 9,
            ..Approval::default()
        }
    }

    /// An approval as the API has always shown it: its own fields, `id` and `run_id`.
    fn approval_json() -> Value {
        let mut v = serde_json::to_value(approval()).unwrap();
        v["id"] = json!("apr_001");
        v["run_id"] = json!(RUN);
        v
    }

    #[test]
    fn approval_views_add_id_and_run() {
        round_trip(&ApprovalView::new(RUN, approval()), approval_json());
        let mut item = approval_json();
        item["session_id"] = json!("s1");
        item["user_id"] = json!(null);
        item["waiting_ms"] = json!(1500);
        round_trip(
            &InboxItem {
                approval: ApprovalView::new(RUN, approval()),
                session_id: "s1".into(),
                user_id: None,
                waiting_ms: Some(1500),
            },
            item.clone(),
        );
        // Decided ones have no waiting time.
        item.as_object_mut().unwrap().remove("waiting_ms");
        round_trip(
            &InboxItem {
                approval: ApprovalView::new(RUN, approval()),
                session_id: "s1".into(),
                user_id: None,
                waiting_ms: None,
            },
            item,
        );
        round_trip(
            &DecisionAccepted {
                status: tag::Accepted::Accepted,
                approval_id: "apr_001".into(),
                run_id: RUN,
                approval: ApprovalView::new(RUN, approval()),
            },
            json!({"status": "accepted", "approval_id": "apr_001", "run_id": RUN, "approval": approval_json()}),
        );
    }

    #[test]
    fn checkpoint_lists_keep_their_shape() {
        let cp = Checkpoint {
            checkpoint_id: "cp_002".into(),
            seq: 7,
            node: "approval".into(),
            at: Timestamp(1_759_658_400_000_000),
            todos_completed: 1,
            parent: Some("cp_001".into()),
            branch: 0,
            update: false,
        };
        let list = CheckpointList::new(RUN, Some("cp_002".into()), [(&cp, true)]);
        round_trip(
            &list,
            json!({"run_id": RUN, "head": "cp_002", "checkpoints": [{
                "checkpoint_id": "cp_002", "timestamp": "2025-10-05T10:00:00.000000Z",
                "node": "approval", "todos_completed": 1, "seq": 7, "parent": "cp_001",
                "branch": 0, "abandoned": true,
            }]}),
        );
    }

    #[test]
    fn run_replies_keep_their_shape() {
        round_trip(
            &Started {
                run_id: RUN,
                session_id: "s1".into(),
            },
            json!({"run_id": RUN, "session_id": "s1"}),
        );
        round_trip(
            &Status {
                run_id: RUN,
                state: RunStatus::WaitingForApproval,
                pending_approval_id: Some("apr_001".into()),
                phase: Phase::Executing,
                last_seq: Some(12),
            },
            json!({"run_id": RUN, "state": "waiting_for_approval", "pending_approval_id": "apr_001",
                   "phase": "executing", "last_seq": 12}),
        );
        round_trip(
            &RunCancelled {
                status: tag::Cancelled::Cancelled,
                run_id: RUN,
            },
            json!({"status": "cancelled", "run_id": RUN}),
        );
        round_trip(
            &RunList {
                runs: vec![RunSummary {
                    run_id: RUN,
                    session_id: "s1".into(),
                    status: RunStatus::Completed,
                    created_at: Timestamp(0),
                    updated_at: Timestamp(1),
                    last_seq: 30,
                    query: "q".into(),
                    parent: None,
                    owner: "alice".into(),
                }],
                next: None,
                damaged: vec![],
            },
            json!({"next": null, "runs": [{
                "run_id": RUN, "session_id": "s1", "status": "completed",
                "created_at": "1970-01-01T00:00:00.000000Z", "updated_at": "1970-01-01T00:00:00.000001Z",
                "last_seq": 30, "query": "q", "parent": null, "owner": "alice",
            }]}),
        );
        round_trip(
            &RunList {
                runs: vec![],
                next: None,
                damaged: vec![DamagedRun {
                    run_id: RUN,
                    session_id: "s1".into(),
                    created_at: Timestamp(0),
                    error: "corrupt log at offset 3: …".into(),
                }],
            },
            json!({"next": null, "runs": [], "damaged": [{
                "run_id": RUN, "session_id": "s1", "created_at": "1970-01-01T00:00:00.000000Z",
                "error": "corrupt log at offset 3: …",
            }]}),
        );
        round_trip(
            &Health {
                status: HealthStatus::Degraded,
                storage: StorageState::Full,
                durable_next_offset: 5,
                available_bytes: Some(1),
                reserve_bytes: Some(2),
                needed_bytes: Some(3),
                reason: None,
            },
            json!({"status": "degraded", "storage": "full", "durable_next_offset": 5,
                   "available_bytes": 1, "reserve_bytes": 2, "needed_bytes": 3}),
        );
    }

    #[test]
    fn todo_lists_keep_their_shape() {
        let list = TodoList {
            todos: vec![],
            sub_runs: vec![SubRun {
                todo_id: "todo_001".into(),
                tool_call_id: "call_1".into(),
                run_id: RUN,
                status: "not_started".into(),
                phase: None,
            }],
            summary: TodoSummary {
                total: 2,
                pending: 1,
                completed: 1,
                ..TodoSummary::default()
            },
            current_todo_id: Some("todo_002".into()),
            execution_strategy: "sequential".into(),
            planning_state: TodoIds {
                completed_todo_ids: vec!["todo_001".into()],
                ..TodoIds::default()
            },
        };
        round_trip(
            &list,
            json!({
                "todos": [],
                "sub_runs": [{"todo_id": "todo_001", "tool_call_id": "call_1", "run_id": RUN,
                              "status": "not_started", "phase": null}],
                "summary": {"total": 2, "pending": 1, "in_progress": 0, "completed": 1, "failed": 0,
                            "skipped": 0, "blocked": 0, "waiting_approval": 0},
                "current_todo_id": "todo_002",
                "execution_strategy": "sequential",
                "planning_state": {"completed_todo_ids": ["todo_001"], "failed_todo_ids": [],
                                   "skipped_todo_ids": []},
            }),
        );
    }

    #[test]
    fn chat_turns_keep_their_shape() {
        let turn = ChatTurn {
            thread_id: "t1".into(),
            run_id: RUN,
            status: SessionStatus::WaitingHuman,
            response: None,
            failure: None,
        };
        let turn_json = json!({"thread_id": "t1", "run_id": RUN, "status": "waiting_human",
                               "response": null, "failure": null});
        round_trip(&turn, turn_json.clone());
        let mut waiting = turn_json;
        waiting["approval"] = approval_json();
        waiting["approvals"] = json!([approval_json()]);
        round_trip(
            &ChatWaiting {
                turn,
                approval: Some(ApprovalView::new(RUN, approval())),
                approvals: vec![ApprovalView::new(RUN, approval())],
            },
            waiting,
        );
        assert_eq!(
            SessionStatus::from(RunStatus::WaitingForApproval),
            SessionStatus::WaitingHuman
        );
    }
}
