//! LangGraph runs. A run with `input` starts a turn (a Chronicle run whose id is the LangGraph
//! run's), after the turn its `checkpoint` names (see [`super::branch`]); one with
//! `command.resume` decides the waiting turn's interrupts; `command.goto: "__end__"` ends it;
//! one with an older `checkpoint` and no input restores the latest turn to it and lets it go on
//! (time travel), or asks an earlier turn's question again. Each is recorded (see
//! [`super::records`]) with the seq where its part of the Chronicle run starts; its status and
//! stream are read from there.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chronicle_engine::{Principal as Who, RestoreTarget, RunState, StartRun, is_settled};
use chronicle_schemas::{Follows, HitlMode, OnReject, RunConfig, RunId, RunStatus, Strategy};
use chronicle_wire::langgraph::{
    CancelStatus, IfNotExists, Run, RunCommand, RunCreate, RunsCancel, StreamMode, StreamModes,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{IntoResponses, PartialSchema, ToSchema};
use uuid::Uuid;

use super::branch::{self, Again};
use super::graphs;
use super::loaded::{self, Loaded, checkpoint_id_in, human_message, load, uuid_of};
use super::records::{self, RunKind, RunRecord};
use super::request::{ThreadPath, ThreadRunPath, page_limit, paged};
use super::stream::{self, Ask};
use super::views;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{IdempotencyKey, Json as Body, Query, Unread};
use crate::refusals::{
    LgRunReadError, LgRunStartError, LgRunWriteError, LgThreadReadError, LgThreadWriteError,
    LgWriteError,
};
use crate::state::{AppState, now};
use chronicle_wire::langgraph::Detail;

/// The run options a LangGraph client may set in `config.configurable` or `context`.
#[derive(Debug, Default, Deserialize)]
struct Options {
    #[serde(default)]
    hitl: Option<HitlMode>,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    on_reject: Option<OnReject>,
    #[serde(default)]
    strategy: Option<Strategy>,
    #[serde(default)]
    approval_timeout_ms: Option<u64>,
}

fn options(req: &RunCreate) -> ApiResult<Options> {
    let mut merged = Map::new();
    if let Some(Value::Object(c)) = req.config.as_ref().and_then(|c| c.get("configurable")) {
        merged.extend(c.clone());
    }
    if let Some(c) = &req.context {
        merged.extend(c.clone());
    }
    serde_json::from_value(Value::Object(merged)).map_err(|e| {
        ApiError::unprocessable(format!(
            "a run option in config.configurable or context: {e}"
        ))
    })
}

/// The query in a run's `input`: `query`, or the last human message of `messages` (its text,
/// or its text parts joined).
fn query_of(input: &Value) -> ApiResult<String> {
    if let Some(q) = input.get("query").and_then(Value::as_str) {
        return Ok(q.to_owned());
    }
    let text = match human_message(input).and_then(|m| m.get("content")) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    };
    text.ok_or_else(|| {
        ApiError::unprocessable(
            "input must hold `messages` with a human message (its `content` a string or text parts), or `query`",
        )
    })
}

/// The waiting turn of the thread and its pending approvals' run.
fn waiting(l: &Loaded) -> ApiResult<&RunState> {
    l.latest_own()
        .filter(|s| !s.supervisor.run_status.is_terminal() && is_settled(s))
        .ok_or_else(|| {
            ApiError::conflict(format!(
                "thread {} has no pending interrupt to resume",
                l.id
            ))
        })
}

fn run_of(s: &RunState) -> RunId {
    s.run_id.unwrap_or(RunId(Uuid::nil()))
}

/// A run's `input`, when it has one. An empty object is none: `useStream().submit({},
/// {command})` (agent-chat-ui's approval buttons) sends `{}` beside its command.
fn input_of(req: &RunCreate) -> Option<&Value> {
    req.input
        .as_ref()
        .filter(|i| i.as_object().is_none_or(|m| !m.is_empty()))
}

/// What can be checked of a run without the thread's state, before a busy thread's turn is
/// cancelled to make room for it: the input's query and the run options.
fn check(req: &RunCreate) -> ApiResult<()> {
    if let Some(input) = input_of(req) {
        query_of(input)?;
    }
    options(req).map(drop)
}

