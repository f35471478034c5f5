//! An agent's model calls, durable like its tool calls. A call arrives as an input with its
//! position in the attempt; one the log holds at that position for the same request is answered
//! from the log (the model is never asked the same thing twice); otherwise the actor asks the
//! model in a task of its own, records `LlmCalled` (the request's hash, the whole answer, token
//! usage, duration) with a checkpoint, and only then answers the agent.
//!
//! Before every call the host puts the memory files, the user's long-term memory as the turn
//! loaded it, and the skills (names and descriptions) into
//! the system prompt, read afresh so that an edit shows at the next turn; their hashes are
//! recorded with the call. They are not part of the request's hash: a re-execution is answered
//! from the log whatever the files hold now.
//!
//! Before a call of the agent that drives the run, the host adds what a person changed in the
//! agent's TODO list since the model last heard of it, as a user message; the text is recorded
//! with the call, so a re-execution adds the same.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chronicle_projections::trace::SpanKey;
use chronicle_schemas::{
    Event, LoadedFile, ModelTurn, ModelTurnState, Payload, SupervisorTodo, TodoId, TodoStatus,
};
use serde_json::Value;

use crate::plugin::agents::{memory_files, skills};
use crate::plugin::llm::{
    CALL_TIMEOUT_MS_MAX, ChatResponse, Delta, LlmError, Message, request_hash,
};
use crate::plugin::tools::{ModelReply, ToolError, Workspace};
use crate::runtime::actor::RunActor;
use crate::runtime::actor::nodes::checkpoint;
use crate::runtime::mailbox::{Input, ModelCallMsg, ModelDone, ModelWaiter};
use crate::{Error, Result};

/// The files an agent's system prompt is completed with.
struct ContextFiles {
    workspace: Workspace,
    skills_dir: Option<PathBuf>,
    memory_dir: Option<PathBuf>,
    /// The user's long-term memory as the turn loaded it.
    user: Vec<chronicle_schemas::Memory>,
}

impl ContextFiles {
    /// The prompt's memory and skills parts, and what they were read from. A workspace that
    /// cannot be read adds nothing (the agent's own tools will say why).
    fn load(self) -> (String, Vec<LoadedFile>) {
        let mut memories =
            memory_files::load(self.memory_dir.as_deref(), &self.workspace).unwrap_or_default();
        memories.extend(memory_files::of_user(&self.user));
        let found = skills::load(self.skills_dir.as_deref(), &self.workspace).unwrap_or_default();
        for problem in &found.problems {
            tracing::warn!(%problem, "a skill is left out");
        }
        let loaded = memories
            .iter()
            .map(|m| LoadedFile {
                source: m.source.clone(),
                hash: m.hash,
            })
            .chain(found.skills.iter().map(|s| LoadedFile {
                source: s.path.clone(),
                hash: s.hash,
            }))
            .collect();
        let prompt = [
            memory_files::prompt(&memories),
            skills::prompt(&found.skills),
        ]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
        (prompt, loaded)
    }
}

/// Bytes of a notice kept: it is recorded with the call.
const NOTICE_BYTES_MAX: usize = 4 * 1024;

