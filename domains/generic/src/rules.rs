//! The generic rules: intent, plan and evaluation from the routing table ([`crate::route`]),
//! without a model. Pure functions over the registry and the results, so other domains can hand
//! a query to them (the real-estate domain does for questions that are not its own).
//!
//! - **Intent** `general`, with the matched agents, their scores and the hints that matched in
//!   `entities.agents`; confidence [`CONFIDENCE_KEYWORD`] when a keyword matched,
//!   [`CONFIDENCE_EXAMPLE`] when only examples did, 0 when nothing did.
//! - **Plan** the matched agents in routing order (where the query names them), sequentially,
//!   each step depending on the one before, so every agent sees the earlier agents' replies in
//!   its request's `team_results`. Steps are required: an agent that still fails after its
//!   retries fails the run with its error. Nothing matched: an empty plan.
//! - **Evaluation** quality and completeness are the share of agents that answered (a result
//!   that is not `status: "error"`); agents that failed are named for a retry round (the engine
//!   runs again only those whose failure was retryable).

use chronicle_engine::agents::Registry;
use chronicle_engine::{AgentResult, EvaluationOutcome, Intent, Plan, PlanContext};
use chronicle_schemas::contract::AgentReply;
use chronicle_schemas::{PlanStep, Source, Strategy};
use serde_json::{Value, json};

use crate::route::Match;

/// The one intent type of the generic domain: it routes by agents, not by kinds of question.
pub const INTENT_GENERAL: &str = "general";
/// Intent confidence when a keyword matched: the agent's author named the word.
pub const CONFIDENCE_KEYWORD: f64 = 0.9;
/// Intent confidence when only examples matched.
pub const CONFIDENCE_EXAMPLE: f64 = 0.6;
/// Expected seconds per step, for `estimated_total_time`: about one `http` agent or model call.
const STEP_ESTIMATE_SECS: f64 = 10.0;
/// A step's timeout: the `http` agents' default, so a run's `agent_timeout_ms` (which caps it)
/// decides, and an agent's own shorter timeout fires first with its clearer error.
const STEP_TIMEOUT_SECS: u64 = crate::http::HTTP_AGENT_TIMEOUT_MS_DEFAULT / 1000;
/// Retries per step, which becomes the TODO's `max_retries`.
const STEP_RETRY_COUNT: u32 = 2;

/// One step to plan: the agent, what it should do (its purpose when `None`), and why it was
/// chosen.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StepSpec {
    pub agent: String,
    pub task: Option<String>,
    pub why: String,
    pub matched: Vec<String>,
}

impl StepSpec {
    fn of(m: &Match) -> Self {
        StepSpec {
            agent: m.agent.clone(),
            task: None,
            why: format!("routed by {}", m.describe()),
            matched: m.hints().into_iter().map(str::to_owned).collect(),
        }
    }
}

/// Records why the query goes where it goes: one note per agent, or that nothing matched.
pub fn note_routes(cx: &PlanContext<'_>, matches: &[Match]) {
    if matches.is_empty() {
        cx.note("no agent's keywords or examples match the request: nothing to plan");
    }
    for m in matches {
        cx.note(format!("routed to {}: {}", m.agent, m.describe()));
    }
}

/// The `general` intent of a routing (see the module's rules).
pub fn intent_for(matches: &[Match]) -> Intent {
    let confidence = if matches.iter().any(Match::by_keyword) {
        CONFIDENCE_KEYWORD
    } else if matches.is_empty() {
        0.0
    } else {
        CONFIDENCE_EXAMPLE
    };
    let mut keywords: Vec<String> = Vec::new();
    for m in matches {
        for h in &m.hits {
            if h.kind == crate::route::HitKind::Keyword && !keywords.contains(&h.hint) {
                keywords.push(h.hint.clone());
            }
        }
    }
    let agents: Vec<Value> = matches
        .iter()
        .map(|m| json!({"name": m.agent, "team": m.team, "score": m.score, "matched": m.hints()}))
        .collect();
    Intent {
        intent_type: INTENT_GENERAL.to_owned(),
        confidence,
        keywords,
        entities: json!({ "agents": agents }),
        source: Source::Rules,
    }
}

/// An empty sequential plan.
pub(crate) fn empty_plan(source: Source) -> Plan {
    Plan {
        strategy: Strategy::Sequential,
        steps: vec![],
        parallel_groups: vec![],
        estimated_total_time: 0.0,
        source,
    }
}

/// The plan of a routing: the matched agents in order, each after the one before.
pub fn plan_for(agents: &Registry, matches: &[Match]) -> Plan {
    let mut plan = empty_plan(Source::Rules);
    append(&mut plan, agents, matches);
    plan
}

/// Adds the matched agents to the end of `plan`, each after the step before it (the plan's
/// last step first), skipping agents the plan already runs.
pub fn append(plan: &mut Plan, agents: &Registry, matches: &[Match]) {
    let specs: Vec<StepSpec> = matches.iter().map(StepSpec::of).collect();
    append_specs(plan, agents, specs);
}

/// [`append`] of steps a routing or a model chose.
pub(crate) fn append_specs(plan: &mut Plan, agents: &Registry, specs: Vec<StepSpec>) {
    for spec in specs {
        if plan.steps.iter().any(|s| s.agent_name == spec.agent) {
            continue;
        }
        let (team, purpose) = agents.get(&spec.agent).map_or_else(
            || (String::new(), String::new()),
            |a| (a.team().to_owned(), a.purpose().to_owned()),
        );
        let task = spec.task.clone().unwrap_or_else(|| purpose.clone());
        let index = plan.steps.len();
        let dependencies: Vec<String> = plan
            .steps
            .last()
            .map(|s| s.agent_name.clone())
            .into_iter()
            .collect();
        let mut input = json!({"purpose": purpose, "matched": spec.matched});
        if let Some(task) = &spec.task {
            input["task"] = json!(task);
        }
        plan.steps.push(PlanStep {
            agent_name: spec.agent.clone(),
            team,
            task,
            description: spec.why,
            priority: u32::try_from(index).unwrap_or(u32::MAX),
            dependencies,
            input_mapping: input,
            timeout: STEP_TIMEOUT_SECS,
            retry_count: STEP_RETRY_COUNT,
            optional: false,
        });
        // Each step depends on the one before: one group per step.
        plan.parallel_groups.push(vec![spec.agent]);
        plan.estimated_total_time += STEP_ESTIMATE_SECS;
    }
}

