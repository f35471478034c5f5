//! Running a tool: in its own task, with its timeout; its outcome comes back as an input and is
//! recorded before the agent is answered. Large outputs are written to the workspace and the
//! call returns their path.

use std::sync::Arc;
use std::time::Instant;

use chronicle_projections::trace::SpanKey;
use chronicle_schemas::{TodoStatus, ToolCallState, ToolCallStatus};
use serde_json::{Value, json};

use super::completed;
use crate::Result;
use crate::plugin::tools::{ToolContext, ToolError, Workspace};
use crate::runtime::actor::RunActor;
use crate::runtime::mailbox::{Input, ToolDone, Waiter};
use crate::runtime::runs::Children;

/// An output larger than `max_bytes` goes to a file in the workspace and the call returns its
/// path (and a short preview) instead.
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

impl RunActor {
    /// What a tool knows about the call it serves.
    pub(super) fn tool_ctx(&self, rec: &ToolCallState) -> ToolContext {
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
            workspace: Workspace::for_session(&self.shared.workspaces, workspace_session),
            config: s.config.clone(),
            children: Some(Arc::new(Children(self.shared.clone()))),
        }
    }

    /// Runs the tool in its own task; the outcome comes back as [`ToolDone`].
    pub(super) async fn execute_tool(&mut self, rec: &ToolCallState, args: Value, waiter: Waiter) {
        if self.keeps_plan(rec) {
            if let Err(e) = self.write_agent_plan(rec, args, waiter).await {
                tracing::error!(run = %self.live.run_id(), error = %e, "recording a TODO list failed");
            }
            return;
        }
        let Some(tool) = self.shared.settings.tools.get(&rec.tool) else {
            let err = ToolError::Refused(format!("unknown tool {:?}", rec.tool));
            let ev = completed(rec.tool_call_id.clone(), Err(&err), 0);
            if let Err(e) = self.append(vec![ev]).await {
                tracing::error!(run = %self.live.run_id(), error = %e, "recording a refusal failed");
            }
            waiter.answer(Err(err));
            return;
        };
        let ctx = self.tool_ctx(rec);
        let (tx, epoch) = (self.tx.clone(), self.epoch);
        let offload_bytes = self.shared.settings.tool_output_offload_bytes;
        let tool_call_id = rec.tool_call_id.clone();
        let key = SpanKey::Tool {
            tool_call_id: tool_call_id.0.clone(),
        };
        let (span, log) = self.span_context("tool", &key);
        let work = crate::plugin::trace::within(span, async move {
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
            let _ = tx.send(Input::ToolDone(done)).await;
        });
        let task = tokio::spawn(tracing::Instrument::instrument(work, log));
        self.tool_tasks
            .insert(tool_call_id, (rec.todo_id.clone(), task.abort_handle()));
    }

    pub(in crate::runtime::actor) async fn on_tool_done(&mut self, done: ToolDone) -> Result<()> {
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
            Err(e) if e.is_retryable() => {
                crate::runtime::actor::redeliver(self.tx.clone(), Input::ToolDone(done));
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
}
