//! `generate_response`: the planner's answer from the completed agents' results, then the run
//! completes. The phase and its note come first; a model's answer streams while it is written.
//! TODOs a person rejected (the run went on without them, `on_reject: skip`) are said first in
//! the answer, with the reason, in the query's language, and listed under `rejected`: an answer
//! never hides a rejection behind what the other agents found (or did not).

use chronicle_schemas::{ApprovalStatus, Event, Phase};
use serde_json::{Value, json};

use super::{RunActor, checkpoint, elapsed_ms, intent_of, phase_change, planner_events};
use crate::Result;
use crate::plugin::planner::AgentResult;
use crate::plugin::texts::Text;
use crate::runtime::actor::now;

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
        let response = self.with_rejections(&query, response, !results.is_empty());
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

impl RunActor {
    /// `response` with the TODOs a person rejected said first in its `answer` and listed under
    /// `rejected` (`{todo_id, agent, approval_id, decided_by, comment}`). When no agent returned a
    /// result, the rejections are the whole answer.
    fn with_rejections(&self, query: &str, mut response: Value, any_result: bool) -> Value {
        let state = self.state();
        let Some(p) = state.supervisor.planning_state.as_ref() else {
            return response;
        };
        let texts = &self.shared.settings.texts;
        let mut said = Vec::new();
        let mut listed = Vec::new();
        for t in &p.todos {
            if t.approval_status != Some(ApprovalStatus::Rejected) {
                continue;
            }
            let Some(a) = t
                .approval_id
                .as_ref()
                .and_then(|id| state.approvals.get(id))
            else {
                continue;
            };
            let by = a.decided_by.as_deref().unwrap_or_default();
            said.push(texts.say_to(
                query,
                Text::RejectedInAnswer {
                    todo: &t.id,
                    agent: &t.agent_name,
                    by,
                    comment: a.comment.as_deref(),
                },
            ));
            listed.push(json!({
                "todo_id": t.id,
                "agent": t.agent_name,
                "approval_id": a.approval_id,
                "decided_by": by,
                "comment": a.comment,
            }));
        }
        if said.is_empty() {
            return response;
        }
        if !response.is_object() {
            response = json!({ "result": response });
        }
        let answer = response["answer"].as_str().unwrap_or_default().trim();
        let mut text = said.join(" ");
        if any_result && !answer.is_empty() {
            text = format!("{text}\n\n{answer}");
        }
        response["answer"] = json!(text);
        response["rejected"] = json!(listed);
        response
    }
}