/// What the run does; returns its kind, the Chronicle run and the seq its part starts at.
async fn act(
    st: &AppState,
    who: &Who,
    l: &Loaded,
    req: &RunCreate,
    graph_id: &str,
    run_id: Uuid,
) -> ApiResult<(RunKind, RunId, u64)> {
    let command = req.command.clone().unwrap_or_default();
    if command.resume.is_some() || command.goto.is_some() {
        if input_of(req).is_some() {
            return Err(ApiError::unprocessable(
                "a run takes `input` or a `command`, not both",
            ));
        }
        return commanded(st, who, l, &command).await;
    }
    if command.update.is_some() {
        return Err(ApiError::unprocessable(
            "command.update goes with resume or goto; set values alone with POST /threads/{thread_id}/state",
        ));
    }
    let turns = l.tree();
    let named = named_checkpoint(req);
    if let Some(input) = input_of(req) {
        let query = query_of(input)?;
        let follows = branch::for_input(l, &turns, named.as_deref())?;
        let turn = NewTurn {
            run: RunId(run_id),
            query,
            config: None,
            follows,
        };
        return new_turn(st, who, l, req, graph_id, turn).await;
    }
    let id = named.ok_or_else(|| {
        ApiError::unprocessable(
            "a run needs `input`, a `command`, or an older `checkpoint` to go on from",
        )
    })?;
    match branch::without_input(l, &turns, &id)? {
        Again::Restore(p) => {
            let s = turns.states()[p.turn];
            let run = run_of(s);
            let from = s.next_seq();
            let target = RestoreTarget::Checkpoint(p.checkpoint.checkpoint_id.clone());
            st.engine.restore(run, target, who).await?;
            Ok((RunKind::Fork, run, from))
        }
        Again::Ask { turn, follows } => {
            let earlier = turns.states()[turn];
            let turn = NewTurn {
                run: RunId(run_id),
                query: earlier.supervisor.query.clone(),
                config: Some(earlier.supervisor.config.clone()),
                follows,
            };
            new_turn(st, who, l, req, graph_id, turn).await
        }
    }
}

/// The checkpoint a run names: `checkpoint` (an id or a checkpoint object), else
/// `checkpoint_id`.
fn named_checkpoint(req: &RunCreate) -> Option<String> {
    req.checkpoint
        .as_ref()
        .and_then(checkpoint_id_in)
        .or_else(|| req.checkpoint_id.clone())
}

/// A turn to start: its run, its question, its configuration (the server's defaults when
/// `None`) and the turn it follows.
struct NewTurn {
    run: RunId,
    query: String,
    config: Option<RunConfig>,
    follows: Follows,
}

/// Starts turn `t` on the thread (the request's run options over its configuration).
async fn new_turn(
    st: &AppState,
    who: &Who,
    l: &Loaded,
    req: &RunCreate,
    graph_id: &str,
    t: NewTurn,
) -> ApiResult<(RunKind, RunId, u64)> {
    let o = options(req)?;
    let NewTurn {
        run,
        query,
        config,
        follows,
    } = t;
    st.engine
        .start_run_with_id(
            run,
            StartRun {
                by: who.clone(),
                query,
                session_id: Some(l.session()),
                user_id: o.user_id,
                hitl: o.hitl,
                on_reject: o.on_reject,
                strategy: o.strategy,
                approval_timeout_ms: o.approval_timeout_ms,
                config,
                parent: None,
                agent: (graph_id != views::SUPERVISOR_GRAPH).then(|| graph_id.to_owned()),
                plan: None,
                idempotency_key: None,
                follows: Some(follows),
            },
        )
        .await?;
    Ok((RunKind::Turn, run, 0))
}

/// A run with a command for the waiting turn: `goto: "__end__"` ends it, `resume` decides its
/// interrupts, `update` sets values first. All of it is checked before anything is written.
async fn commanded(
    st: &AppState,
    who: &Who,
    l: &Loaded,
    command: &RunCommand,
) -> ApiResult<(RunKind, RunId, u64)> {
    let update = match &command.update {
        None => None,
        Some(Value::Object(values)) => Some(values.clone()),
        Some(_) => {
            return Err(ApiError::unprocessable(
                "command.update must be a JSON object",
            ));
        }
    };
    if let Some(goto) = command.goto.as_ref().filter(|g| *g != "__end__") {
        return Err(ApiError::unprocessable(format!(
            "command.goto can only be \"__end__\" (end the waiting turn), got {goto}"
        )));
    }
    let s = waiting(l)?;
    let run = run_of(s);
    let from = s.next_seq();
    let decisions = match (&command.goto, &command.resume) {
        (Some(_), _) => None,
        (None, resume) => {
            let pending: Vec<_> = s.approvals.pending().collect();
            let resume = resume.clone().unwrap_or(Value::Null);
            Some(
                views::decisions_from_resume(run, &resume, &pending)
                    .map_err(ApiError::unprocessable)?,
            )
        }
    };
    if let Some(values) = update {
        st.engine.update_values(run, values, None, who).await?;
    }
    let Some(decisions) = decisions else {
        let reason = "ended by the client (goto __end__)".to_owned();
        st.engine.cancel(run, who, Some(reason)).await?;
        return Ok((RunKind::End, run, from));
    };
    for d in decisions {
        st.engine
            .decide(
                run,
                d.approval_id,
                d.decision,
                d.edited_args,
                who,
                d.comment,
            )
            .await?;
    }
    Ok((RunKind::Resume, run, from))
}

