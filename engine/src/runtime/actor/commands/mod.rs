//! Carrying out the slash commands the grammar ([`crate::commands`]) parses, one file per
//! command, in the actor, so commands serialize with the run. Every command, carried out or
//! refused, is recorded as `CommandReceived`. Plain words are read as the command they mean
//! first ([`RunActor::say`]).

use chronicle_projections::RunState;
use chronicle_schemas::{Actor, Approval, ApprovalId, Event};
use chronicle_wire::CommandOutcome;

use super::RunActor;
use crate::commands::{Command, parse};
use crate::plugin::planner::{PlanContext, Planner};
use crate::plugin::said;
use crate::plugin::texts::Text;
use crate::{Error, Result};

mod add;
mod approve;
mod checkpoint_list;
mod checkpoint_restore;
mod help;
mod reject;
mod skip;
mod todos;
mod update;

/// The most characters of a refused command (and of the words it was read from) its
/// `CommandReceived` records.
pub(crate) const REFUSED_COMMAND_CHARS_MAX: usize = 256;

/// `text` cut to [`REFUSED_COMMAND_CHARS_MAX`] characters, with `…` where it was cut.
fn cut_refused(text: &str) -> String {
    match text.char_indices().nth(REFUSED_COMMAND_CHARS_MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The reading of `words`: the model's when it gives a usable one ([`said::parse_answer`]), the
/// planner's rules otherwise ([`Planner::interpret`]).
async fn interpret(
    cx: &PlanContext<'_>,
    planner: &dyn Planner,
    words: &str,
    state: &RunState,
) -> Option<String> {
    let user = said::prompt(words, state, cx.agents);
    let by_model = cx
        .llm
        .ask("interpret", said::SYSTEM, &user, said::parse_answer)
        .await;
    match by_model {
        Some(Some(command)) => Some(command),
        _ => planner.interpret(cx, words, state).await,
    }
}

impl RunActor {
    /// Runs one slash command; a refused one is recorded too and answered with
    /// [`Error::Command`] (the reason and the deployment's help).
    pub(super) async fn command(&mut self, text: &str, by: &str) -> Result<CommandOutcome> {
        self.command_said(text, by, None).await
    }

    /// Plain words to the run, read as the command they mean (see [`said`]) and carried out,
    /// recorded with the words; `None` when they mean no command. The model's reading, when
    /// one was asked, is recorded first.
    pub(super) async fn say(
        &mut self,
        said: &str,
        by: &str,
    ) -> Result<Option<(String, CommandOutcome)>> {
        let query = self.state().supervisor.query.clone();
        let cx = self.plan_context(&query);
        let planner = self.shared.settings.planner.clone();
        let command = interpret(&cx, planner.as_ref(), said, self.state()).await;
        let asked = super::nodes::planner_events(cx);
        if !asked.is_empty() {
            self.append(asked).await?;
        }
        let Some(command) = command else {
            return Ok(None);
        };
        let outcome = self.command_said(&command, by, Some(said)).await?;
        Ok(Some((command, outcome)))
    }

    /// [`Self::command`]; `said` is what the person typed when the command was read from it.
    async fn command_said(
        &mut self,
        text: &str,
        by: &str,
        said: Option<&str>,
    ) -> Result<CommandOutcome> {
        // A refused command is recorded cut short: enough to see what was tried, never a way to
        // fill the disk with requests that change nothing.
        let cut = |s: &str, accepted: bool| match accepted {
            true => s.to_owned(),
            false => cut_refused(s),
        };
        let received = |accepted: bool| Event::CommandReceived {
            command: cut(text, accepted),
            by: Actor::user(by),
            accepted,
            said: said.map(|s| cut(s, accepted)),
        };
        let outcome = match parse(text) {
            Ok(cmd) => self.apply(cmd, by, received(true)).await,
            Err(reason) => Err(Error::Command {
                reason,
                help: String::new(),
            }),
        };
        match outcome {
            Err(Error::Store(e)) => Err(Error::Store(e)),
            Err(e) => {
                self.append(vec![received(false)]).await?;
                let help = self.shared.settings.texts.say(Text::Help);
                Err(match e {
                    Error::Command { reason, .. } => Error::Command { reason, help },
                    // What the run's state refused stays a conflict, as on every other route.
                    other if other.is_conflict() => Error::CommandConflict {
                        reason: other.to_string(),
                        help,
                    },
                    other => Error::Command {
                        reason: other.to_string(),
                        help,
                    },
                })
            }
            ok => ok,
        }
    }

    /// Carries out a parsed command; `received` is its `CommandReceived`, appended with what the
    /// command does.
    async fn apply(&mut self, cmd: Command, by: &str, received: Event) -> Result<CommandOutcome> {
        Ok(match cmd {
            Command::Help => self.help(received).await?,
            Command::Todos => CommandOutcome::Todos(self.todos(received).await?),
            Command::CheckpointList => self.checkpoint_list(received).await?,
            Command::CheckpointRestore { checkpoint } => {
                CommandOutcome::Restored(self.checkpoint_restore(checkpoint, by, received).await?)
            }
            Command::Approve { target } => self.approve(target, by, received).await?,
            Command::Reject { words } => {
                CommandOutcome::Rejected(self.reject(words, by, received).await?)
            }
            Command::Skip { todo, reason } => {
                CommandOutcome::Skipped(self.skip(todo, reason, by, received).await?)
            }
            Command::Add { agent, after } => {
                CommandOutcome::Added(Box::new(self.add(agent, after, by, received).await?))
            }
            Command::Update { todo, status } => {
                CommandOutcome::Updated(self.update(todo, status, by, received).await?)
            }
        })
    }

    /// Resolves `[<approval_id>|<todo_id>|all]` against the pending approvals.
    fn resolve_pending(&self, target: Option<&str>) -> Result<Vec<ApprovalId>> {
        let pending: Vec<&Approval> = self.state().approvals.pending().collect();
        if pending.is_empty() {
            return Err(Error::NothingPending);
        }
        let names = |a: &Approval, id: &str| {
            a.approval_id.as_str() == id
                || a.subject
                    .as_ref()
                    .is_some_and(|s| s.todo_id().as_str() == id)
        };
        match target {
            None if pending.len() == 1 => Ok(vec![pending[0].approval_id.clone()]),
            None => Err(Error::SeveralPending(
                pending
                    .iter()
                    .map(|a| {
                        a.subject
                            .as_ref()
                            .map_or(a.approval_id.to_string(), |s| s.todo_id().to_string())
                    })
                    .collect(),
            )),
            Some("all") => Ok(pending.iter().map(|a| a.approval_id.clone()).collect()),
            Some(id) => pending
                .iter()
                .find(|a| names(a, id))
                .map(|a| vec![a.approval_id.clone()])
                .ok_or_else(|| Error::NoPendingFor(id.to_owned())),
        }
    }
}
