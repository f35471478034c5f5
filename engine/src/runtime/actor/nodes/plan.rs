//! `build_plan`: the planner's plan (or the one that came with the request) becomes TODOs.

use chronicle_schemas::{Actor, Event, PlanStep, Source, Strategy};

use super::{RunActor, checkpoint, intent_of, planner_events};
use crate::Result;
use crate::plugin::planner::Plan;
use crate::plugin::texts::Text;
use crate::runtime::todo;

/// A plan that came with the request, as a `Plan` (strategy defaults to sequential).
fn provided_plan(steps: &[PlanStep], strategy: Option<Strategy>) -> Plan {
    Plan {
        strategy: strategy.unwrap_or_default(),
        steps: steps.to_vec(),
        parallel_groups: vec![],
        estimated_total_time: steps.iter().map(|s| s.timeout as f64).sum(),
        source: Source::Request,
    }
}

impl RunActor {
    pub(super) async fn build_plan(&mut self) -> Result<()> {
        let s = &self.state().supervisor;
        let (query, config) = (s.query.clone(), s.config.clone());
        let intent = intent_of(self.state());
        let cx = self.plan_context(&query);
        let plan = match &config.plan {
            Some(steps) => provided_plan(steps, config.strategy),
            None => self.shared.settings.planner.plan(&cx, &intent).await,
        };
        let mut ev: Vec<Event> = planner_events(cx);
        let max_todos = config.limits.max_todos as usize;
        if plan.steps.len() > max_todos {
            ev.push(Event::RunFailed {
                error: format!(
                    "the plan has {} TODOs, over the max_todos limit of {max_todos}",
                    plan.steps.len()
                ),
            });
            return self.append(ev).await.map(drop);
        }
        let settings = &self.shared.settings;
        let strategy = config.strategy.unwrap_or(plan.strategy);
        let mut todos = todo::convert_plan(
            &plan.steps,
            0,
            super::super::now(),
            &settings.registry,
            settings.texts.as_ref(),
        );
        // Agent mode: the one TODO is the agent that drives the run.
        if config.agent.is_some()
            && let [driver] = todos.as_mut_slice()
        {
            driver
                .metadata
                .insert(todo::DRIVES_RUN.to_owned(), serde_json::json!(true));
        }
        let agents: Vec<&str> = plan.steps.iter().map(|st| st.agent_name.as_str()).collect();
        let note = settings.texts.say(Text::PlanBuilt {
            agents: &agents,
            strategy: strategy.as_str(),
        });
        ev.push(Event::PlanCreated {
            strategy: plan.strategy,
            steps: plan.steps.clone(),
            parallel_groups: plan.parallel_groups,
            estimated_total_time: plan.estimated_total_time,
            available_agents: settings.registry.names().map(str::to_owned).collect(),
            available_teams: settings.registry.teams(),
            source: plan.source,
        });
        ev.extend(todos.into_iter().map(|todo| Event::TodoAdded {
            todo,
            added_by: Actor::Engine,
        }));
        ev.push(Event::Reasoning { message: note });
        ev.push(checkpoint(self.state(), "build_plan", 0));
        self.append(ev).await.map(drop)
    }
}