/// The run a request sent again with its `Idempotency-Key` created the first time, with its
/// thread; `None` when there is none yet.
fn created_before(
    st: &AppState,
    who: &Who,
    thread: Option<Uuid>,
    key: &str,
) -> ApiResult<Option<(RunRecord, Loaded)>> {
    let run_id = chronicle_engine::idempotent_run_id(who, key).0;
    let thread = match thread {
        Some(t) => Some(t),
        // A new thread's run is its first turn, under the same id.
        None => st
            .engine
            .store()
            .run_head(RunId(run_id))?
            .and_then(|h| Uuid::parse_str(h.session_id.as_str()).ok()),
    };
    let Some(thread) = thread else {
        return Ok(None);
    };
    let Some(rec) = records::runs(st.engine.store(), thread)?
        .into_iter()
        .find(|r| r.run_id == run_id)
    else {
        return Ok(None);
    };
    Ok(Some((rec, load(st, who, thread)?)))
}

/// Creates a LangGraph run on `thread` (a new thread when `None`): checks, acts, records. With
/// an idempotency key, a request sent again gets the run the first one created.
async fn launch(
    st: &AppState,
    who: &Who,
    thread: Option<Uuid>,
    req: &RunCreate,
    key: Option<&str>,
) -> ApiResult<(RunRecord, Loaded)> {
    let assistant = graphs::find(st, &req.assistant_id)?;
    let store = st.engine.store();
    let named = match thread {
        Some(t) => Some(t),
        None => req
            .thread_id
            .as_deref()
            .map(|t| uuid_of("thread_id", t))
            .transpose()?,
    };
    if let Some(key) = key
        && let Some(found) = created_before(st, who, named, key)?
    {
        return Ok(found);
    }
    // A new thread (a stateless run's, or `if_not_exists: create`) is written with the run's
    // record, once the run started: a refused run leaves nothing behind.
    let (thread, fresh) = match named {
        None => (Uuid::new_v4(), true),
        Some(t) => match load(st, who, t) {
            Err(e)
                if e.status == StatusCode::NOT_FOUND
                    && req.if_not_exists == Some(IfNotExists::Create)
                    && !loaded::taken(st, t)? =>
            {
                (t, true)
            }
            other => {
                other?;
                (t, false)
            }
        },
    };
    check(req)?;
    let l = if fresh {
        loaded::fresh(who, thread)
    } else {
        let strategy = req.multitask_strategy.unwrap_or_default();
        if let Some(latest) = load(st, who, thread)?.latest() {
            let wait = Duration::from_millis(st.config.chat_wait_ms);
            st.engine
                .make_room(latest, strategy.into(), wait, who)
                .await?;
        }
        load(st, who, thread)?
    };
    let run_id = key.map_or_else(Uuid::now_v7, |k| {
        chronicle_engine::idempotent_run_id(who, k).0
    });
    let (kind, chronicle_run, from_seq) =
        act(st, who, &l, req, &assistant.graph_id, run_id).await?;
    let mut kwargs = match serde_json::to_value(req) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    kwargs.remove("assistant_id");
    let rec = RunRecord {
        run_id,
        thread_id: thread,
        kind,
        chronicle_run,
        from_seq,
        created_at: now(),
        assistant_id: assistant.assistant_id.clone(),
        metadata: req.metadata.clone().unwrap_or_default(),
        kwargs,
        multitask_strategy: req.multitask_strategy.unwrap_or_default(),
        cancelled: false,
    };
    records::put_run(store, &rec)?;
    let mut thread_rec = l.record.clone();
    thread_rec
        .metadata
        .insert("graph_id".into(), json!(assistant.graph_id));
    thread_rec
        .metadata
        .insert("assistant_id".into(), json!(assistant.assistant_id));
    thread_rec.updated_at = now();
    records::put_thread(store, &thread_rec)?;
    let l = load(st, who, thread)?;
    Ok((rec, l))
}

/// The runs of a thread, oldest first, each with the seq where the next one on the same
/// Chronicle run took over (its part ends before it).
fn runs_with_ends(st: &AppState, thread: Uuid) -> ApiResult<Vec<(RunRecord, Option<u64>)>> {
    let all = records::runs(st.engine.store(), thread)?;
    Ok(all
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let until = all[i + 1..]
                .iter()
                .find(|later| later.chronicle_run == r.chronicle_run)
                .map(|later| later.from_seq.saturating_sub(1));
            (r.clone(), until)
        })
        .collect())
}

/// A LangGraph run's status: `pending` before its Chronicle run has an event, `running` while
/// it works, `success` once it ended or waits for a human (or a later run took over), `error`
/// when it failed, `interrupted` when it was cancelled.
fn status(st: &AppState, rec: &RunRecord, until: Option<u64>) -> ApiResult<&'static str> {
    if rec.cancelled {
        return Ok("interrupted");
    }
    if st.engine.store().run_head(rec.chronicle_run)?.is_none() {
        return Ok("pending");
    }
    let s = st.engine.state(rec.chronicle_run, until)?;
    Ok(match s.supervisor.run_status {
        RunStatus::Failed => "error",
        RunStatus::Cancelled if rec.kind != RunKind::End => "interrupted",
        _ if until.is_some() || s.supervisor.run_status.is_terminal() || is_settled(&s) => {
            "success"
        }
        _ => "running",
    })
}

