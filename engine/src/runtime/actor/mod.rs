//! The run actor: one tokio task per active run that owns the run's state. It decides the next
//! step from the projected state ([`step::next_step`], a pure function), performs it
//! ([`nodes`]), appends the resulting events with `expected_seq` (through `LiveRun`), and applies
//! them. Everything else that happens to the run arrives as an [`Input`] on its one mailbox —
//! requests ([`commands`], decisions, restores, cancels), agents' tool and model calls
//! ([`tool_host`]) and the outcomes of the agents and tool executions it started — so a run never
//! races with itself.
//!
//! Every node appends its events in one append (one atomic batch): a crash keeps a node's events
//! all or none, so recovery simply decides the next step again from what is stored. (With a model
//! configured, the phase change announcing a model call goes first, on its own: see `nodes`.)
//!
//! The run's own steps, and the outcomes of its agents, are only *written* (`append_written`):
//! they need no barrier of their own, because nothing outside the run has seen them yet, and a
//! crash that loses them is a crash before them (recovery decides the same steps again). The run
//! waits for durability ([`RunActor::durable`]) only where something outside acts on what it
//! wrote: before it starts an agent that acts outside the engine, before a model call, and before
//! it answers a request (requests append durably). Readers see only durable events. So the
//! barriers of a run's steps are shared, with each other and with other runs.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chronicle_projections::RunState;
use chronicle_projections::trace::{self, SpanKey, TraceParent};
use chronicle_schemas::{
    Envelope, Event, Payload, RunId, SupervisorTodo, Timestamp, TodoId, ToolCallId,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::runtime::cluster::Mark;
use crate::runtime::mailbox::{Input, Waiter};
use crate::runtime::shared::Shared;
use crate::store::{self, LiveRun, StorageHealth};
use crate::{Error, Result};

pub mod commands;
mod decide;
mod expiry;
mod forget;
mod nodes;
mod restore;
pub(crate) mod step;
#[cfg(test)]
mod tests;
mod tool_host;
mod values;

use step::{Running, Step};

/// How long a run waits before retrying a step the full disk refused.
const STORAGE_FULL_RETRY: Duration = Duration::from_millis(500);

/// Where [`RunActor::progress`] left the run.
enum Progress {
    /// Nothing more to do until an input or a timer.
    Waiting,
    /// The disk is full: steps and outcomes wait for space.
    Full,
    /// The store cannot be used any more, for this reason.
    Stop(store::Error),
}

/// Steps one `advance` may take before it gives up: a run that keeps finding work without
/// waiting has a bug, and must not spin forever.
const STEPS_PER_ADVANCE_MAX: usize = 10_000;

pub(crate) struct RunActor {
    shared: Arc<Shared>,
    live: LiveRun,
    /// The actor's own mailbox, for the agents and tool executions it starts.
    tx: mpsc::Sender<Input>,
    /// Bumped by every restore and cancel: outcomes of work started before are discarded.
    epoch: u64,
    /// Agents running now: TODO → attempt, and how to stop them.
    running: HashMap<TodoId, (u32, AbortHandle)>,
    /// Outcomes that arrived while the disk was full; handled once there may be space.
    deferred: VecDeque<Input>,
    /// Calls waiting for a human, by tool call.
    parked: HashMap<ToolCallId, Waiter>,
    /// Tool executions in flight, with the TODO whose agent made the call.
    tool_tasks: HashMap<ToolCallId, (TodoId, AbortHandle)>,
    /// Model calls in flight, by the TODO whose agent made them and their position.
    model_tasks: HashMap<(TodoId, u32), AbortHandle>,
    /// Appends are only written, not waited durable: set while the run takes its own steps and
    /// records its agents' outcomes (see the module documentation).
    write_only: bool,
    /// Answers to requests whose events were only written: sent once they are durable (see
    /// [`RunActor::durable`]), so a decision and the steps it unblocks share one barrier.
    acks: Vec<Ack>,
    /// Those waiting for the run to settle ([`Input::Settled`]).
    settled: Vec<oneshot::Sender<Result<RunState>>>,
}

/// Sends a request's answer once its events are durable, or the store's error.
type Ack = Box<dyn FnOnce(std::result::Result<(), store::Error>) + Send + Sync>;

/// Starts the actor of a run on its state and mailbox (the engine's
/// [`SpawnActor`](crate::runtime::shared::SpawnActor)).
pub(crate) fn spawn(
    shared: Arc<Shared>,
    live: LiveRun,
    tx: mpsc::Sender<Input>,
    rx: mpsc::Receiver<Input>,
) {
    let tasks = shared.tasks.clone();
    let stopped = Stopped {
        shared: shared.clone(),
        run: live.run_id(),
        tx: tx.clone(),
    };
    let actor = RunActor {
        shared,
        live,
        tx,
        epoch: 0,
        running: HashMap::new(),
        deferred: VecDeque::new(),
        parked: HashMap::new(),
        tool_tasks: HashMap::new(),
        model_tasks: HashMap::new(),
        write_only: false,
        acks: Vec::new(),
        settled: Vec::new(),
    };
    // What the actor calls itself (a planner's model) is part of the run's span.
    let (root, log) = actor.span_context("run", &SpanKey::Run);
    tasks.spawn(tracing::Instrument::instrument(
        crate::plugin::trace::within(root, async move {
            actor.run(rx).await;
            drop(stopped);
        }),
        log,
    ));
}

/// Forgets the actor's mailbox when the actor stops, however it stops (a panic too): dropped
/// after the actor's receiver, so a caller that finds the mailbox closed starts a new actor.
struct Stopped {
    shared: Arc<Shared>,
    run: RunId,
    tx: mpsc::Sender<Input>,
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.shared.actor_stopped(self.run, &self.tx);
    }
}

