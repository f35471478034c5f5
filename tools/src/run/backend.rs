//! Where `run` and `chat` send their work: an [`Engine`] embedded on a data directory, or a
//! server through the client (`--server`). Both answer in the same terms — the run's projected
//! [`RunState`], typed command outcomes, events as the streams shape them — so the commands
//! above them do not care which one they talk to.

use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use anyhow::{Context, bail};
use chronicle_client::{ChatReply, Client, EventsFrom, StreamEvent, StreamItem};
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Live, Principal, StartRun, Turn, TurnInput, TurnOutcome};
use chronicle_projections::RunState;
use chronicle_schemas::{
    Approval, ApprovalId, HitlMode, OnReject, RunId, RunStatus, SessionId, Strategy, TodoStatus,
};
use chronicle_wire::names::{event_data, wire_names};
use chronicle_wire::{ChatRequest, CommandOutcome, DecisionRequest, RunRequest};
use futures_util::{Stream, StreamExt};

use crate::common::{DataArgs, RemoteArgs};

/// How long the CLI waits for a run to need a human or end. Long on purpose: the engine's own
/// limits (`max_steps`, agent and run timeouts) end a run that hangs; this only bounds a bug.
const SETTLE_TIMEOUT_MS: u64 = 6 * 3600 * 1000;
/// How often a remote run's status is polled while waiting for it to settle.
const REMOTE_POLL_MS: u64 = 150;

/// A run's events and, between them, the live chunks of its model answers.
pub type Events = Pin<Box<dyn Stream<Item = anyhow::Result<StreamItem>> + Send>>;

/// What a caller asks for when starting a run.
#[derive(Clone, Debug, Default)]
pub struct StartReq {
    pub query: String,
    pub hitl: Option<HitlMode>,
    pub on_reject: Option<OnReject>,
    pub strategy: Option<Strategy>,
    pub session: Option<SessionId>,
    /// Agent mode: this agent drives the run.
    pub agent: Option<String>,
}

/// How the runs a chat turn starts are set up.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurnOpts {
    pub hitl: Option<HitlMode>,
    pub on_reject: Option<OnReject>,
}

/// Plain words a command was read from, and the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreted {
    pub said: String,
    pub command: String,
}

/// What one chat turn did, in the same terms embedded and remote (the engine's `TurnOutcome`).
#[derive(Clone, Debug, PartialEq)]
pub enum Turned {
    /// A slash command ran on the run (a refused one is [`CommandOutcome::Refused`]); `said`
    /// is the plain words it was interpreted from, when it was not typed as a command.
    Command {
        run: RunId,
        outcome: Box<CommandOutcome>,
        said: Option<Interpreted>,
    },
    /// A new run started in the session.
    Started { run: RunId },
    /// The run waits for a human: the message started nothing.
    Waiting { run: RunId },
    /// The message decided the run's pending approval: the run goes on.
    Decided { run: RunId },
}

/// A session's latest run and the approvals it waits for, as a remote turn found it: how a
/// server's answer, which names only the run, tells a new run, a decision and "still waiting"
/// apart.
struct Before {
    run: RunId,
    pending: Vec<ApprovalId>,
}

#[derive(Debug)]
pub enum Backend {
    Local(Engine),
    Remote(Client),
}

