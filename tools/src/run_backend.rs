//! Where `run` and `chat` send their work: an [`Engine`] embedded on a data directory, or a
//! server's REST routes (`--server`). Both answer in the same terms — the run's projected
//! [`RunState`], seed 000's command JSON, events as the SSE stream shapes them — so the commands
//! above them do not care which one they talk to.

use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use anyhow::{Context, bail};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, StartRun};
use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalId, Decision, HitlMode, RunId, RunStatus, SessionId, Strategy, TodoStatus,
};
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::common::{DataArgs, RemoteArgs};
use crate::run::remote::{self, HttpError, Remote};

/// The principal an embedded CLI acts as: the same name a server without tokens gives every
/// caller, so the audit trail reads alike whichever way a decision was made.
pub const LOCAL_PRINCIPAL: &str = "local";

/// How long the CLI waits for a run to need a human or end. Long on purpose: the engine's own
/// limits (`max_steps`, agent and run timeouts) end a run that hangs; this only bounds a bug.
const SETTLE_TIMEOUT_MS: u64 = 6 * 3600 * 1000;
/// How often a remote run's status is polled while waiting for it to settle.
const REMOTE_POLL_MS: u64 = 150;

/// One event as a stream shows it: the run seq, the dotted SSE name, and the SSE `data` object
/// (`{run_id, seq, offset, at, kind, type, subtype, content}`).
#[derive(Clone, Debug, PartialEq)]
pub struct WireEvent {
    pub seq: u64,
    pub name: String,
    pub data: Value,
}

pub type Events = Pin<Box<dyn Stream<Item = anyhow::Result<WireEvent>> + Send>>;

/// What a caller asks for when starting a run.
#[derive(Clone, Debug, Default)]
pub struct StartReq {
    pub query: String,
    pub hitl: Option<HitlMode>,
    pub strategy: Option<Strategy>,
    pub session: Option<SessionId>,
}

#[derive(Debug)]
pub enum Backend {
    Local(Engine),
    Remote(Remote),
}

impl Backend {
    /// The server of `--server`, else an engine on the data directory (created when missing, but
    /// never shared with a running server).
    pub async fn open(data: &DataArgs, remote: &RemoteArgs) -> anyhow::Result<Backend> {
        if let Some(r) = Remote::from_args(remote)? {
            return Ok(Backend::Remote(r));
        }
        let store = open_or_create(&data.data)?;
        let engine = Engine::open(store, crate::domain::DomainArgs::from_env()?.settings()?)
            .await
            .with_context(|| format!("starting the engine on {}", data.data.display()))?;
        Ok(Backend::Local(engine))
    }

    /// How to reach the same runs from another `chronicle` command (`--data DIR` or
    /// `--server URL`).
    pub fn where_flag(&self) -> String {
        match self {
            Backend::Local(e) => format!(
                "--data {}",
                e.store().dir().unwrap_or(Path::new(".")).display()
            ),
            Backend::Remote(r) => format!("--server {}", r.base()),
        }
    }

    /// Where a run goes on when this CLI stops watching it.
    pub fn goes_on_where(&self) -> String {
        match self {
            Backend::Local(e) => format!(
                "the next time an engine opens {} (chronicle serve, run or chat)",
                e.store().dir().unwrap_or(Path::new(".")).display()
            ),
            Backend::Remote(r) => format!("on the server {}", r.base()),
        }
    }

