//! `/help`: the deployment's command help.

use chronicle_schemas::Event;
use chronicle_wire::CommandOutcome;

use super::RunActor;
use crate::Result;
use crate::plugin::texts::Text;

impl RunActor {
    pub(super) async fn help(&mut self, received: Event) -> Result<CommandOutcome> {
        self.append(vec![received]).await?;
        Ok(CommandOutcome::Help {
            help: self.shared.settings.texts.say(Text::Help),
        })
    }
}