fn view(st: &AppState, rec: &RunRecord, until: Option<u64>) -> ApiResult<Run> {
    let created = rec.created_at.to_string();
    Ok(Run {
        run_id: rec.run_id.to_string(),
        thread_id: rec.thread_id.to_string(),
        assistant_id: rec.assistant_id.clone(),
        created_at: created.clone(),
        updated_at: created,
        status: status(st, rec, until)?.to_owned(),
        metadata: rec.metadata.clone(),
        kwargs: rec.kwargs.clone(),
        multitask_strategy: rec.multitask_strategy.as_str().to_owned(),
    })
}

/// The run `run` of thread `thread` that `who` may see, with where its part ends.
fn find(
    st: &AppState,
    who: &Who,
    thread: &str,
    run: &str,
) -> ApiResult<(Loaded, RunRecord, Option<u64>)> {
    let l = load(st, who, uuid_of("thread_id", thread)?)?;
    let run = uuid_of("run_id", run)?;
    let (rec, until) = runs_with_ends(st, l.record.thread_id)?
        .into_iter()
        .find(|(r, _)| r.run_id == run)
        .ok_or_else(|| ApiError::not_found(format!("run {run} not found in thread {}", l.id)))?;
    Ok((l, rec, until))
}

fn locations(rec: &RunRecord, res: &mut Response, stream: bool) {
    let base = format!("/threads/{}/runs/{}", rec.thread_id, rec.run_id);
    let h = res.headers_mut();
    if stream && let Ok(v) = HeaderValue::from_str(&format!("{base}/stream")) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&base) {
        h.insert(header::CONTENT_LOCATION, v);
    }
}

/// The turns `run`'s turn follows, oldest first (the head's branch for a run not among them).
fn earlier(l: &Loaded, run: RunId) -> stream::Earlier {
    let turns = l.tree();
    let chain = match l.turns.iter().position(|s| s.run_id == Some(run)) {
        Some(turn) => {
            let mut chain = turns.chain(turn);
            chain.pop();
            chain
        }
        None => turns
            .states()
            .len()
            .checked_sub(1)
            .map_or_else(Vec::new, |t| turns.chain(t)),
    };
    let states = chain
        .into_iter()
        .map(|t| turns.states()[t].clone())
        .collect();
    stream::Earlier {
        turns: states,
        given: l.given.clone(),
    }
}

fn modes(m: Option<&StreamModes>) -> Vec<StreamMode> {
    m.map_or_else(|| vec![StreamMode::Values], StreamModes::list)
}

/// The answers of a run's creation, each declared once for the thread's route and the stateless
/// one: the run's stream, the thread's values once it settled, or the run itself.
macro_rules! run_answers {
    ($($(#[$doc:meta])* $name:ident = $description:literal, $content_type:literal, $schema:expr, [$($header:literal = $header_description:literal),*];)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name(Response);

        impl IntoResponse for $name {
            fn into_response(self) -> Response {
                self.0
            }
        }

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
                let answer = ResponseBuilder::new()
                    .description($description)
                    .content($content_type, ContentBuilder::new().schema(Some($schema)).build())
                    $(.header($header, HeaderBuilder::new()
                        .schema(String::schema())
                        .description(Some($header_description))
                        .build()))*
                    .build();
                BTreeMap::from([("200".to_owned(), RefOr::T(answer))])
            }
        }
    )*};
}

run_answers! {
    /// `POST .../runs/stream`.
    RunStreamAnswer = "Server-sent events: `metadata` first, then per the stream modes `values`, `updates`, `messages`, `custom`, `debug`, `checkpoints`; interrupts as `updates` with `__interrupt__` and in the final `values`; `error` when the run fails. Ends when the run waits for a human or has ended (its status says so first). With `stream_resumable`, `id:` is the run's event seq",
        "text/event-stream", String::schema(),
        ["Location" = "The run's stream, to rejoin", "Content-Location" = "The run"];
    /// `POST .../runs/wait`.
    RunWaitAnswer = "The thread's values once the run waits for a human (with `__interrupt__`) or has ended; `{\"__error__\": {error, message}}` when it failed",
        "application/json", Value::schema(),
        ["Content-Location" = "The run"];
    /// `POST .../runs`.
    RunCreateAnswer = "The run, started",
        "application/json", Ref::from_schema_name(Run::name()),
        ["Content-Location" = "The run"];
}

async fn create_stream(
    st: AppState,
    who: Who,
    thread: Option<Uuid>,
    req: RunCreate,
    key: Option<String>,
) -> ApiResult<RunStreamAnswer> {
    // The stream's slot first: a stream refused for the cap has started nothing.
    let permit = st.streams.open(&who.name)?;
    let (rec, l) = launch(&st, &who, thread, &req, key.as_deref()).await?;
    let ask = Ask {
        modes: modes(req.stream_mode.as_ref()),
        resumable: req.stream_resumable.unwrap_or(false),
        after: None,
        cancel_on_disconnect: req.on_disconnect.as_deref() == Some("cancel"),
    };
    let before = earlier(&l, rec.chronicle_run);
    let mut res = stream::respond(&st, &who, permit, rec.clone(), before, None, ask)?;
    locations(&rec, &mut res, true);
    Ok(RunStreamAnswer(res))
}

