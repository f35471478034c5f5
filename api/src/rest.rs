//! REST handlers: the seed-compatible routes (seed 003 / 004) and the engine routes (DESIGN §6).
//! Handlers translate HTTP to `Engine` calls and back; every rule lives in the engine.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chronicle_engine::store::StorageHealth;
use chronicle_engine::{RestoreTarget, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalId, CheckpointId, Decision, HitlMode, PlanStep, RunId, RunStatus, SessionId,
    Strategy,
};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, OptionalJson, Path, Query};
use crate::state::AppState;

type JsonResult = ApiResult<axum::Json<Value>>;

fn ok(v: Value) -> JsonResult {
    Ok(axum::Json(v))
}

pub(crate) fn run_id(s: &str) -> ApiResult<RunId> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid run id {s:?}")))
}

fn state_of(st: &AppState, run: RunId) -> ApiResult<RunState> {
    Ok(st.engine.state(run, None)?)
}

/// An approval as seed 003 shows it (`id` is the approval id), with its run.
pub(crate) fn approval_json(run: RunId, a: &Approval) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("id".into(), json!(a.approval_id));
        m.insert("run_id".into(), json!(run));
    }
    v
}

/// seed 004's session status of a run's state.
fn session_status(s: &RunState) -> &'static str {
    match s.supervisor.run_status {
        RunStatus::WaitingForApproval => "waiting_human",
        RunStatus::Running => "in_progress",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

fn latest_run(st: &AppState, thread: &str) -> ApiResult<RunId> {
    st.engine
        .store()
        .session_runs(&SessionId::from(thread))?
        .last()
        .copied()
        .ok_or_else(|| ApiError::not_found(format!("session {thread} not found")))
}

// ------------------------------------------------------------------ seed 004: /chat

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    pub message: String,
    pub thread_id: Option<String>,
    pub user_id: Option<String>,
    #[schema(value_type = Option<String>, example = "every_todo")]
    pub hitl: Option<HitlMode>,
}

/// The answer to a turn: 200 with the final response, 409 with the pending approval when the run
/// waits for a human, 202 when it is still working after `chat_wait_ms`.
async fn turn_response(st: &AppState, thread: &str, run: RunId) -> ApiResult<Response> {
    let s = st.engine.wait_settled(run, st.chat_wait()).await;
    let s = match s {
        Ok(s) => s,
        Err(chronicle_engine::Error::Timeout { .. }) => state_of(st, run)?,
        Err(e) => return Err(e.into()),
    };
    let body = json!({
        "thread_id": thread,
        "run_id": run,
        "status": session_status(&s),
        "response": s.supervisor.final_response,
        "failure": s.supervisor.error_log.last().filter(|_| s.supervisor.run_status == RunStatus::Failed),
    });
    if s.supervisor.run_status == RunStatus::WaitingForApproval {
        let pending: Vec<Value> = s
            .approvals
            .pending()
            .map(|a| approval_json(run, a))
            .collect();
        let msg = s
            .supervisor
            .approval_message
            .clone()
            .unwrap_or_else(|| "waiting for a human".into());
        let mut extra = body;
        extra["approval"] = pending.first().cloned().unwrap_or(Value::Null);
        extra["approvals"] = Value::Array(pending);
        return Err(ApiError::new(StatusCode::CONFLICT, "waiting_for_human", msg).with(extra));
    }
    let status = if s.supervisor.run_status.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, axum::Json(body)).into_response())
}

#[utoipa::path(post, path = "/chat", tag = "seed", request_body = ChatRequest,
    responses((status = 200, description = "final response"), (status = 409, description = "waiting for a human, with the pending approval"),
              (status = 400), (status = 401), (status = 413), (status = 422)))]
