//! Human-in-the-loop policies: which TODOs and which tool calls need a human first; and what a
//! person chose when letting a TODO run ([`Chosen`]), which the TODOs after it carry on with
//! (`Planner::carry`, by default [`carry_edits`]).

use chronicle_projections::RunState;
use chronicle_schemas::{ApprovalStatus, Decision, HitlMode, RunConfig, SupervisorTodo, TodoId};
use serde_json::Value;

/// The categories whose TODOs need a human by default (contracts, payments, sensitive data),
/// used when a `categories` run names none.
pub const DEFAULT_HITL_CATEGORIES: [&str; 3] = ["contract", "payment", "sensitive"];

/// The tools gated by default under the `tools` policy, used when a run names none: those that
/// write files, start a sub-agent or change a dbt project (`*` suffix = prefix match).
pub const DEFAULT_HITL_TOOLS: [&str; 4] = ["write_file", "edit_file", "task", "dbt_*"];

/// Whether starting a TODO of an agent in `category` needs a human first. Under `tools` the gate
/// is on tool calls, not TODOs.
pub fn todo_needs_approval(config: &RunConfig, category: &str) -> bool {
    match config.hitl {
        HitlMode::None | HitlMode::Tools => false,
        HitlMode::EveryTodo => true,
        HitlMode::Categories => {
            if config.hitl_categories.is_empty() {
                DEFAULT_HITL_CATEGORIES.contains(&category)
            } else {
                config.hitl_categories.iter().any(|c| c == category)
            }
        }
    }
}

/// Whether a tool call needs a human first (policy `tools`). A run's `hitl_tools` list decides
/// when it names one; otherwise [`DEFAULT_HITL_TOOLS`], plus any tool that declares itself gated.
pub fn tool_needs_approval(config: &RunConfig, tool: &str, declared_gated: bool) -> bool {
    if config.hitl != HitlMode::Tools {
        return false;
    }
    let matches = |pattern: &str| match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => tool == pattern,
    };
    if config.hitl_tools.is_empty() {
        declared_gated || DEFAULT_HITL_TOOLS.iter().any(|p| matches(p))
    } else {
        config.hitl_tools.iter().any(|p| matches(p))
    }
}

/// What a person chose for a TODO when letting it run: the args its approval asked with, the args
/// they edited them to, and what they said. Read from the recorded decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chosen {
    pub todo_id: TodoId,
    pub agent: String,
    /// The args the approval asked with.
    pub requested: Value,
    /// The args an edit replaced them with (`None` for a plain approval).
    pub edited: Option<Value>,
    /// What they said: an edit's `feedback` (a `resume {response}` is recorded so), else the
    /// decision's comment.
    pub said: Option<String>,
}

impl Chosen {
    /// What was decided for `t`, when a person approved or edited it.
    pub fn of(state: &RunState, t: &SupervisorTodo) -> Option<Chosen> {
        if !matches!(
            t.approval_status,
            Some(ApprovalStatus::Approved | ApprovalStatus::Edited)
        ) {
            return None;
        }
        let a = state.approvals.get(t.approval_id.as_ref()?)?;
        let edited = match a.decision {
            Some(Decision::Edit) => a.edited_args.clone(),
            _ => None,
        };
        let said = edited
            .as_ref()
            .and_then(|args| args.get("feedback"))
            .and_then(Value::as_str)
            .or(a.comment.as_deref())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        Some(Chosen {
            todo_id: t.id.clone(),
            agent: t.agent_name.clone(),
            requested: a.request_args.clone(),
            edited,
            said,
        })
    }

    /// The keys an edit changed, with their new values (`None`: the edit removed the key);
    /// `feedback` is words, not an arg.
    pub fn changed(&self) -> Vec<(&str, Option<&Value>)> {
        let (Some(Value::Object(edited)), requested) = (&self.edited, &self.requested) else {
            return Vec::new();
        };
        let mut out: Vec<(&str, Option<&Value>)> = edited
            .iter()
            .filter(|(k, v)| k.as_str() != "feedback" && requested.get(k.as_str()) != Some(*v))
            .map(|(k, v)| (k.as_str(), Some(v)))
            .collect();
        if let Value::Object(requested) = requested {
            out.extend(
                requested
                    .keys()
                    .filter(|k| !edited.contains_key(k.as_str()))
                    .map(|k| (k.as_str(), None)),
            );
        }
        out
    }
}

