//! `evaluate`: the planner judges the results; a retry round adds new TODOs for the agents it
//! names (completed TODOs are final).

use chronicle_schemas::contract::AgentReply;
use chronicle_schemas::{Actor, Event, Source, TodoStatus};
use serde_json::json;

use super::{RunActor, checkpoint, planner_events};
use crate::Result;
use crate::plugin::planner::{AgentResult, EvaluationOutcome};
use crate::plugin::texts::Text;

impl RunActor {
    pub(super) async fn evaluate(&mut self) -> Result<()> {
        let query = self.state().supervisor.query.clone();
        let results = self.agent_results();
        let cx = self.plan_context(&query);
        let outcome = match &self.state().supervisor.config.agent {
            Some(agent) => agent_mode_evaluation(agent, &results),
            None => self.shared.settings.planner.evaluate(&cx, &results).await,
        };
        let mut ev: Vec<Event> = planner_events(cx);
        ev.push(Event::Reasoning {
            message: self.shared.settings.texts.say(Text::Evaluated {
                feedback: &outcome.feedback,
            }),
        });
        let add_agents = self.additions(outcome.add_agents);
        ev.push(Event::EvaluationRecorded {
            quality_score: outcome.quality_score,
            completeness: outcome.completeness,
            needs_retry: outcome.needs_retry,
            retry_agents: outcome.retry_agents,
            feedback: outcome.feedback,
            source: outcome.source,
            add_agents,
        });
        ev.push(checkpoint(self.state(), "evaluate", 0));
        self.append(ev).await.map(drop)
    }

    /// A new round: TODOs that retry `agents`, and TODOs for the agents an evaluation added
    /// (recorded like `/todo add`, by `llm`), bounded by the run's `max_todos`.
    pub(super) async fn add_retries(
        &mut self,
        agents: Vec<String>,
        added: Vec<String>,
        round: u32,
    ) -> Result<()> {
        let texts = self.shared.settings.texts.clone();
        let todos = self
            .state()
            .supervisor
            .planning_state
            .as_ref()
            .map_or(0, |p| p.todos.len());
        let room = (self.state().supervisor.config.limits.max_todos as usize).saturating_sub(todos);
        let mut ev = Vec::new();
        for (i, agent) in agents.iter().enumerate() {
            let mut t = self.new_todo(todos + i, agent, vec![]);
            t.name = texts.say(Text::RetryTodoName { agent });
            t.description = texts.say(Text::RetryTodoDescription { agent });
            t.metadata.insert("round".into(), json!(round));
            t.metadata.insert("retry_of".into(), json!(agent));
            ev.push(Event::TodoAdded {
                todo: t,
                added_by: Actor::Engine,
            });
        }
        if !agents.is_empty() {
            ev.push(Event::Reasoning {
                message: texts.say(Text::RetryRound {
                    round,
                    agents: &agents,
                }),
            });
        }
        let added: Vec<String> = added
            .into_iter()
            .take(room.saturating_sub(agents.len()))
            .collect();
        for (i, agent) in added.iter().enumerate() {
            let mut t = self.new_todo(todos + agents.len() + i, agent, vec![]);
            t.metadata.insert("added_by".into(), json!("llm"));
            t.metadata.insert("round".into(), json!(round));
            t.metadata.insert("optional".into(), json!(false));
            ev.push(Event::TodoAdded {
                todo: t,
                added_by: Actor::Llm,
            });
        }
        if !added.is_empty() {
            ev.push(Event::Reasoning {
                message: texts.say(Text::EvaluationAdded {
                    round,
                    agents: &added,
                }),
            });
        }
        self.append(ev).await.map(drop)
    }

    /// The agents an evaluation may add: registered, not in the plan yet, each once.
    fn additions(&self, asked: Vec<String>) -> Vec<String> {
        let p = self.state().supervisor.planning_state.as_ref();
        let mut out: Vec<String> = Vec::new();
        for agent in asked {
            let known = self.shared.settings.registry.get(&agent).is_some();
            let planned = p.is_some_and(|p| p.todos.iter().any(|t| t.agent_name == agent));
            if known && !planned && !out.contains(&agent) {
                out.push(agent);
            }
        }
        out
    }

    /// The answer of the agent that drives the run (agent mode): its reply's `answer`, else its
    /// `summary`, else the reply itself as JSON.
    pub(super) fn agent_mode_response(&self, agent: &str) -> serde_json::Value {
        let result = self.state().supervisor.team_results.get(agent);
        let reply = result.map(AgentReply::read).unwrap_or_default();
        let answer = reply
            .answer
            .or(reply.summary)
            .or_else(|| result.map(|r| r.to_string()))
            .unwrap_or_default();
        json!({
            "answer": answer,
            "agents": [agent],
            "metadata": {"mode": "agent", "agent": agent},
        })
    }

    /// Each agent's latest TODO that ran, in plan order, with its result or its failure (a
    /// successful retry supersedes an earlier failure). TODOs a human rejected or skipped, and
    /// blocked ones, did not fail: they are left out.
    pub(super) fn agent_results(&self) -> Vec<AgentResult> {
        let s = &self.state().supervisor;
        let Some(p) = s.planning_state.as_ref() else {
            return vec![];
        };
        let mut latest: Vec<AgentResult> = Vec::new();
        for t in p.todos.iter().filter(|t| t.planned_by().is_none()) {
            let (result, error) = match t.status {
                TodoStatus::Completed => (s.team_results.get(&t.agent_name).cloned(), None),
                TodoStatus::Skipped
                    if t.error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("Skipped: Failed")) =>
                {
                    (None, t.error.clone())
                }
                _ => continue,
            };
            let entry = AgentResult {
                agent: t.agent_name.clone(),
                team: t.team.clone(),
                todo_id: t.id.clone(),
                result,
                error,
            };
            match latest.iter_mut().find(|r| r.agent == entry.agent) {
                Some(slot) => *slot = entry,
                None => latest.push(entry),
            }
        }
        latest
    }
}

/// Agent mode's evaluation: the agent judged its own work; the run is done when it answered.
fn agent_mode_evaluation(agent: &str, results: &[AgentResult]) -> EvaluationOutcome {
    let answered = results
        .iter()
        .any(|r| r.agent == agent && r.result.is_some());
    let score = if answered { 1.0 } else { 0.0 };
    EvaluationOutcome {
        quality_score: score,
        completeness: score,
        needs_retry: false,
        retry_agents: vec![],
        feedback: if answered {
            format!("{agent} drove the run and answered")
        } else {
            format!("{agent} drove the run and gave no answer")
        },
        source: Source::Rules,
        add_agents: vec![],
    }
}