    pub async fn start(&self, req: StartReq) -> anyhow::Result<(RunId, SessionId)> {
        match self {
            Backend::Local(engine) => {
                let s = engine
                    .start_run(StartRun {
                        query: req.query,
                        session_id: req.session,
                        hitl: req.hitl,
                        strategy: req.strategy,
                        ..StartRun::default()
                    })
                    .await?;
                Ok((s.run_id, s.session_id))
            }
            Backend::Remote(r) => {
                let mut body = json!({"query": req.query});
                if let Some(h) = req.hitl {
                    body["hitl"] = json!(h);
                }
                if let Some(s) = req.strategy {
                    body["strategy"] = json!(s);
                }
                if let Some(s) = req.session {
                    body["session_id"] = json!(s);
                }
                let v = r.post_json("/api/v1/agent/run", &body).await?;
                let run = v["run_id"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .with_context(|| format!("the server answered without a run id: {v}"))?;
                let session = SessionId(v["session_id"].as_str().unwrap_or_default().to_owned());
                Ok((run, session))
            }
        }
    }

    /// Every event of `run` from `from_seq`: history, then live. The remote stream ends after
    /// `run.end` / `run.error`; the embedded one when the engine stops.
    pub async fn events(&self, run: RunId, from_seq: u64) -> anyhow::Result<Events> {
        match self {
            Backend::Local(engine) => {
                let events = engine.subscribe(run, from_seq)?;
                Ok(Box::pin(events.map(|env| {
                    let env = env?;
                    let (name, _, _) = chronicle_api::names::wire_names(&env.event);
                    Ok(WireEvent {
                        seq: env.seq,
                        name: name.to_owned(),
                        data: chronicle_api::names::event_data(&env),
                    })
                })))
            }
            Backend::Remote(r) => {
                let res = r
                    .get_stream(
                        &format!("/api/v1/agent/{run}/events"),
                        &[("from", from_seq.to_string())],
                    )
                    .await?;
                Ok(Box::pin(remote::sse(res).map(|msg| {
                    let msg = msg?;
                    let data: Value = serde_json::from_str(&msg.data)
                        .with_context(|| format!("an SSE message is not JSON: {}", msg.data))?;
                    let seq = data["seq"]
                        .as_u64()
                        .or_else(|| msg.id.as_deref().and_then(|id| id.parse().ok()))
                        .context("an SSE message without a seq")?;
                    Ok(WireEvent {
                        seq,
                        name: msg.event.unwrap_or_default(),
                        data,
                    })
                })))
            }
        }
    }

    /// The run's projected state now.
    pub async fn state(&self, run: RunId) -> anyhow::Result<RunState> {
        match self {
            Backend::Local(engine) => Ok(engine.state(run, None)?),
            Backend::Remote(r) => {
                let v = r.get_json(&format!("/api/v1/agent/{run}/state")).await?;
                serde_json::from_value(v).context("the server's run state does not decode")
            }
        }
    }

    /// Waits until the run needs nothing but a human or has ended (the engine's
    /// `wait_settled`; remotely, the same test on polled state).
    pub async fn settled(&self, run: RunId) -> anyhow::Result<RunState> {
        let timeout = Duration::from_millis(SETTLE_TIMEOUT_MS);
        match self {
            Backend::Local(engine) => Ok(engine.wait_settled(run, timeout).await?),
            Backend::Remote(r) => {
                let deadline = tokio::time::Instant::now() + timeout;
                loop {
                    // The status is cheap; the whole state only when the run may have settled.
                    let status = r.get_json(&format!("/api/v1/agent/{run}/status")).await?;
                    if status["state"] != "running" {
                        let s = self.state(run).await?;
                        if is_settled(&s) {
                            return Ok(s);
                        }
                    }
                    if tokio::time::Instant::now() >= deadline {
                        bail!("timed out after {timeout:?} waiting for run {run}");
                    }
                    tokio::time::sleep(Duration::from_millis(REMOTE_POLL_MS)).await;
                }
            }
        }
    }

    /// Runs a slash command; the JSON result has seed 000's shape, or `{error, help}`.
    pub async fn command(&self, run: RunId, text: &str) -> anyhow::Result<Value> {
        match self {
            // A refused command is an answer, not a failure: show it as the server does.
            Backend::Local(engine) => match engine.command(run, text, LOCAL_PRINCIPAL).await {
                Err(chronicle_engine::Error::Command { reason, help }) => {
                    Ok(json!({"error": reason, "help": help}))
                }
                other => Ok(other?),
            },
            Backend::Remote(r) => {
                let path = format!("/api/v1/agent/{run}/commands");
                match r.post_json(&path, &json!({"command": text})).await {
                    Ok(v) => Ok(v),
                    // A refused command is an answer, not a failure: show it as the engine does.
                    Err(e) => match e.downcast::<HttpError>() {
                        Ok(h) if h.status == 400 || h.status == 409 => Ok(json!({
                            "error": h.message,
                            "help": h.body.get("help").cloned().unwrap_or(Value::Null),
                        })),
                        Ok(h) => Err(h.into()),
                        Err(e) => Err(e),
                    },
                }
            }
        }
    }

    /// Decides one approval (as the local principal, or as the server's principal of the token).
    pub async fn decide(
        &self,
        run: RunId,
        approval: &ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        comment: Option<String>,
    ) -> anyhow::Result<()> {
        match self {
            Backend::Local(engine) => {
                engine
                    .decide(
                        run,
                        approval.clone(),
                        decision,
                        edited_args,
                        LOCAL_PRINCIPAL,
                        comment,
                    )
                    .await?;
            }
            Backend::Remote(r) => {
                let mut body = json!({"decision": decision});
                if let Some(a) = edited_args {
                    body["edited_args"] = a;
                }
                if let Some(c) = comment {
                    body["comment"] = json!(c);
                }
                r.post_json(
                    &format!("/api/v1/agent/{run}/approvals/{approval}/decision"),
                    &body,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Stops the embedded engine (its runs continue the next time one opens the data) and
    /// flushes the store.
    pub async fn close(self) {
        if let Backend::Local(engine) = self {
            engine.shutdown().await;
        }
    }
}

/// The engine's `wait_settled` test: ended, or waiting for a human with no agent working.
pub fn is_settled(s: &RunState) -> bool {
    let sup = &s.supervisor;
    sup.run_status.is_terminal()
        || (!sup.pending_approval_ids.is_empty()
            && sup
                .planning_state
                .as_ref()
                .is_none_or(|p| p.todos.iter().all(|t| t.status != TodoStatus::InProgress)))
}

/// The approvals a settled run waits for, oldest first.
pub fn pending(s: &RunState) -> Vec<Approval> {
    s.approvals.pending().cloned().collect()
}

/// The run ended (completed, failed or cancelled).
pub fn is_terminal(s: &RunState) -> bool {
    s.supervisor.run_status.is_terminal()
}

/// The final response's `answer`, if the run produced one.
pub fn answer(s: &RunState) -> Option<String> {
    let r = s.supervisor.final_response.as_ref()?;
    match r.get("answer") {
        Some(Value::String(a)) => Some(a.clone()),
        Some(other) => Some(other.to_string()),
        None => Some(r.to_string()),
    }
}

/// Why a run did not complete, for the message on stderr.
pub fn failure(s: &RunState) -> String {
    match s.supervisor.run_status {
        RunStatus::Cancelled => "the run was cancelled".to_owned(),
        _ => s
            .supervisor
            .error_log
            .last()
            .cloned()
            .unwrap_or_else(|| format!("the run is {}", s.supervisor.run_status.as_str())),
    }
}

/// Opens the store of `run` / `chat`, creating an empty one in a new directory.
fn open_or_create(data: &Path) -> anyhow::Result<Store> {
    crate::common::open_with(
        data,
        Options::default(),
        "use --server URL, or another --data DIR",
    )
}
