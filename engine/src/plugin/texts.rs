//! The words the engine says to people: reasoning notes, TODO names, approval messages, command
//! replies and the command help. A deployment picks the language by plugging in its own
//! [`Texts`]; the engine's own is English. What a person reads as the answer to their query or
//! as the question put to them (an approval's message, a rejection in the answer) is said
//! [`Texts::say_to`] the query, so a deployment can answer in the query's language.
//!
//! An approval's message is a description a UI can show beside its buttons: what will run and
//! with what. How to answer it (`/todo approve` ...) is the business of the surface that asks:
//! the terminal shows its commands, a UI its buttons.

use chronicle_schemas::{SupervisorTodo, TodoId, TodoStatus};
use serde_json::Value;

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
    /// What a person sees when a TODO waits for their approval: what will run (`todo`) and with
    /// what (`args`, the input its agent gets when approved).
    TodoApproval {
        todo: &'a SupervisorTodo,
        args: &'a Value,
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
    /// A sentence of the run's answer for a TODO a person rejected while the run went on without
    /// it (`on_reject: skip`).
    RejectedInAnswer {
        todo: &'a TodoId,
        agent: &'a str,
        by: &'a str,
        comment: Option<&'a str>,
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

    /// `text` for the person who asked `query`: the answer and the questions put to them (an
    /// approval's message) follow the query's language when the deployment speaks it. By default
    /// [`Texts::say`].
    fn say_to(&self, query: &str, text: Text<'_>) -> String {
        let _ = query;
        self.say(text)
    }
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
            Text::TodoApproval { todo, args } => todo_approval_en(todo, args),
            Text::ToolApproval {
                tool,
                todo,
                target: "",
            } => {
                format!("Let {todo}'s agent call {tool}?")
            }
            Text::ToolApproval { tool, todo, target } => {
                format!("Let {todo}'s agent call {tool} on {target}?")
            }
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
            Text::RejectedInAnswer {
                todo,
                agent,
                by,
                comment,
            } => {
                let why = comment.map_or(String::new(), |c| format!(": {c}"));
                format!("{by} rejected {todo} ({agent}){why}. It did not run.")
            }
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

/// `Run weather for todo_001? Weather forecasts for a city and a day.` and the input it gets.
fn todo_approval_en(t: &SupervisorTodo, args: &Value) -> String {
    let purpose = t.agent_purpose.trim();
    let what = if purpose.is_empty() {
        String::new()
    } else {
        format!(" {}", sentence(purpose))
    };
    let with = match args_text(args, &[]) {
        text if text.is_empty() => "no input".to_owned(),
        text => text,
    };
    format!(
        "Run {agent} for {id}?{what}\nWith: {with}",
        agent = t.agent_name,
        id = t.id
    )
}

/// `text` ending with a full stop (unless it ends with punctuation already).
pub fn sentence(text: &str) -> String {
    let text = text.trim();
    match text.chars().last() {
        Some('.' | '!' | '?' | '。') | None => text.to_owned(),
        Some(_) => format!("{text}."),
    }
}

/// An agent's input for a person: `key: value` pairs joined by `; `, strings without quotes,
/// lists joined by `, `, in the input's key order; keys in `skip` and null values left out.
pub fn args_text(args: &Value, skip: &[&str]) -> String {
    let Value::Object(map) = args else {
        return value_text(args);
    };
    map.iter()
        .filter(|(k, v)| !v.is_null() && !skip.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}: {}", value_text(v)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One value for a person: a string as it is, a list joined by `, `, anything else as JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_approval_says_what_runs_and_with_what_and_no_commands() {
        let t = SupervisorTodo {
            id: "todo_001".into(),
            agent_name: "weather".into(),
            agent_purpose: "Weather forecasts for a city and a day".into(),
            ..Default::default()
        };
        let args = json!({"city": "Seoul", "days": [1, 2], "unit": null});
        let m = English.say(Text::TodoApproval {
            todo: &t,
            args: &args,
        });
        assert_eq!(
            m,
            "Run weather for todo_001? Weather forecasts for a city and a day.\nWith: city: Seoul; days: 1, 2"
        );
        assert!(!m.contains("/todo"));
        let none = English.say(Text::TodoApproval {
            todo: &t,
            args: &json!({}),
        });
        assert!(none.ends_with("With: no input"), "{none}");
        // English texts ignore the query's language: they have one.
        assert_eq!(
            English.say_to(
                "강남구",
                Text::TodoApproval {
                    todo: &t,
                    args: &args
                }
            ),
            m
        );
    }
}
