//! REST handlers: the chat routes, the run and approval routes, health and metrics.
//! Handlers translate HTTP to `Engine` calls and back; every rule lives in the engine.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chronicle_engine::{RestoreTarget, StartRun, Turn, TurnInput, TurnOutcome};
use chronicle_projections::RunState;
use chronicle_schemas::{ApprovalId, CheckpointId, RunId, RunStatus, SessionId};
use chronicle_wire::ErrorBody;
use chronicle_wire::{
    ApprovalView, CancelRequest, ChatCommand, ChatRequest, ChatTurn, ChatWaiting, CheckpointList,
    CommandOutcome, CommandRequest, DecisionAccepted, DecisionRequest, RestoreRequest,
    ResumeRequest, RunCancelled, RunRequest, SessionCheckpoints, SessionView, Started, Status,
    TodoIds, TodoList, TurnCheckpoints, tag,
};
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{
    ApprovalIdPath, CheckpointIdPath, IdempotencyKey, Json, OwnedRun, Query, RunPath, SessionPath,
    ThreadId,
};
use crate::refusals::{ReadError, RunReadError, RunWriteError, WriteError};
use crate::response::{ChatAnswer, WAITING_HINT, WaitingForHumanOrConflict};
use crate::state::AppState;

type JsonResult<T, E = ApiError> = Result<axum::Json<T>, E>;

fn ok<T: Serialize, E>(v: T) -> JsonResult<T, E> {
    Ok(axum::Json(v))
}

fn state_of(st: &AppState, run: RunId) -> ApiResult<RunState> {
    Ok(st.engine.state(run, None)?)
}

fn latest_run(
    st: &AppState,
    who: &chronicle_engine::Principal,
    session: &SessionId,
) -> ApiResult<RunId> {
    st.engine
        .latest_run_of(who, session)?
        .ok_or_else(|| ApiError::not_found(format!("session {} not found", session.0)))
}

/// The checkpoint tree of `run` as it stands, abandoned checkpoints included.
fn checkpoints_of(st: &AppState, run: RunId) -> JsonResult<CheckpointList> {
    let s = state_of(st, run)?;
    ok(CheckpointList::new(
        run,
        s.checkpoints.head.clone(),
        s.checkpoints.with_abandoned(),
    ))
}

// ------------------------------------------------------------------ chat: /chat and resume

/// The answer to a turn: 200 with the final response, 409 with the pending approval when the run
/// waits for a human, 202 when it is still working after `chat_wait_ms`.
async fn turn_response(st: &AppState, thread: &str, run: RunId) -> ApiResult<Response> {
    turn_response_told(st, thread, run, None).await
}

/// [`turn_response`]; a run that waits is answered with `hint` after what it waits for.
async fn turn_response_told(
    st: &AppState,
    thread: &str,
    run: RunId,
    hint: Option<&str>,
) -> ApiResult<Response> {
    let s = match st.engine.wait_settled(run, st.chat_wait()).await {
        Ok(s) => s,
        Err(chronicle_engine::Error::Timeout { .. }) => state_of(st, run)?,
        Err(e) => return Err(e.into()),
    };
    let sup = &s.supervisor;
    let turn = ChatTurn {
        thread_id: thread.to_owned(),
        run_id: run,
        status: sup.run_status.into(),
        response: sup.final_response.clone(),
        failure: sup
            .error_log
            .last()
            .filter(|_| sup.run_status == RunStatus::Failed)
            .cloned(),
    };
    if sup.run_status == RunStatus::WaitingForApproval {
        let approvals: Vec<ApprovalView> = s
            .approvals
            .pending()
            .map(|a| ApprovalView::new(run, a.clone()))
            .collect();
        let mut msg = sup
            .approval_message
            .clone()
            .unwrap_or_else(|| "waiting for a human".into());
        if let Some(hint) = hint {
            msg = format!("{msg} ({hint})");
        }
        let waiting = ChatWaiting {
            turn,
            approval: approvals.first().cloned(),
            approvals,
        };
        let extra = serde_json::to_value(waiting).map_err(ApiError::internal)?;
        return Err(ApiError::new(StatusCode::CONFLICT, "waiting_for_human", msg).with(extra));
    }
    let status = if sup.run_status.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, axum::Json(turn)).into_response())
}

