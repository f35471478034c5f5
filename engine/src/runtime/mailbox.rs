//! What a run actor receives, on its one channel: requests from callers (decide, command,
//! restore, cancel, delete, set values, wait until settled), agents' tool and model calls, and
//! the outcomes of the agents, tool executions and model calls it started. One channel, so the
//! actor serializes everything that happens to its run.

use chronicle_projections::RunState;
use chronicle_schemas::{Approval, ApprovalId, CheckpointId, Decision, TodoId, ToolCallId};
use chronicle_wire::{CommandOutcome, Restored};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::Result;
use crate::plugin::agents::{AgentError, AgentOutput};
use crate::plugin::chunks::ChunkSink;
use crate::plugin::llm::{ChatRequest, ChatResponse};
use crate::plugin::tools::{ModelReply, ToolError};

/// Where a restore goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreTarget {
    Checkpoint(CheckpointId),
    Seq(u64),
}

/// One input of a run actor.
#[derive(Debug)]
pub(crate) enum Input {
    Decide {
        approval_id: ApprovalId,
        decision: Decision,
        edited_args: Option<Value>,
        by: String,
        comment: Option<String>,
        reply: oneshot::Sender<Result<Approval>>,
    },
    Command {
        text: String,
        by: String,
        reply: oneshot::Sender<Result<CommandOutcome>>,
    },
    /// Plain words to a run that waits for a human: the command they mean, carried out.
    Say {
        text: String,
        by: String,
        reply: oneshot::Sender<Result<Option<(String, CommandOutcome)>>>,
    },
    Restore {
        target: RestoreTarget,
        by: String,
        reply: oneshot::Sender<Result<Restored>>,
    },
    Cancel {
        by: String,
        reason: Option<String>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// The run's session is deleted: record its tombstone (`SessionDeleted`), cancelling the
    /// run first when it is still going. Replies whether it was cancelled.
    DeleteSession {
        by: String,
        reply: oneshot::Sender<Result<bool>>,
    },
    /// A person deletes an item of long-term memory the run saved (`MemoryDeleted`).
    Forget {
        memory_id: String,
        by: String,
        reply: oneshot::Sender<Result<chronicle_schemas::Memory>>,
    },
    /// A person sets values on the run's state (`ValuesUpdated` and the checkpoint it makes).
    UpdateValues {
        values: Map<String, Value>,
        as_node: Option<String>,
        by: String,
        reply: oneshot::Sender<Result<CheckpointId>>,
    },
    /// Someone waits for the run to settle ([`crate::is_settled`]): answered with the
    /// run's state once it has, and everything the run wrote is durable.
    Settled {
        reply: oneshot::Sender<Result<RunState>>,
    },
    /// An agent calls a tool through the run (the tool host).
    ToolCall(ToolCallMsg),
    /// A tool execution the actor started has ended.
    ToolDone(ToolDone),
    /// An agent asks the model through the run.
    ModelCall(ModelCallMsg),
    /// A model call the actor started has ended.
    ModelDone(ModelDone),
    /// An agent the actor started has ended.
    AgentDone(AgentDone),
}

impl Input {
    /// Outcomes of work the run started; they wait while the disk is full (recording them would
    /// fail), unlike requests, which are answered.
    pub(crate) fn is_outcome(&self) -> bool {
        matches!(
            self,
            Input::ToolCall(_)
                | Input::ToolDone(_)
                | Input::ModelCall(_)
                | Input::ModelDone(_)
                | Input::AgentDone(_)
        )
    }
}

/// Waits for the answer to an input sent to an actor's `mailbox`; `None` when the actor ended
/// without answering it.
///
/// Waiting on the reply alone could wait forever. An input sent while the actor ends can be
/// left in the closed mailbox (tokio's mpsc does not drain a value sent through a permit taken
/// before its receiver was dropped), and then nothing drops it, nor its reply sender, while any
/// handle of the mailbox lives: the caller's own, at least. An actor sends every answer
/// before it ends, so once the mailbox is closed the answer is there or never comes.
pub(crate) async fn answer<T>(
    mailbox: &mpsc::Sender<Input>,
    mut reply: oneshot::Receiver<T>,
) -> Option<T> {
    tokio::select! {
        biased;
        r = &mut reply => r.ok(),
        // The answer may have come between the two polls, just before the actor ended.
        () = mailbox.closed() => reply.try_recv().ok(),
    }
}

/// An agent's tool call on its way to the run actor (sent by the agent's end of the tool host,
/// `actor/tool_host/agent_end.rs`).
#[derive(Debug)]
pub(crate) struct ToolCallMsg {
    pub todo_id: TodoId,
    pub attempt: u32,
    /// The actor's epoch when the agent started: a call from before a restore is refused.
    pub epoch: u64,
    pub index: u32,
    pub tool: String,
    pub args: Value,
    pub reply: oneshot::Sender<std::result::Result<Value, ToolError>>,
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
    pub reply: oneshot::Sender<std::result::Result<ModelReply, ToolError>>,
}

/// An agent's outcome, tagged with the attempt and the actor epoch it was started in.
#[derive(Clone, Debug)]
pub(crate) struct AgentDone {
    pub todo_id: TodoId,
    pub attempt: u32,
    pub epoch: u64,
    pub outcome: Result<AgentOutput, AgentError>,
    pub duration_ms: u64,
}

/// An agent waiting for a call's answer.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub reply: oneshot::Sender<std::result::Result<Value, ToolError>>,
}

