//! The words the engine says to people: reasoning notes, TODO names, approval messages, command
//! replies and the command help. A deployment picks the language by plugging in its own
//! [`Texts`]; the engine's own is English.

use chronicle_schemas::{SupervisorTodo, TodoId, TodoStatus};

/// Everything the engine phrases for a person, with the values the phrase needs.
#[derive(Clone, Copy, Debug)]
pub enum Text<'a> {
    /// The initialize node's note.
    RequestReceived {
        query: &'a str,
    },
    IntentAnalyzed {
        intent_type: &'a str,
        confidence: f64,
        by_model: bool,
    },
    PlanBuilt {
        agents: &'a [&'a str],
        strategy: &'a str,
    },
    /// A TODO made from a plan step.
    TodoName {
        agent: &'a str,
    },
    TodoDescription {
        agent: &'a str,
    },
    /// A TODO a person added with `/todo add`.
    AddedTodoName {
        agent: &'a str,
    },
    AddedTodoDescription {
        agent: &'a str,
    },
    /// A TODO an evaluation asked for.
    RetryTodoName {
        agent: &'a str,
    },
    RetryTodoDescription {
        agent: &'a str,
    },
    TodoStarted {
        todo: &'a TodoId,
        agent: &'a str,
        attempt: u32,
    },
    /// An agent that was running when the process stopped, started again.
    TodoRerun {
        todo: &'a TodoId,
        agent: &'a str,
        attempt: u32,
    },
    TodoCompleted {
        todo: &'a TodoId,
        agent: &'a str,
        duration_ms: u64,
    },
    Evaluated {
        feedback: &'a str,
    },
    RetryRound {
        round: u32,
        agents: &'a [String],
    },
    /// A model's evaluation added these agents to the plan.
    EvaluationAdded {
        round: u32,
        agents: &'a [String],
    },
    Aggregated {
        agents: usize,
    },
    Responding,
    /// What a person sees when a TODO waits for their approval.
    TodoApproval {
        todo: &'a SupervisorTodo,
    },
    /// What a person sees when a tool call waits for their approval.
    ToolApproval {
        tool: &'a str,
        todo: &'a TodoId,
        target: &'a str,
    },
    TodoApproved {
        todo: &'a str,
    },
    ToolCallApproved {
        todo: &'a TodoId,
        tool: &'a str,
    },
    TodoRejected {
        todo: &'a TodoId,
        reason: &'a str,
    },
    ToolCallRejected {
        todo: &'a TodoId,
        tool: &'a str,
        reason: &'a str,
    },
    TodoSkipped {
        todo: &'a TodoId,
        reason: &'a str,
    },
    TodoAdded {
        todo: &'a TodoId,
    },
    TodoUpdated {
        todo: &'a TodoId,
        status: TodoStatus,
    },
    Restored {
        checkpoint: &'a str,
    },
    /// The run's answer when a person's rejection ended the turn (`on_reject: end_turn`).
    TurnEndedOnReject {
        todo: &'a TodoId,
        agent: &'a str,
        /// The tool, when what was rejected is a call the agent asked for.
        tool: Option<&'a str>,
        by: &'a str,
        comment: Option<&'a str>,
    },
    /// The slash-command help.
    Help,
}

/// A language for [`Text`].
pub trait Texts: Send + Sync + 'static {
    fn say(&self, text: Text<'_>) -> String;
}

/// The engine's own words, in English.
#[derive(Clone, Copy, Debug, Default)]
pub struct English;

/// The command help, in English.
pub const HELP_EN: &str = "\
Commands:
  /todos                                       the TODO list, its summary and the current TODO
  /todo approve [<approval_id>|<todo_id>|all]  approve what waits (name one when several wait)
  /todo reject [<id>] [reason]                 reject it (a TODO is skipped, never retried)
  /todo skip <todo_id> [reason]                skip a TODO
  /todo add <agent> [after <id>[,<id>]]        add a TODO
  /todo update <todo_id> <status>              set a status by hand (pending, in_progress, completed, failed, skipped, blocked, waiting_approval)
  /checkpoint list                             the checkpoints
  /checkpoint restore <checkpoint_id>          go back to a checkpoint and continue from there
  /help                                        this help";

