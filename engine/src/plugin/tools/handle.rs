//! The agent's side of the tool host: [`ToolHandle::call`] hands the call to the run's host (the
//! run actor, through the [`CallHost`] the runtime lends the handle), which records it, asks a
//! human when policy says so, runs it (or answers it from the log) and replies;
//! [`ToolHandle::complete`] does the same for a call to the model.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::ToolError;
use crate::plugin::chunks::ChunkSink;
use crate::plugin::llm::{ChatRequest, ChatResponse};

/// The future of one call on the host.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

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

/// Where an agent's calls go: the run's tool host, which the runtime lends the agent through
/// [`ToolHandle::new`]. Each call comes with its position in the attempt (the handle numbers
/// them); the host records it, asks a human when policy says so, runs it (or answers it from
/// the log) and returns the answer.
#[async_trait::async_trait]
pub(crate) trait CallHost: Send + Sync + std::fmt::Debug + 'static {
    /// Calls `tool` with `args`, as the call at position `index`.
    async fn tool(&self, index: u32, tool: &str, args: Value) -> Result<Value, ToolError>;
    /// Asks the model, as the call at position `index`; the answer's pieces go to `chunks`.
    async fn model(
        &self,
        index: u32,
        request: ChatRequest,
        chunks: &ChunkSink,
    ) -> Result<ModelReply, ToolError>;
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
    host: Box<dyn CallHost>,
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
    /// A handle whose calls go to `host` (the runtime's tool host of one agent attempt).
    pub(crate) fn new(host: impl CallHost) -> Self {
        ToolHandle {
            inner: Some(Arc::new(Inner {
                host: Box::new(host),
                next_index: AtomicU32::new(0),
                in_calls: Mutex::new(InCalls::default()),
            })),
        }
    }

    /// Calls `tool` with `args` (a JSON object) and waits for its output.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        self.through_run(|host, index| host.tool(index, tool, args))
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
        self.through_run(|host, index| host.model(index, request, chunks))
            .await
    }

    /// Makes the call `make` builds on the host, at the next position of the attempt, and waits
    /// for its answer; the wait counts as time in calls.
    async fn through_run<'a, T>(
        &'a self,
        make: impl FnOnce(&'a dyn CallHost, u32) -> BoxFuture<'a, Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        let Some(inner) = &self.inner else {
            return Err(ToolError::Refused(
                "no tool host: the agent is not running inside a run".into(),
            ));
        };
        let index = inner.next_index.fetch_add(1, Ordering::SeqCst);
        let _timer = CallTimer::start(inner);
        make(inner.host.as_ref(), index).await
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
