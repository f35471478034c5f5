//! `execute_todo`: starting agents (a new attempt, or the interrupted attempt again after a
//! crash) and recording what they return: completion, a retry, an optional TODO skipped, or the
//! run failing.

use std::time::{Duration, Instant};

use chronicle_projections::RunState;
use chronicle_projections::trace::SpanKey;
use chronicle_schemas::{Actor, Event, Phase, SupervisorTodo, TodoId, TodoStatus};
use serde_json::Value;

use super::{RunActor, checkpoint, phase_change};
use crate::Result;
use crate::plugin::agents::{Agent, AgentContext, AgentError, AgentOutput};
use crate::plugin::hitl::{Chosen, chosen_before};
use crate::plugin::texts::Text;
use crate::runtime::actor::tool_host::AgentEnd;
use crate::runtime::mailbox::{AgentDone, Input};

/// What a person told the agent of `t` when letting it run: the edited args' `feedback` (what
/// an answer in words, `resume {response}`, records), else the decision's comment. Read from
/// the recorded decision, so a re-run of the attempt gets the same.
fn feedback_of(state: &RunState, t: &SupervisorTodo) -> Option<String> {
    Chosen::of(state, t)?.said
}

impl RunActor {
    /// What a TODO's agent runs with, and what its approval shows: a person's edit of this TODO,
    /// else the plan's input with what people chose for the TODOs it depends on carried over by
    /// the domain (`Planner::carry`). From the state alone, so a re-run gets the same.
    pub(in crate::runtime::actor) fn input_for(&self, t: &SupervisorTodo) -> Value {
        if let Some(edited) = &t.effective_input {
            return edited.clone();
        }
        let planned = t.input();
        let chosen = chosen_before(self.state(), t);
        if chosen.is_empty() {
            return planned;
        }
        self.shared.settings.planner.carry(planned, &chosen)
    }
}

/// Runs an agent with its timeout, not counting the time it spends inside tool calls (waiting
/// for a human, a sub-agent run, or a tool with its own timeout).
async fn run_with_timeout(
    agent: &dyn Agent,
    ctx: &AgentContext,
    input: Value,
    timeout_ms: u64,
) -> Result<AgentOutput, AgentError> {
    let limit = Duration::from_millis(timeout_ms);
    let started = Instant::now();
    let run = agent.run(ctx, input);
    tokio::pin!(run);
    let mut wake = tokio::time::Instant::now() + limit;
    loop {
        tokio::select! {
            out = &mut run => return out,
            _ = tokio::time::sleep_until(wake) => {
                let working = started.elapsed().saturating_sub(ctx.tools.time_in_calls());
                if working >= limit {
                    return Err(AgentError::retryable(format!("timeout after {timeout_ms} ms")));
                }
                wake = tokio::time::Instant::now() + (limit - working);
            }
        }
    }
}

impl RunActor {
    pub(super) async fn start_todos(&mut self, ids: Vec<TodoId>) -> Result<()> {
        let phase = phase_change(self.state(), Phase::Executing);
        self.launch(ids, phase, false).await
    }

    /// Agents that were running when the process stopped: the interrupted attempt again (not a
    /// new one), so the calls it repeats are answered from the log.
    pub(super) async fn rerun_todos(&mut self, ids: Vec<TodoId>) -> Result<()> {
        self.launch(ids, None, true).await
    }

