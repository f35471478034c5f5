//! A run's life outside its actor: starting it (checked, then `RunStarted` recorded),
//! reading its state, following its events, waiting for it, and the sub-agent runs a `task`
//! call starts and waits for.

use std::sync::Arc;
use std::time::Duration;

use chronicle_projections::RunState;
use chronicle_schemas::{
    APPROVAL_TIMEOUT_MS_MAX, APPROVAL_TIMEOUT_MS_MIN, Envelope, Event, Follows, HitlMode, OnReject,
    ParentLink, PlanStep, QUERY_CHARS_MAX, RunConfig, RunId, RunStatus, SESSION_ID_CHARS_MAX,
    SessionId, Strategy, ToolCallId,
};
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;

use chronicle_wire::SubRun;

use crate::Principal;
use crate::error::PlanError;
use crate::plugin::tools::{ChildRequest, ChildRuns, ToolContext};
use crate::runtime::bus::Live;
use crate::runtime::mailbox::Input;
use crate::runtime::shared::Shared;
use crate::store::{self, Store};
use crate::{Error, Result};

/// What a caller asks for when starting a run; `None` fields take the server defaults.
#[derive(Clone, Debug, Default)]
pub struct StartRun {
    /// Who starts it: the run (and a new session) will belong to this principal.
    pub by: Principal,
    pub query: String,
    pub session_id: Option<SessionId>,
    pub user_id: Option<String>,
    pub hitl: Option<HitlMode>,
    /// What a rejected approval does (default: the server's).
    pub on_reject: Option<OnReject>,
    pub strategy: Option<Strategy>,
    pub approval_timeout_ms: Option<u64>,
    /// The run's whole config, instead of the server's defaults (a sub-agent run inherits its
    /// parent's); the fields above and below still apply over it.
    pub config: Option<RunConfig>,
    pub parent: Option<ParentLink>,
    /// Agent mode: this agent drives the whole run (see `RunConfig::agent`).
    pub agent: Option<String>,
    /// A fixed plan that came with the request: the run executes it instead of planning (see
    /// `RunConfig::plan`).
    pub plan: Option<Vec<PlanStep>>,
    /// The earlier turn of its session the run follows (default: the run before it).
    pub follows: Option<Follows>,
    /// A key the caller sends again when it retries the request (`Idempotency-Key`): the same
    /// key from the same principal names the same run, so a retry after a lost answer (a node
    /// that died) starts no second run.
    pub idempotency_key: Option<String>,
}

/// The longest idempotency key taken, in bytes.
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 255;

/// The run an idempotency key names for a principal.
pub fn idempotent_run_id(by: &Principal, key: &str) -> RunId {
    let mut h = blake3::Hasher::new_derive_key("chronicle idempotent run v1");
    h.update(&(by.name.len() as u64).to_be_bytes());
    h.update(by.name.as_bytes());
    h.update(key.as_bytes());
    let bytes: [u8; 16] = h.finalize().as_bytes()[..16].try_into().unwrap_or_default();
    RunId(uuid::Uuid::new_v8(bytes))
}

/// An idempotency key is 1..=[`IDEMPOTENCY_KEY_BYTES_MAX`] bytes of visible ASCII.
pub fn check_idempotency_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.len() <= IDEMPOTENCY_KEY_BYTES_MAX
        && key.bytes().all(|b| b.is_ascii_graphic());
    match ok {
        true => Ok(()),
        false => Err(Error::BadIdempotencyKey { bytes: key.len() }),
    }
}

/// Whether `run` was started by the same request: in `session` (when one was named) with
/// `query`.
pub(crate) fn same_request(
    shared: &Shared,
    run: RunId,
    session: Option<&SessionId>,
    query: &str,
) -> Result<bool> {
    let first = shared.store.read_run(run, 0, 0).next().transpose()?;
    Ok(match first.map(|e| e.event) {
        Some(Event::RunStarted {
            session_id,
            query: q,
            ..
        }) => session.is_none_or(|s| *s == session_id) && q == query,
        _ => false,
    })
}

