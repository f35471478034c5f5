//! The agent's end of the tool host: what the [`ToolHandle`] of one agent attempt calls. Each call
//! goes into the run actor's mailbox as an input, and its answer comes back on a channel of its
//! own; a run that stops before it answers is told to the agent as a refusal.

use chronicle_schemas::TodoId;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::plugin::chunks::ChunkSink;
use crate::plugin::llm::ChatRequest;
use crate::plugin::tools::{CallHost, ModelReply, ToolError, ToolHandle};
use crate::runtime::mailbox::{self, Input, ModelCallMsg, ToolCallMsg};

/// The calls of one agent attempt, on their way to its run's actor.
#[derive(Debug)]
pub(crate) struct AgentEnd {
    pub tx: mpsc::Sender<Input>,
    pub todo_id: TodoId,
    pub attempt: u32,
    /// The actor's epoch when the agent started: a call from before a restore is refused.
    pub epoch: u64,
}

impl AgentEnd {
    /// The handle an agent gets in its `AgentContext`.
    pub(crate) fn handle(self) -> ToolHandle {
        ToolHandle::new(self)
    }

    /// Sends `input` (carrying `reply`'s sender) and waits for the answer; `stopped` when the
    /// run ends without one.
    async fn send<T>(
        &self,
        input: Input,
        reply: oneshot::Receiver<Result<T, ToolError>>,
        stopped: &str,
    ) -> Result<T, ToolError> {
        let stopped = || ToolError::Refused(stopped.to_owned());
        self.tx.send(input).await.map_err(|_| stopped())?;
        mailbox::answer(&self.tx, reply).await.ok_or_else(stopped)?
    }
}

#[async_trait::async_trait]
impl CallHost for AgentEnd {
    async fn tool(&self, index: u32, tool: &str, args: Value) -> Result<Value, ToolError> {
        let (reply, rx) = oneshot::channel();
        let call = ToolCallMsg {
            todo_id: self.todo_id.clone(),
            attempt: self.attempt,
            epoch: self.epoch,
            index,
            tool: tool.to_owned(),
            args,
            reply,
        };
        let stopped = "the run stopped before the call completed";
        self.send(Input::ToolCall(call), rx, stopped).await
    }

    async fn model(
        &self,
        index: u32,
        request: ChatRequest,
        chunks: &ChunkSink,
    ) -> Result<ModelReply, ToolError> {
        let (reply, rx) = oneshot::channel();
        let call = ModelCallMsg {
            todo_id: self.todo_id.clone(),
            attempt: self.attempt,
            epoch: self.epoch,
            index,
            request,
            chunks: chunks.clone(),
            reply,
        };
        let stopped = "the run stopped before the model answered";
        self.send(Input::ModelCall(call), rx, stopped).await
    }
}
