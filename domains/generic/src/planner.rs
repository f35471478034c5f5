//! [`GenericPlanner`]: the generic domain's planning. With a model configured it asks the model,
//! with the prompts of [`crate::prompts`] over what the agents declare, and checks every answer;
//! without one, or when an answer is unusable (refused with its reason in a note and in the
//! recorded call), the rules of [`crate::rules`] decide and the composer of [`crate::compose`]
//! answers.
//!
//! What a model may decide, and what it may not:
//!
//! - intent: which registered agents fit, with scores (an unknown agent refuses the answer);
//! - plan: registered agents only, each once, at most [`ROUTE_AGENTS_MAX`], with a task each;
//!   the steps are wired as the rules wire them (each after the one before);
//! - evaluation: scores and retries, but an agent that failed is retried whatever it says, and it
//!   can only name agents that ran;
//! - response: the answer's wording only — insights, sources, agents and metadata stay the
//!   composer's. Without any answering agent the model is not asked: there is nothing to phrase.

use chronicle_engine::agents::Registry;
use chronicle_engine::llm::json_object;
use chronicle_engine::{AgentResult, EvaluationOutcome, Intent, Plan, PlanContext, Planner};
use chronicle_schemas::Source;
use serde_json::{Map, Value, json};

use crate::compose::{ANSWER_BYTES_MAX, compose, cut_bytes, cut_chars};
use crate::prompts;
use crate::route::{ROUTE_AGENTS_MAX, route};
use crate::rules::{
    INTENT_GENERAL, StepSpec, answered, append_specs, empty_plan, evaluate, intent_for,
    note_routes, plan_for,
};

/// The confidence of a valid model intent that names none.
const LLM_DEFAULT_CONFIDENCE: f64 = 0.8;
/// Characters of a task a model gives a step.
const TASK_CHARS_MAX: usize = 300;

/// The generic domain's planner: the model when one is configured, the rules otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenericPlanner;

/// Asks the model when one is configured; the parsed answer, or `None` (with a note saying why
/// the rules decide instead).
async fn ask<T>(
    cx: &PlanContext<'_>,
    purpose: &str,
    system: &str,
    user: &str,
    parse: impl FnOnce(Map<String, Value>) -> Result<T, String>,
) -> Option<T> {
    cx.llm.model()?;
    let mut refused: Option<String> = None;
    let answer = cx
        .llm
        .ask(purpose, system, user, |text| {
            let parsed = json_object(text).and_then(parse);
            if let Err(why) = &parsed {
                refused = Some(why.clone());
            }
            parsed
        })
        .await;
    if answer.is_none() {
        let why = refused.unwrap_or_else(|| "no usable answer".to_owned());
        cx.note(format!(
            "the model's {purpose} answer is refused ({why}): the rules decide"
        ));
    }
    answer
}

#[async_trait::async_trait]
impl Planner for GenericPlanner {
    async fn intent(&self, cx: &PlanContext<'_>) -> Intent {
        let user = cx.with_history(prompts::intent(cx.agents, cx.query));
        let parse = |answer| intent_from_answer(answer, cx.agents);
        match ask(cx, "intent_analysis", prompts::INTENT_SYSTEM, &user, parse).await {
            Some(intent) => intent,
            None => intent_for(&route(cx.query, cx.agents.infos())),
        }
    }

    async fn plan(&self, cx: &PlanContext<'_>, intent: &Intent) -> Plan {
        let user = cx.with_history(prompts::plan(cx.agents, cx.query, intent));
        let parse = |answer| plan_from_answer(answer, cx.agents);
        if let Some(specs) = ask(cx, "plan_building", prompts::PLAN_SYSTEM, &user, parse).await {
            let mut plan = empty_plan(Source::Llm);
            append_specs(&mut plan, cx.agents, specs);
            return plan;
        }
        let matches = route(cx.query, cx.agents.infos());
        note_routes(cx, &matches);
        plan_for(cx.agents, &matches)
    }

    async fn evaluate(&self, cx: &PlanContext<'_>, results: &[AgentResult]) -> EvaluationOutcome {
        let rules = evaluate(results);
        if results.is_empty() {
            return rules;
        }
        let user = prompts::evaluation(cx.agents, cx.query, results);
        let parse = |answer| checked_evaluation(answer, results, &rules, cx.agents);
        let judged = ask(cx, "evaluation", prompts::EVALUATION_SYSTEM, &user, parse).await;
        judged.unwrap_or(rules)
    }

