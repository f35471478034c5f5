//! The agent's side of the tool host: [`ToolHandle::call`] sends the call to the run actor, which
//! records it, asks a human when policy says so, runs it (or answers it from the log) and replies;
//! [`ToolHandle::complete`] does the same for a call to the model.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronicle_schemas::TodoId;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::ToolError;
use crate::chunks::ChunkSink;
use crate::llm::{ChatRequest, ChatResponse};
use crate::mailbox::Input;

/// One call on its way to the run actor.
#[derive(Debug)]
pub(crate) struct ToolCallMsg {
    pub todo_id: TodoId,
    pub attempt: u32,
    /// The actor's epoch when the agent started: a call from before a restore is refused.
    pub epoch: u64,
    pub index: u32,
    pub tool: String,
    pub args: Value,
    pub reply: oneshot::Sender<Result<Value, ToolError>>,
}

/// One model call on its way to the run actor.
#[derive(Debug)]
pub(crate) struct ModelCallMsg {
    pub todo_id: TodoId,
    pub attempt: u32,
    pub epoch: u64,
    pub index: u32,
    pub request: ChatRequest,
    /// Where the answer's pieces go while the model writes it.
    pub chunks: ChunkSink,
    pub reply: oneshot::Sender<Result<ModelReply, ToolError>>,
}

/// A model's answer as an agent gets it through the host.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelReply {
    pub response: ChatResponse,
    /// What the host added to the conversation before the call (a person's changes to the
    /// agent's TODO list). The agent adds it to its own copy of the conversation, as a user
    /// message before the answer, so its next request is the conversation the model saw.
    pub notice: Option<String>,
    /// Answered from the log (a re-execution of the attempt), not by the model.
    pub replayed: bool,
}

/// The actor's end, from which handles are made: calls arrive in the actor's mailbox.
#[derive(Clone, Debug)]
pub(crate) struct ToolHost {
    pub tx: mpsc::Sender<Input>,
}

impl ToolHost {
    pub(crate) fn handle(&self, todo_id: TodoId, attempt: u32, epoch: u64) -> ToolHandle {
        ToolHandle {
            inner: Some(Arc::new(Inner {
                tx: self.tx.clone(),
                todo_id,
                attempt,
                epoch,
                next_index: AtomicU32::new(0),
                in_calls: Mutex::new(InCalls::default()),
            })),
        }
    }
}

/// An agent's way to call tools, handed to it in its `AgentContext`. Calls are numbered in the
/// order they are made (their position in the attempt); an agent that repeats its calls in the
/// same order after a crash gets the recorded answers back without the tools running again.
#[derive(Clone, Debug, Default)]
pub struct ToolHandle {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    tx: mpsc::Sender<Input>,
    todo_id: TodoId,
    attempt: u32,
    epoch: u64,
    next_index: AtomicU32,
    in_calls: Mutex<InCalls>,
}

/// Time spent inside tool and model calls (waiting for a human, a sub-agent run, a tool, the
/// model): it does not count against the agent's own timeout, because each has its own bound.
#[derive(Debug, Default)]
struct InCalls {
    total: Duration,
    active: u32,
    since: Option<Instant>,
}

impl ToolHandle {
    /// Calls `tool` with `args` (a JSON object) and waits for its output.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        self.through_run(
            "the run stopped before the call completed",
            |inner, index, reply| {
                Input::ToolCall(ToolCallMsg {
                    todo_id: inner.todo_id.clone(),
                    attempt: inner.attempt,
                    epoch: inner.epoch,
                    index,
                    tool: tool.to_owned(),
                    args,
                    reply,
                })
            },
        )
        .await
    }

    /// Asks the model through the run: the call takes the next position in the attempt (the same
    /// numbering as tool calls) and is recorded as `LlmCalled` before the answer comes back; a
    /// re-execution of the attempt that makes the same request at the same position gets the
    /// recorded answer without the model being asked again. The answer's pieces go to `chunks`
    /// while the model writes it.
    pub async fn complete(
        &self,
        request: ChatRequest,
        chunks: &ChunkSink,
    ) -> Result<ModelReply, ToolError> {
        self.through_run(
            "the run stopped before the model answered",
            |inner, index, reply| {
                Input::ModelCall(ModelCallMsg {
                    todo_id: inner.todo_id.clone(),
                    attempt: inner.attempt,
                    epoch: inner.epoch,
                    index,
                    request,
                    chunks: chunks.clone(),
                    reply,
                })
            },
        )
        .await
    }

    /// Sends the run actor what `make` builds from the call's position (the next of the
    /// attempt) and its reply channel, and waits for the reply; the wait counts as time in calls.
    async fn through_run<T>(
        &self,
        stopped: &str,
        make: impl FnOnce(&Inner, u32, oneshot::Sender<Result<T, ToolError>>) -> Input,
    ) -> Result<T, ToolError> {
        let Some(inner) = &self.inner else {
            return Err(ToolError::Refused(
                "no tool host: the agent is not running inside a run".into(),
            ));
        };
        let index = inner.next_index.fetch_add(1, Ordering::SeqCst);
        let (reply, rx) = oneshot::channel();
        let _timer = CallTimer::start(inner);
        let stopped = || ToolError::Refused(stopped.to_owned());
        inner
            .tx
            .send(make(inner, index, reply))
            .await
            .map_err(|_| stopped())?;
        crate::mailbox::answer(&inner.tx, rx)
            .await
            .ok_or_else(stopped)?
    }

    /// How long this attempt has spent inside tool and model calls so far.
    pub fn time_in_calls(&self) -> Duration {
        let Some(inner) = &self.inner else {
            return Duration::ZERO;
        };
        let c = inner.in_calls.lock().unwrap_or_else(|e| e.into_inner());
        c.total + c.since.map_or(Duration::ZERO, |s| s.elapsed())
    }
}

/// Counts the time a call is in flight (also when the agent drops the call's future).
struct CallTimer<'a>(&'a Inner);

impl<'a> CallTimer<'a> {
    fn start(inner: &'a Inner) -> Self {
        let mut c = inner.in_calls.lock().unwrap_or_else(|e| e.into_inner());
        if c.active == 0 {
            c.since = Some(Instant::now());
        }
        c.active += 1;
        drop(c);
        CallTimer(inner)
    }
}

impl Drop for CallTimer<'_> {
    fn drop(&mut self) {
        let mut c = self.0.in_calls.lock().unwrap_or_else(|e| e.into_inner());
        c.active -= 1;
        if c.active == 0
            && let Some(since) = c.since.take()
        {
            c.total += since.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_handle_outside_a_run_refuses() {
        let err = ToolHandle::default()
            .call("ls", serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Refused(_)), "{err}");
    }
}