/// Waits until `rec`'s part of its Chronicle run settled; the thread's values then (with its
/// interrupts), or `{"__error__"}` when it failed.
async fn settled_values(
    st: &AppState,
    who: &Who,
    rec: &RunRecord,
    until: Option<u64>,
) -> ApiResult<Value> {
    if until.is_none() && st.engine.store().run_head(rec.chronicle_run)?.is_some() {
        let wait = Duration::from_millis(st.config.chat_wait_ms);
        let from = rec.from_seq;
        st.engine
            .wait_until(rec.chronicle_run, wait, |s| {
                s.next_seq() > from && (s.supervisor.run_status.is_terminal() || is_settled(s))
            })
            .await?;
    }
    let l = load(st, who, rec.thread_id)?;
    let latest = l.turns.iter().find(|s| s.run_id == Some(rec.chronicle_run));
    if let Some(s) = latest
        && s.supervisor.run_status == RunStatus::Failed
    {
        let message = s.supervisor.error_log.last().cloned().unwrap_or_default();
        return Ok(json!({"__error__": {"error": "RunFailed", "message": message}}));
    }
    let turns = l.tree();
    Ok(match views::head(&turns) {
        Some(p) => loaded::state_of(st, &l, &turns, p)?.values,
        None => json!({}),
    })
}

async fn create_wait(
    st: AppState,
    who: Who,
    thread: Option<Uuid>,
    req: RunCreate,
    key: Option<String>,
) -> ApiResult<RunWaitAnswer> {
    let (rec, _) = launch(&st, &who, thread, &req, key.as_deref()).await?;
    let values = settled_values(&st, &who, &rec, None).await?;
    let mut res = Json(values).into_response();
    locations(&rec, &mut res, false);
    Ok(RunWaitAnswer(res))
}

async fn create_background(
    st: AppState,
    who: Who,
    thread: Option<Uuid>,
    req: RunCreate,
    key: Option<String>,
) -> ApiResult<RunCreateAnswer> {
    let (rec, _) = launch(&st, &who, thread, &req, key.as_deref()).await?;
    let mut res = Json(view(&st, &rec, None)?).into_response();
    locations(&rec, &mut res, false);
    Ok(RunCreateAnswer(res))
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/stream", operation_id = "stream_run", tag = "langgraph", request_body = RunCreate, security(("bearer" = [])),
    params(ThreadPath, IdempotencyKey),
    responses(
        RunStreamAnswer,
        LgRunStartError,
    ))]
pub(crate) async fn stream_on_thread(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    ThreadPath(thread): ThreadPath,
    Body(req): Body<RunCreate>,
) -> Result<RunStreamAnswer, LgRunStartError> {
    let thread = uuid_of("thread_id", &thread)?;
    Ok(create_stream(st, who, Some(thread), req, key).await?)
}

#[utoipa::path(post, path = "/runs/stream", operation_id = "stream_stateless_run", tag = "langgraph", request_body = RunCreate, security(("bearer" = [])),
    params(IdempotencyKey),
    responses(
        RunStreamAnswer,
        LgRunStartError,
    ))]
pub(crate) async fn stream_stateless(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    Body(req): Body<RunCreate>,
) -> Result<RunStreamAnswer, LgRunStartError> {
    Ok(create_stream(st, who, None, req, key).await?)
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/wait", operation_id = "wait_run", tag = "langgraph", request_body = RunCreate, security(("bearer" = [])),
    params(ThreadPath, IdempotencyKey),
    responses(
        RunWaitAnswer,
        LgRunStartError,
    ))]
pub(crate) async fn wait_on_thread(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    ThreadPath(thread): ThreadPath,
    Body(req): Body<RunCreate>,
) -> Result<RunWaitAnswer, LgRunStartError> {
    let thread = uuid_of("thread_id", &thread)?;
    Ok(create_wait(st, who, Some(thread), req, key).await?)
}

#[utoipa::path(post, path = "/runs/wait", operation_id = "wait_stateless_run", tag = "langgraph", request_body = RunCreate, security(("bearer" = [])),
    params(IdempotencyKey),
    responses(
        RunWaitAnswer,
        LgRunStartError,
    ))]
pub(crate) async fn wait_stateless(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    Body(req): Body<RunCreate>,
) -> Result<RunWaitAnswer, LgRunStartError> {
    Ok(create_wait(st, who, None, req, key).await?)
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs", operation_id = "create_run", tag = "langgraph", request_body = RunCreate, security(("bearer" = [])),
    params(ThreadPath, IdempotencyKey),
    responses(
        RunCreateAnswer,
        LgRunStartError,
    ))]