    async fn respond(
        &self,
        cx: &PlanContext<'_>,
        intent: &Intent,
        results: &[AgentResult],
    ) -> Value {
        let composed = compose(cx.agents, intent, results);
        if !results.iter().any(answered) {
            return composed;
        }
        let user = cx.with_history(prompts::response(cx.query, results, &composed));
        let parse = |answer| response_from_answer(answer, &composed);
        let phrased = ask(
            cx,
            "response_formatting",
            prompts::RESPONSE_SYSTEM,
            &user,
            parse,
        )
        .await;
        phrased.unwrap_or(composed)
    }
}

/// A number in 0..=1 under `key`; `None` when absent.
fn unit(answer: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match answer.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(if *b { 1.0 } else { 0.0 })),
        Some(v) => v
            .as_f64()
            .filter(|n| (0.0..=1.0).contains(n))
            .map(Some)
            .ok_or_else(|| format!("{key} {v} is not in 0..=1")),
    }
}

/// The `agents` list of an answer: each a name or an object with `name`, checked against the
/// registry, each once, at most [`ROUTE_AGENTS_MAX`].
fn named_agents<'v>(
    answer: &'v Map<String, Value>,
    agents: &Registry,
) -> Result<Vec<(String, &'v Value)>, String> {
    let items = answer
        .get("agents")
        .and_then(Value::as_array)
        .ok_or("the answer has no agents list")?;
    if items.len() > ROUTE_AGENTS_MAX {
        return Err(format!(
            "the answer names {} agents, over {ROUTE_AGENTS_MAX}",
            items.len()
        ));
    }
    let mut out: Vec<(String, &Value)> = Vec::with_capacity(items.len());
    for item in items {
        let name = item
            .as_str()
            .or_else(|| item.get("name").and_then(Value::as_str))
            .ok_or_else(|| format!("agent {item} has no name"))?
            .trim();
        if agents.get(name).is_none() {
            let known: Vec<&str> = agents.names().collect();
            return Err(format!(
                "agent {name:?} is not registered (registered: {})",
                known.join(", ")
            ));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("agent {name:?} appears twice"));
        }
        out.push((name.to_owned(), item));
    }
    Ok(out)
}

/// A model's intent: the agents that fit, with scores.
fn intent_from_answer(answer: Map<String, Value>, agents: &Registry) -> Result<Intent, String> {
    let mut chosen: Vec<Value> = Vec::new();
    for (name, item) in named_agents(&answer, agents)? {
        let score = match item.as_object() {
            Some(fields) => unit(fields, "score")?.unwrap_or(1.0),
            None => 1.0,
        };
        let team = agents.get(&name).map(|a| a.team().to_owned());
        chosen.push(json!({"name": name, "team": team, "score": score}));
    }
    let confidence = unit(&answer, "confidence")?.unwrap_or(LLM_DEFAULT_CONFIDENCE);
    let keywords: Vec<String> = answer
        .get("keywords")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    Ok(Intent {
        intent_type: INTENT_GENERAL.to_owned(),
        confidence,
        keywords,
        entities: json!({ "agents": chosen }),
        source: Source::Llm,
    })
}

/// A model's plan: registered agents in order, each with an optional task.
fn plan_from_answer(
    answer: Map<String, Value>,
    agents: &Registry,
) -> Result<Vec<StepSpec>, String> {
    let named = named_agents(&answer, agents)?;
    if named.is_empty() {
        return Err("the plan has no agents".into());
    }
    Ok(named
        .into_iter()
        .map(|(agent, item)| StepSpec {
            agent,
            task: item
                .get("task")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| cut_chars(t, TASK_CHARS_MAX)),
            why: "planned by the model".to_owned(),
            matched: vec![],
        })
        .collect())
}