impl RunActor {
    pub(in crate::runtime::actor) async fn on_model_call(
        &mut self,
        call: ModelCallMsg,
    ) -> Result<()> {
        let ModelCallMsg {
            todo_id,
            attempt,
            epoch,
            index,
            request,
            chunks,
            reply,
        } = call;
        let waiter = ModelWaiter { reply };
        if epoch != self.epoch || self.running.get(&todo_id).map(|r| r.0) != Some(attempt) {
            waiter.answer(Err(ToolError::Refused(
                "the agent's attempt is over (restored, cancelled or skipped); the model was not asked"
                    .into(),
            )));
            return Ok(());
        }
        let prompt_hash = request_hash(&request);
        let recorded = self
            .state()
            .supervisor
            .model_turns
            .iter()
            .rev()
            .find(|m| m.todo_id == todo_id && m.attempt == attempt && m.index == index)
            .cloned();
        if let Some(turn) = recorded {
            if turn.prompt_hash == prompt_hash {
                waiter.answer(self.recorded_turn(&turn)?);
                return Ok(());
            }
            tracing::warn!(
                run = %self.live.run_id(), todo = %todo_id, attempt, index,
                "the agent's model request differs from the recorded one at its position; asked anew"
            );
        }
        let Some(provider) = self.shared.settings.llm.clone() else {
            waiter.answer(Err(ToolError::Refused(
                "no model is configured (set CHRONICLE_LLM_BASE_URL or CHRONICLE_LLM_API_KEY)"
                    .into(),
            )));
            return Ok(());
        };
        let (notice, plan_edits_seen) = match self.todo(&todo_id) {
            Some(t) => self.plan_notice(&t),
            None => (None, 0),
        };
        let mut request = request;
        if let Some(text) = &notice {
            request.messages.push(Message::User {
                content: text.clone(),
            });
        }
        let model = request
            .model
            .clone()
            .unwrap_or_else(|| provider.model().to_owned());
        let (tx, key) = (self.tx.clone(), (todo_id.clone(), index));
        let files = self.context_files();
        let span_key = SpanKey::Model {
            todo_id: todo_id.clone(),
            attempt,
            index,
        };
        let (span, log) = self.span_context("model", &span_key);
        let work = crate::plugin::trace::within(span, async move {
            let started = Instant::now();
            let (prompt, loaded) = tokio::task::spawn_blocking(move || files.load())
                .await
                .unwrap_or_default();
            if let Some(Message::System { content }) = request.messages.first_mut()
                && !prompt.is_empty()
            {
                content.push_str("\n\n");
                content.push_str(&prompt);
            }
            let on_delta = |d: Delta<'_>| chunks.send(d);
            let outcome = tokio::time::timeout(
                Duration::from_millis(CALL_TIMEOUT_MS_MAX),
                provider.complete(&request, &on_delta),
            )
            .await
            .unwrap_or(Err(LlmError::Timeout(CALL_TIMEOUT_MS_MAX)))
            .map_err(|e| e.to_string());
            let done = ModelDone {
                todo_id,
                attempt,
                epoch,
                index,
                prompt_hash,
                model,
                notice,
                plan_edits_seen,
                loaded,
                outcome,
                duration_ms: started.elapsed().as_millis() as u64,
                waiter,
            };
            let _ = tx.send(Input::ModelDone(done)).await;
        });
        let task = tokio::spawn(tracing::Instrument::instrument(work, log));
        self.model_tasks.insert(key, task.abort_handle());
        Ok(())
    }

    pub(in crate::runtime::actor) async fn on_model_done(&mut self, done: ModelDone) -> Result<()> {
        self.model_tasks.remove(&(done.todo_id.clone(), done.index));
        if done.epoch != self.epoch || self.shared.shutdown.is_cancelled() {
            return Ok(()); // restored or cancelled meanwhile, or stopping: asked again later
        }
        let agent = match self.todo(&done.todo_id) {
            Some(t)
                if t.status == TodoStatus::InProgress
                    && self.running.get(&t.id).map(|r| r.0) == Some(done.attempt) =>
            {
                t.agent_name
            }
            _ => return Ok(()), // the agent was stopped meanwhile
        };
        let events = match self.turn_events(&done, &agent) {
            Ok(ev) => ev,
            Err(e) => {
                done.waiter
                    .answer(Err(ToolError::Failed(format!("recording the answer: {e}"))));
                return Err(e);
            }
        };
        match self.append(events).await {
            // Nothing was recorded: deliver the outcome again once there may be space.
            Err(e) if e.is_retryable() => {
                crate::runtime::actor::redeliver(self.tx.clone(), Input::ModelDone(done));
                Ok(())
            }
            Err(e) => Err(e),
            Ok(_) => {
                let answer = match done.outcome {
                    Ok(response) => Ok(ModelReply {
                        response,
                        notice: done.notice,
                        replayed: false,
                    }),
                    Err(e) => Err(ToolError::Failed(e)),
                };
                done.waiter.answer(answer);
                Ok(())
            }
        }
    }

