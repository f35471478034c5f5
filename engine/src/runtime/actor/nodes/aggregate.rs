//! `aggregate`: one digest per agent result (the full results stay in the log once, in
//! `AgentCompleted`, and in `team_results`).

use chronicle_schemas::{Event, Phase, TodoStatus};
use serde_json::{Value, json};

use super::{RunActor, checkpoint, phase_change};
use crate::Result;
use crate::plugin::texts::Text;

/// A small summary of an agent result: its scalar fields (short strings, numbers, flags) and the
/// length of its lists.
fn digest(v: &Value) -> Value {
    const STRING_BYTES_MAX: usize = 200;
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, v)| match v {
                    Value::Bool(_) | Value::Number(_) => Some((k.clone(), v.clone())),
                    Value::String(s) if s.len() <= STRING_BYTES_MAX => Some((k.clone(), v.clone())),
                    Value::Array(a) => Some((format!("{k}_count"), json!(a.len()))),
                    _ => None,
                })
                .collect(),
        ),
        Value::Array(a) => json!({"count": a.len()}),
        other => other.clone(),
    }
}

impl RunActor {
    pub(super) async fn aggregate(&mut self) -> Result<()> {
        let sup = &self.state().supervisor;
        let todo_of = |agent: &str| {
            sup.planning_state.as_ref().and_then(|p| {
                p.todos
                    .iter()
                    .rev()
                    .find(|t| t.agent_name == agent && t.status == TodoStatus::Completed)
                    .map(|t| t.id.clone())
            })
        };
        let aggregated: serde_json::Map<String, Value> = sup
            .team_results
            .iter()
            .map(|(agent, result)| {
                (
                    agent.clone(),
                    json!({"todo_id": todo_of(agent), "digest": digest(result)}),
                )
            })
            .collect();
        let mut ev: Vec<Event> = phase_change(self.state(), Phase::Aggregation)
            .into_iter()
            .collect();
        ev.push(Event::Reasoning {
            message: self.shared.settings.texts.say(Text::Aggregated {
                agents: aggregated.len(),
            }),
        });
        ev.push(Event::ResultsAggregated {
            aggregated: Value::Object(aggregated),
        });
        ev.push(checkpoint(self.state(), "aggregate", 0));
        self.append(ev).await.map(drop)
    }
}
