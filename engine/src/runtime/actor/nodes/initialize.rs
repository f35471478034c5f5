//! `initialize`: the run's first node, right after its `RunStarted`.

use chronicle_schemas::{Event, Phase};

use super::{RunActor, checkpoint};
use crate::Result;
use crate::plugin::texts::Text;

impl RunActor {
    pub(super) async fn initialize(&mut self) -> Result<()> {
        let query = &self.state().supervisor.query;
        let note = self
            .shared
            .settings
            .texts
            .say(Text::RequestReceived { query });
        let mut ev = vec![
            Event::PhaseChanged {
                phase: Phase::Initialization,
            },
            Event::Reasoning { message: note },
        ];
        ev.extend(self.session_context()?);
        ev.extend(self.load_memory()?);
        ev.push(checkpoint(self.state(), "initialize", 0));
        self.append(ev).await.map(drop)
    }
}