pub async fn chat(
    State(st): State<AppState>,
    Principal(who): Principal,
    Json(req): Json<ChatRequest>,
) -> ApiResult<Response> {
    let thread = req
        .thread_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    if let Some(thread_id) = &req.thread_id
        && let Ok(run) = latest_run(&st, thread_id)
    {
        let s = state_of(&st, run)?;
        if req.message.trim_start().starts_with('/') {
            let out = st.engine.command(run, req.message.trim(), &who).await?;
            return Ok(
                axum::Json(json!({"thread_id": thread, "run_id": run, "result": out}))
                    .into_response(),
            );
        }
        if s.supervisor.run_status == RunStatus::WaitingForApproval {
            return turn_response(&st, &thread, run).await;
        }
    }
    let started = st
        .engine
        .start_run(StartRun {
            query: req.message,
            session_id: Some(SessionId(thread.clone())),
            user_id: req.user_id,
            hitl: req.hitl,
            ..StartRun::default()
        })
        .await?;
    st.metrics.runs_started.inc();
    turn_response(&st, &thread, started.run_id).await
}

#[utoipa::path(get, path = "/api/sessions/{thread_id}", tag = "seed", params(("thread_id" = String, Path)),
    responses((status = 200, description = "the latest run's state"), (status = 404)))]
pub async fn session(
    State(st): State<AppState>,
    _p: Principal,
    Path(thread): Path<String>,
) -> JsonResult {
    let run = latest_run(&st, &thread)?;
    let s = state_of(&st, run)?;
    ok(json!({
        "thread_id": thread,
        "run_id": run,
        "status": session_status(&s),
        "pending_approval": s.approvals.pending().next().map(|a| approval_json(run, a)),
        "final_response": s.supervisor.final_response,
        "state": s.supervisor,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    pub approve: Option<bool>,
    /// A `/command`, or feedback passed to the agent as an edit.
    pub response: Option<String>,
}

#[utoipa::path(post, path = "/api/sessions/{thread_id}/resume", tag = "seed", params(("thread_id" = String, Path)), request_body = ResumeRequest,
    responses((status = 200), (status = 409), (status = 404), (status = 422)))]
pub async fn resume(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(thread): Path<String>,
    Json(req): Json<ResumeRequest>,
) -> ApiResult<Response> {
    let run = latest_run(&st, &thread)?;
    let s = state_of(&st, run)?;
    if let Some(text) = req
        .response
        .as_deref()
        .map(str::trim)
        .filter(|t| t.starts_with('/'))
    {
        let out = st.engine.command(run, text, &who).await?;
        return Ok(
            axum::Json(json!({"thread_id": thread, "run_id": run, "result": out})).into_response(),
        );
    }
    let mut pending_all = s.approvals.pending();
    let pending = pending_all.next().cloned().ok_or_else(|| {
        ApiError::conflict(format!("session {thread} is not waiting for a human"))
    })?;
    if pending_all.next().is_some() {
        // Never guess which of several approvals a bare "yes" answers (the WebSocket agrees).
        return Err(ApiError::conflict(format!(
            "several approvals are pending in run {run}; decide each with \
             POST /api/v1/agent/{run}/approvals/{{approval_id}}/decision"
        )));
    }
    let (decision, edited) = match (req.approve, req.response) {
        (Some(true), None) => (Decision::Approve, None),
        (Some(false), None) => (Decision::Reject, None),
        (None, Some(text)) if !text.trim().is_empty() => {
            let mut args = match pending.request_args.clone() {
                Value::Object(m) => m,
                _ => Default::default(),
            };
            args.insert("feedback".into(), Value::String(text));
            (Decision::Edit, Some(Value::Object(args)))
        }
        _ => {
            return Err(ApiError::unprocessable(
                "send either {\"approve\": bool} or {\"response\": \"...\"}",
            ));
        }
    };
    st.engine
        .decide(run, pending.approval_id, decision, edited, &who, None)
        .await?;
    st.metrics.decisions.inc();
    turn_response(&st, &thread, run).await
}

#[utoipa::path(get, path = "/api/sessions/{thread_id}/checkpoints", tag = "seed", params(("thread_id" = String, Path)), responses((status = 200), (status = 404)))]
pub async fn session_checkpoints(
    State(st): State<AppState>,
    _p: Principal,
    Path(thread): Path<String>,
) -> JsonResult {
    let run = latest_run(&st, &thread)?;
    checkpoints_of(&st, run)
}

// ------------------------------------------------------------------ seed 003: /api/v1/agent

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub query: String,
    pub session_id: Option<String>,
    pub user_id: Option<String>,
    #[schema(value_type = Option<String>, example = "every_todo")]
    pub hitl: Option<HitlMode>,
    #[schema(value_type = Option<String>, example = "dag")]
    pub strategy: Option<Strategy>,
    pub approval_timeout_ms: Option<u64>,
    /// A fixed plan to execute instead of planning.
    #[schema(value_type = Option<Vec<Object>>)]
    pub plan: Option<Vec<PlanStep>>,
}