pub(crate) fn now() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0),
    )
}

/// Sends an outcome the full disk refused back to the actor after [`STORAGE_FULL_RETRY`].
fn redeliver(tx: mpsc::Sender<Input>, input: Input) {
    tokio::spawn(async move {
        tokio::time::sleep(STORAGE_FULL_RETRY).await;
        let _ = tx.send(input).await;
    });
}

async fn sleep_until(t: Option<Timestamp>) {
    let wait_us = t.map_or(0, |t| (t.as_micros() - now().as_micros()).max(0)) as u64;
    tokio::time::sleep(Duration::from_micros(wait_us)).await;
}

impl RunActor {
    fn state(&self) -> &RunState {
        self.live.state()
    }

    /// The work of span `key` of this run (`kind` says what it is): its trace context, which
    /// its calls out name as their parent, and the span of the process's log lines for it, which
    /// carry the run id and the trace's ids so that logs and traces join.
    fn span_context(&self, kind: &'static str, key: &SpanKey) -> (TraceParent, tracing::Span) {
        let run = self.live.run_id();
        let t = trace::traceparent_of(run, self.state().supervisor.traceparent.as_deref(), key);
        let log = tracing::info_span!(
            "work",
            kind,
            run_id = %run,
            trace_id = %t.trace_id,
            span_id = %t.span_id
        );
        (t, log)
    }

    fn storage_full(&self) -> bool {
        matches!(self.shared.store.health(), StorageHealth::Full { .. })
    }

    async fn append(&mut self, events: Vec<Event>) -> Result<Vec<Envelope>> {
        // The session's tombstone is a run's last event, whatever asks to write after it: reads
        // decide that a run is deleted from its last event.
        if self.state().supervisor.session_deleted {
            return Err(Error::RunNotFound(self.live.run_id()));
        }
        let appended = if self.write_only {
            self.live.append_written(events).await
        } else {
            self.live.append(events).await
        };
        match appended {
            Err(store::Error::Conflict { .. }) => {
                // Someone else wrote to this run (an actor being replaced): start from the log,
                // once what this run wrote is durable (answers may be waiting on it).
                self.live.durable().await?;
                self.live = self.shared.store.load_async(self.live.run_id()).await?;
                Err(Error::Concurrent)
            }
            other => Ok(other?),
        }
    }

    /// Waits until everything the run wrote is durable: before something outside the run acts
    /// on it. The answers waiting for it are sent then.
    async fn durable(&mut self) -> Result<()> {
        let done = self.live.durable().await;
        for ack in self.acks.drain(..) {
            ack(done.as_ref().map(drop).map_err(store::Error::same_again));
        }
        Ok(done?)
    }

