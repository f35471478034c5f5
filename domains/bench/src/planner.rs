//! `BenchPlanner`: the benchmark workflow's rules ([`crate::rules`]) as the engine's four
//! decisions, with no model even when one is configured (the comparison measures the engine).

use chronicle_engine::{AgentResult, EvaluationOutcome, Intent, Plan, PlanContext, Planner};
use chronicle_schemas::{PlanStep, Source, Strategy};
use serde_json::{Value, json};

use crate::rules::{BenchPlan, Role, aggregate, answer_text, plan_for_query, prefix};

/// A step's timeout in seconds; the mock agents answer at once.
const STEP_TIMEOUT_SECS: u64 = 10;
/// How many characters of the query a step's description repeats.
const DESCRIPTION_QUERY_CHARS: usize = 40;

/// The benchmark domain's planner.
#[derive(Clone, Copy, Debug, Default)]
pub struct BenchPlanner;

#[async_trait::async_trait]
impl Planner for BenchPlanner {
    async fn intent(&self, cx: &PlanContext<'_>) -> Intent {
        let plan = plan_for_query(cx.query);
        let agents: Vec<&str> = plan.agents.iter().map(|r| r.name).collect();
        Intent {
            intent_type: plan.intent.to_owned(),
            confidence: 1.0,
            keywords: plan.keywords.iter().map(|k| (*k).to_owned()).collect(),
            entities: json!({ "agents": agents }),
            source: Source::Rules,
        }
    }

    async fn plan(&self, cx: &PlanContext<'_>, _intent: &Intent) -> Plan {
        let plan = plan_for_query(cx.query);
        cx.note(why(&plan));
        let steps: Vec<PlanStep> = plan
            .agents
            .iter()
            .enumerate()
            .map(|(i, role)| step(role, i, &plan, cx.query))
            .collect();
        Plan {
            strategy: Strategy::Sequential,
            parallel_groups: steps.iter().map(|s| vec![s.agent_name.clone()]).collect(),
            steps,
            estimated_total_time: 0.0,
            source: Source::Rules,
        }
    }

    /// The mock agents never fail, so the generic rule passes every result.
    async fn evaluate(&self, _cx: &PlanContext<'_>, results: &[AgentResult]) -> EvaluationOutcome {
        chronicle_generic::evaluate(results)
    }

    /// The aggregate and the answer's text, with the intent and the completed TODOs: a few
    /// hundred bytes, as the other implementations return.
    async fn respond(
        &self,
        cx: &PlanContext<'_>,
        _intent: &Intent,
        results: &[AgentResult],
    ) -> Value {
        let plan = plan_for_query(cx.query);
        let aggregated = aggregate(plan.agents.len(), results);
        let completed: Vec<&str> = results
            .iter()
            .filter(|r| r.result.is_some())
            .map(|r| r.todo_id.as_str())
            .collect();
        json!({
            "answer": answer_text(plan.intent, cx.query, &aggregated),
            "intent": plan.intent,
            "completed_todo_ids": completed,
            "aggregated_results": aggregated,
        })
    }
}

/// The `index`th step of `plan`: its agent, after the step before it.
fn step(role: &Role, index: usize, plan: &BenchPlan, query: &str) -> PlanStep {
    let dependencies = index
        .checked_sub(1)
        .map(|before| plan.agents[before].name.to_owned())
        .into_iter()
        .collect();
    PlanStep {
        agent_name: role.name.to_owned(),
        team: role.team.to_owned(),
        task: role.purpose.to_owned(),
        description: format!(
            "{} step {} for: {}",
            role.name,
            index + 1,
            prefix(query, DESCRIPTION_QUERY_CHARS)
        ),
        priority: u32::try_from(index).unwrap_or(u32::MAX),
        dependencies,
        input_mapping: json!({ "purpose": role.purpose }),
        timeout: STEP_TIMEOUT_SECS,
        retry_count: 0,
        optional: false,
    }
}

/// The plan's note: which keywords chose the agents, or that the default plan was taken.
fn why(plan: &BenchPlan) -> String {
    let agents: Vec<&str> = plan.agents.iter().map(|r| r.name).collect();
    let keywords = if plan.keywords.is_empty() {
        "none".to_owned()
    } else {
        plan.keywords.join(", ")
    };
    if plan.by_default {
        format!(
            "fewer than two agents matched (keywords: {keywords}): the default plan {}",
            agents.join(" → ")
        )
    } else {
        format!("keywords {keywords} plan {}", agents.join(" → "))
    }
}