#[utoipa::path(post, path = "/api/v1/agent/run", tag = "runs", request_body = RunRequest,
    responses((status = 202, description = "{run_id, session_id}"), (status = 400), (status = 401), (status = 413), (status = 422),
        (status = 503, description = "storage unavailable (stopped after a failed fsync) or shutting down"), (status = 507, description = "disk full: nothing written")))]
pub async fn start_run(
    State(st): State<AppState>,
    _p: Principal,
    Json(req): Json<RunRequest>,
) -> ApiResult<Response> {
    let mut config = st.engine.settings().defaults.clone();
    config.plan = req.plan;
    let started = st
        .engine
        .start_run(StartRun {
            query: req.query,
            session_id: req.session_id.map(SessionId),
            user_id: req.user_id,
            hitl: req.hitl,
            strategy: req.strategy,
            approval_timeout_ms: req.approval_timeout_ms,
            config: Some(config),
            parent: None,
        })
        .await?;
    st.metrics.runs_started.inc();
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({"run_id": started.run_id, "session_id": started.session_id})),
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/status", tag = "runs", params(("run_id" = String, Path)), responses((status = 200), (status = 400), (status = 404)))]
pub async fn status(
    State(st): State<AppState>,
    _p: Principal,
    Path(run): Path<String>,
) -> JsonResult {
    let run = run_id(&run)?;
    let s = state_of(&st, run)?;
    ok(json!({
        "run_id": run,
        "state": s.supervisor.run_status.as_str(),
        "pending_approval_id": s.approvals.pending().next().map(|a| a.approval_id.clone()),
        "phase": s.supervisor.current_phase.as_str(),
        "last_seq": s.last_seq,
    }))
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/approvals", tag = "approvals", params(("run_id" = String, Path)), responses((status = 200), (status = 404)))]
pub async fn approvals(
    State(st): State<AppState>,
    _p: Principal,
    Path(run): Path<String>,
) -> JsonResult {
    let run = run_id(&run)?;
    let s = state_of(&st, run)?;
    ok(Value::Array(
        s.approvals
            .list
            .iter()
            .map(|a| approval_json(run, a))
            .collect(),
    ))
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/approvals/{approval_id}", tag = "approvals",
    params(("run_id" = String, Path), ("approval_id" = String, Path)), responses((status = 200), (status = 404)))]
pub async fn approval(
    State(st): State<AppState>,
    _p: Principal,
    Path((run, id)): Path<(String, String)>,
) -> JsonResult {
    let run = run_id(&run)?;
    let s = state_of(&st, run)?;
    let a = s
        .approvals
        .get(&ApprovalId(id.clone()))
        .ok_or_else(|| ApiError::not_found(format!("approval {id} not found")))?;
    ok(approval_json(run, a))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    #[schema(value_type = String, example = "approve")]
    pub decision: Decision,
    #[schema(value_type = Option<Object>)]
    pub edited_args: Option<Value>,
    pub comment: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/approvals/{approval_id}/decision", tag = "approvals",
    params(("run_id" = String, Path), ("approval_id" = String, Path)), request_body = DecisionRequest,
    responses((status = 200, description = "{status: accepted, approval_id, run_id}"), (status = 404), (status = 409, description = "already decided"),
        (status = 413, description = "the decision would record an event over the 64 KiB limit (the message names the size)"), (status = 422),
        (status = 503, description = "storage unavailable"), (status = 507, description = "disk full: nothing written")))]