    /// Runs `f` with appends only written (see the module documentation).
    async fn written<T>(&mut self, f: impl AsyncFnOnce(&mut Self) -> T) -> T {
        self.write_only = true;
        let r = f(self).await;
        self.write_only = false;
        r
    }

    /// The agents running now, as [`step::next_step`] sees them.
    fn running(&self) -> Running {
        self.running
            .iter()
            .map(|(todo, (attempt, _))| (todo.clone(), *attempt))
            .collect()
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Input>) {
        tracing::debug!(next_seq = self.state().next_seq(), "driving the run");
        let shutdown = self.shared.shutdown.clone();
        loop {
            // While the disk is full no step runs (it could not record what it did, and a step
            // may call a model) and outcomes wait; requests are still answered (their writes are
            // refused with the full-disk error), and a timer looks again.
            let mut full = self.storage_full();
            let mut stop = None;
            if !full {
                match self.progress().await {
                    Progress::Waiting => {}
                    // The step's write was refused and wrote nothing (a full disk, a database
                    // out of reach): it runs again after a while.
                    Progress::Full => full = true,
                    // The store is unusable (closing or broken): stop; recovery resumes the run.
                    Progress::Stop(e) => stop = Some(e),
                }
            }
            if !self.acks.is_empty() {
                // Errors reach the waiting requests; the next step sees the store's state.
                let _ = self.durable().await;
            }
            if !self.settled.is_empty() && crate::runtime::runs::is_settled(self.state()) {
                self.answer_settled().await;
            }
            if let Some(e) = stop {
                for reply in self.settled.drain(..) {
                    let _ = reply.send(Err(e.same_again().into()));
                }
                return;
            }
            let expiry = self.next_expiry();
            let deadline = self.run_deadline();
            let ended = self.state().supervisor.run_status.is_terminal() && self.running.is_empty();
            // A timer that is due fires first (an approval that expired while nobody held the
            // run is expired now).
            let due = [expiry, deadline]
                .into_iter()
                .flatten()
                .any(|t| t.as_micros() <= now().as_micros());
            if ended || (!full && !due && self.parks()) {
                // Answer what is already queued (commands on a finished run), then stop, and
                // leave the state for the run's next actor.
                match rx.try_recv() {
                    Ok(input) => {
                        self.on_input(input, false).await;
                        continue;
                    }
                    Err(_) => {
                        if let Some(cluster) = &self.shared.cluster {
                            let mark = match ended {
                                true => Mark::Ended,
                                false => Mark::Parked(expiry.into_iter().chain(deadline).min()),
                            };
                            let session = self.state().supervisor.session_id.clone();
                            cluster.stopped(session.as_str(), self.live.run_id(), mark);
                        }
                        self.shared.idle.keep(self.live);
                        return;
                    }
                }
            }
            tokio::select! {
                input = rx.recv() => match input {
                    Some(input) => self.on_input(input, full).await,
                    None => return,
                },
                // Past the run timeout: the next step fails the run and aborts its agents.
                _ = sleep_until(deadline), if deadline.is_some() => {}
                _ = sleep_until(expiry), if expiry.is_some() => {
                    if let Err(e) = self.expire_due().await {
                        tracing::error!(run = %self.live.run_id(), error = %e, "expiring approvals failed");
                    }
                    self.resume_parked_logged().await;
                }
                _ = tokio::time::sleep(STORAGE_FULL_RETRY), if full => {}
                _ = shutdown.cancelled() => {
                    self.abort_agents();
                    return;
                }
            }
        }
    }

    /// On a node of a cluster, a run that only waits for a person, with nothing in flight and
    /// everything durable, stops its actor: its session can then be released, and the run holds
    /// nothing on any node until an input or its next timer.
    fn parks(&self) -> bool {
        self.shared.cluster.is_some()
            && crate::runtime::runs::is_settled(self.state())
            && self.running.is_empty()
            && self.tool_tasks.is_empty()
            && self.model_tasks.is_empty()
            && self.parked.is_empty()
            && self.deferred.is_empty()
            && self.acks.is_empty()
            && self.settled.is_empty()
            && self.live.is_durable()
    }