pub(crate) async fn create_on_thread(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    ThreadPath(thread): ThreadPath,
    Body(req): Body<RunCreate>,
) -> Result<RunCreateAnswer, LgRunStartError> {
    let thread = uuid_of("thread_id", &thread)?;
    Ok(create_background(st, who, Some(thread), req, key).await?)
}

#[utoipa::path(post, path = "/runs", operation_id = "create_stateless_run", tag = "langgraph", request_body = RunCreate, security(("bearer" = [])),
    params(IdempotencyKey),
    responses(
        RunCreateAnswer,
        LgRunStartError,
    ))]
pub(crate) async fn create_stateless(
    State(st): State<AppState>,
    Principal(who): Principal,
    IdempotencyKey(key): IdempotencyKey,
    Body(req): Body<RunCreate>,
) -> Result<RunCreateAnswer, LgRunStartError> {
    Ok(create_background(st, who, None, req, key).await?)
}

/// `GET /threads/{thread_id}/runs`: a page, and a status filter.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// The page's size (10 when absent).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
    /// How many runs to skip.
    #[serde(default)]
    offset: Option<u64>,
    /// Runs with this status only: pending, running, success, error, interrupted.
    #[serde(default)]
    status: Option<String>,
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs", operation_id = "list_runs", tag = "langgraph", security(("bearer" = [])),
    params(ThreadPath, ListQuery),
    responses(
        (status = 200, description = "One page of the thread's runs, newest first", body = Vec<Run>,
            headers(
                ("X-Pagination-Total" = u64, description = "How many runs match, over all pages"),
                ("X-Pagination-Next" = u64, description = "The `offset` of the next page, when there is one"),
            )),
        (status = 400, description = "A malformed query parameter, or a `Host` header that names another server", body = Detail),
        (status = 422, description = "A `thread_id` that is not a UUID, or a `limit` outside 1..=1000", body = Detail),
        LgThreadReadError,
    ))]
pub(crate) async fn list(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadPath(thread): ThreadPath,
    Query(q): Query<ListQuery>,
) -> Result<Response, LgThreadReadError> {
    let limit = page_limit(q.limit)?;
    let l = load(&st, &who, uuid_of("thread_id", &thread)?)?;
    let mut runs = Vec::new();
    for (rec, until) in runs_with_ends(&st, l.record.thread_id)?.into_iter().rev() {
        let run = view(&st, &rec, until)?;
        if q.status.as_ref().is_none_or(|s| *s == run.status) {
            runs.push(run);
        }
    }
    Ok(paged(runs, q.offset, limit))
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}", operation_id = "get_run", tag = "langgraph", security(("bearer" = [])),
    params(ThreadRunPath),
    responses(
        (status = 200, description = "The run and its status", body = Run),
        (status = 422, description = "A `thread_id` or `run_id` that is not a UUID", body = Detail),
        LgRunReadError,
    ))]
pub(crate) async fn get(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadRunPath(thread, run): ThreadRunPath,
) -> Result<Json<Run>, LgRunReadError> {
    let (_, rec, until) = find(&st, &who, &thread, &run)?;
    Ok(Json(view(&st, &rec, until)?))
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/join", operation_id = "join_run", tag = "langgraph", security(("bearer" = [])),
    params(ThreadRunPath),
    responses(
        (status = 200, description = "The thread's values once the run waits for a human or has ended; `{\"__error__\"}` when it failed", body = serde_json::Value),
        (status = 422, description = "A `thread_id` or `run_id` that is not a UUID", body = Detail),
        LgRunReadError,
    ))]
pub(crate) async fn join(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadRunPath(thread, run): ThreadRunPath,
) -> Result<Json<Value>, LgRunReadError> {
    let (_, rec, until) = find(&st, &who, &thread, &run)?;
    Ok(Json(settled_values(&st, &who, &rec, until).await?))
}

/// `GET .../runs/{run_id}/stream`: which modes (the run's own when absent).
#[derive(Debug, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct JoinStreamQuery {
    /// The stream modes, the parameter repeated for each (the run's own when absent).
    stream_mode: Option<Vec<StreamMode>>,
    /// Cancel the run when the client leaves before its end.
    cancel_on_disconnect: Option<bool>,
}

impl JoinStreamQuery {
    /// From the query's pairs: `stream_mode` may repeat (an empty one is absent).
    fn parse(pairs: Vec<(String, String)>) -> ApiResult<Self> {
        let mut q = JoinStreamQuery::default();
        for (k, v) in pairs {
            match k.as_str() {
                "stream_mode" if v.is_empty() => {}
                "stream_mode" => {
                    let mode = serde_json::from_value(Value::String(v.clone()))
                        .map_err(|_| ApiError::bad_request(format!("unknown stream_mode {v:?}")))?;
                    q.stream_mode.get_or_insert_with(Vec::new).push(mode);
                }
                "cancel_on_disconnect" => {
                    q.cancel_on_disconnect = Some(v.parse().map_err(|_| {
                        ApiError::bad_request(format!(
                            "cancel_on_disconnect must be true or false, got {v:?}"
                        ))
                    })?);
                }
                _ => {}
            }
        }
        Ok(q)
    }
}

