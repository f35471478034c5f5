//! `/help`: the deployment's command help.

use chronicle_schemas::Event;
use chronicle_wire::CommandOutcome;

use super::{Command, RunActor};
use crate::Result;
use crate::texts::Text;

pub(super) fn parse(args: &[&str]) -> std::result::Result<Command, String> {
    match args {
        [] => Ok(Command::Help),
        _ => Err("usage: /help".into()),
    }
}

impl RunActor {
    pub(super) async fn help(&mut self, received: Event) -> Result<CommandOutcome> {
        self.append(vec![received]).await?;
        Ok(CommandOutcome::Help {
            help: self.shared.settings.texts.say(Text::Help),
        })
    }
}