    /// Answers those waiting for the run to settle with its state, once what it wrote is
    /// durable: the state a reader would see, without a second fold of the run for them.
    async fn answer_settled(&mut self) {
        let done = self.live.durable().await;
        for reply in self.settled.drain(..) {
            if reply.is_closed() {
                continue;
            }
            let answer = match &done {
                Ok(()) => Ok(self.live.state().clone()),
                Err(e) => Err(e.same_again().into()),
            };
            let _ = reply.send(answer);
        }
    }

    /// The outcomes that waited for space, then steps until the run must wait.
    async fn progress(&mut self) -> Progress {
        while let Some(input) = self.deferred.pop_front() {
            self.on_input(input, false).await;
            if self.storage_full() {
                return Progress::Full;
            }
        }
        match self.advance().await {
            Ok(()) => Progress::Waiting,
            Err(e) => {
                tracing::error!(run = %self.live.run_id(), error = %e, "run step failed");
                match e {
                    e if e.is_retryable() => Progress::Full,
                    Error::Store(e) => Progress::Stop(e),
                    _ => Progress::Waiting,
                }
            }
        }
    }

    /// Performs steps until the run has to wait for something; they are only written.
    /// Then asks for a barrier, which the run does not wait for.
    async fn advance(&mut self) -> Result<()> {
        let done = self.written(Self::steps).await;
        self.live.request_barrier();
        done
    }

    async fn steps(&mut self) -> Result<()> {
        for _ in 0..STEPS_PER_ADVANCE_MAX {
            let step = step::next_step(self.state(), &self.running(), now());
            if step == Step::Wait {
                return Ok(());
            }
            self.perform(step).await?;
        }
        Err(Error::Unsettled(STEPS_PER_ADVANCE_MAX))
    }

