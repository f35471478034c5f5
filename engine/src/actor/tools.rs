//! The tool host inside the run actor. An agent's call arrives as a message; the actor records
//! `ToolCallRequested` (with `ApprovalRequested` when the call is gated), runs the tool in its own
//! task, records `ToolCallCompleted` and only then answers the agent. A call the log already
//! holds for the same attempt and position (same tool, same args) is taken up where it stopped:
//! completed → answered from the log; approved but not completed → executed (at-least-once, with
//! the call's idempotency key); still waiting → waits again.

use std::time::Instant;

use chronicle_schemas::{
    ApprovalId, ApprovalStatus, Event, ExpiryAction, Payload, Subject, TodoId, TodoStatus,
    ToolCallId, ToolCallState, ToolCallStatus,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{RunActor, now};
use crate::tools::{ToolCallMsg, ToolContext, ToolError, Workspace};
use crate::{Engine, Error, Result, hitl};

/// Largest args (as JSON) a call may have: they are recorded in `ToolCallRequested` and, when
/// gated, again in `ApprovalRequested` beside a preview, and an event holds at most 64 KiB.
const TOOL_ARGS_BYTES_MAX: usize = 24 * 1024;

/// An agent waiting for a call's answer.
pub(crate) struct Waiter {
    reply: oneshot::Sender<std::result::Result<Value, ToolError>>,
}

impl Waiter {
    fn answer(self, answer: std::result::Result<Value, ToolError>) {
        // The agent may be gone (aborted); then nobody needs the answer.
        let _ = self.reply.send(answer);
    }
}

/// A tool execution's outcome, back from its task.
pub(crate) struct ToolDone {
    tool_call_id: ToolCallId,
    epoch: u64,
    outcome: std::result::Result<Value, String>,
    duration_ms: u64,
    waiter: Waiter,
}

impl RunActor {
    pub(super) async fn on_tool_call(&mut self, call: ToolCallMsg) -> Result<()> {
        let ToolCallMsg {
            todo_id,
            attempt,
            epoch,
            index,
            tool,
            args,
            reply,
        } = call;
        let waiter = Waiter { reply };
        if epoch != self.epoch || self.running.get(&todo_id).map(|r| r.0) != Some(attempt) {
            waiter.answer(Err(ToolError::Refused(
                "the agent's attempt is over (restored, cancelled or skipped); the call was not made"
                    .into(),
            )));
            return Ok(());
        }
        let recorded = self
            .state()
            .supervisor
            .tool_calls
            .iter()
            .rev()
            .find(|c| c.todo_id == todo_id && c.attempt == attempt && c.index == index);
        if let Some(rec) = recorded {
            if rec.tool == tool && rec.args == args {
                let rec = rec.clone();
                return self.settle(rec, waiter).await;
            }
            tracing::warn!(
                run = %self.live.run_id(), todo = %todo_id, attempt, index,
                "the agent's call differs from the recorded one at its position; recorded anew"
            );
        }

        let tool_call_id = ToolCallId(format!("call_{}", uuid::Uuid::new_v4().simple()));
        let rec = ToolCallState {
            tool_call_id: tool_call_id.clone(),
            todo_id,
            tool,
            args,
            attempt,
            index,
            ..ToolCallState::default()
        };
        let requested = Event::ToolCallRequested {
            tool_call_id: tool_call_id.clone(),
            todo_id: rec.todo_id.clone(),
            tool: rec.tool.clone(),
            args: rec.args.clone(),
            attempt,
            index,
        };
        let args_bytes = serde_json::to_vec(&rec.args).map_or(usize::MAX, |b| b.len());
        if args_bytes > TOOL_ARGS_BYTES_MAX {
            // The args go into the log (twice when gated): a call too large to record is not
            // made, and its record keeps the size instead of the args.
            let err = ToolError::Refused(format!(
                "the call's args are {args_bytes} bytes, over the {TOOL_ARGS_BYTES_MAX}-byte limit of a recorded call; send large content in parts"
            ));
            let mut requested = requested;
            if let Event::ToolCallRequested { args, .. } = &mut requested {
                *args = json!({ "omitted_bytes": args_bytes });
            }
            self.append(vec![requested, completed(tool_call_id, Err(&err), 0)])
                .await?;
            waiter.answer(Err(err));
            return Ok(());
        }
        let refusal = match self.shared.tools.get(&rec.tool) {
            None => Some(format!(
                "unknown tool {:?}; known: {}",
                rec.tool,
                self.shared.tools.names().collect::<Vec<_>>().join(", ")
            )),
            Some(_) if self.rejected_before(&rec) => Some(format!(
                "a human rejected {} with these args in this attempt; it is not called again",
                rec.tool
            )),
            Some(_) => None,
        };
        if let Some(reason) = refusal {
            let err = ToolError::Refused(reason);
            self.append(vec![requested, completed(tool_call_id, Err(&err), 0)])
                .await?;
            waiter.answer(Err(err));
            return Ok(());
        }
        let declared = self.shared.tools.get(&rec.tool).is_some_and(|t| t.gated());
        let mut ev = vec![requested];
        if hitl::tool_needs_approval(&self.state().supervisor.config, &rec.tool, declared) {
            ev.extend(self.ask_human(&rec, None));
        }
        self.append(ev).await?;
        let rec = self
            .recorded(&tool_call_id)
            .ok_or_else(|| Error::Invalid(format!("tool call {tool_call_id} was not recorded")))?;
        self.settle(rec, waiter).await
    }

    /// Takes a recorded call as far as it can go now: answer it from the log, wait for its
    /// human, ask again (its request was cancelled by a restore), refuse it (rejected) or run it.
    async fn settle(&mut self, rec: ToolCallState, waiter: Waiter) -> Result<()> {
        if rec.status != ToolCallStatus::Requested {
            waiter.answer(self.recorded_answer(&rec)?);
            return Ok(());
        }
        if waiter.reply.is_closed() {
            return Ok(()); // the agent stopped waiting: nothing runs for nobody
        }
        let Some(aid) = rec.approval_id.clone() else {
            self.execute_tool(&rec, rec.args.clone(), waiter).await;
            return Ok(());
        };
        let logged = self.state().approvals.get(&aid).map(|a| a.status);
        let on_expiry = self.state().supervisor.config.on_expiry;
        match rec.approval_status {
            Some(ApprovalStatus::Pending) if logged == Some(ApprovalStatus::Pending) => {
                self.parked.insert(rec.tool_call_id, waiter);
            }
            Some(ApprovalStatus::Approved | ApprovalStatus::Edited) => {
                let args = rec
                    .effective_args
                    .clone()
                    .unwrap_or_else(|| rec.args.clone());
                self.execute_tool(&rec, args, waiter).await;
            }
            Some(ApprovalStatus::Expired) if on_expiry == ExpiryAction::Approve => {
                self.execute_tool(&rec, rec.args.clone(), waiter).await;
            }
            Some(ApprovalStatus::Rejected | ApprovalStatus::Expired) => {
                let err = ToolError::Rejected(self.rejection_reason(&aid));
                self.append(vec![completed(rec.tool_call_id, Err(&err), 0)])
                    .await?;
                waiter.answer(Err(err));
            }
            _ => {
                // Pending here but not in the log: a restore cancelled the request, or it was
                // decided on an abandoned branch. Ask again.
                let ev = self.ask_human(&rec, Some(aid));
                self.append(ev.into()).await?;
                self.parked.insert(rec.tool_call_id, waiter);
            }
        }
        Ok(())
    }

    /// Parked calls whose approval was decided (or expired, or cancelled) go on.
    pub(super) async fn resume_parked(&mut self) -> Result<()> {
        let ids: Vec<ToolCallId> = self.parked.keys().cloned().collect();
        for id in ids {
            let Some(rec) = self.recorded(&id) else {
                self.parked.remove(&id);
                continue;
            };
            let logged = rec
                .approval_id
                .as_ref()
                .and_then(|a| self.state().approvals.get(a))
                .map(|a| a.status);
            if rec.approval_status == Some(ApprovalStatus::Pending)
                && logged == Some(ApprovalStatus::Pending)
            {
                continue;
            }
            if let Some(waiter) = self.parked.remove(&id) {
                self.settle(rec, waiter).await?;
            }
        }
        Ok(())
    }

    pub(super) async fn resume_parked_logged(&mut self) {
        if let Err(e) = self.resume_parked().await {
            tracing::error!(run = %self.live.run_id(), error = %e, "resuming tool calls failed");
        }
    }

    /// Runs the tool in its own task; the outcome comes back as [`ToolDone`].
    async fn execute_tool(&mut self, rec: &ToolCallState, args: Value, waiter: Waiter) {
        let Some(tool) = self.shared.tools.get(&rec.tool).cloned() else {
            let err = ToolError::Refused(format!("unknown tool {:?}", rec.tool));
            let ev = completed(rec.tool_call_id.clone(), Err(&err), 0);
            if let Err(e) = self.append(vec![ev]).await {
                tracing::error!(run = %self.live.run_id(), error = %e, "recording a refusal failed");
            }
            waiter.answer(Err(err));
            return;
        };
        let ctx = self.tool_ctx(rec);
        let (tx, epoch) = (self.tool_done_tx.clone(), self.epoch);
        let offload_bytes = self.shared.tool_output_offload_bytes;
        let tool_call_id = rec.tool_call_id.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let outcome = match tool.timeout() {
                Some(limit) => tokio::time::timeout(limit, tool.call(&ctx, args))
                    .await
                    .unwrap_or_else(|_| Err(format!("timed out after {} ms", limit.as_millis()))),
                None => tool.call(&ctx, args).await,
            };
            let outcome = outcome.and_then(|v| offload(&ctx, v, offload_bytes));
            let done = ToolDone {
                tool_call_id: ctx.tool_call_id,
                epoch,
                outcome,
                duration_ms: started.elapsed().as_millis() as u64,
                waiter,
            };
            let _ = tx.send(done).await;
        });
        self.tool_tasks
            .insert(tool_call_id, (rec.todo_id.clone(), task.abort_handle()));
    }

    pub(super) async fn on_tool_done(&mut self, done: ToolDone) -> Result<()> {
        self.tool_tasks.remove(&done.tool_call_id);
        if done.epoch != self.epoch || self.shared.shutdown.is_cancelled() {
            // The run was restored or cancelled meanwhile; or the engine is stopping, and an
            // outcome cut short by that (a `task` whose wait ended) must not be recorded: the
            // call runs again after the restart.
            return Ok(());
        }
        // An outcome delivered again after a full disk may find its call settled or its TODO
        // moved on meanwhile: then there is nothing to record.
        let open = self.recorded(&done.tool_call_id).is_some_and(|c| {
            c.status == ToolCallStatus::Requested
                && self
                    .todo(&c.todo_id)
                    .is_some_and(|t| t.status == TodoStatus::InProgress)
        });
        if !open {
            return Ok(());
        }
        let answer = done.outcome.clone().map_err(ToolError::Failed);
        match self.record_tool_outcome(&done, &answer).await {
            // Nothing was recorded: deliver the outcome again once there may be space.
            Err(e) if e.is_storage_full() => {
                super::redeliver(self.tool_done_tx.clone(), done);
                Ok(())
            }
            Err(e) => Err(e),
            Ok(()) => {
                done.waiter.answer(answer);
                Ok(())
            }
        }
    }

    async fn record_tool_outcome(
        &mut self,
        done: &ToolDone,
        answer: &std::result::Result<Value, ToolError>,
    ) -> Result<()> {
        let output = match answer {
            Ok(v) => Ok(self.payload(v.clone())?),
            Err(e) => Err(e),
        };
        let event = completed(done.tool_call_id.clone(), output, done.duration_ms);
        self.append(vec![event]).await?;
        Ok(())
    }

    fn recorded(&self, id: &ToolCallId) -> Option<ToolCallState> {
        self.state()
            .supervisor
            .tool_calls
            .iter()
            .rev()
            .find(|c| &c.tool_call_id == id)
            .cloned()
    }

    fn recorded_answer(
        &self,
        rec: &ToolCallState,
    ) -> Result<std::result::Result<Value, ToolError>> {
        Ok(match (&rec.output, &rec.error) {
            (Some(Payload::Inline(v)), _) => Ok(v.clone()),
            (Some(Payload::Blob(b)), _) => {
                let bytes = self.shared.store.read_blob(b)?;
                Ok(serde_json::from_slice(&bytes).map_err(|e| Error::Invalid(e.to_string()))?)
            }
            (None, Some(e)) => Err(ToolError::from_recorded(e)),
            (None, None) => Ok(Value::Null),
        })
    }

    /// The host's rule for rejected calls: the same call (tool and args) is not made again in
    /// the attempt where a human rejected it.
    fn rejected_before(&self, call: &ToolCallState) -> bool {
        let on_expiry = self.state().supervisor.config.on_expiry;
        self.state().supervisor.tool_calls.iter().any(|c| {
            c.todo_id == call.todo_id
                && c.attempt == call.attempt
                && c.tool == call.tool
                && c.args == call.args
                && match c.approval_status {
                    Some(ApprovalStatus::Rejected) => true,
                    Some(ApprovalStatus::Expired) => on_expiry == ExpiryAction::Reject,
                    _ => false,
                }
        })
    }

    fn rejection_reason(&self, aid: &ApprovalId) -> String {
        match self.state().approvals.get(aid) {
            Some(a) if a.status == ApprovalStatus::Expired => format!("approval {aid} expired"),
            Some(a) => {
                let by = a.decided_by.as_deref().unwrap_or("a human");
                match &a.comment {
                    Some(c) => format!("rejected by {by}: {c}"),
                    None => format!("rejected by {by}"),
                }
            }
            None => "rejected".into(),
        }
    }

    fn tool_ctx(&self, rec: &ToolCallState) -> ToolContext {
        let s = &self.state().supervisor;
        let run_id = self.live.run_id();
        let workspace_session = s.config.workspace_session.as_ref().unwrap_or(&s.session_id);
        ToolContext {
            run_id,
            session_id: s.session_id.clone(),
            todo_id: rec.todo_id.clone(),
            attempt: rec.attempt,
            index: rec.index,
            tool_call_id: rec.tool_call_id.clone(),
            idempotency_key: format!("{run_id}/{}/{}/{}", rec.todo_id, rec.attempt, rec.index),
            workspace: Workspace::for_session(
                // replaced by Settings::workspace_root
                self.shared.store.dir().unwrap_or(std::path::Path::new(".")),
                workspace_session,
            ),
            config: s.config.clone(),
            engine: Some(Engine::from_shared(self.shared.clone())),
        }
    }

    /// A gated call's approval request, with the tool's preview (file path, line count, diff),
    /// and the interruption it causes.
    fn ask_human(&self, rec: &ToolCallState, supersedes: Option<ApprovalId>) -> [Event; 2] {
        let ask = self.tool_approval(rec, supersedes);
        let interrupted = Event::RunInterrupted {
            reason: format!("waiting for approval of {}", rec.tool),
            approval_id: super::approval_id_of(&ask),
        };
        [ask, interrupted]
    }

    fn tool_approval(&self, rec: &ToolCallState, supersedes: Option<ApprovalId>) -> Event {
        let cfg = &self.state().supervisor.config;
        let ctx = self.tool_ctx(rec);
        let mut preview = self
            .shared
            .tools
            .get(&rec.tool)
            .map_or_else(|| json!({}), |t| t.preview(&ctx, &rec.args));
        if let Value::Object(m) = &mut preview {
            m.insert("tool".into(), json!(rec.tool));
            m.insert("tool_call_id".into(), json!(rec.tool_call_id));
            m.insert("todo_id".into(), json!(rec.todo_id));
        }
        let target = ["file_path", "description"]
            .iter()
            .find_map(|k| preview.get(*k).and_then(Value::as_str))
            .unwrap_or("-")
            .to_owned();
        Event::ApprovalRequested {
            approval_id: ApprovalId(uuid::Uuid::new_v4().to_string()),
            subject: Subject::ToolCall {
                tool_call_id: rec.tool_call_id.clone(),
                todo_id: rec.todo_id.clone(),
            },
            tool_name: rec.tool.clone(),
            args: rec.args.clone(),
            preview,
            policy: cfg.hitl.as_str().to_owned(),
            message: self.shared.texts.say(crate::texts::Text::ToolApproval {
                tool: &rec.tool,
                todo: &rec.todo_id,
                target: &target,
            }),
            expires_at: cfg
                .approval_timeout_ms
                .map(|ms| chronicle_schemas::Timestamp(now().as_micros() + ms as i64 * 1000)),
            supersedes,
        }
    }

    /// Stops a TODO's agent (a human moved the TODO on) and everything its calls started.
    pub(super) fn stop_agent(&mut self, todo: &TodoId, by: &str, reason: &str) -> Vec<Event> {
        if let Some((_, h)) = self.running.remove(todo) {
            h.abort();
        }
        self.release_todo(todo, by, reason)
    }

    /// Ends what a TODO's calls left in flight: their executions are aborted, their sub-agent
    /// runs cancelled, and the approvals they wait for are answered with a rejection (returned,
    /// to record in the caller's append), so no approval stays pending for an agent that is gone.
    pub(super) fn release_todo(&mut self, todo: &TodoId, by: &str, reason: &str) -> Vec<Event> {
        self.tool_tasks.retain(|_, (t, h)| {
            if t == todo {
                h.abort();
            }
            t != todo
        });
        self.cancel_sub_runs(by, Some(todo));
        let waiting: Vec<(ApprovalId, ToolCallId)> = self
            .state()
            .approvals
            .pending()
            .filter_map(|a| match &a.subject {
                Some(Subject::ToolCall {
                    tool_call_id,
                    todo_id,
                }) if todo_id == todo => Some((a.approval_id.clone(), tool_call_id.clone())),
                _ => None,
            })
            .collect();
        waiting
            .into_iter()
            .map(|(approval_id, call)| {
                self.parked.remove(&call);
                Event::ApprovalDecided {
                    approval_id,
                    decision: chronicle_schemas::Decision::Reject,
                    edited_args: None,
                    decided_by: by.to_owned(),
                    comment: Some(reason.to_owned()),
                }
            })
            .collect()
    }

    /// The `task` calls whose sub-agent run may still be running.
    pub(super) fn sub_run_calls(&self) -> Vec<(TodoId, ToolCallId)> {
        self.state()
            .supervisor
            .tool_calls
            .iter()
            .filter(|c| c.tool == "task" && c.status == ToolCallStatus::Requested)
            .map(|c| (c.todo_id.clone(), c.tool_call_id.clone()))
            .collect()
    }

    /// Cancels the sub-agent runs still in flight, of one TODO or of all (a cancelled or failed
    /// parent leaves none running).
    pub(super) fn cancel_sub_runs(&self, by: &str, todo: Option<&TodoId>) {
        let calls = self
            .sub_run_calls()
            .into_iter()
            .filter(|(t, _)| todo.is_none_or(|todo| t == todo))
            .collect();
        self.cancel_children(by, calls);
    }

    pub(super) fn cancel_children(&self, by: &str, calls: Vec<(TodoId, ToolCallId)>) {
        let engine = Engine::from_shared(self.shared.clone());
        let run_id = self.live.run_id();
        for (_, call) in calls {
            let child = crate::child_run_id(run_id, &call);
            let (engine, by) = (engine.clone(), by.to_owned());
            self.shared.tasks.spawn(async move {
                // Not started yet, or already finished: nothing to cancel.
                let _ = engine
                    .cancel(
                        child,
                        &by,
                        Some(format!("parent run {run_id} stopped its call")),
                    )
                    .await;
            });
        }
    }
}

fn completed(
    tool_call_id: ToolCallId,
    outcome: std::result::Result<Payload, &ToolError>,
    duration_ms: u64,
) -> Event {
    let (output, error) = match outcome {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e.to_string())),
    };
    Event::ToolCallCompleted {
        tool_call_id,
        output,
        error,
        duration_ms,
    }
}

/// Seed 003's offload rule: an output larger than `max_bytes` goes to a file in the workspace and
/// the call returns its path (and a short preview) instead.
fn offload(ctx: &ToolContext, v: Value, max_bytes: usize) -> std::result::Result<Value, String> {
    let bytes = match &v {
        Value::String(s) => s.as_bytes().to_vec(),
        other => serde_json::to_vec_pretty(other).map_err(|e| e.to_string())?,
    };
    if bytes.len() <= max_bytes {
        return Ok(v);
    }
    let path = ctx
        .workspace
        .offload(&format!("{}.json", ctx.tool_call_id), &bytes)
        .map_err(|e| e.to_string())?;
    let preview: String = String::from_utf8_lossy(&bytes).chars().take(1000).collect();
    Ok(json!({
        "offloaded": true,
        "path": path,
        "bytes": bytes.len(),
        "preview": preview,
    }))
}