/// The run a retried request with `key` started already, as it was answered the first time.
pub(crate) async fn started_before(
    shared: &Shared,
    by: &Principal,
    key: &str,
) -> Result<Option<Started>> {
    let run_id = idempotent_run_id(by, key);
    let Some(head) = shared.store.run_head_async(run_id).await? else {
        return Ok(None);
    };
    shared.authorize(by, run_id)?;
    Ok(Some(Started {
        run_id,
        session_id: head.session_id,
    }))
}

/// A started run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    pub run_id: RunId,
    pub session_id: SessionId,
}

/// A fixed plan is checked when it is submitted, before anything is written: every step names
/// a registered agent, and depends only on agents the plan runs. (A plan longer than the run's
/// TODO limit is the run's failure, recorded with its reason.)
fn check_plan(shared: &Shared, plan: &[PlanStep]) -> Result<(), PlanError> {
    let registry = &shared.settings.registry;
    for (index, step) in plan.iter().enumerate() {
        if step.agent_name.is_empty() {
            return Err(PlanError::NoAgent { index });
        }
        if let Err(e) = registry.find(&step.agent_name) {
            return Err(PlanError::UnknownAgent {
                index,
                name: e.name,
                known: e.known,
            });
        }
        if let Some(dep) = step
            .dependencies
            .iter()
            .find(|d| !plan.iter().any(|s| &s.agent_name == *d))
        {
            return Err(PlanError::DependencyOutside {
                index,
                agent: step.agent_name.clone(),
                dependency: dep.clone(),
            });
        }
    }
    Ok(())
}

/// A query has something besides whitespace, and at most [`QUERY_CHARS_MAX`] characters as sent.
pub(crate) fn check_query(query: &str) -> Result<()> {
    if query.trim().is_empty() {
        return Err(Error::EmptyQuery);
    }
    let chars = query.chars().count();
    if chars > QUERY_CHARS_MAX {
        return Err(Error::QueryTooLong { chars });
    }
    Ok(())
}

/// A session id a run may be started in: 1..=[`SESSION_ID_CHARS_MAX`] characters, no NUL. In
/// characters, so that a client can tell without encoding; the store's own limit is in bytes.
pub fn check_session_id(session: &SessionId) -> Result<()> {
    const _: () = assert!(SESSION_ID_CHARS_MAX * 4 <= store::SESSION_ID_BYTES_MAX);
    let chars = session.as_str().chars().count();
    let contains_nul = session.as_str().contains('\0');
    if chars == 0 || chars > SESSION_ID_CHARS_MAX || contains_nul {
        return Err(Error::BadSessionId {
            chars,
            contains_nul,
        });
    }
    Ok(())
}

/// The approval timeout, when the run has one, is within its range (whoever set it: the request,
/// the server's defaults or a caller's whole config).
fn check_approval_timeout(config: &RunConfig) -> Result<()> {
    match config.approval_timeout_ms {
        Some(ms) if !(APPROVAL_TIMEOUT_MS_MIN..=APPROVAL_TIMEOUT_MS_MAX).contains(&ms) => {
            Err(Error::ApprovalTimeout { ms })
        }
        _ => Ok(()),
    }
}

/// The run's config: the request's, or the server's defaults, with the request's fields over
/// it. A plan is always a request's own: the defaults never give a run theirs.
fn config_of(shared: &Shared, req: &StartRun) -> RunConfig {
    let mut config = match &req.config {
        Some(config) => config.clone(),
        None => RunConfig {
            plan: None,
            ..shared.settings.defaults.clone()
        },
    };
    if req.plan.is_some() {
        config.plan.clone_from(&req.plan);
    }
    if let Some(follows) = req.follows {
        config.follows = follows;
    }
    if let Some(h) = req.hitl {
        config.hitl = h;
    }
    if let Some(r) = req.on_reject {
        config.on_reject = r;
    }
    if req.strategy.is_some() {
        config.strategy = req.strategy;
    }
    if req.approval_timeout_ms.is_some() {
        config.approval_timeout_ms = req.approval_timeout_ms;
    }
    if req.agent.is_some() {
        config.agent.clone_from(&req.agent);
    }
    config
}