    async fn on_input(&mut self, input: Input, full: bool) {
        if full && input.is_outcome() {
            self.deferred.push_back(input);
            return;
        }
        let run = self.live.run_id();
        match input {
            Input::Decide {
                approval_id,
                decision,
                edited_args,
                by,
                comment,
                reply,
            } => {
                // Answered once durable, together with the steps the decision unblocks (the
                // next agent's start): one barrier for both.
                let decided = self
                    .written(async |a| {
                        a.decide(&approval_id, decision, edited_args, &by, comment, vec![])
                            .await
                    })
                    .await;
                match decided {
                    Ok(answer) => self.acks.push(Box::new(move |durable| {
                        let _ = reply.send(durable.map(|()| answer).map_err(Error::from));
                    })),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
                self.resume_parked_logged().await;
            }
            Input::Command { text, by, reply } => {
                let r = self.command(&text, &by).await;
                let _ = reply.send(r);
                self.resume_parked_logged().await;
            }
            Input::Say { text, by, reply } => {
                let r = self.say(&text, &by).await;
                let _ = reply.send(r);
                self.resume_parked_logged().await;
            }
            Input::Restore { target, by, reply } => {
                let r = self.restore(target, &by, vec![]).await;
                let _ = reply.send(r);
                self.resume_parked_logged().await;
            }
            Input::Cancel { by, reason, reply } => {
                let _ = reply.send(self.cancel(&by, reason).await);
            }
            Input::DeleteSession { by, reply } => {
                let _ = reply.send(self.delete_session(&by).await);
            }
            Input::Forget {
                memory_id,
                by,
                reply,
            } => {
                let _ = reply.send(self.forget(&memory_id, &by).await);
            }
            Input::UpdateValues {
                values,
                as_node,
                by,
                reply,
            } => {
                let _ = reply.send(self.update_values(values, as_node, &by).await);
            }
            Input::Settled { reply } => {
                // Answered where the run waits (see `run`); a waiter that gave up is forgotten.
                self.settled.retain(|r| !r.is_closed());
                self.settled.push(reply);
            }
            Input::ToolCall(call) => {
                if let Err(e) = self.on_tool_call(call).await {
                    tracing::error!(%run, error = %e, "recording a tool call failed");
                }
            }
            Input::ToolDone(done) => {
                if let Err(e) = self.on_tool_done(done).await {
                    tracing::error!(%run, error = %e, "recording a tool result failed");
                }
            }
            Input::ModelCall(call) => {
                if let Err(e) = self.on_model_call(call).await {
                    tracing::error!(%run, error = %e, "taking a model call failed");
                }
            }
            Input::ModelDone(done) => {
                if let Err(e) = self.on_model_done(done).await {
                    tracing::error!(%run, error = %e, "recording a model call failed");
                }
            }
            Input::AgentDone(done) => self.on_agent_done_retrying(done).await,
        }
    }

    async fn cancel(&mut self, by: &str, reason: Option<String>) -> Result<()> {
        let status = self.state().supervisor.run_status;
        if status.is_terminal() {
            return Err(Error::RunFinished {
                run: self.live.run_id(),
                status,
            });
        }
        let cancelled = self.stop(by, reason);
        self.append(vec![cancelled]).await.map(drop)
    }

    /// Stops the run's sub-agent runs, agents and tool executions; returns the event that
    /// records the cancel.
    fn stop(&mut self, by: &str, reason: Option<String>) -> Event {
        self.cancel_sub_runs(by, None);
        self.abort_agents();
        Event::RunCancelled {
            by: chronicle_schemas::Actor::user(by),
            reason,
        }
    }

    /// Records the session's tombstone as the run's last event, in one append with the cancel
    /// when the run is still going (a crash keeps both or neither). Replies whether it
    /// cancelled; a run that already has its tombstone is [`Error::RunNotFound`], as for every
    /// other request.
    async fn delete_session(&mut self, by: &str) -> Result<bool> {
        let run = self.live.run_id();
        let sup = &self.state().supervisor;
        if sup.session_deleted {
            return Err(Error::RunNotFound(run));
        }
        let facts = crate::runtime::shared::RunFacts {
            owner: sup.owner.clone(),
            user_id: sup.user_id.clone(),
            child: sup.parent.is_some(),
            deleted: true,
        };
        let mut events = Vec::with_capacity(2);
        let going = !sup.run_status.is_terminal();
        if going {
            events.push(self.stop(by, Some("the session was deleted".into())));
        }
        events.push(Event::SessionDeleted {
            by: chronicle_schemas::Actor::user(by),
        });
        self.append(events).await?;
        self.shared.mark_deleted(run, facts);
        Ok(going)
    }

    /// Stops every agent and tool execution of the run; their late outcomes are discarded.
    fn abort_agents(&mut self) {
        self.epoch += 1;
        for (_, (_, h)) in self.running.drain() {
            h.abort();
        }
        for (_, (_, h)) in self.tool_tasks.drain() {
            h.abort();
        }
        self.abort_model_calls(None);
        self.parked.clear();
    }

    /// A TODO added after planning (by a person, or by an evaluation's retry round), with what
    /// its agent declares.
    fn new_todo(&self, index: usize, agent: &str, deps: Vec<TodoId>) -> SupervisorTodo {
        let settings = &self.shared.settings;
        let (team, category) = crate::runtime::todo::declared(&settings.registry, agent, "");
        SupervisorTodo {
            id: TodoId(format!("todo_{:03}", index + 1)),
            name: settings
                .texts
                .say(crate::plugin::texts::Text::AddedTodoName { agent }),
            description: settings
                .texts
                .say(crate::plugin::texts::Text::AddedTodoDescription { agent }),
            agent_name: agent.to_owned(),
            team,
            category,
            agent_purpose: settings
                .registry
                .get(agent)
                .map(|a| a.purpose().to_owned())
                .unwrap_or_default(),
            dependencies: deps,
            created_at: now(),
            max_retries: self.state().supervisor.config.max_retries,
            ..SupervisorTodo::default()
        }
    }

    fn todo(&self, id: &TodoId) -> Option<SupervisorTodo> {
        self.state()
            .supervisor
            .planning_state
            .as_ref()?
            .todo(id)
            .cloned()
    }

    /// Large results go to a blob; the event keeps the reference.
    fn payload(&self, v: Value) -> Result<Payload> {
        let bytes = serde_json::to_vec(&v).map_err(|e| Error::Decode(e.to_string()))?;
        if bytes.len() <= self.shared.settings.inline_payload_bytes_max {
            Ok(Payload::Inline(v))
        } else {
            Ok(Payload::Blob(self.shared.store.put_blob(&bytes)?))
        }
    }
}