impl Backend {
    /// The server of `--server`, else an engine on the data directory (created when missing, but
    /// never shared with a running server).
    pub async fn open(data: &DataArgs, remote: &RemoteArgs) -> anyhow::Result<Backend> {
        if let Some(client) = remote.client()? {
            return Ok(Backend::Remote(client));
        }
        let store = open_or_create(&data.data)?;
        let engine = Engine::open(
            store,
            crate::domain::DomainArgs::from_env()?.settings().await?,
        )
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
            Backend::Remote(c) => format!("--server {}", c.base()),
        }
    }

    /// Where a run goes on when this CLI stops watching it.
    pub fn goes_on_where(&self) -> String {
        match self {
            Backend::Local(e) => format!(
                "the next time an engine opens {} (chronicle serve, run or chat)",
                e.store().dir().unwrap_or(Path::new(".")).display()
            ),
            Backend::Remote(c) => format!("on the server {}", c.base()),
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
                        on_reject: req.on_reject,
                        strategy: req.strategy,
                        agent: req.agent,
                        ..StartRun::default()
                    })
                    .await?;
                Ok((s.run_id, s.session_id))
            }
            Backend::Remote(client) => {
                let started = client
                    .start_run(&RunRequest {
                        hitl: req.hitl,
                        on_reject: req.on_reject,
                        strategy: req.strategy,
                        session_id: req.session.map(|s| s.0),
                        agent: req.agent,
                        ..RunRequest::new(req.query)
                    })
                    .await?;
                Ok((started.run_id, started.session_id))
            }
        }
    }

    /// Every event of `run` from `from_seq`: history, then live, with the live chunks of the
    /// run's model answers from now on between them. The remote stream ends after `run.end` /
    /// `run.error`; the embedded one when the engine stops.
    pub async fn events(&self, run: RunId, from_seq: u64) -> anyhow::Result<Events> {
        match self {
            Backend::Local(engine) => {
                let events = engine.subscribe_live(run, from_seq)?;
                Ok(Box::pin(events.map(|item| {
                    Ok(match item? {
                        Live::Event(env) => StreamItem::Event(StreamEvent {
                            id: env.seq,
                            name: wire_names(&env.event).0.to_owned(),
                            data: event_data(&env),
                        }),
                        Live::Chunk(chunk) => StreamItem::Chunk(chunk.data.clone()),
                    })
                })))
            }
            Backend::Remote(client) => {
                let stream = client.run_events(run, EventsFrom::seq(from_seq)).await?;
                Ok(Box::pin(
                    stream
                        .into_item_stream()
                        .map(|e| e.map_err(anyhow::Error::from)),
                ))
            }
        }
    }

    /// The run's projected state now.
    pub async fn state(&self, run: RunId) -> anyhow::Result<RunState> {
        match self {
            Backend::Local(engine) => Ok(engine.state(run, None)?),
            Backend::Remote(client) => Ok(client.state(run, None).await?),
        }
    }

    /// Waits until the run needs nothing but a human or has ended (the engine's
    /// `wait_settled`; remotely, the same test on polled state).
    pub async fn settled(&self, run: RunId) -> anyhow::Result<RunState> {
        let timeout = Duration::from_millis(SETTLE_TIMEOUT_MS);
        match self {
            Backend::Local(engine) => Ok(engine.wait_settled(run, timeout).await?),
            Backend::Remote(client) => {
                let deadline = tokio::time::Instant::now() + timeout;
                loop {
                    // The status is cheap; the whole state only when the run may have settled.
                    if client.status(run).await?.state != RunStatus::Running {
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

    /// One chat turn in `session`: `text` goes through the engine's chat-turn policy (a
    /// `/command` on the session's latest run, an answer to the approval it waits for, or a
    /// query that starts a run), embedded as the local principal or as `POST /chat`.
    pub async fn turn(
        &self,
        session: &SessionId,
        text: &str,
        opts: TurnOpts,
    ) -> anyhow::Result<Turned> {
        match self {
            Backend::Local(engine) => local_turn(engine, session, text, opts).await,
            Backend::Remote(client) => remote_turn(client, session, text, opts).await,
        }
    }

    /// The deployment's command help, when this process knows it without asking a run (the
    /// embedded engine's texts; a server's help comes with its replies).
    pub fn help(&self) -> Option<String> {
        match self {
            Backend::Local(engine) => Some(
                engine
                    .settings()
                    .texts
                    .say(chronicle_engine::texts::Text::Help),
            ),
            Backend::Remote(_) => None,
        }
    }

    /// Runs a slash command; a refused one is [`CommandOutcome::Refused`], as the engine gives it.
    pub async fn command(&self, run: RunId, text: &str) -> anyhow::Result<CommandOutcome> {
        match self {
            // A refused command is an answer, not a failure: show it as the server does.
            Backend::Local(engine) => match engine.command(run, text, &Principal::local()).await {
                Err(
                    chronicle_engine::Error::Command { reason, help }
                    | chronicle_engine::Error::CommandConflict { reason, help },
                ) => Ok(CommandOutcome::Refused {
                    error: reason,
                    help,
                }),
                other => Ok(other?),
            },
            Backend::Remote(client) => match client.command(run, text).await {
                // A conflict (the run moved meanwhile) is a refusal to show, not a failure.
                Err(chronicle_client::Error::Http { status: 409, body }) => {
                    Ok(CommandOutcome::Refused {
                        help: body.help().unwrap_or_default().to_owned(),
                        error: body.error.message,
                    })
                }
                other => Ok(other?),
            },
        }
    }

    /// Decides one approval (as the local principal, or as the server's principal of the token).
    pub async fn decide(
        &self,
        run: RunId,
        approval: &ApprovalId,
        req: DecisionRequest,
    ) -> anyhow::Result<()> {
        match self {
            Backend::Local(engine) => {
                let (decision, edited_args, comment) = req.into_parts();
                engine
                    .decide(
                        run,
                        approval.clone(),
                        decision,
                        edited_args,
                        &Principal::local(),
                        comment,
                    )
                    .await?;
            }
            Backend::Remote(client) => {
                client.decide(run, approval, &req).await?;
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

async fn local_turn(
    engine: &Engine,
    session: &SessionId,
    text: &str,
    opts: TurnOpts,
) -> anyhow::Result<Turned> {
    let turn = Turn {
        session: session.clone(),
        run: None,
        input: TurnInput::Message(text.to_owned()),
        by: Principal::local(),
        user_id: None,
        hitl: opts.hitl,
        on_reject: opts.on_reject,
        idempotency_key: None,
    };
    Ok(match engine.turn(turn).await {
        Ok(TurnOutcome::Command {
            run,
            command,
            outcome,
            said,
        }) => Turned::Command {
            run,
            outcome,
            said: said.map(|said| Interpreted { said, command }),
        },
        Ok(TurnOutcome::Started { run }) => Turned::Started { run },
        Ok(TurnOutcome::Waiting { run }) => Turned::Waiting { run },
        Ok(TurnOutcome::Decided { run, .. }) => Turned::Decided { run },
        // A refused command is an answer, not a failure (it only comes from a session's run).
        Err(
            chronicle_engine::Error::Command { reason, help }
            | chronicle_engine::Error::CommandConflict { reason, help },
        ) => {
            let Some(run) = engine.latest_run_of(&Principal::local(), session)? else {
                bail!("{reason}");
            };
            refused(run, reason, help)
        }
        Err(e) => return Err(e.into()),
    })
}

/// The session's latest run and what it waits for; `None` for a session without runs.
async fn session_now(client: &Client, session: &SessionId) -> anyhow::Result<Option<Before>> {
    match client.session(&session.0).await {
        Ok(view) => {
            let mut pending = view.state.pending_approval_ids;
            pending.sort();
            Ok(Some(Before {
                run: view.run_id,
                pending,
            }))
        }
        Err(e) if e.status() == Some(404) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `POST /chat`. The server answers a turn that started a run only once the run has settled;
/// so that the chat can stream the run's answer meanwhile, the session is watched while the
/// request is out, and a new run in it is answered as started at once (the request goes on,
/// and its answer is then not needed).
async fn remote_turn(
    client: &Client,
    session: &SessionId,
    text: &str,
    opts: TurnOpts,
) -> anyhow::Result<Turned> {
    let before = session_now(client, session).await?;
    let req = ChatRequest {
        message: text.to_owned(),
        thread_id: Some(session.0.clone()),
        user_id: None,
        hitl: opts.hitl,
        on_reject: opts.on_reject,
    };
    let mut post = tokio::spawn({
        let client = client.clone();
        async move { client.chat(&req).await }
    });
    let reply = loop {
        tokio::select! {
            reply = &mut post => break reply.context("the chat request stopped")?,
            () = tokio::time::sleep(Duration::from_millis(REMOTE_POLL_MS)) => {
                let now = session_now(client, session).await?;
                if let Some(now) = now.filter(|n| before.as_ref().is_none_or(|b| b.run != n.run)) {
                    return Ok(Turned::Started { run: now.run });
                }
            }
        }
    };
    let (run, waiting) = match reply {
        Ok(ChatReply::Command(c)) => {
            let command = c.command;
            return Ok(Turned::Command {
                run: c.run_id,
                outcome: Box::new(c.result),
                said: c.interpreted_from.map(|said| Interpreted { said, command }),
            });
        }
        Ok(ChatReply::Done(t) | ChatReply::Working(t)) => (t.run_id, None),
        Ok(ChatReply::Waiting { waiting, .. }) => {
            let mut ids: Vec<ApprovalId> = waiting.approvals.iter().map(|a| a.id.clone()).collect();
            ids.sort();
            (waiting.turn.run_id, Some(ids))
        }
        // A refused command (400 with the help) or one the run's state refused (409): an
        // answer to show, as the engine gives it embedded.
        Err(chronicle_client::Error::Http { status, body })
            if (status == 400 && body.help().is_some()) || status == 409 =>
        {
            let Some(before) = before else {
                bail!("{}", body.error.message);
            };
            let help = body.help().unwrap_or_default().to_owned();
            return Ok(refused(before.run, body.error.message, help));
        }
        Err(e) => return Err(e.into()),
    };
    Ok(match before {
        Some(b) if b.run == run && waiting.as_ref() == Some(&b.pending) => Turned::Waiting { run },
        Some(b) if b.run == run => Turned::Decided { run },
        _ => Turned::Started { run },
    })
}

fn refused(run: RunId, error: String, help: String) -> Turned {
    Turned::Command {
        run,
        outcome: Box::new(CommandOutcome::Refused { error, help }),
        said: None,
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

/// Opens the store of `run` / `chat`, creating an empty one in a new directory.
fn open_or_create(data: &Path) -> anyhow::Result<Store> {
    crate::common::open_with(
        data,
        Options::default(),
        "use --server URL, or another --data DIR",
    )
}