impl Texts for English {
    fn say(&self, text: Text<'_>) -> String {
        match text {
            Text::RequestReceived { query } => format!("request received: {query}"),
            Text::IntentAnalyzed {
                intent_type,
                confidence,
                by_model,
            } => format!(
                "intent analysed: {intent_type} (confidence {confidence:.2}, {})",
                if by_model { "model" } else { "rules" }
            ),
            Text::PlanBuilt { agents, strategy } => format!(
                "plan: {} ({strategy}, {} TODO(s))",
                agents.join(" → "),
                agents.len()
            ),
            Text::TodoName { agent } => format!("run {agent}"),
            Text::TodoDescription { agent } => format!("run {agent} for the request"),
            Text::AddedTodoName { agent } => format!("run {agent} (added)"),
            Text::AddedTodoDescription { agent } => format!("a run of {agent} added by a person"),
            Text::RetryTodoName { agent } => format!("run {agent} again"),
            Text::RetryTodoDescription { agent } => {
                format!("run {agent} again, as the evaluation asked")
            }
            Text::TodoStarted {
                todo,
                agent,
                attempt,
            } => format!("{todo} started: {agent} (attempt {attempt})"),
            Text::TodoRerun {
                todo,
                agent,
                attempt,
            } => format!("{todo}'s agent did not finish: {agent} runs again (attempt {attempt})"),
            Text::TodoCompleted {
                todo,
                agent,
                duration_ms,
            } => format!("{todo} completed: {agent} ({duration_ms} ms)"),
            Text::Evaluated { feedback } => format!("evaluation: {feedback}"),
            Text::RetryRound { round, agents } => {
                format!(
                    "retrying as evaluated (round {round}): {}",
                    agents.join(", ")
                )
            }
            Text::EvaluationAdded { round, agents } => {
                format!(
                    "the evaluation adds to the plan (round {round}): {}",
                    agents.join(", ")
                )
            }
            Text::Aggregated { agents } => format!("results aggregated: {agents} agent(s)"),
            Text::Responding => "composing the answer".into(),
            Text::TodoApproval { todo } => todo_approval_en(todo),
            Text::ToolApproval { tool, todo, target } => format!(
                "🔧 Run this tool call?\n\n- Tool: {tool}\n- TODO ID: {todo}\n- Target: {target}\n\n\
                 Commands:\n  /todo approve    - approve\n  /todo reject     - reject"
            ),
            Text::TodoApproved { todo } => format!("TODO {todo} approved."),
            Text::ToolCallApproved { todo, tool } => {
                format!("TODO {todo}: the {tool} call is approved.")
            }
            Text::TodoRejected { todo, reason } => format!("TODO {todo} rejected. ({reason})"),
            Text::ToolCallRejected { todo, tool, reason } => {
                format!("TODO {todo}: the {tool} call is rejected. ({reason})")
            }
            Text::TodoSkipped { todo, reason } => format!("TODO {todo} skipped. ({reason})"),
            Text::TodoAdded { todo } => format!("TODO {todo} added."),
            Text::TodoUpdated { todo, status } => format!("TODO {todo} is now {status}."),
            Text::Restored { checkpoint } => format!("restored to checkpoint {checkpoint}."),
            Text::TurnEndedOnReject {
                todo,
                agent,
                tool,
                by,
                comment,
            } => {
                let what = tool.map_or(String::new(), |t| format!("the {t} call of "));
                let why = comment.map_or(String::new(), |c| format!(": {c}"));
                format!(
                    "Stopped here: {by} rejected {what}{todo} ({agent}){why}. The remaining \
                     steps were skipped; ask again to continue differently."
                )
            }
            Text::Help => HELP_EN.to_owned(),
        }
    }
}

fn todo_approval_en(t: &SupervisorTodo) -> String {
    let deps = if t.dependencies.is_empty() {
        "none".to_owned()
    } else {
        t.dependencies
            .iter()
            .map(TodoId::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "📋 Run this task?\n\n\
         - TODO ID: {id}\n\
         - Task: {name}\n\
         - Agent: {agent}\n\
         - Priority: {prio}\n\
         - Depends on: {deps}\n\n\
         Commands:\n  \
         /todo approve    - approve\n  \
         /todo skip {id}  - skip\n  \
         /todos           - the TODO list",
        id = t.id,
        name = t.name,
        agent = t.agent_name,
        prio = t.priority.as_str(),
    )
}