/// A model's evaluation (`{quality_score, completeness?, needs_retry?, retry_agents?,
/// add_agents?, feedback?}`), checked against the run: scores in 0..=1, retries only of agents
/// that ran, additions only of registered agents that did not. An agent the rules' outcome
/// retries (it failed) is retried whatever the model says: a model must not be able to hide a
/// failure.
pub fn checked_evaluation(
    answer: Map<String, Value>,
    results: &[AgentResult],
    rules: &EvaluationOutcome,
    agents: &Registry,
) -> Result<EvaluationOutcome, String> {
    let quality_score = unit(&answer, "quality_score")?.ok_or("the answer has no quality_score")?;
    let completeness = unit(&answer, "completeness")?.unwrap_or(rules.completeness);
    let mut retry_agents: Vec<String> = Vec::new();
    if answer.get("needs_retry").and_then(Value::as_bool) != Some(false) {
        for agent in agent_names(&answer, "retry_agents", "retry agent") {
            let agent = agent?;
            if !results.iter().any(|r| r.agent == agent) {
                return Err(format!("retry agent {agent:?} did not run"));
            }
            if !retry_agents.iter().any(|a| a == agent) {
                retry_agents.push(agent.to_owned());
            }
        }
    }
    for failed in &rules.retry_agents {
        if !retry_agents.contains(failed) {
            retry_agents.push(failed.clone());
        }
    }
    let mut add_agents: Vec<String> = Vec::new();
    for agent in agent_names(&answer, "add_agents", "added agent") {
        let agent = agent?;
        if agents.get(agent).is_none() {
            return Err(format!("added agent {agent:?} is not registered"));
        }
        if results.iter().any(|r| r.agent == agent) {
            return Err(format!("added agent {agent:?} already ran"));
        }
        if !add_agents.iter().any(|a| a == agent) {
            add_agents.push(agent.to_owned());
        }
    }
    let feedback = answer
        .get("feedback")
        .and_then(Value::as_str)
        .map_or_else(|| rules.feedback.clone(), str::to_owned);
    Ok(EvaluationOutcome {
        quality_score,
        completeness,
        needs_retry: !retry_agents.is_empty(),
        retry_agents,
        feedback,
        source: Source::Llm,
        add_agents,
    })
}

/// The agents a model's answer names in its `key` list, in order (none when it has no list);
/// `what` says in an error which list held something that is not a name.
fn agent_names<'a>(
    answer: &'a Map<String, Value>,
    key: &str,
    what: &'a str,
) -> impl Iterator<Item = Result<&'a str, String>> + 'a {
    answer
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(move |agent| {
            agent
                .as_str()
                .ok_or_else(|| format!("{what} {agent} is not a name"))
        })
}

/// The text of a model's `{"answer": "..."}`, trimmed; refused when missing or empty.
pub fn answer_text(answer: &Map<String, Value>) -> Result<&str, String> {
    answer
        .get("answer")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| "the answer has no answer text".to_owned())
}

