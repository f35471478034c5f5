//! `generate_response`: the planner's answer from the completed agents' results, then the run
//! completes. The phase and its note come first; a model's answer streams while it is written.

use chronicle_schemas::{Event, Phase};

use super::{RunActor, checkpoint, elapsed_ms, intent_of, phase_change, planner_events};
use crate::Result;
use crate::actor::now;
use crate::planner::AgentResult;
use crate::texts::Text;

impl RunActor {
    pub(super) async fn respond(&mut self) -> Result<()> {
        let (query, start) = {
            let s = &self.state().supervisor;
            (s.query.clone(), s.start_time)
        };
        let announce: Vec<Event> = match phase_change(self.state(), Phase::ResponseGeneration) {
            Some(phase) => vec![
                phase,
                Event::Reasoning {
                    message: self.shared.settings.texts.say(Text::Responding),
                },
            ],
            None => Vec::new(),
        };
        let mut ev = self.announce(announce).await?;
        let intent = intent_of(self.state());
        let results: Vec<AgentResult> = self
            .agent_results()
            .into_iter()
            .filter(|r| r.result.is_some())
            .collect();
        // The answer's text streams to subscribers while the model writes it.
        let cx = self.answer_context(&query);
        let (response, saved) = match self.state().supervisor.config.agent.clone() {
            // Agent mode: the agent's answer is the run's.
            Some(agent) => (self.agent_mode_response(&agent), Vec::new()),
            None => {
                let planner = &self.shared.settings.planner;
                let response = planner.respond(&cx, &intent, &results).await;
                (response, self.save_memory(&cx, &intent, &results).await)
            }
        };
        ev.extend(planner_events(cx));
        ev.push(Event::ResponseGenerated {
            final_response: response,
        });
        ev.extend(saved);
        ev.push(checkpoint(self.state(), "generate_response", 0));
        ev.push(Event::PhaseChanged {
            phase: Phase::Finished,
        });
        ev.push(Event::RunCompleted {
            total_execution_time_ms: elapsed_ms(start, now()),
        });
        self.append(ev).await.map(drop)
    }
}
