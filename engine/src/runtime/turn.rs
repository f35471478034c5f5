//! A chat turn: what a message or an answer typed into a session does. One policy for every
//! chat surface (`POST /chat`, `POST /api/sessions/{id}/resume`, the WebSocket):
//!
//! - `/new <query>` starts a new run in the session, even while its latest run waits;
//! - other text starting with `/` is a slash command on the session's run;
//! - a message while that run waits for a human acts on it and starts no second run: its words
//!   are read as the command they mean ("approved" approves, "no" rejects, "분석도 추가해줘" adds
//!   a TODO — by the model when one is configured, by the domain's rules otherwise, see
//!   [`crate::said`]) and the command is carried out, recorded with the words; words that mean
//!   no command leave the run waiting, and the turn says so (the caller shows what it waits for);
//! - any other message starts a new run in the session;
//! - an answer (`approve` yes/no, or free text) decides the one pending approval of the run.
//!   Free text is first read like a message's words; text that means no command is passed to
//!   the agent as an edit of the requested args with `feedback: text`. With several approvals
//!   pending a bare answer is refused: a "yes" is never guessed.
//!
//! And one policy for a new turn on a session whose latest run still works, as a LangGraph
//! thread's `multitask_strategy` asks ([`Engine::make_room`]): refuse it, wait for the run to
//! settle, or cancel the run first.

use std::time::Duration;

use chronicle_projections::RunState;
use chronicle_schemas::{Approval, Decision, HitlMode, OnReject, RunId, RunStatus, SessionId};
use chronicle_wire::CommandOutcome;
use chronicle_wire::langgraph::MultitaskStrategy;
use serde_json::Value;

use crate::Principal;

use crate::runtime::engine::Engine;
use crate::runtime::runs::StartRun;
use crate::{Error, Result};

/// What the person typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnInput {
    /// A message (or a `/command`).
    Message(String),
    /// A yes or no to the pending approval.
    Approve(bool),
    /// Free text answering the pending approval (or a `/command`).
    Response(String),
}

/// One turn of a session.
#[derive(Clone, Debug)]
pub struct Turn {
    pub session: SessionId,
    /// The run the turn is about; the session's latest run when `None`.
    pub run: Option<RunId>,
    pub input: TurnInput,
    /// The authenticated principal.
    pub by: Principal,
    /// For a run the turn starts.
    pub user_id: Option<String>,
    pub hitl: Option<HitlMode>,
    /// What a rejection does in a run the turn starts.
    pub on_reject: Option<OnReject>,
    /// The request's `Idempotency-Key`: a retried turn whose first try started a run answers
    /// with that run, and does nothing else.
    pub idempotency_key: Option<String>,
}

/// What the turn did.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutcome {
    /// A slash command ran on the run.
    Command {
        run: RunId,
        /// The command as carried out (as typed, or as read from the words).
        command: String,
        outcome: Box<CommandOutcome>,
        /// The plain words the command was interpreted from, when it was not typed as one.
        said: Option<String>,
    },
    /// A new run started in the session.
    Started { run: RunId },
    /// The run waits for a human; the message started nothing.
    Waiting { run: RunId },
    /// The pending approval was decided.
    Decided { run: RunId, approval: Box<Approval> },
}

impl TurnOutcome {
    pub fn run(&self) -> RunId {
        match self {
            TurnOutcome::Command { run, .. }
            | TurnOutcome::Started { run }
            | TurnOutcome::Waiting { run }
            | TurnOutcome::Decided { run, .. } => *run,
        }
    }
}

/// What a new turn does to its session's latest run when that run still works (neither ended nor
/// waiting for a human).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Multitask {
    /// The new turn is refused ([`Error::SessionBusy`]).
    Reject,
    /// The new turn waits for the run to settle.
    #[default]
    Enqueue,
    /// The run is cancelled first.
    Interrupt,
    /// As [`Multitask::Interrupt`]: the run is cancelled first (its events stay in the log,
    /// which is append-only).
    Rollback,
}