/// The HTTP answer to a turn the engine carried out.
async fn turn_answer(st: &AppState, thread: &str, outcome: TurnOutcome) -> ApiResult<Response> {
    match outcome {
        TurnOutcome::Command {
            run,
            command,
            outcome,
            said,
        } => {
            let body = ChatCommand {
                thread_id: thread.to_owned(),
                run_id: run,
                command,
                result: *outcome,
                interpreted_from: said,
            };
            Ok(axum::Json(body).into_response())
        }
        TurnOutcome::Started { run } => turn_response(st, thread, run).await,
        TurnOutcome::Waiting { run } => {
            turn_response_told(st, thread, run, Some(WAITING_HINT)).await
        }
        TurnOutcome::Decided { run, .. } => turn_response(st, thread, run).await,
    }
}

#[utoipa::path(post, path = "/chat", tag = "chat", request_body = ChatRequest, security(("bearer" = [])),
    params(IdempotencyKey),
    responses(
        (status = 200, description = "The run ended (`ChatTurn` with the final response, or the failure), or the message was a `/command` on the session's latest run (`ChatCommand`)", body = inline(ChatAnswer)),
        (status = 202, description = "The run is still working after the wait (60 s by default): follow it by its `run_id`", body = ChatTurn),
        (status = 400, description = "Malformed JSON or a refused `/command` (`bad_request`, with `help`; the command is recorded all the same), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "The thread is another principal's, or a `/command` was sent to a thread without runs (`not_found`)", body = ErrorBody),
        (status = 409, description = "The run waits for a human (`waiting_for_human`, with the turn and the approvals it waits for): the message started nothing; or the `Idempotency-Key` was sent before with another request (`conflict`)", body = inline(WaitingForHumanOrConflict)),
        (status = 422, description = "JSON of the wrong shape, a message that is blank or over 8192 characters, a bad `thread_id`, or a `user_id` that is not the caller's own (only an admin may name another user) (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn chat(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    Json(req): Json<ChatRequest>,
) -> Result<Response, WriteError> {
    let thread = req
        .thread_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let outcome = st
        .engine
        .turn(Turn {
            session: SessionId(thread.clone()),
            run: None,
            input: TurnInput::Message(req.message),
            by: who,
            user_id: req.user_id,
            hitl: req.hitl,
            on_reject: req.on_reject,
            idempotency_key: key,
        })
        .await?;
    Ok(turn_answer(&st, &thread, outcome).await?)
}

#[utoipa::path(get, path = "/api/sessions/{thread_id}", tag = "chat", security(("bearer" = [])),
    params(("thread_id" = inline(ThreadId), Path, description = "The session")),
    responses(
        (status = 200, description = "The session's latest run: its status, pending approval, final response and supervisor state; and every turn of the session, oldest first (`turns`)", body = SessionView),
        (status = 400, description = "A bad thread id (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such session, another principal's, or a deleted one (`not_found`: the same answer)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn session(
    State(st): State<AppState>,
    Principal(who): Principal,
    SessionPath(session): SessionPath,
) -> JsonResult<SessionView, ReadError> {
    // The latest turn and the state shown beside it are one read: one answer never says two
    // things of the run.
    let (turns, run, s) = st.engine.session_latest(&who, &session)?;
    ok(SessionView {
        turns,
        thread_id: session.0,
        run_id: run,
        status: s.supervisor.run_status.into(),
        pending_approval: s
            .approvals
            .pending()
            .next()
            .map(|a| ApprovalView::new(run, a.clone())),
        final_response: s.supervisor.final_response.clone(),
        state: s.supervisor,
    })
}

#[utoipa::path(post, path = "/api/sessions/{thread_id}/resume", tag = "chat", request_body = ResumeRequest, security(("bearer" = [])),
    params(("thread_id" = inline(ThreadId), Path, description = "The session")),
    responses(
        (status = 200, description = "The approval was decided and the run ended (`ChatTurn`), or `response` was a `/command` (`ChatCommand`)", body = inline(ChatAnswer)),
        (status = 202, description = "The approval was decided; the run is still working after the wait", body = ChatTurn),
        (status = 400, description = "Malformed JSON, a bad thread id or a refused `/command` (`bad_request`, with `help`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such session, another principal's, or a deleted one (`not_found`)", body = ErrorBody),
        (status = 409, description = "The run waits for a human again (`waiting_for_human`, with the approvals), or the answer does not fit the run: nothing pending, several pending, already decided (`conflict`)", body = inline(WaitingForHumanOrConflict)),
        (status = 422, description = "JSON of the wrong shape: neither or both of `approve` and `response`, or a blank `response` (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn resume(
    State(st): State<AppState>,
    Principal(who): Principal,
    SessionPath(session): SessionPath,
    Json(req): Json<ResumeRequest>,
) -> Result<Response, WriteError> {
    let input = match (req.approve, req.response) {
        (Some(yes), None) => TurnInput::Approve(yes),
        (None, Some(text)) if !text.trim().is_empty() => TurnInput::Response(text),
        _ => {
            return Err(ApiError::unprocessable(
                "send either {\"approve\": bool} or {\"response\": \"...\"}",
            )
            .into());
        }
    };
    let outcome = st
        .engine
        .turn(Turn {
            session: session.clone(),
            run: Some(latest_run(&st, &who, &session)?),
            input,
            by: who,
            user_id: None,
            hitl: None,
            on_reject: None,
            idempotency_key: None,
        })
        .await?;
    Ok(turn_answer(&st, &session.0, outcome).await?)
}

#[utoipa::path(get, path = "/api/sessions/{thread_id}/checkpoints", tag = "chat", security(("bearer" = [])),
    params(("thread_id" = inline(ThreadId), Path, description = "The session")),
    responses(
        (status = 200, description = "The checkpoint tree of the session's latest run (`run_id`, `checkpoints`, `head`), and every turn's, oldest first (`turns`)", body = SessionCheckpoints),
        (status = 400, description = "A bad thread id (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such session, another principal's, or a deleted one (`not_found`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn session_checkpoints(
    State(st): State<AppState>,
    Principal(who): Principal,
    SessionPath(session): SessionPath,
) -> JsonResult<SessionCheckpoints, ReadError> {
    let (turns, run, s) = st.engine.session_latest(&who, &session)?;
    let latest = CheckpointList::new(
        run,
        s.checkpoints.head.clone(),
        s.checkpoints.with_abandoned(),
    );
    let turns = turns
        .into_iter()
        .map(|t| {
            // The latest turn's tree is the one above (one read).
            let list = match t.run_id == run {
                true => latest.clone(),
                false => checkpoints_of(&st, t.run_id)?.0,
            };
            Ok(TurnCheckpoints {
                run_id: t.run_id,
                query: t.query,
                checkpoints: list.checkpoints,
                head: list.head,
            })
        })
        .collect::<ApiResult<_>>()?;
    ok(SessionCheckpoints { latest, turns })
}

// ------------------------------------------------------------------ /api/v1/agent

#[utoipa::path(post, path = "/api/v1/agent/run", tag = "runs", request_body = RunRequest, security(("bearer" = [])),
    params(IdempotencyKey),
    responses(
        (status = 202, description = "The run started: it is recorded (durably) and works on", body = Started,
            links(
                ("Status" = (operation_id = "status", parameters(("run_id" = "$response.body#/run_id")))),
                ("Approvals" = (operation_id = "approvals", parameters(("run_id" = "$response.body#/run_id")))),
                ("Todos" = (operation_id = "todos", parameters(("run_id" = "$response.body#/run_id")))),
                ("State" = (operation_id = "state", parameters(("run_id" = "$response.body#/run_id")))),
                ("Log" = (operation_id = "log", parameters(("run_id" = "$response.body#/run_id")))),
                ("Checkpoints" = (operation_id = "checkpoints", parameters(("run_id" = "$response.body#/run_id")))),
                ("Events" = (operation_id = "run_events", parameters(("run_id" = "$response.body#/run_id")))),
                ("Cancel" = (operation_id = "cancel", parameters(("run_id" = "$response.body#/run_id"))))
            )),
        (status = 400, description = "Malformed JSON (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "`session_id` names another principal's session, or a deleted one (`not_found`)", body = ErrorBody),
        (status = 409, description = "Another request wrote to the new run at the same moment (`conflict`): try again; or the `Idempotency-Key` was sent before with another request (`conflict`)", body = ErrorBody),
        (status = 422, description = "JSON of the wrong shape, a query that is blank or over 8192 characters, a bad `session_id`, an `approval_timeout_ms` out of range, a fixed plan naming an agent the server does not have or a dependency the plan does not run, an `agent` the server does not have (or a `plan` beside it that is not that agent's one step), or a `user_id` that is not the caller's own (only an admin may name another user) (`unprocessable_entity`); nothing was written", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn start_run(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    Json(req): Json<RunRequest>,
) -> Result<Response, WriteError> {
    let started = st
        .engine
        .start_run(StartRun {
            by: who,
            query: req.query,
            session_id: req.session_id.map(SessionId),
            user_id: req.user_id,
            hitl: req.hitl,
            on_reject: req.on_reject,
            strategy: req.strategy,
            approval_timeout_ms: req.approval_timeout_ms,
            config: None,
            parent: None,
            agent: req.agent,
            plan: req.plan.map(|s| s.into_iter().map(Into::into).collect()),
            follows: None,
            idempotency_key: key,
        })
        .await?;
    let body = Started {
        run_id: started.run_id,
        session_id: started.session_id,
    };
    Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response())
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/status", tag = "runs", security(("bearer" = [])),
    params(OwnedRun),
    responses(
        (status = 200, description = "Where the run is", body = Status),
        (status = 400, description = "A run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn status(
    State(st): State<AppState>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<Status, RunReadError> {
    let s = state_of(&st, run)?;
    ok(Status {
        run_id: run,
        state: s.supervisor.run_status,
        pending_approval_id: s.approvals.pending().next().map(|a| a.approval_id.clone()),
        phase: s.supervisor.current_phase,
        last_seq: s.last_seq,
    })
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/approvals", tag = "approvals", security(("bearer" = [])),
    params(OwnedRun),
    responses(
        (status = 200, description = "Every approval of the run, in the order they were asked", body = Vec<ApprovalView>),
        (status = 400, description = "A run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn approvals(
    State(st): State<AppState>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<Vec<ApprovalView>, RunReadError> {
    let s = state_of(&st, run)?;
    ok(s.approvals
        .list
        .into_iter()
        .map(|a| ApprovalView::new(run, a))
        .collect())
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/approvals/{approval_id}", tag = "approvals", security(("bearer" = [])),
    params(OwnedRun, ("approval_id" = String, Path, min_length = 1, description = "The approval")),
    responses(
        (status = 200, description = "The approval", body = ApprovalView),
        (status = 400, description = "A run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such run (or another principal's), or no such approval in it (`not_found`)", body = ErrorBody),
        ReadError,
    ))]
pub(crate) async fn approval(
    State(st): State<AppState>,
    OwnedRun(run): OwnedRun,
    ApprovalIdPath(id): ApprovalIdPath,
) -> JsonResult<ApprovalView, ReadError> {
    let s = state_of(&st, run)?;
    let a = s
        .approvals
        .get(&ApprovalId(id.clone()))
        .ok_or_else(|| ApiError::not_found(format!("approval {id} not found")))?;
    ok(ApprovalView::new(run, a.clone()))
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/approvals/{approval_id}/decision", tag = "approvals", request_body = DecisionRequest, security(("bearer" = [])),
    params(RunPath, ("approval_id" = String, Path, min_length = 1, description = "The approval")),
    responses(
        (status = 200, description = "The decision is recorded (the principal as `decided_by`)", body = DecisionAccepted),
        (status = 400, description = "Malformed JSON, a run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such run (or another principal's), or no such approval in it (`not_found`)", body = ErrorBody),
        (status = 409, description = "The approval is already decided, expired or cancelled, or the run changed at the same moment (`conflict`)", body = ErrorBody),
        (status = 422, description = "JSON of the wrong shape: an unknown decision or field, `edit` without `edited_args` (a JSON object), or `edited_args` with `approve` or `reject` (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn decide(
    State(st): State<AppState>,
    Principal(who): Principal,
    RunPath(run): RunPath,
    ApprovalIdPath(id): ApprovalIdPath,
    Json(req): Json<DecisionRequest>,
) -> JsonResult<DecisionAccepted, WriteError> {
    let (decision, edited_args, comment) = req.into_parts();
    let a = st
        .engine
        .decide(run, ApprovalId(id), decision, edited_args, &who, comment)
        .await?;
    ok(DecisionAccepted {
        status: tag::Accepted::default(),
        approval_id: a.approval_id.clone(),
        run_id: run,
        approval: ApprovalView::new(run, a),
    })
}

// ------------------------------------------------------------------ engine routes

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/commands", tag = "runs", request_body = CommandRequest, security(("bearer" = [])),
    params(RunPath),
    responses(
        (status = 200, description = "The command was carried out (and recorded); the reply's shape depends on the command", body = CommandOutcome),
        (status = 400, description = "A refused command: bad grammar, an unknown id... (`bad_request`, with the reason and `help`; recorded all the same); or malformed JSON or a run id that is not a UUID (`bad_request`); or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 409, description = "A command the run's state refuses: no approval is pending, it is already decided, an illegal transition... (`conflict`, with the reason and `help`, as on every route; recorded all the same)", body = ErrorBody),
        (status = 422, description = "JSON of the wrong shape (`unprocessable_entity`)", body = ErrorBody),
        RunWriteError,
    ))]
pub(crate) async fn command(
    State(st): State<AppState>,
    Principal(who): Principal,
    RunPath(run): RunPath,
    Json(req): Json<CommandRequest>,
) -> JsonResult<CommandOutcome, RunWriteError> {
    ok(st.engine.command(run, &req.command, &who).await?)
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/todos", tag = "runs", security(("bearer" = [])),
    params(OwnedRun),
    responses(
        (status = 200, description = "The TODO list with its summary and the sub-agent runs", body = TodoList),
        (status = 400, description = "A run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn todos(
    State(st): State<AppState>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<TodoList, RunReadError> {
    let s = state_of(&st, run)?;
    let sub_runs = st.engine.sub_runs(&s);
    let p = s.supervisor.planning_state.unwrap_or_default();
    ok(TodoList {
        summary: chronicle_engine::todo::summary(&p),
        todos: p.todos,
        sub_runs,
        current_todo_id: p.current_todo_id,
        execution_strategy: p.execution_strategy,
        planning_state: TodoIds {
            completed_todo_ids: p.completed_todo_ids,
            failed_todo_ids: p.failed_todo_ids,
            skipped_todo_ids: p.skipped_todo_ids,
        },
    })
}

#[derive(Debug, Deserialize)]
pub struct AtQuery {
    pub at: Option<u64>,
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/state", tag = "runs", security(("bearer" = [])),
    params(OwnedRun, ("at" = Option<u64>, Query, minimum = 0, description = "Time travel: the state right after this seq (default: now)")),
    responses(
        (status = 200, description = "The run's projected state: `supervisor`, `checkpoints`, `approvals`, `last_seq`", body = Object),
        (status = 400, description = "A run id that is not a UUID, an `at` that is not an unsigned integer (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 422, description = "`at` is beyond the run's last seq (`unprocessable_entity`)", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn state(
    State(st): State<AppState>,
    // The principal before the query and the run after it, as the answers' order has it: no
    // token is 401 whatever the query, a bad query 400 whatever the run.
    _: Principal,
    Query(q): Query<AtQuery>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<Value, RunReadError> {
    let head = st
        .engine
        .store()
        .run_head(run)?
        .ok_or_else(|| ApiError::not_found(format!("run {run} not found")))?;
    if let Some(at) = q.at
        && at > head.last_seq
    {
        return Err(ApiError::unprocessable(format!(
            "seq {at} is beyond the run's last seq {}",
            head.last_seq
        ))
        .into());
    }
    let s = st.engine.state(run, q.at)?;
    ok(serde_json::to_value(&s).map_err(ApiError::internal)?)
}

#[derive(Debug, Deserialize)]
pub struct LogQuery {
    pub from: Option<u64>,
    pub limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/log", tag = "runs", security(("bearer" = [])),
    params(
        OwnedRun,
        ("from" = Option<u64>, Query, minimum = 0, description = "The first seq (default 0)"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "At most this many events (default: the maximum)"),
    ),
    responses(
        (status = 200, description = "The run's stored events from `from`, in seq order, each an envelope: `run_id`, `seq`, `offset`, `at`, `event`, `hash`, `prev_hash`", body = Vec<Object>),
        (status = 400, description = "A run id that is not a UUID, a `from` or `limit` that is not an unsigned integer (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 422, description = "`limit` is 0 or over the maximum (`unprocessable_entity`)", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn log(
    State(st): State<AppState>,
    // The principal before the query and the run after it (see `state`).
    _: Principal,
    Query(q): Query<LogQuery>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<Value, RunReadError> {
    let max = st.config.log_page_events_max;
    let limit = q.limit.unwrap_or(max);
    if limit == 0 || limit > max {
        return Err(
            ApiError::unprocessable(format!("limit must be 1..={max}, got {limit}")).into(),
        );
    }
    let from = q.from.unwrap_or(0);
    let events: Vec<_> = st
        .engine
        .store()
        .read_run(run, from, from.saturating_add(limit as u64 - 1))
        .collect::<Result<_, _>>()?;
    ok(serde_json::to_value(events).map_err(ApiError::internal)?)
}

/// Spans of one run's trace the server answers at most (a run of any length folds in bounded
/// memory; a longer trace is exported with `chronicle trace export`, which has no such bound).
pub const TRACE_SPANS_MAX: usize = 10_000;

#[derive(Debug, Deserialize)]
pub struct TraceQuery {
    pub content: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/trace", tag = "runs", security(("bearer" = [])),
    params(
        OwnedRun,
        ("content" = Option<bool>, Query, description = "Put the run's content in the spans: the query, the model's answers, the tools' arguments and results (default false)"),
    ),
    responses(
        (status = 200, description = "The run's OpenTelemetry trace, rebuilt from its events, as one OTLP/JSON `ExportTraceServiceRequest` (`resourceSpans`): the spans, with the same ids, that the live OTLP export sends", body = Object),
        (status = 400, description = "A run id that is not a UUID, a `content` that is not a boolean (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 413, description = "The trace has more than 10,000 spans (`payload_too_large`): export it with `chronicle trace export`", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn trace(
    State(st): State<AppState>,
    _: Principal,
    Query(q): Query<TraceQuery>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<Value, RunReadError> {
    let store = st.engine.store().clone();
    let opts = chronicle_projections::trace::TraceOptions {
        content: q.content.unwrap_or(false),
    };
    let spans = tokio::task::spawn_blocking(move || {
        let mut trace = chronicle_projections::trace::RunTrace::new(run, opts);
        let mut spans = Vec::new();
        for env in store.read_run(run, 0, u64::MAX) {
            spans.extend(trace.apply(&env?));
            if spans.len() > TRACE_SPANS_MAX {
                return Ok(None);
            }
        }
        spans.extend(trace.open_spans());
        Ok::<_, chronicle_engine::store::Error>((spans.len() <= TRACE_SPANS_MAX).then_some(spans))
    })
    .await
    .map_err(ApiError::internal)??;
    let Some(spans) = spans else {
        return Err(ApiError::too_large(format!(
            "the trace of run {run} has more than {TRACE_SPANS_MAX} spans: export it with `chronicle trace export`"
        ))
        .into());
    };
    ok(chronicle_telemetry::otlp_json(&spans))
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/checkpoints", tag = "runs", security(("bearer" = [])),
    params(OwnedRun),
    responses(
        (status = 200, description = "The run's checkpoint tree in log order (abandoned ones included) and the head", body = CheckpointList),
        (status = 400, description = "A run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        RunReadError,
    ))]
pub(crate) async fn checkpoints(
    State(st): State<AppState>,
    OwnedRun(run): OwnedRun,
) -> JsonResult<CheckpointList, RunReadError> {
    Ok(checkpoints_of(&st, run)?)
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/checkpoints/{checkpoint_id}/restore", tag = "runs", request_body = RestoreRequest, security(("bearer" = [])),
    params(RunPath, ("checkpoint_id" = String, Path, min_length = 1, description = "The checkpoint")),
    responses(
        (status = 200, description = "The run went back to the checkpoint and goes on from there; what came after stays in the log as an abandoned branch", body = chronicle_wire::Restored),
        (status = 400, description = "Malformed JSON, a run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 404, description = "No such run (or another principal's), or no such checkpoint in it (`not_found`)", body = ErrorBody),
        (status = 409, description = "The run changed at the same moment (`conflict`): try again", body = ErrorBody),
        (status = 422, description = "A body other than `{}` (`unprocessable_entity`)", body = ErrorBody),
        WriteError,
    ))]
pub(crate) async fn restore(
    State(st): State<AppState>,
    Principal(who): Principal,
    RunPath(run): RunPath,
    CheckpointIdPath(cp): CheckpointIdPath,
    Json(RestoreRequest {}): Json<RestoreRequest>,
) -> JsonResult<chronicle_wire::Restored, WriteError> {
    ok(st
        .engine
        .restore(run, RestoreTarget::Checkpoint(CheckpointId(cp)), &who)
        .await?)
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/cancel", tag = "runs", request_body = Option<CancelRequest>, security(("bearer" = [])),
    params(RunPath),
    responses(
        (status = 200, description = "The run is cancelled (with its sub-agent runs)", body = RunCancelled),
        (status = 400, description = "Malformed JSON (an empty body included), a run id that is not a UUID (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 409, description = "The run already ended, or changed at the same moment (`conflict`)", body = ErrorBody),
        (status = 422, description = "JSON of the wrong shape (`unprocessable_entity`)", body = ErrorBody),
        RunWriteError,
    ))]
pub(crate) async fn cancel(
    State(st): State<AppState>,
    Principal(who): Principal,
    RunPath(run): RunPath,
    Json(req): Json<Option<CancelRequest>>,
) -> JsonResult<RunCancelled, RunWriteError> {
    // `null` is a cancel without a reason, as `{}` is.
    let req = req.unwrap_or_default();
    st.engine.cancel(run, &who, req.reason).await?;
    ok(RunCancelled {
        status: tag::Cancelled::default(),
        run_id: run,
    })
}