/// Whether an agent's result is an answer: present and not `status: "error"`.
pub(crate) fn answered(r: &AgentResult) -> bool {
    r.result
        .as_ref()
        .is_some_and(|v| !AgentReply::read(v).is_error())
}

/// The rule-based evaluation (see the module's rules).
pub fn evaluate(results: &[AgentResult]) -> EvaluationOutcome {
    let total = results.len();
    let answered = results.iter().filter(|r| answered(r)).count();
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| r.agent.clone())
        .collect();
    let share = if total == 0 {
        0.0
    } else {
        answered as f64 / total as f64
    };
    let mut feedback = if total == 0 {
        "no agent ran".to_owned()
    } else {
        format!("{answered} of {total} agent(s) answered")
    };
    if !failed.is_empty() {
        feedback.push_str(&format!("; failed: {}", failed.join(", ")));
    }
    EvaluationOutcome {
        quality_score: share,
        completeness: share,
        needs_retry: !failed.is_empty(),
        retry_agents: failed,
        feedback,
        source: Source::Rules,
        add_agents: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{registry, result};

    #[test]
    fn the_intent_names_the_matched_agents_and_their_scores() {
        let agents = registry();
        let matches = crate::route("Search the news and write a report", agents.infos());
        let intent = intent_for(&matches);
        assert_eq!(
            (
                intent.intent_type.as_str(),
                intent.confidence,
                intent.source
            ),
            (INTENT_GENERAL, CONFIDENCE_KEYWORD, Source::Rules)
        );
        assert_eq!(intent.keywords, ["search", "report"]);
        assert_eq!(
            intent.entities,
            json!({"agents": [
                {"name": "search", "team": "research", "score": 1.0, "matched": ["search"]},
                {"name": "report", "team": "writing", "score": 1.0, "matched": ["report"]},
            ]})
        );
        let none = intent_for(&[]);
        assert_eq!(
            (none.confidence, none.entities),
            (0.0, json!({"agents": []}))
        );
    }

    #[test]
    fn several_matches_run_in_query_order_each_after_the_one_before() {
        let agents = registry();
        let matches = crate::route("검색해서 보고서로 정리해줘", agents.infos());
        let plan = plan_for(&agents, &matches);
        let steps: Vec<(&str, &str, Vec<&str>)> = plan
            .steps
            .iter()
            .map(|s| {
                let deps = s.dependencies.iter().map(String::as_str).collect();
                (s.agent_name.as_str(), s.team.as_str(), deps)
            })
            .collect();
        assert_eq!(
            steps,
            [
                ("search", "research", vec![]),
                ("report", "writing", vec!["search"]),
            ]
        );
        assert_eq!(plan.parallel_groups, [vec!["search"], vec!["report"]]);
        assert_eq!(plan.strategy, Strategy::Sequential);
        assert_eq!(plan.estimated_total_time, 2.0 * STEP_ESTIMATE_SECS);
        let first = &plan.steps[0];
        assert_eq!(first.task, "Finds documents on the web");
        assert_eq!(first.description, "routed by keyword \"검색\" (score 1.00)");
        assert_eq!(
            first.input_mapping,
            json!({"purpose": "Finds documents on the web", "matched": ["검색"]})
        );
        assert_eq!((first.priority, first.optional), (0, false));
        // Appending skips what the plan runs and chains after its last step.
        let mut more = plan.clone();
        let weather = crate::route("search the weather", agents.infos());
        append(&mut more, &agents, &weather);
        let names: Vec<&str> = more.steps.iter().map(|s| s.agent_name.as_str()).collect();
        assert_eq!(names, ["search", "report", "weather"]);
        assert_eq!(more.steps[2].dependencies, ["report"]);
    }

    #[test]
    fn nothing_matched_plans_nothing() {
        let agents = registry();
        let matches = crate::route("Tell me a joke", agents.infos());
        assert!(matches.is_empty());
        assert_eq!(plan_for(&agents, &matches), empty_plan(Source::Rules));
    }

    #[test]
    fn evaluation_is_the_share_that_answered_and_failures_are_retried() {
        let ok = result("weather", Some(json!({"answer": "sunny"})));
        let nothing = result(
            "search",
            Some(json!({"status": "error", "summary": "no hits"})),
        );
        let mut failed = result("report", None);
        failed.error = Some("http agent `report`: POST … returned 503".into());
        let outcome = evaluate(&[ok.clone(), nothing, failed]);
        assert_eq!(
            outcome,
            EvaluationOutcome {
                quality_score: 1.0 / 3.0,
                completeness: 1.0 / 3.0,
                needs_retry: true,
                retry_agents: vec!["report".into()],
                feedback: "1 of 3 agent(s) answered; failed: report".into(),
                source: Source::Rules,
                add_agents: vec![],
            }
        );
        let all = evaluate(&[ok]);
        assert_eq!((all.quality_score, all.needs_retry), (1.0, false));
        let none = evaluate(&[]);
        assert_eq!(
            (none.quality_score, none.feedback.as_str()),
            (0.0, "no agent ran")
        );
    }
}