    /// Records the agents' starts (after `first`) in one append, then starts them.
    async fn launch(&mut self, ids: Vec<TodoId>, first: Option<Event>, rerun: bool) -> Result<()> {
        let texts = self.shared.settings.texts.clone();
        let mut ev: Vec<Event> = first.into_iter().collect();
        let mut starts = Vec::new();
        for id in ids {
            let Some(t) = self.todo(&id) else { continue };
            let (agent, input) = (t.agent_name.clone(), self.input_for(&t));
            let (attempt, note) = if rerun {
                let attempt = t.attempts.max(1);
                (
                    attempt,
                    Text::TodoRerun {
                        todo: &id,
                        agent: &agent,
                        attempt,
                    },
                )
            } else {
                let attempt = t.attempts + 1;
                ev.push(Event::TodoStatusChanged {
                    todo_id: id.clone(),
                    from: t.status,
                    to: TodoStatus::InProgress,
                    reason: None,
                    attempt,
                    by: Actor::Engine,
                });
                (
                    attempt,
                    Text::TodoStarted {
                        todo: &id,
                        agent: &agent,
                        attempt,
                    },
                )
            };
            let message = texts.say(note);
            ev.push(Event::AgentStarted {
                todo_id: id.clone(),
                agent: agent.clone(),
                attempt,
                input: input.clone(),
            });
            ev.push(Event::Reasoning { message });
            starts.push((t, attempt, input));
        }
        self.append(ev).await?;
        // An agent that acts outside the engine starts only once its start is durable: what it
        // does is never done without a record of it.
        let registry = &self.shared.settings.registry;
        if starts
            .iter()
            .any(|(t, ..)| registry.get(&t.agent_name).is_none_or(|a| a.acts_outside()))
        {
            self.durable().await?;
        }
        for (t, attempt, input) in starts {
            self.spawn_agent(&t, attempt, input);
        }
        Ok(())
    }

    fn agent_context(&self, t: &SupervisorTodo, attempt: u32) -> AgentContext {
        let s = &self.state().supervisor;
        AgentContext {
            run_id: self.live.run_id(),
            session_id: s.session_id.clone(),
            user_id: s.user_id.clone(),
            todo_id: t.id.clone(),
            attempt,
            query: s.query.clone(),
            intent: s
                .planning_state
                .as_ref()
                .map(|p| p.analyzed_intent.clone())
                .unwrap_or(Value::Null),
            team_results: s.team_results.clone(),
            turn: crate::plugin::agents::TurnContext {
                feedback: feedback_of(self.state(), t),
                ..crate::plugin::agents::TurnContext::of(s)
            },
            tools: AgentEnd {
                tx: self.tx.clone(),
                todo_id: t.id.clone(),
                attempt,
                epoch: self.epoch,
            }
            .handle(),
            // What the agent's model writes streams to the run's subscribers, marked with the
            // TODO and the agent.
            chunks: self.shared.bus.chunk_sink(
                self.live.run_id(),
                self.state().next_seq().saturating_sub(1),
                Some(t.id.clone()),
                Some(t.agent_name.clone()),
            ),
        }
    }

    fn spawn_agent(&mut self, t: &SupervisorTodo, attempt: u32, input: Value) {
        let ctx = self.agent_context(t, attempt);
        let limit_ms = self.state().supervisor.config.limits.agent_timeout_ms;
        let timeout_ms = t
            .metadata
            .get("timeout")
            .and_then(Value::as_u64)
            // A plan step without a timeout (0) has the run's agent timeout, not 0 s.
            .filter(|&secs| secs > 0)
            .map_or(limit_ms, |secs| secs.saturating_mul(1000).min(limit_ms))
            .max(1);
        let agent = self.shared.settings.registry.get(&t.agent_name).cloned();
        let agent_name = t.agent_name.clone();
        let (tx, epoch, todo_id) = (self.tx.clone(), self.epoch, t.id.clone());
        let key = SpanKey::Agent {
            todo_id: t.id.clone(),
            attempt,
        };
        let (span, log) = self.span_context("agent", &key);
        let work = crate::plugin::trace::within(span, async move {
            tracing::debug!(agent = %agent_name, attempt, "calling the agent");
            let started = Instant::now();
            let outcome = match agent {
                None => Err(AgentError::fatal(format!("unknown agent {agent_name}"))),
                Some(agent) => run_with_timeout(agent.as_ref(), &ctx, input, timeout_ms).await,
            };
            let duration_ms = started.elapsed().as_millis() as u64;
            let done = AgentDone {
                todo_id: ctx.todo_id,
                attempt,
                epoch,
                outcome,
                duration_ms,
            };
            let _ = tx.send(Input::AgentDone(done)).await;
        });
        let handle = tokio::spawn(tracing::Instrument::instrument(work, log));
        self.running
            .insert(todo_id, (attempt, handle.abort_handle()));
    }