pub async fn decide(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path((run, id)): Path<(String, String)>,
    Json(req): Json<DecisionRequest>,
) -> JsonResult {
    let run = run_id(&run)?;
    let a = st
        .engine
        .decide(
            run,
            ApprovalId(id),
            req.decision,
            req.edited_args,
            &who,
            req.comment,
        )
        .await?;
    st.metrics.decisions.inc();
    ok(
        json!({"status": "accepted", "approval_id": a.approval_id, "run_id": run, "approval": approval_json(run, &a)}),
    )
}

// ------------------------------------------------------------------ engine routes

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandRequest {
    pub command: String,
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/commands", tag = "runs", params(("run_id" = String, Path)), request_body = CommandRequest,
    responses((status = 200, description = "seed 000's JSON result"), (status = 400, description = "bad command: {error, help}"), (status = 404)))]
pub async fn command(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(run): Path<String>,
    Json(req): Json<CommandRequest>,
) -> JsonResult {
    let run = run_id(&run)?;
    ok(st.engine.command(run, &req.command, &who).await?)
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/todos", tag = "runs", params(("run_id" = String, Path)), responses((status = 200), (status = 404)))]
pub async fn todos(
    State(st): State<AppState>,
    _p: Principal,
    Path(run): Path<String>,
) -> JsonResult {
    let run = run_id(&run)?;
    let s = state_of(&st, run)?;
    let sub_runs = st.engine.sub_runs(&s);
    let p = s.supervisor.planning_state.unwrap_or_default();
    ok(json!({
        "todos": p.todos,
        "sub_runs": sub_runs,
        "summary": chronicle_engine::todo::summary(&p),
        "current_todo_id": p.current_todo_id,
        "execution_strategy": p.execution_strategy,
        "planning_state": {"completed_todo_ids": p.completed_todo_ids, "failed_todo_ids": p.failed_todo_ids, "skipped_todo_ids": p.skipped_todo_ids},
    }))
}

#[derive(Debug, Deserialize)]
pub struct AtQuery {
    pub at: Option<u64>,
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/state", tag = "runs", params(("run_id" = String, Path), ("at" = Option<u64>, Query, description = "time travel: the state right after this seq")),
    responses((status = 200), (status = 400), (status = 404), (status = 422)))]
pub async fn state(
    State(st): State<AppState>,
    _p: Principal,
    Path(run): Path<String>,
    Query(q): Query<AtQuery>,
) -> JsonResult {
    let run = run_id(&run)?;
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
        )));
    }
    let s = st.engine.state(run, q.at)?;
    ok(serde_json::to_value(&s).map_err(ApiError::internal)?)
}

#[derive(Debug, Deserialize)]
pub struct LogQuery {
    pub from: Option<u64>,
    pub limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/log", tag = "runs", params(("run_id" = String, Path), ("from" = Option<u64>, Query), ("limit" = Option<usize>, Query)),
    responses((status = 200, description = "raw events"), (status = 404), (status = 422)))]
pub async fn log(
    State(st): State<AppState>,
    _p: Principal,
    Path(run): Path<String>,
    Query(q): Query<LogQuery>,
) -> JsonResult {
    let run = run_id(&run)?;
    st.engine
        .store()
        .run_head(run)?
        .ok_or_else(|| ApiError::not_found(format!("run {run} not found")))?;
    let max = st.config.log_page_events_max;
    let limit = q.limit.unwrap_or(max);
    if limit == 0 || limit > max {
        return Err(ApiError::unprocessable(format!(
            "limit must be 1..={max}, got {limit}"
        )));
    }
    let from = q.from.unwrap_or(0);
    let events: Vec<_> = st
        .engine
        .store()
        .read_run(run, from, from.saturating_add(limit as u64 - 1))
        .collect::<Result<_, _>>()?;
    ok(serde_json::to_value(events).map_err(ApiError::internal)?)
}