#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/stream", operation_id = "join_run_stream", tag = "langgraph", security(("bearer" = [])),
    params(ThreadRunPath, JoinStreamQuery,
        ("Last-Event-ID" = Option<String>, Header, pattern = "^(-1|[0-9]{1,19})?$", description = "Resume after this event seq; `-1` replays the run from its start")),
    responses(
        (status = 200, description = "The run's events as `POST .../runs/stream` sends them (`id:` = event seq), from its start or after `Last-Event-ID`; ends when the run waits for a human or has ended", content_type = "text/event-stream", body = String),
        (status = 400, description = "A bad `Last-Event-ID` or query parameter, or a `Host` header that names another server", body = Detail),
        (status = 422, description = "A `thread_id` or `run_id` that is not a UUID", body = Detail),
        LgRunReadError,
    ))]
pub(crate) async fn join_stream(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadRunPath(thread, run): ThreadRunPath,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, LgRunReadError> {
    let q = JoinStreamQuery::parse(pairs)?;
    let permit = st.streams.open(&who.name)?;
    let (l, rec, until) = find(&st, &who, &thread, &run)?;
    let after = match headers
        .get("last-event-id")
        .map(|v| v.to_str().map(str::trim))
    {
        None | Some(Ok("-1" | "")) => None,
        Some(Ok(s)) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid Last-Event-ID {s:?}: a seq, or -1"))
        })?),
        Some(Err(_)) => return Err(ApiError::bad_request("invalid Last-Event-ID").into()),
    };
    let own: Option<StreamModes> = rec
        .kwargs
        .get("stream_mode")
        .and_then(|m| serde_json::from_value(m.clone()).ok());
    let ask = Ask {
        modes: q.stream_mode.unwrap_or_else(|| modes(own.as_ref())),
        resumable: true,
        after,
        cancel_on_disconnect: q.cancel_on_disconnect.unwrap_or(false),
    };
    let before = earlier(&l, rec.chronicle_run);
    Ok(stream::respond(&st, &who, permit, rec, before, until, ask)?)
}

/// `POST .../cancel`: `wait` for the run to end; `action` interrupt (the default) or
/// rollback (the LangGraph run is forgotten too; the turn's events stay in the log).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CancelQuery {
    /// Answer once the turn has ended (204): `true` or `1`.
    #[serde(default, deserialize_with = "flag")]
    #[param(value_type = Option<bool>)]
    wait: Option<bool>,
    /// `interrupt` (the default) or `rollback`.
    #[serde(default)]
    action: Option<CancelAction>,
}

/// A query flag as LangGraph clients send it: `true`/`false` or `1`/`0`.
fn flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let s = String::deserialize(d)?;
    match s.as_str() {
        "true" | "1" => Ok(Some(true)),
        "false" | "0" => Ok(Some(false)),
        _ => Err(serde::de::Error::custom(format!(
            "expected true, false, 1 or 0, got {s:?}"
        ))),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CancelAction {
    Interrupt,
    Rollback,
}

async fn cancel_one(
    st: &AppState,
    who: &Who,
    mut rec: RunRecord,
    until: Option<u64>,
    action: CancelAction,
) -> ApiResult<()> {
    let nothing = || {
        ApiError::not_found(format!(
            "run {} is not pending or running: there is nothing to cancel",
            rec.run_id
        ))
    };
    if !matches!(status(st, &rec, until)?, "pending" | "running") {
        return Err(nothing());
    }
    let reason = Some(format!("cancelled by the client ({action:?})").to_lowercase());
    match st.engine.cancel(rec.chronicle_run, who, reason).await {
        // It ended between the look and the cancel.
        Err(chronicle_engine::Error::RunFinished { .. }) => return Err(nothing()),
        other => other?,
    }
    let store = st.engine.store();
    match action {
        CancelAction::Interrupt => {
            rec.cancelled = true;
            records::put_run(store, &rec)?;
        }
        CancelAction::Rollback => records::delete_run(store, &rec)?,
    }
    Ok(())
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/{run_id}/cancel", operation_id = "cancel_run", tag = "langgraph", security(("bearer" = [])),
    params(ThreadRunPath, CancelQuery),
    responses(
        (status = 202, description = "Cancelled: its turn ends `cancelled` (with `action=rollback` the run is forgotten too)"),
        (status = 204, description = "With `wait=true`: cancelled, and the turn has ended"),
        (status = 400, description = "A malformed query parameter, or a `Host` header that names another server", body = Detail),
        (status = 404, description = "No thread has this id, the thread has no run with this id, or the run is not pending or running", body = Detail),
        (status = 422, description = "A `thread_id` or `run_id` that is not a UUID", body = Detail),
        LgWriteError,
    ))]