/// Agent mode: the named agent is the run's one step, whose TODO drives the run (marked
/// [`todo::DRIVES_RUN`](crate::todo::DRIVES_RUN) when the plan becomes TODOs). A plan may come
/// with it only as that agent's one step, to give it an input.
fn agent_mode(shared: &Shared, config: &mut RunConfig, query: &str) -> Result<(), PlanError> {
    let Some(name) = config.agent.clone() else {
        return Ok(());
    };
    let agent = shared
        .settings
        .registry
        .find(&name)
        .map_err(|e| PlanError::UnknownDriver {
            name: e.name,
            known: e.known,
        })?;
    match &config.plan {
        None => {
            config.plan = Some(vec![PlanStep {
                agent_name: name,
                team: agent.team().to_owned(),
                task: query.to_owned(),
                description: query.to_owned(),
                timeout: config.limits.agent_timeout_ms.div_ceil(1000),
                retry_count: config.max_retries,
                ..PlanStep::default()
            }]);
            Ok(())
        }
        Some(steps) if steps.len() == 1 && steps[0].agent_name == name => Ok(()),
        Some(_) => Err(PlanError::PlanBesideAgent { agent: name }),
    }
}

/// Starts a run: validates the request, records `RunStarted` (acknowledged once durable) and
/// hands the run to its actor, whose first node is `initialize`. Nothing is written for a refused
/// request.
pub(crate) async fn start(shared: &Arc<Shared>, run_id: RunId, req: StartRun) -> Result<Started> {
    // Refuse before writing anything: a run nobody would drive must not be half-started.
    if shared.shutdown.is_cancelled() {
        return Err(Error::ShuttingDown);
    }
    if let Some(key) = &req.idempotency_key {
        check_idempotency_key(key)?;
    }
    check_query(&req.query)?;
    let query = req.query.trim();
    let mut config = config_of(shared, &req);
    check_approval_timeout(&config)?;
    agent_mode(shared, &mut config, query)?;
    if let Some(plan) = &config.plan {
        check_plan(shared, plan)?;
    }
    let user_id = user_of(&req)?;
    let session_id = match req.session_id.clone() {
        Some(session) => {
            check_session_id(&session)?;
            claim_session(shared, &session, &req.by)?;
            session
        }
        None => SessionId(uuid::Uuid::new_v4().to_string()),
    };
    // A run follows a turn of its own session (one that exists already).
    if let Follows::Turn(turn) = config.follows
        && !shared.store.session_runs(&session_id)?.contains(&turn)
    {
        return Err(Error::RunNotFound(turn));
    }
    // A request sent again with its key: the run the first one started, if it is the same
    // request (its session and query); the key used for another request is refused.
    let (run_id, key) = match &req.idempotency_key {
        Some(key) => {
            if let Some(started) = started_before(shared, &req.by, key).await? {
                let same = same_request(shared, started.run_id, req.session_id.as_ref(), query)?;
                return match same {
                    true => Ok(started),
                    false => Err(Error::IdempotencyKeyReused),
                };
            }
            (idempotent_run_id(&req.by, key), Some(key.clone()))
        }
        None => (run_id, None),
    };
    // On a node of a cluster, the session is this node's before its run starts here.
    if let Some(cluster) = &shared.cluster {
        cluster.ensure(shared, session_id.as_str()).await?;
    }
    let request_id = format!("req_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let mut live = shared.store.load_async(run_id).await?;
    // A run of this id that exists already is a conflict, and nothing is written.
    let appended = match live.state().next_seq() {
        0 => live
            .append(vec![Event::RunStarted {
                session_id: session_id.clone(),
                user_id,
                request_id,
                query: query.to_owned(),
                config,
                parent: req.parent,
                owner: Some(req.by.name.clone()),
                // The trace the request came in (a caller's `traceparent`, or the `task` call
                // of a parent run): the run's trace continues it.
                traceparent: crate::plugin::trace::traceparent(),
            }])
            .await
            .map(drop),
        actual => Err(store::Error::Conflict {
            run_id,
            expected: 0,
            actual,
        }),
    };
    match (appended, key) {
        (Ok(()), _) => {}
        // The same key at the same moment, on this node or another: the first one's run.
        (Err(e @ store::Error::Conflict { .. }), Some(key)) => {
            let Some(started) = started_before(shared, &req.by, &key).await? else {
                return Err(e.into());
            };
            return match same_request(shared, started.run_id, req.session_id.as_ref(), query)? {
                true => Ok(started),
                false => Err(Error::IdempotencyKeyReused),
            };
        }
        (Err(e), _) => return Err(e.into()),
    }
    drop(live);
    shared.deliver(run_id, None).await?;
    Ok(Started { run_id, session_id })
}

/// The run's `user_id`: the caller's own name unless an admin names another user.
fn user_of(req: &StartRun) -> Result<Option<String>> {
    match &req.user_id {
        _ if req.by.admin => Ok(req.user_id.clone()),
        None => Ok(Some(req.by.name.clone())),
        Some(u) if *u == req.by.name => Ok(Some(u.clone())),
        Some(u) => Err(Error::NotYourUser { given: u.clone() }),
    }
}

/// The record that says whose a session is, written once, before its first run.
const SESSION_CLAIM_PREFIX: &str = "session/owner/";

/// A session belongs to the principal of its first run; another principal cannot start a run
/// in it (nor learn that it exists), and nobody can in a deleted one.
///
/// Checking the first run and then appending one is not atomic: two principals starting the
/// first run of one session at once would both find it empty. So a session without runs is
/// claimed first, with a record only one caller can create ([`Store::put_record_if_absent`]):
/// the caller who created it may go on, every other one is answered as for someone else's
/// session. (A session id the server made up needs no claim: nobody else can name it.)
pub(crate) fn claim_session(shared: &Shared, session: &SessionId, who: &Principal) -> Result<()> {
    if !shared.session_runs(who, session)?.is_empty() {
        return Ok(());
    }
    let key = format!("{SESSION_CLAIM_PREFIX}{session}");
    match shared
        .store
        .put_record_if_absent(&key, who.name.as_bytes())?
    {
        None => Ok(()),
        Some(owner) if owner == who.name.as_bytes() => Ok(()),
        Some(_) => Err(Error::SessionNotFound(session.to_string())),
    }
}

/// The run's projected state now (or right after `seq`), as of its newest *durable* event, so a
/// reader never sees what a subscriber has not been sent (and a crash could still lose).
pub(crate) fn state(shared: &Shared, run: RunId, seq: Option<u64>) -> Result<RunState> {
    durable_state(&shared.store, run, seq)
}

/// [`state`] on a store.
pub(crate) fn durable_state(store: &Store, run: RunId, seq: Option<u64>) -> Result<RunState> {
    let head = store.run_head(run)?.ok_or(Error::RunNotFound(run))?;
    let durable = store.durable_seq(run)?.unwrap_or(0).min(head.last_seq);
    let at = seq.map_or(durable, |s| s.min(durable));
    Ok(store.state_at(run, at)?)
}

/// Every event of `run` from `from_seq`: history, then live; no gap, no duplicate.
pub(crate) fn subscribe(
    shared: &Shared,
    run: RunId,
    from_seq: u64,
) -> Result<ReceiverStream<Result<Arc<Envelope>, store::Error>>> {
    if shared.store.run_head(run)?.is_none() {
        return Err(Error::RunNotFound(run));
    }
    Ok(shared.bus.subscribe(run, from_seq))
}

/// [`subscribe`], with the run's live chunks between the events.
pub(crate) fn subscribe_live(
    shared: &Shared,
    run: RunId,
    from_seq: u64,
) -> Result<ReceiverStream<Result<Live, store::Error>>> {
    let Some(head) = shared.store.run_head(run)? else {
        return Err(Error::RunNotFound(run));
    };
    let stream = shared.bus.subscribe_live(run, from_seq);
    // On a node of a cluster, a run another node drives streams its chunks there: they are
    // relayed here while someone listens.
    if let Some(cluster) = &shared.cluster
        && !head.terminal
    {
        cluster.relay_chunks(shared, run, head.session_id);
    }
    Ok(stream)
}

/// Waits until `done(state)` holds at the run's newest durable event (or `timeout`).
pub(crate) async fn wait_until(
    shared: &Shared,
    run: RunId,
    timeout: Duration,
    done: impl Fn(&RunState) -> bool,
) -> Result<RunState> {
    // One timer for the whole wait, not one per event.
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut events = subscribe(shared, run, 0)?.into_inner();
    let src = shared.store.source(run);
    // The subscription's events folded as they come (nothing is read twice). `done` is asked
    // only at the run's newest durable event: an append's events become durable together, so
    // the state it sees is never halfway through one, and a reader sees what a subscriber saw.
    let mut state = RunState::default();
    loop {
        if events.is_empty()
            && state.last_seq.is_some()
            && state.last_seq == shared.store.durable_seq(run)?
            && done(&state)
        {
            return Ok(state);
        }
        let next = tokio::select! {
            biased;
            next = events.recv() => next,
            () = &mut deadline => {
                return Err(Error::Timeout {
                    run,
                    after: timeout,
                });
            }
        };
        match next {
            None => return Err(Error::ShuttingDown),
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(env)) => state.apply(&env, &src)?,
        }
    }
}