fn checkpoints_of(st: &AppState, run: RunId) -> JsonResult {
    let s = state_of(st, run)?;
    let list: Vec<Value> = s
        .checkpoints
        .with_abandoned()
        .into_iter()
        .map(|(c, abandoned)| {
            json!({
                "checkpoint_id": c.checkpoint_id, "timestamp": c.at, "node": c.node, "todos_completed": c.todos_completed,
                "seq": c.seq, "parent": c.parent, "branch": c.branch, "abandoned": abandoned,
            })
        })
        .collect();
    ok(json!({"run_id": run, "checkpoints": list, "head": s.checkpoints.head}))
}

#[utoipa::path(get, path = "/api/v1/agent/{run_id}/checkpoints", tag = "runs", params(("run_id" = String, Path)), responses((status = 200), (status = 404)))]
pub async fn checkpoints(
    State(st): State<AppState>,
    _p: Principal,
    Path(run): Path<String>,
) -> JsonResult {
    checkpoints_of(&st, run_id(&run)?)
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/checkpoints/{checkpoint_id}/restore", tag = "runs",
    params(("run_id" = String, Path), ("checkpoint_id" = String, Path)), responses((status = 200), (status = 404)))]
pub async fn restore(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path((run, cp)): Path<(String, String)>,
) -> JsonResult {
    let run = run_id(&run)?;
    ok(st
        .engine
        .restore(run, RestoreTarget::Checkpoint(CheckpointId(cp)), &who)
        .await?)
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    pub reason: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/agent/{run_id}/cancel", tag = "runs", params(("run_id" = String, Path)), request_body = Option<CancelRequest>,
    responses((status = 200), (status = 404), (status = 409, description = "already finished")))]
pub async fn cancel(
    State(st): State<AppState>,
    Principal(who): Principal,
    Path(run): Path<String>,
    OptionalJson(req): OptionalJson<CancelRequest>,
) -> JsonResult {
    let run = run_id(&run)?;
    let req = req.unwrap_or_default();
    let s = state_of(&st, run)?;
    if s.supervisor.run_status.is_terminal() {
        return Err(ApiError::conflict(format!(
            "run {run} is already {}",
            s.supervisor.run_status.as_str()
        )));
    }
    st.engine.cancel(run, &who, req.reason).await?;
    ok(json!({"status": "cancelled", "run_id": run}))
}

/// 200 `{"status":"ok","storage":"ok"}` while appends can be taken; 503 with `"storage":"full"`
/// (appends answer 507 until space is freed; reads work) or `"storage":"failed"` (a failed fsync
/// stopped the store; the server exits and a restart recovers).
#[utoipa::path(get, path = "/healthz", tag = "ops", responses(
    (status = 200, description = "serving; `storage` is `ok`"),
    (status = 503, description = "`storage` is `full` (appends refused with 507 until space is freed) or `failed` (fail-stop after a failed fsync)")))]
pub async fn healthz(State(st): State<AppState>) -> Response {
    let store = st.engine.store();
    let durable = store.durable_next_offset();
    let (status, body) = match store.health() {
        StorageHealth::Ok => (
            StatusCode::OK,
            json!({"status": "ok", "storage": "ok", "durable_next_offset": durable}),
        ),
        StorageHealth::Full { available, reserve } => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "degraded", "storage": "full", "available_bytes": available,
                   "reserve_bytes": reserve, "durable_next_offset": durable}),
        ),
        StorageHealth::Failed(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "failed", "storage": "failed", "reason": reason,
                   "durable_next_offset": durable}),
        ),
    };
    (status, axum::Json(body)).into_response()
}

#[utoipa::path(get, path = "/metrics", tag = "ops", responses((status = 200, description = "Prometheus text format")))]
pub async fn metrics(State(st): State<AppState>, _p: Principal) -> ApiResult<Response> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &st.metrics.registry)
        .map_err(ApiError::internal)?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
        .into_response())
}