pub(crate) async fn cancel(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadRunPath(thread, run): ThreadRunPath,
    Query(q): Query<CancelQuery>,
    _body: Unread,
) -> Result<StatusCode, LgWriteError> {
    let (_, rec, until) = find(&st, &who, &thread, &run)?;
    let run = rec.chronicle_run;
    cancel_one(
        &st,
        &who,
        rec,
        until,
        q.action.unwrap_or(CancelAction::Interrupt),
    )
    .await?;
    if q.wait.unwrap_or(false) {
        let wait = Duration::from_millis(st.config.chat_wait_ms);
        st.engine
            .wait_until(run, wait, |s| s.supervisor.run_status.is_terminal())
            .await?;
        return Ok(StatusCode::NO_CONTENT);
    }
    Ok(StatusCode::ACCEPTED)
}

#[utoipa::path(delete, path = "/threads/{thread_id}/runs/{run_id}", operation_id = "delete_run", tag = "langgraph", security(("bearer" = [])),
    params(ThreadRunPath),
    responses(
        (status = 204, description = "The run is forgotten (its turn's events stay in the log)"),
        (status = 409, description = "The run is still pending or running: cancel it first", body = Detail),
        (status = 422, description = "A `thread_id` or `run_id` that is not a UUID", body = Detail),
        LgRunWriteError,
    ))]
pub(crate) async fn delete(
    State(st): State<AppState>,
    Principal(who): Principal,
    ThreadRunPath(thread, run): ThreadRunPath,
    _body: Unread,
) -> Result<StatusCode, LgRunWriteError> {
    let (_, rec, until) = find(&st, &who, &thread, &run)?;
    if matches!(status(&st, &rec, until)?, "pending" | "running") {
        return Err(ApiError::conflict(format!(
            "run {} is still running: cancel it first",
            rec.run_id
        ))
        .into());
    }
    records::delete_run(st.engine.store(), &rec)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /runs/cancel?action=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CancelManyQuery {
    /// `interrupt` (the default) or `rollback`.
    #[serde(default)]
    action: Option<CancelAction>,
}

#[utoipa::path(post, path = "/runs/cancel", operation_id = "cancel_runs", tag = "langgraph", request_body = RunsCancel, security(("bearer" = [])),
    params(CancelManyQuery),
    responses(
        (status = 204, description = "Every pending or running run that matched is cancelled"),
        (status = 400, description = "Malformed JSON or query, or a `Host` header that names another server", body = Detail),
        (status = 422, description = "Neither `thread_id` nor `status`, `run_ids` without `thread_id`, or a `thread_id` that is not a UUID", body = Detail),
        LgThreadWriteError,
    ))]
pub(crate) async fn cancel_many(
    State(st): State<AppState>,
    Principal(who): Principal,
    Query(q): Query<CancelManyQuery>,
    Body(req): Body<RunsCancel>,
) -> Result<StatusCode, LgThreadWriteError> {
    let threads = match (&req.thread_id, req.status) {
        (Some(t), _) => vec![uuid_of("thread_id", t)?],
        (None, Some(_)) if req.run_ids.is_none() => records::threads(st.engine.store(), &who)?
            .into_iter()
            .map(|r| r.thread_id)
            .collect(),
        _ => {
            return Err(ApiError::unprocessable(
                "name a `thread_id` (and perhaps its `run_ids`), or a `status` for all your runs",
            )
            .into());
        }
    };
    // An id that is not a UUID names no run.
    let wanted: Option<Vec<Uuid>> = req.run_ids.as_ref().map(|ids| {
        ids.iter()
            .filter_map(|id| uuid_of("run_id", id).ok())
            .collect()
    });
    let action = q.action.unwrap_or(CancelAction::Interrupt);
    for thread in threads {
        match load(&st, &who, thread) {
            Ok(_) => {}
            // Among all the caller's threads, one deleted through Chronicle's own API is skipped.
            Err(e) if req.thread_id.is_none() && e.status == StatusCode::NOT_FOUND => continue,
            Err(e) => return Err(e.into()),
        }
        for (rec, until) in runs_with_ends(&st, thread)? {
            if wanted.as_ref().is_some_and(|w| !w.contains(&rec.run_id)) {
                continue;
            }
            // Ended runs are most of them: known so from the log's head, without a fold.
            let ended = rec.cancelled
                || until.is_some()
                || st
                    .engine
                    .store()
                    .run_head(rec.chronicle_run)?
                    .is_some_and(|h| h.terminal);
            let status = if ended {
                "ended"
            } else {
                status(&st, &rec, until)?
            };
            let matches = match req.status.unwrap_or(CancelStatus::All) {
                CancelStatus::Pending => status == "pending",
                CancelStatus::Running => status == "running",
                CancelStatus::All => matches!(status, "pending" | "running"),
            };
            if !matches {
                continue;
            }
            match cancel_one(&st, &who, rec, until, action).await {
                // Ended meanwhile: nothing left to cancel.
                Err(e) if e.status == StatusCode::NOT_FOUND => {}
                other => other?,
            }
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