    /// `LlmCalled` for a finished call, with a checkpoint when the model answered (a restore
    /// can go back to any turn of the loop).
    fn turn_events(&self, done: &ModelDone, agent: &str) -> Result<Vec<Event>> {
        let (response, usage, error) = match &done.outcome {
            Ok(r) => {
                let kept = ChatResponse {
                    usage: None,
                    ..r.clone()
                };
                let v = serde_json::to_value(kept).map_err(|e| Error::Decode(e.to_string()))?;
                (self.payload(v)?, r.usage, None)
            }
            Err(e) => (Payload::Inline(Value::Null), None, Some(e.clone())),
        };
        let mut ev = vec![Event::LlmCalled {
            purpose: format!("agent:{agent}"),
            model: done.model.clone(),
            prompt_hash: done.prompt_hash,
            response,
            duration_ms: done.duration_ms,
            error: error.clone(),
            turn: Some(ModelTurn {
                todo_id: done.todo_id.clone(),
                attempt: done.attempt,
                index: done.index,
                plan_edits_seen: done.plan_edits_seen,
            }),
            usage,
            notice: done.notice.clone(),
            loaded: done.loaded.clone(),
        }];
        if error.is_none() {
            ev.push(checkpoint(self.state(), "agent_turn", 0));
        }
        Ok(ev)
    }

    /// Where this run's memory files and skills are read from.
    fn context_files(&self) -> ContextFiles {
        let s = &self.state().supervisor;
        let session = s.config.workspace_session.as_ref().unwrap_or(&s.session_id);
        ContextFiles {
            workspace: Workspace::for_session(&self.shared.workspaces, session),
            skills_dir: self.shared.settings.skills_dir.clone(),
            memory_dir: self.shared.settings.memory_dir.clone(),
            user: crate::plugin::agents::TurnContext::of(s).memories,
        }
    }

    /// A recorded call's answer, as the agent got it the first time.
    fn recorded_turn(
        &self,
        turn: &ModelTurnState,
    ) -> Result<std::result::Result<ModelReply, ToolError>> {
        if let Some(e) = &turn.error {
            return Ok(Err(ToolError::Failed(e.clone())));
        }
        let value = match &turn.response {
            Payload::Inline(v) => v.clone(),
            Payload::Blob(b) => {
                let bytes = self.shared.store.read_blob(b)?;
                serde_json::from_slice(&bytes).map_err(|e| Error::Decode(e.to_string()))?
            }
        };
        let mut response: ChatResponse =
            serde_json::from_value(value).map_err(|e| Error::Decode(e.to_string()))?;
        response.usage = turn.usage;
        Ok(Ok(ModelReply {
            response,
            notice: turn.notice.clone(),
            replayed: true,
        }))
    }

    /// What a person changed in the TODO list of the agent driving the run since the model was
    /// last told, and how many changes it will then have been told of.
    fn plan_notice(&self, t: &SupervisorTodo) -> (Option<String>, u32) {
        let s = &self.state().supervisor;
        let told = s.plan_edits_told;
        let edits = s.plan_edits.get(told as usize..).unwrap_or_default();
        if !crate::runtime::todo::drives_run(t) || edits.is_empty() {
            return (None, told);
        }
        let planned: Vec<&SupervisorTodo> = s
            .planning_state
            .as_ref()
            .map(|p| {
                p.todos
                    .iter()
                    .filter(|p| p.planned_by() == Some(t.id.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        let name = |id: &TodoId| {
            planned
                .iter()
                .find(|p| &p.id == id)
                .map_or_else(String::new, |p| format!(" \"{}\"", p.name))
        };
        let mut text = String::from("While you worked, a person changed your TODO list:\n");
        for e in edits {
            let why = e
                .reason
                .as_deref()
                .map_or_else(String::new, |r| format!(" ({r})"));
            text.push_str(&format!(
                "- {}{}: {} -> {} by {}{why}\n",
                e.todo_id,
                name(&e.todo_id),
                e.from,
                e.to,
                e.by
            ));
        }
        text.push_str("Your TODO list now:\n");
        for p in &planned {
            text.push_str(&format!("- {} [{}] {}\n", p.id, p.status, p.name));
        }
        (Some(bounded(text)), s.plan_edits.len() as u32)
    }

    /// Model calls in flight for `todo` end with its agent.
    pub(in crate::runtime::actor) fn abort_model_calls(&mut self, todo: Option<&TodoId>) {
        self.model_tasks.retain(|(t, _), h| {
            let stop = todo.is_none_or(|todo| t == todo);
            if stop {
                h.abort();
            }
            !stop
        });
    }
}

/// A notice cut to [`NOTICE_BYTES_MAX`] on a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > NOTICE_BYTES_MAX {
        let mut cut = NOTICE_BYTES_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}