/// What people chose for the TODOs `t` depends on (directly or through others), in the run's
/// TODO order: the choices `t` carries on with. Only its dependencies, because they are decided
/// and done before `t` is asked for or started, so `t`'s approval shows the input its agent gets
/// and a re-run of the agent gets it again.
pub fn chosen_before(state: &RunState, t: &SupervisorTodo) -> Vec<Chosen> {
    let Some(p) = state.supervisor.planning_state.as_ref() else {
        return Vec::new();
    };
    let mut deps: Vec<&TodoId> = t.dependencies.iter().collect();
    let mut i = 0;
    while let Some(id) = deps.get(i).copied() {
        i += 1;
        for d in p
            .todo(id)
            .map(|u| u.dependencies.as_slice())
            .unwrap_or_default()
        {
            if !deps.contains(&d) {
                deps.push(d);
            }
        }
    }
    p.todos
        .iter()
        .filter(|u| deps.contains(&&u.id))
        .filter_map(|u| Chosen::of(state, u))
        .collect()
}

/// The engine's rule for carrying choices on: a key an edit changed is changed the same way in
/// a later input that had the value the edited TODO was asked with (region `강남구` edited to
/// `서초구` makes a later `region: 강남구` `서초구`); other keys and words are left to the
/// domain.
pub fn carry_edits(mut input: Value, chosen: &[Chosen]) -> Value {
    let Value::Object(map) = &mut input else {
        return input;
    };
    for c in chosen {
        for (key, new) in c.changed() {
            let Some(old) = c.requested.get(key) else {
                continue;
            };
            if map.get(key) != Some(old) {
                continue;
            }
            match new {
                Some(v) => map.insert(key.to_owned(), v.clone()),
                None => map.remove(key),
            };
        }
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        let mut c = RunConfig {
            hitl: HitlMode::Categories,
            ..Default::default()
        };
        assert!(todo_needs_approval(&c, "contract") && !todo_needs_approval(&c, "general"));
        c.hitl_categories = vec!["general".into()];
        assert!(todo_needs_approval(&c, "general") && !todo_needs_approval(&c, "contract"));
        c.hitl = HitlMode::Tools;
        assert!(!todo_needs_approval(&c, "general"));
        c.hitl_tools = vec![];
        assert!(tool_needs_approval(&c, "dbt_run", false));
        assert!(tool_needs_approval(&c, "write_file", false));
        assert!(!tool_needs_approval(&c, "read_file", false));
        assert!(
            tool_needs_approval(&c, "deploy", true),
            "a tool may declare itself gated"
        );
        c.hitl_tools = vec!["read_*".into()];
        assert!(tool_needs_approval(&c, "read_file", false));
        assert!(
            !tool_needs_approval(&c, "write_file", true),
            "the run's list decides"
        );
        c.hitl = HitlMode::EveryTodo;
        assert!(todo_needs_approval(&c, "general") && !tool_needs_approval(&c, "write_file", true));
    }

    #[test]
    fn an_edit_carries_to_inputs_that_had_the_old_value() {
        use serde_json::json;
        let chosen = Chosen {
            requested: json!({"region": "강남구", "deal": "sale", "limit": 5}),
            edited: Some(json!({"region": "서초구", "deal": "sale", "feedback": "words"})),
            ..Chosen::default()
        };
        let mut changed = chosen.changed();
        changed.sort_by_key(|(k, _)| *k);
        assert_eq!(
            changed,
            vec![("limit", None), ("region", Some(&json!("서초구")))]
        );
        let later = json!({"region": "강남구", "limit": 5, "deal": "rent", "other": 1});
        assert_eq!(
            carry_edits(later, std::slice::from_ref(&chosen)),
            json!({"region": "서초구", "deal": "rent", "other": 1})
        );
        // A later input that named another value, or not the key, keeps its own.
        let own = json!({"region": "마포구"});
        assert_eq!(carry_edits(own.clone(), std::slice::from_ref(&chosen)), own);
        let plain = Chosen {
            edited: None,
            ..chosen
        };
        assert!(plain.changed().is_empty());
    }
}