impl Waiter {
    pub(crate) fn answer(self, answer: std::result::Result<Value, ToolError>) {
        // The agent may be gone (aborted); then nobody needs the answer.
        let _ = self.reply.send(answer);
    }
}

/// A tool execution's outcome, back from its task.
#[derive(Debug)]
pub(crate) struct ToolDone {
    pub tool_call_id: ToolCallId,
    pub epoch: u64,
    pub outcome: std::result::Result<Value, String>,
    pub duration_ms: u64,
    pub waiter: Waiter,
}

/// An agent waiting for the model's answer.
#[derive(Debug)]
pub(crate) struct ModelWaiter {
    pub reply: oneshot::Sender<std::result::Result<ModelReply, ToolError>>,
}

impl ModelWaiter {
    pub(crate) fn answer(self, answer: std::result::Result<ModelReply, ToolError>) {
        let _ = self.reply.send(answer);
    }
}

/// A model call's outcome, back from its task, with what the call is recorded with.
#[derive(Debug)]
pub(crate) struct ModelDone {
    pub todo_id: TodoId,
    pub attempt: u32,
    pub epoch: u64,
    pub index: u32,
    /// The hash of the request as the agent made it.
    pub prompt_hash: chronicle_schemas::Hash,
    pub model: String,
    pub notice: Option<String>,
    pub plan_edits_seen: u32,
    /// The memory files and skills put into the system prompt.
    pub loaded: Vec<chronicle_schemas::LoadedFile>,
    pub outcome: std::result::Result<ChatResponse, String>,
    pub duration_ms: u64,
    pub waiter: ModelWaiter,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cancel(reply: oneshot::Sender<Result<()>>) -> Input {
        Input::Cancel {
            by: "alice".into(),
            reason: None,
            reply,
        }
    }

    #[tokio::test]
    async fn an_answer_sent_before_the_actor_ended_is_taken() {
        let (tx, mut rx) = mpsc::channel(1);
        let (reply, answered) = oneshot::channel();
        tx.send(cancel(reply)).await.unwrap();
        let Some(Input::Cancel { reply, .. }) = rx.recv().await else {
            panic!("the input is in the mailbox");
        };
        reply.send(Ok(())).unwrap();
        drop(rx);
        assert!(matches!(answer(&tx, answered).await, Some(Ok(()))));
    }

    /// The input of a send that raced the actor's end stays in the closed mailbox, its reply
    /// sender with it: the wait must end on the closed mailbox, not on the reply.
    #[tokio::test]
    async fn an_input_left_in_a_closed_mailbox_is_not_waited_for() {
        let (tx, rx) = mpsc::channel(1);
        let permit = tx.reserve().await.unwrap();
        drop(rx);
        let (reply, answered) = oneshot::channel::<Result<()>>();
        permit.send(cancel(reply));
        let waited = tokio::time::timeout(Duration::from_secs(30), answer(&tx, answered)).await;
        assert!(matches!(waited, Ok(None)), "{waited:?}");
    }
}