/// [`wait_until`] [`is_settled`], asked of the run's actor: it answers where it waits, with the
/// state it holds, so nothing folds the run a second time. A run that ended and is durable is
/// read from the log instead.
pub(crate) async fn wait_settled(
    shared: &Arc<Shared>,
    run: RunId,
    timeout: Duration,
) -> Result<RunState> {
    // A run that ended and is durable needs no actor (and waits for no busy one).
    if let Some(head) = shared.store.run_head(run)?
        && head.terminal
        && shared.store.durable_seq(run)? == Some(head.last_seq)
    {
        return Ok(shared.store.state_at(run, head.last_seq)?);
    }
    let asked = shared.ask(run, |reply| Input::Settled { reply });
    tokio::time::timeout(timeout, asked)
        .await
        .unwrap_or(Err(Error::Timeout {
            run,
            after: timeout,
        }))
}

/// The run needs nothing but a human, or has ended: terminal, or waiting for an approval with
/// no agent still working (an agent waiting for a human on a tool call counts as settled).
pub fn is_settled(s: &RunState) -> bool {
    let sup = &s.supervisor;
    let waits_on_tool = |t: &chronicle_schemas::SupervisorTodo| {
        s.approvals.pending().any(|a| {
            matches!(&a.subject, Some(chronicle_schemas::Subject::ToolCall { todo_id, .. }) if *todo_id == t.id)
        })
    };
    sup.run_status.is_terminal()
        || (!sup.pending_approval_ids.is_empty()
            && sup.planning_state.as_ref().is_none_or(|p| {
                p.todos.iter().all(|t| {
                    t.status != chronicle_schemas::TodoStatus::InProgress
                        || waits_on_tool(t)
                        || t.planned_by().is_some()
                })
            }))
}

