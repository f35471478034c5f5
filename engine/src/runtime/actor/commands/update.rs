//! `/todo update <todo_id> <status>`: set a status by hand (recorded as by the person).

use chronicle_schemas::{Actor, Event, TodoId, TodoStatus};
use chronicle_wire::{Updated, tag};

use super::RunActor;
use crate::plugin::texts::Text;
use crate::runtime::todo;
use crate::{Error, Result};

impl RunActor {
    pub(super) async fn update(
        &mut self,
        todo: String,
        status: String,
        by: &str,
        received: Event,
    ) -> Result<Updated> {
        let id = TodoId(todo);
        let to = TodoStatus::parse(&status).ok_or(Error::BadStatus(status))?;
        let t = self
            .todo(&id)
            .ok_or_else(|| Error::TodoNotFound(id.clone()))?;
        todo::check_transition(&t, to)?;
        let reason = format!("manual update by {by}");
        let mut ev = vec![received];
        if to != TodoStatus::InProgress {
            ev.extend(self.stop_agent(&id, by, &reason));
        }
        ev.push(Event::TodoStatusChanged {
            todo_id: id.clone(),
            from: t.status,
            to,
            reason: Some(reason),
            attempt: t.attempts,
            by: Actor::user(by),
        });
        self.append(ev).await?;
        let message = self.shared.settings.texts.say(Text::TodoUpdated {
            todo: &id,
            status: to,
        });
        Ok(Updated {
            status: tag::Updated::default(),
            todo_id: id,
            new_status: to,
            message,
        })
    }
}