/// The composed response with the model's wording of the answer.
fn response_from_answer(answer: Map<String, Value>, composed: &Value) -> Result<Value, String> {
    let text = answer_text(&answer)?;
    let mut out = composed.clone();
    out["answer"] = Value::String(cut_bytes(text, ANSWER_BYTES_MAX));
    out["metadata"]["composed_by"] = json!("model");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chronicle_engine::llm::{Llm, LlmCall, LlmConfig, OpenAiCompat};
    use chronicle_schemas::RunId;
    use chronicle_testkit::model::{Reply, TestServer};

    use super::*;
    use crate::testing::{registry, result};

    const KEY: &str = "sk-generic-5e1d7c9a3b";
    const WEATHER: &str = "What's the weather in Seoul tomorrow?";

    fn llm(server: &TestServer) -> Llm {
        let config = LlmConfig {
            base_url: server.base_url.clone(),
            model: "gpt-4o-mini".into(),
            api_key: Some(KEY.into()),
            timeout_ms: 5_000,
        };
        Llm::new(Some(Arc::new(OpenAiCompat::new(config).expect("client"))))
    }

    /// Which prompt a request carries, from its system message.
    fn purpose(body: &Value) -> &'static str {
        match body["messages"][0]["content"].as_str() {
            Some(prompts::INTENT_SYSTEM) => "intent",
            Some(prompts::PLAN_SYSTEM) => "plan",
            Some(prompts::EVALUATION_SYSTEM) => "evaluation",
            Some(prompts::RESPONSE_SYSTEM) => "response",
            _ => "unknown",
        }
    }

    /// The four decisions for `query` over the test registry, with `results` as the run's, and
    /// the model calls and notes they left.
    async fn decide(
        query: &str,
        results: &[AgentResult],
        llm: Llm,
    ) -> (
        Intent,
        Plan,
        EvaluationOutcome,
        Value,
        Vec<LlmCall>,
        Vec<String>,
    ) {
        let agents = registry();
        let cx = PlanContext::new(RunId::from_u128(1), query, &agents, llm);
        let intent = GenericPlanner.intent(&cx).await;
        let plan = GenericPlanner.plan(&cx, &intent).await;
        let outcome = GenericPlanner.evaluate(&cx, results).await;
        let response = GenericPlanner.respond(&cx, &intent, results).await;
        let (calls, notes) = cx.finish();
        (intent, plan, outcome, response, calls, notes)
    }

    fn weather_reply() -> Vec<AgentResult> {
        vec![result(
            "weather",
            Some(json!({"answer": "Tomorrow in Seoul: sunny, 21°C", "insights": ["no rain"]})),
        )]
    }

    fn agents_of(plan: &Plan) -> Vec<&str> {
        plan.steps.iter().map(|s| s.agent_name.as_str()).collect()
    }

    #[tokio::test]
    async fn without_a_model_the_rules_route_and_say_why() {
        let (intent, plan, outcome, response, calls, notes) =
            decide(WEATHER, &weather_reply(), Llm::new(None)).await;
        assert!(calls.is_empty());
        assert_eq!((intent.source, intent.confidence), (Source::Rules, 0.9));
        assert_eq!(agents_of(&plan), ["weather"]);
        assert_eq!(
            notes,
            ["routed to weather: keyword \"weather\" (score 1.00)"]
        );
        assert_eq!(outcome, evaluate(&weather_reply()));
        assert_eq!(response["answer"], "Tomorrow in Seoul: sunny, 21°C");

        let (_, plan, _, response, _, notes) = decide("Tell me a joke", &[], Llm::new(None)).await;
        assert!(plan.steps.is_empty());
        assert_eq!(
            notes,
            ["no agent's keywords or examples match the request: nothing to plan"]
        );
        assert!(response["answer"].as_str().unwrap().starts_with(
            "No agent could answer this request.\n\nThe available agents:\n- report: "
        ));
    }

    #[tokio::test]
    async fn good_model_answers_are_used_and_the_prompts_are_generic() {
        let server = TestServer::start(Some(KEY), |body| {
            Reply::Content(match purpose(body) {
                "intent" => json!({"agents": [{"name": "weather", "score": 0.95}], "keywords": ["weather"], "confidence": 0.9}).to_string(),
                "plan" => json!({"agents": [
                    {"name": "search", "task": "find tomorrow's forecast for Seoul"},
                    {"name": "weather"},
                ]})
                .to_string(),
                "evaluation" => json!({"quality_score": 0.7, "needs_retry": false, "feedback": "fine"}).to_string(),
                "response" => "```json\n{\"answer\": \"Sunny tomorrow in Seoul, around 21°C.\"}\n```".into(),
                _ => "?".into(),
            })
        })
        .await;
        let (intent, plan, outcome, response, calls, notes) =
            decide(WEATHER, &weather_reply(), llm(&server)).await;
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            (intent.source, intent.confidence, &intent.entities),
            (
                Source::Llm,
                0.9,
                &json!({"agents": [{"name": "weather", "team": "weather", "score": 0.95}]})
            )
        );
        assert_eq!(plan.source, Source::Llm);
        assert_eq!(agents_of(&plan), ["search", "weather"]);
        assert_eq!(plan.steps[0].task, "find tomorrow's forecast for Seoul");
        assert_eq!(plan.steps[1].task, "Weather forecasts for a city and a day");
        assert_eq!(plan.steps[1].dependencies, ["search"]);
        assert_eq!(
            (
                outcome.quality_score,
                outcome.source,
                outcome.feedback.as_str()
            ),
            (0.7, Source::Llm, "fine")
        );
        // The model phrased the answer; the composer's facts stay.
        assert_eq!(response["answer"], "Sunny tomorrow in Seoul, around 21°C.");
        assert_eq!(response["insights"], json!(["no rain"]));
        assert_eq!(response["agents"], json!(["weather"]));
        assert_eq!(response["metadata"]["composed_by"], "model");
        let purposes: Vec<(&str, bool)> = calls
            .iter()
            .map(|c| (c.purpose.as_str(), c.error.is_none()))
            .collect();
        assert_eq!(
            purposes,
            [
                ("intent_analysis", true),
                ("plan_building", true),
                ("evaluation", true),
                ("response_formatting", true)
            ]
        );
        let seen = server.requests();
        let prompt = seen[0].body["messages"][1]["content"].as_str().unwrap();
        assert!(
            prompt.contains("- weather (team weather): Weather forecasts for a city and a day"),
            "{prompt}"
        );
        assert!(prompt.contains("keywords: weather, forecast, rain, 날씨, 기온"));
        assert!(prompt.contains(WEATHER));
        for s in &seen {
            let text = s.body.to_string().to_lowercase();
            for word in ["real estate", "부동산", "apartment", "아파트"] {
                assert!(!text.contains(word), "a generic prompt says {word:?}");
            }
        }
        assert!(!format!("{calls:?}").contains(KEY));
    }

    #[tokio::test]
    async fn unusable_model_answers_are_refused_with_a_reason_and_the_rules_decide() {
        let server = TestServer::start(Some(KEY), |body| {
            Reply::Content(match purpose(body) {
                "intent" => json!({"agents": ["property_search"]}).to_string(),
                "plan" => json!({"agents": ["weather", "weather"]}).to_string(),
                "evaluation" => json!({"quality_score": 3}).to_string(),
                _ => "I'd rather chat.".into(),
            })
        })
        .await;
        let (intent, plan, outcome, response, calls, notes) =
            decide(WEATHER, &weather_reply(), llm(&server)).await;
        assert_eq!(intent, intent_for(&route(WEATHER, registry().infos())));
        assert_eq!(plan.source, Source::Rules);
        assert_eq!(agents_of(&plan), ["weather"]);
        assert_eq!(outcome, evaluate(&weather_reply()));
        assert_eq!(response["answer"], "Tomorrow in Seoul: sunny, 21°C");
        assert_eq!(response["metadata"]["composed_by"], "rules");
        assert_eq!(
            notes,
            [
                "the model's intent_analysis answer is refused (agent \"property_search\" is not registered (registered: report, search, weather)): the rules decide",
                "the model's plan_building answer is refused (agent \"weather\" appears twice): the rules decide",
                "routed to weather: keyword \"weather\" (score 1.00)",
                "the model's evaluation answer is refused (quality_score 3 is not in 0..=1): the rules decide",
                "the model's response_formatting answer is refused (the answer is not JSON: expected value at line 1 column 1): the rules decide",
            ]
        );
        // Every call is recorded with the reason it was refused.
        assert_eq!(calls.len(), 4);
        assert!(calls.iter().all(|c| c.error.is_some()));
        assert!(
            calls[1]
                .error
                .as_deref()
                .unwrap()
                .ends_with("agent \"weather\" appears twice")
        );
    }

    #[tokio::test]
    async fn a_failing_model_leaves_it_to_the_rules_and_a_failure_cannot_be_hidden() {
        let server = TestServer::start(Some(KEY), |_| Reply::Status(500)).await;
        let (intent, plan, _, _, calls, notes) = decide(WEATHER, &[], llm(&server)).await;
        assert_eq!(intent.source, Source::Rules);
        assert_eq!(agents_of(&plan), ["weather"]);
        // Nothing ran: evaluation and response do not ask.
        assert_eq!(calls.len(), 2);
        assert_eq!(
            notes[0],
            "the model's intent_analysis answer is refused (no usable answer): the rules decide"
        );

        let judge = TestServer::start(Some(KEY), |_| {
            Reply::Content(json!({"quality_score": 0.95, "needs_retry": false}).to_string())
        })
        .await;
        let mut failed = result("search", None);
        failed.error = Some("timed out".into());
        let runs = [weather_reply().remove(0), failed];
        let agents = registry();
        let cx = PlanContext::new(RunId::from_u128(1), WEATHER, &agents, llm(&judge));
        let outcome = GenericPlanner.evaluate(&cx, &runs).await;
        assert_eq!(outcome.source, Source::Llm);
        assert_eq!(outcome.quality_score, 0.95);
        assert!(outcome.needs_retry);
        assert_eq!(outcome.retry_agents, ["search"]);
    }

    #[test]
    fn model_plans_are_checked() {
        let agents = registry();
        let plan = |answer: Value| {
            plan_from_answer(answer.as_object().cloned().unwrap_or_default(), &agents)
        };
        assert_eq!(
            plan(json!({"agents": []})).err().as_deref(),
            Some("the plan has no agents")
        );
        assert_eq!(
            plan(json!({"steps": ["weather"]})).err().as_deref(),
            Some("the answer has no agents list")
        );
        assert_eq!(
            plan(json!({"agents": [{"task": "x"}]})).err().as_deref(),
            Some("agent {\"task\":\"x\"} has no name")
        );
        let many: Vec<&str> = vec!["weather"; ROUTE_AGENTS_MAX + 1];
        assert_eq!(
            plan(json!({ "agents": many })).err(),
            Some(format!(
                "the answer names 9 agents, over {ROUTE_AGENTS_MAX}"
            ))
        );
        let ok = plan(json!({"agents": [{"name": " report ", "task": "x".repeat(400)}]}));
        let ok = ok.expect("a valid plan");
        assert_eq!(ok[0].agent, "report");
        assert_eq!(ok[0].task.as_ref().map(|t| t.chars().count()), Some(301));
    }
}