/// The run a `task` call starts: derived from the parent run and the call, so the call finds its
/// child again when it is executed a second time (after a crash).
pub fn child_run_id(parent: RunId, tool_call_id: &ToolCallId) -> RunId {
    let mut h = blake3::Hasher::new_derive_key("chronicle task child run v1");
    h.update(parent.0.as_bytes());
    h.update(tool_call_id.as_str().as_bytes());
    let bytes: [u8; 16] = h.finalize().as_bytes()[..16].try_into().unwrap_or_default();
    RunId(uuid::Uuid::new_v8(bytes))
}

/// The runtime's [`ChildRuns`], lent to each tool call: child runs are started on the engine's
/// shared state.
#[derive(Debug)]
pub(crate) struct Children(pub Arc<Shared>);

#[async_trait::async_trait]
impl ChildRuns for Children {
    async fn run_child(
        &self,
        ctx: &ToolContext,
        req: ChildRequest,
    ) -> std::result::Result<Value, String> {
        run_child(&self.0, ctx, req).await
    }
}

/// The child run of a `task` call: started once, then awaited. Returns the child's final
/// response, or why it did not finish.
async fn run_child(
    shared: &Arc<Shared>,
    ctx: &ToolContext,
    req: ChildRequest,
) -> std::result::Result<Value, String> {
    let child = child_run_id(ctx.run_id, &ctx.tool_call_id);
    let fail = |e: Error| format!("sub-agent run {child}: {e}");
    let head = shared.store.run_head(child).map_err(|e| fail(e.into()))?;
    if let Some(head) = &head
        && !head.terminal
        && shared.cluster.is_some()
    {
        // The call runs again (its node died, and this one took the parent over): the child
        // comes to the parent's node when nobody else drives it yet.
        match shared.deliver(child, None).await {
            Ok(_) | Err(Error::Elsewhere { .. }) => {}
            Err(e) => tracing::warn!(run = %child, error = %e, "resuming a sub-agent run failed"),
        }
    }
    if head.is_none() {
        let depth_max = shared.settings.subagent_depth_max;
        if ctx.config.subagent_depth >= depth_max {
            return Err(format!(
                "sub-agent depth limit of {depth_max} reached: this run is {} level(s) below its root run, so it cannot delegate further",
                ctx.config.subagent_depth
            ));
        }
        let mut start_child = child_request(shared, ctx, &req)?;
        // A child belongs to its parent's owner, and works for the parent's user.
        let parent = state(shared, ctx.run_id, None).map_err(fail)?.supervisor;
        start_child.by = Principal::admin(parent.owner);
        start_child.user_id = parent.user_id;
        match start(shared, child, start_child).await {
            Ok(_) | Err(Error::Store(store::Error::Conflict { .. })) => {}
            Err(e) => return Err(fail(e)),
        }
    }
    let limit = ctx.config.limits.run_timeout_ms.saturating_add(60_000);
    let state = wait_until(shared, child, Duration::from_millis(limit), |s| {
        s.supervisor.run_status.is_terminal()
    })
    .await
    .map_err(fail)?;
    let s = &state.supervisor;
    match s.run_status {
        RunStatus::Completed => Ok(json!({
            "run_id": child,
            "status": "completed",
            "answer": s.final_response.as_ref().and_then(|r| r.get("answer")),
            "final_response": s.final_response,
        })),
        status => Err(format!(
            "sub-agent run {child} {}: {}",
            status.as_str(),
            s.error_log
                .last()
                .map_or("no reason recorded", String::as_str)
        )),
    }
}