impl Multitask {
    pub fn as_str(self) -> &'static str {
        match self {
            Multitask::Reject => "reject",
            Multitask::Enqueue => "enqueue",
            Multitask::Interrupt => "interrupt",
            Multitask::Rollback => "rollback",
        }
    }
}

impl From<MultitaskStrategy> for Multitask {
    fn from(s: MultitaskStrategy) -> Self {
        match s {
            MultitaskStrategy::Reject => Multitask::Reject,
            MultitaskStrategy::Enqueue => Multitask::Enqueue,
            MultitaskStrategy::Interrupt => Multitask::Interrupt,
            MultitaskStrategy::Rollback => Multitask::Rollback,
        }
    }
}

/// Whether a run in `state` still works: neither ended nor settled (waiting for a human).
fn works(state: &RunState) -> bool {
    !state.supervisor.run_status.is_terminal() && !crate::is_settled(state)
}

/// Text that is a slash command, trimmed.
fn command_text(text: &str) -> Option<&str> {
    Some(text.trim()).filter(|t| t.starts_with('/'))
}

/// The query of `/new <query>`, the one chat command that is not the run's.
fn new_run_query(text: &str) -> Option<&str> {
    let rest = text.trim().strip_prefix("/new")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

impl Engine {
    /// Carries out one turn (see the module's policy).
    pub async fn turn(&self, t: Turn) -> Result<TurnOutcome> {
        if let Some(key) = &t.idempotency_key {
            crate::runtime::runs::check_idempotency_key(key)?;
            crate::runtime::runs::check_session_id(&t.session)?;
            if let TurnInput::Message(text) = &t.input {
                crate::runtime::runs::check_query(text)?;
            }
            if let Some(started) = self.started_before(&t.by, key).await? {
                // The same turn sent again (its session and words) answers with its run.
                let same = match &t.input {
                    TurnInput::Message(text) => self.same_request(
                        started.run_id,
                        &t.session,
                        new_run_query(text).unwrap_or(text).trim(),
                    )?,
                    _ => false,
                };
                return match same {
                    true => Ok(TurnOutcome::Started {
                        run: started.run_id,
                    }),
                    false => Err(Error::IdempotencyKeyReused),
                };
            }
        }
        let run = match t.run {
            Some(run) => {
                self.authorize(&t.by, run)?;
                Some(run)
            }
            None => self.latest_run_of(&t.by, &t.session)?,
        };
        // A message is held to a query's rules whether it turns out to be one or a command, so
        // that what a chat surface takes does not depend on the session's state.
        if let TurnInput::Message(text) = &t.input {
            crate::runtime::runs::check_query(text)?;
            if let Some(query) = new_run_query(text) {
                let query = query.to_owned();
                return self.start_in_session(t, query).await;
            }
        }
        let text = match &t.input {
            TurnInput::Message(text) | TurnInput::Response(text) => command_text(text),
            TurnInput::Approve(_) => None,
        };
        if let Some(text) = text {
            let run = run.ok_or_else(|| Error::SessionNotFound(t.session.to_string()))?;
            let outcome = Box::new(self.command(run, text, &t.by).await?);
            return Ok(TurnOutcome::Command {
                run,
                command: text.to_owned(),
                outcome,
                said: None,
            });
        }
        match t.input.clone() {
            TurnInput::Message(text) => match self.waiting(run)? {
                Some(run) => Ok(self
                    .said(run, &text, &t.by)
                    .await?
                    .unwrap_or(TurnOutcome::Waiting { run })),
                None => self.start_in_session(t, text).await,
            },
            TurnInput::Approve(yes) => {
                let decision = if yes {
                    Decision::Approve
                } else {
                    Decision::Reject
                };
                self.answer(run, &t.session, decision, None, &t.by).await
            }
            TurnInput::Response(text) => {
                if let Some(run) = self.waiting(run)?
                    && let Some(outcome) = self.said(run, &text, &t.by).await?
                {
                    return Ok(outcome);
                }
                self.answer(run, &t.session, Decision::Edit, Some(text), &t.by)
                    .await
            }
        }
    }

    /// Makes room for a new turn after `latest` (the state of the turn it follows, as the caller
    /// read it) as `multitask` says, when that run still works: refuse, wait for it to settle
    /// (at most `wait`), or cancel it, by `who`. Nothing to do for a run that ended or waits for
    /// a human.
    pub async fn make_room(
        &self,
        latest: &RunState,
        multitask: Multitask,
        wait: Duration,
        who: &Principal,
    ) -> Result<()> {
        if !works(latest) {
            return Ok(());
        }
        let run = latest.run_id.unwrap_or_default();
        match multitask {
            Multitask::Reject => Err(Error::SessionBusy {
                session: latest.supervisor.session_id.to_string(),
                run,
            }),
            Multitask::Enqueue => self.wait_settled(run, wait).await.map(drop),
            Multitask::Interrupt | Multitask::Rollback => {
                let reason = format!("a new run on the thread ({})", multitask.as_str());
                self.cancel(run, who, Some(reason)).await
            }
        }
    }

    /// The newest run of a session `who` may see; `None` for a session with no runs, and
    /// [`Error::SessionNotFound`] for someone else's or a deleted one (existence is not
    /// disclosed).
    pub fn latest_run_of(&self, who: &Principal, session: &SessionId) -> Result<Option<RunId>> {
        Ok(self.session_runs_of(who, session)?.last().copied())
    }

    /// `run` when it waits for a human.
    fn waiting(&self, run: Option<RunId>) -> Result<Option<RunId>> {
        match run {
            Some(run)
                if self.state(run, None)?.supervisor.run_status
                    == RunStatus::WaitingForApproval =>
            {
                Ok(Some(run))
            }
            _ => Ok(None),
        }
    }

    /// Plain words to a waiting run: the command they mean, carried out; `None` when they mean
    /// none.
    async fn said(&self, run: RunId, text: &str, by: &Principal) -> Result<Option<TurnOutcome>> {
        Ok(self
            .say(run, text.trim(), by)
            .await?
            .map(|(command, outcome)| TurnOutcome::Command {
                run,
                command,
                outcome: Box::new(outcome),
                said: Some(text.trim().to_owned()),
            }))
    }

    async fn start_in_session(&self, t: Turn, query: String) -> Result<TurnOutcome> {
        let start = StartRun {
            by: t.by,
            query,
            session_id: Some(t.session),
            user_id: t.user_id,
            hitl: t.hitl,
            on_reject: t.on_reject,
            idempotency_key: t.idempotency_key,
            ..StartRun::default()
        };
        let started = self.start_run(start).await?;
        Ok(TurnOutcome::Started {
            run: started.run_id,
        })
    }

    /// Decides the run's one pending approval; `feedback` edits its requested args.
    async fn answer(
        &self,
        run: Option<RunId>,
        session: &SessionId,
        decision: Decision,
        feedback: Option<String>,
        by: &Principal,
    ) -> Result<TurnOutcome> {
        let run = run.ok_or_else(|| Error::SessionNotFound(session.to_string()))?;
        let state = self.state(run, None)?;
        let mut pending = state.approvals.pending();
        let one = pending.next().cloned().ok_or(Error::NothingPending)?;
        let more: Vec<String> = pending.map(|a| a.approval_id.to_string()).collect();
        if !more.is_empty() {
            let ids = std::iter::once(one.approval_id.to_string())
                .chain(more)
                .collect();
            return Err(Error::SeveralPending(ids));
        }
        let edited = feedback.map(|text| {
            let mut args = match one.request_args.clone() {
                Value::Object(m) => m,
                _ => Default::default(),
            };
            args.insert("feedback".into(), Value::String(text));
            Value::Object(args)
        });
        let approval = self
            .decide(run, one.approval_id, decision, edited, by, None)
            .await?;
        Ok(TurnOutcome::Decided {
            run,
            approval: Box::new(approval),
        })
    }
}
