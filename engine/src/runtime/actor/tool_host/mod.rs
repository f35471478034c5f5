//! The tool host inside the run actor. An agent's call arrives as an input; the actor records
//! `ToolCallRequested` (with `ApprovalRequested` when the call is gated), runs the tool in its own
//! task, records `ToolCallCompleted` and only then answers the agent. A call the log already
//! holds for the same attempt and position (same tool, same args) is taken up where it stopped:
//! completed → answered from the log; approved but not completed → executed (at-least-once, with
//! the call's idempotency key); still waiting → waits again. A call a model asked for before the
//! agent's latest start that was never recorded is answered as cancelled (`cut_off`).
//!
//! The same host takes an agent's model calls (`model.rs`) and keeps the run's TODO list for the
//! agent that drives the run (`todos.rs`). The agent's end of it, what its `ToolHandle` calls, is
//! [`AgentEnd`].

use chronicle_schemas::{
    ApprovalStatus, Event, ExpiryAction, Payload, ToolCallId, ToolCallState, ToolCallStatus,
};
use serde_json::{Value, json};

use super::RunActor;
use crate::plugin::hitl;
use crate::plugin::tools::ToolError;
use crate::runtime::mailbox::{ToolCallMsg, Waiter};
use crate::{Error, Result};

mod agent_end;
mod ask;
mod execute;
mod model;
mod release;
mod todos;

pub(crate) use agent_end::AgentEnd;

/// Largest args (as JSON) a call may have: they are recorded in `ToolCallRequested` and, when
/// gated, again in `ApprovalRequested` beside a preview, and an event holds at most 64 KiB.
const TOOL_ARGS_BYTES_MAX: usize = 24 * 1024;

/// `ToolCallCompleted` for an output or an error.
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
        let rec = ToolCallState {
            tool_call_id: ToolCallId(format!("call_{}", uuid::Uuid::new_v4().simple())),
            todo_id,
            tool,
            args,
            attempt,
            index,
            ..ToolCallState::default()
        };
        self.record_call(rec, waiter).await
    }

    /// Records a new call — refused (too large, unknown tool, a repeat of a rejected call) or
    /// requested (and asked for when gated) — and takes it as far as it can go.
    async fn record_call(&mut self, rec: ToolCallState, waiter: Waiter) -> Result<()> {
        let tool = self.shared.settings.tools.get(&rec.tool);
        let requested = Event::ToolCallRequested {
            tool_call_id: rec.tool_call_id.clone(),
            todo_id: rec.todo_id.clone(),
            tool: rec.tool.clone(),
            args: rec.args.clone(),
            attempt: rec.attempt,
            index: rec.index,
            server: tool.as_ref().and_then(|t| t.server()).map(str::to_owned),
        };
        if let Some((err, requested)) = self.refusal(&rec, tool.as_deref(), requested.clone()) {
            let done = completed(rec.tool_call_id, Err(&err), 0);
            self.append(vec![requested, done]).await?;
            waiter.answer(Err(err));
            return Ok(());
        }
        let declared = tool.is_some_and(|t| t.gated());
        let mut ev = vec![requested];
        if hitl::tool_needs_approval(&self.state().supervisor.config, &rec.tool, declared) {
            ev.extend(self.ask_human(&rec, None));
        }
        self.append(ev).await?;
        let rec = self.recorded(&rec.tool_call_id).ok_or_else(|| {
            Error::Decode(format!("tool call {} was not recorded", rec.tool_call_id))
        })?;
        self.settle(rec, waiter).await
    }

    /// Why the host refuses a new call without running it, with the request to record (a call
    /// too large to record keeps its size instead of its args): cut off, too large, an unknown
    /// tool, a repeat of a rejected call, or args the tool's [`check`](crate::tools::Tool::check)
    /// refuses.
    fn refusal(
        &self,
        rec: &ToolCallState,
        tool: Option<&dyn crate::plugin::tools::Tool>,
        mut requested: Event,
    ) -> Option<(ToolError, Event)> {
        if let Some(why) = self.cut_off(rec) {
            return Some((ToolError::Cancelled(why), requested));
        }
        let args_bytes = serde_json::to_vec(&rec.args).map_or(usize::MAX, |b| b.len());
        if args_bytes > TOOL_ARGS_BYTES_MAX {
            if let Event::ToolCallRequested { args, .. } = &mut requested {
                *args = json!({ "omitted_bytes": args_bytes });
            }
            let err = ToolError::Refused(format!(
                "the call's args are {args_bytes} bytes, over the {TOOL_ARGS_BYTES_MAX}-byte limit of a recorded call; send large content in parts"
            ));
            return Some((err, requested));
        }
        let reason = match tool {
            None => format!(
                "unknown tool {:?}; known: {}",
                rec.tool,
                self.shared.settings.tools.names().join(", ")
            ),
            Some(_) if self.rejected_before(rec) => format!(
                "a human rejected {} with these args in this attempt; it is not called again",
                rec.tool
            ),
            Some(t) => match t.check(&rec.args) {
                Ok(()) => return None,
                Err(why) => format!("{} was not called: {why}", rec.tool),
            },
        };
        Some((ToolError::Refused(reason), requested))
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
    async fn resume_parked(&mut self) -> Result<()> {
        if self.parked.is_empty() {
            return Ok(());
        }
        // A decision that releases a call may only be written: durable before the call runs.
        self.durable().await?;
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
                Ok(serde_json::from_slice(&bytes).map_err(|e| Error::Decode(e.to_string()))?)
            }
            (None, Some(e)) => Err(ToolError::from_recorded(e)),
            (None, None) => Ok(Value::Null),
        })
    }

    /// Patch-tool-calls: a call the model asked for in a turn recorded before the agent's latest
    /// start (the process died, or a restore went back, after the model answered) that has no
    /// record of its own was never made. It is answered as cancelled, so the model learns its
    /// call did not happen, instead of the host silently making a call a person went back on.
    fn cut_off(&self, rec: &ToolCallState) -> Option<String> {
        let s = &self.state().supervisor;
        let start = s
            .agent_starts
            .iter()
            .find(|a| a.todo_id == rec.todo_id && a.attempt == rec.attempt)?;
        let asked_in = s
            .model_turns
            .iter()
            .filter(|m| m.todo_id == rec.todo_id && m.attempt == rec.attempt && m.index < rec.index)
            .map(|m| m.index)
            .max()?;
        (asked_in < start.first_index).then(|| {
            "the run stopped or was restored after this call was asked for and before it was made; it was not made".to_owned()
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
}
