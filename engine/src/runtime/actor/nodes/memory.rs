//! Long-term memory at a turn's edges: the user's memory is loaded when the turn starts
//! (`initialize`) and what the planner remembers of the turn is saved when it answers
//! (`generate_response`), each in that node's one append. Sub-agent runs do neither: they work
//! for their parent's turn, which has loaded the memory.

use chronicle_schemas::{Event, Memory};

use super::RunActor;
use crate::plugin::planner::{AgentResult, Intent, PlanContext};
use crate::runtime::actor::now;
use crate::runtime::memory::memory_user;

impl RunActor {
    /// The run's memory user (see [`memory_user`]); `None` for a sub-agent run.
    fn memory_user(&self) -> Option<String> {
        let s = &self.state().supervisor;
        s.parent
            .is_none()
            .then(|| memory_user(s.user_id.as_deref(), &s.owner))
    }

    /// `MemoryLoaded` with what the user's memory holds for this run's owner; nothing when it
    /// holds nothing, so runs without memory stay as small as they were.
    pub(super) fn load_memory(&self) -> crate::Result<Option<Event>> {
        let Some(user_id) = self.memory_user() else {
            return Ok(None);
        };
        let owner = &self.state().supervisor.owner;
        let max = self.shared.settings.memories_loaded_max;
        let memories = self.shared.memory()?.load(owner, &user_id, max)?;
        Ok((!memories.is_empty()).then_some(Event::MemoryLoaded { user_id, memories }))
    }

    /// `MemorySaved` for each item the planner remembers of the turn, stamped with a new id,
    /// the user and the run.
    pub(super) async fn save_memory(
        &self,
        cx: &PlanContext<'_>,
        intent: &Intent,
        results: &[AgentResult],
    ) -> Vec<Event> {
        let Some(user_id) = self.memory_user() else {
            return Vec::new();
        };
        let remembered = self
            .shared
            .settings
            .planner
            .remember(cx, intent, results)
            .await;
        remembered
            .into_iter()
            .map(|r| Event::MemorySaved {
                memory: Memory {
                    memory_id: format!("mem_{}", uuid::Uuid::new_v4().simple()),
                    kind: r.kind,
                    key: r.key,
                    value: r.value,
                    text: r.text,
                    user_id: user_id.clone(),
                    run_id: self.live.run_id(),
                    saved_at: Some(now()),
                },
            })
            .collect()
    }
}