/// The child's request: the parent's config and workspace, one level deeper; when the call names
/// the agent to run, the child is that agent's run (agent mode), with the call's input.
fn child_request(
    shared: &Shared,
    ctx: &ToolContext,
    req: &ChildRequest,
) -> std::result::Result<StartRun, String> {
    let mut config = ctx.config.clone();
    config.workspace_session = Some(
        config
            .workspace_session
            .clone()
            .unwrap_or_else(|| ctx.session_id.clone()),
    );
    config.subagent_depth += 1;
    config.agent.clone_from(&req.agent);
    config.plan = match &req.agent {
        None => None,
        Some(name) => {
            let agent = shared.settings.registry.find(name).map_err(|e| {
                format!(
                    "unknown subagent_type {name:?}; known: {}",
                    e.known.join(", ")
                )
            })?;
            Some(vec![PlanStep {
                agent_name: name.clone(),
                team: agent.team().to_owned(),
                task: req.description.clone(),
                description: req.description.clone(),
                input_mapping: req.input.clone(),
                timeout: config.limits.agent_timeout_ms.div_ceil(1000),
                retry_count: config.max_retries,
                ..Default::default()
            }])
        }
    };
    Ok(StartRun {
        query: req.description.clone(),
        config: Some(config),
        parent: Some(ParentLink {
            run_id: ctx.run_id,
            tool_call_id: ctx.tool_call_id.clone(),
        }),
        ..StartRun::default()
    })
}

/// The sub-agent runs started by `state`'s `task` calls, with their status (`not_started` while
/// the call waits for its approval), for `/todos`.
pub(crate) fn sub_runs(shared: &Shared, state: &RunState) -> Vec<SubRun> {
    let Some(run_id) = state.run_id else {
        return vec![];
    };
    state
        .supervisor
        .tool_calls
        .iter()
        .filter(|c| c.tool == "task")
        .map(|c| {
            let child = child_run_id(run_id, &c.tool_call_id);
            let (status, phase) = match self::state(shared, child, None) {
                Ok(s) => (
                    s.supervisor.run_status.as_str().to_owned(),
                    Some(s.supervisor.current_phase),
                ),
                Err(_) => ("not_started".to_owned(), None),
            };
            SubRun {
                todo_id: c.todo_id.clone(),
                tool_call_id: c.tool_call_id.clone(),
                run_id: child,
                status,
                phase,
            }
        })
        .collect()
}