    /// Records an agent's outcome; one the full disk refused is delivered again later (the
    /// attempt stays running meanwhile).
    pub(in crate::runtime::actor) async fn on_agent_done_retrying(&mut self, done: AgentDone) {
        let (again, running) = (done.clone(), self.running.get(&done.todo_id).cloned());
        match self.written(async |a| a.on_agent_done(done).await).await {
            Err(e) if e.is_retryable() => {
                if let Some(r) = running {
                    self.running.insert(again.todo_id.clone(), r);
                }
                super::super::redeliver(self.tx.clone(), Input::AgentDone(again));
            }
            Err(e) => {
                tracing::error!(run = %self.live.run_id(), error = %e, "recording an agent result failed");
            }
            Ok(()) => {}
        }
    }

    async fn on_agent_done(&mut self, done: AgentDone) -> Result<()> {
        if done.epoch != self.epoch
            || self.running.get(&done.todo_id).map(|r| r.0) != Some(done.attempt)
        {
            return Ok(()); // superseded by a restore, a cancel or a newer attempt
        }
        self.running.remove(&done.todo_id);
        let Some(t) = self
            .todo(&done.todo_id)
            .filter(|t| t.status == TodoStatus::InProgress)
        else {
            return Ok(()); // skipped or changed by a human meanwhile
        };
        // Calls the agent left behind (it stopped waiting for them) do not outlive it.
        let mut ev = self.release_todo(&t.id, "engine", "the agent finished without this call");
        match done.outcome {
            Ok(out) => ev.extend(self.completed(&t, out, done.attempt, done.duration_ms)?),
            Err(err) => ev.extend(failed(&t, &err, done.attempt)),
        }
        let run_fails = ev.iter().any(|e| matches!(e, Event::RunFailed { .. }));
        self.append(ev).await?;
        // Only once the failure is recorded: an append the full disk refused leaves the run as
        // it was, so the outcome can be delivered again.
        if run_fails {
            self.cancel_sub_runs("engine", None);
            self.abort_agents();
        }
        Ok(())
    }

    fn completed(
        &self,
        t: &SupervisorTodo,
        out: AgentOutput,
        attempt: u32,
        duration_ms: u64,
    ) -> Result<Vec<Event>> {
        Ok(vec![
            Event::AgentCompleted {
                todo_id: t.id.clone(),
                agent: t.agent_name.clone(),
                attempt,
                result: self.payload(out.result)?,
                duration_ms,
            },
            Event::TodoStatusChanged {
                todo_id: t.id.clone(),
                from: TodoStatus::InProgress,
                to: TodoStatus::Completed,
                reason: None,
                attempt,
                by: Actor::Engine,
            },
            Event::Reasoning {
                message: self.shared.settings.texts.say(Text::TodoCompleted {
                    todo: &t.id,
                    agent: &t.agent_name,
                    duration_ms,
                }),
            },
            checkpoint(self.state(), "execute_todo", 1),
        ])
    }
}

/// A failed attempt: recorded, then retried while the error is retryable and retries remain;
/// else an optional TODO is skipped and a required one fails the run.
fn failed(t: &SupervisorTodo, err: &AgentError, attempt: u32) -> Vec<Event> {
    let moved = |from, to, reason: String| Event::TodoStatusChanged {
        todo_id: t.id.clone(),
        from,
        to,
        reason: Some(reason),
        attempt,
        by: Actor::Engine,
    };
    let mut ev = vec![
        Event::AgentFailed {
            todo_id: t.id.clone(),
            agent: t.agent_name.clone(),
            attempt,
            error: err.message.clone(),
            retryable: err.retryable,
        },
        moved(
            TodoStatus::InProgress,
            TodoStatus::Failed,
            err.message.clone(),
        ),
    ];
    if err.retryable && t.retry_count < t.max_retries {
        let reason = format!("retry {}/{}", t.retry_count + 1, t.max_retries);
        ev.push(moved(TodoStatus::Failed, TodoStatus::Pending, reason));
    } else if t.is_optional() {
        let reason = format!("Failed but optional: {}", err.message);
        ev.push(moved(TodoStatus::Failed, TodoStatus::Skipped, reason));
    } else {
        ev.push(Event::RunFailed {
            error: format!(
                "{} ({}) failed after {attempt} attempt(s): {}",
                t.id, t.agent_name, err.message
            ),
        });
    }
    ev
}
