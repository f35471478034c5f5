//! The real-estate planner: intent, plan, evaluation and response through the model when one is
//! configured (with the domain's prompts, every answer checked against what the domain can do),
//! and through the domain's rules otherwise or whenever the model's answer is unusable.

use chronicle_engine::RunState;
use chronicle_engine::llm::json_object;
use chronicle_engine::{
    AgentResult, EvaluationOutcome, Intent, Plan, PlanContext, Planner, Remembered,
};
use chronicle_generic::{INTENT_GENERAL, Match};
use chronicle_schemas::{Source, Strategy};
use serde_json::{Map, Value};

mod carry;
mod follow_up;
mod interpret;
mod memory;
pub(crate) mod prompts;
pub(crate) mod rules;

use rules::{INTENT_TYPES, LISTINGS_MAX, StepSpec, known_agents};

/// Steps a model may plan; more is a runaway answer, not a plan.
const PLAN_STEPS_MAX: usize = 32;
/// The confidence of a valid model intent that names none: about as sure as two agreeing
/// keywords in the rules.
const LLM_DEFAULT_CONFIDENCE: f64 = 0.85;

/// The entity keys a model may set; anything else in its answer is ignored.
const ENTITY_KEYS: [&str; 7] = [
    "region",
    "regions",
    "property_type",
    "deal_type",
    "price_range",
    "size_range",
    "amounts",
];
const PROPERTY_TYPES: [&str; 4] = ["아파트", "오피스텔", "빌라", "단독주택"];
const DEAL_TYPES: [&str; 3] = ["매매", "전세", "월세"];

/// The real-estate domain's planning.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealEstatePlanner;

/// The rules' view of the run's results: `(agent, result, failure)`.
fn triples(results: &[AgentResult]) -> Vec<(String, Option<Value>, Option<String>)> {
    results
        .iter()
        .map(|r| (r.agent.clone(), r.result.clone(), r.error.clone()))
        .collect()
}

/// The intent confidence from which the domain's rules treat a query as a real-estate question:
/// any real-estate term they find gives 0.8 or more, a query with none gets 0.5.
const REAL_ESTATE_CONFIDENCE_MIN: f64 = 0.6;

/// Where a query goes, between this domain's agents and agents registered beside them (`http`
/// agents from a config file, say).
///
/// The rule: a query is a **real-estate question** when the domain's intent rules find a
/// real-estate term in it (confidence at least [`REAL_ESTATE_CONFIDENCE_MIN`]) or a keyword of
/// one of the domain's own agents matches it. A query that is not, and that the generic router
/// sends to other agents (their keywords, else their examples), is handed to the generic rules
/// whole: intent, plan, evaluation and answer. A real-estate question is planned by the domain;
/// other agents whose keywords match it too run after the domain's steps.
#[derive(Debug)]
enum Routing {
    /// The domain plans; `also` are other agents a keyword names, to run after its steps.
    Own { also: Vec<Match> },
    /// Not a real-estate question: the generic rules plan these agents.
    Foreign(Vec<Match>),
}

/// Whether an agent is one of this domain's.
fn is_own(agent: &str) -> bool {
    crate::agents::names().any(|n| n == agent)
}

fn routing(cx: &PlanContext<'_>) -> Routing {
    let foreign =
        chronicle_generic::route(cx.query, cx.agents.infos().filter(|i| !is_own(&i.name)));
    let real_estate = rules::analyze_intent(cx.query).confidence >= REAL_ESTATE_CONFIDENCE_MIN
        || chronicle_generic::route(cx.query, cx.agents.infos().filter(|i| is_own(&i.name)))
            .iter()
            .any(Match::by_keyword);
    if real_estate || foreign.is_empty() {
        let also = foreign.into_iter().filter(Match::by_keyword).collect();
        Routing::Own { also }
    } else {
        Routing::Foreign(foreign)
    }
}

/// The domain's response with the other agents' composed reply added: their answer after the
/// domain's (a blank line between), their insights after its own, their sources, and their
/// names in `metadata.agents_used`. A composed reply without an answer adds nothing.
fn add_foreign(response: &mut Value, foreign: &Value) {
    if foreign["metadata"]["answer_from"] == "none" {
        return;
    }
    let text = foreign["answer"].as_str().unwrap_or_default();
    let answer = match response["answer"].as_str() {
        Some(own) if !own.is_empty() => format!("{own}\n\n{text}"),
        _ => text.to_owned(),
    };
    response["answer"] = Value::String(answer);
    for (field, into) in [
        ("insights", "/insights"),
        ("sources", "/sources"),
        ("agents", "/metadata/agents_used"),
    ] {
        let Some(more) = foreign[field].as_array().filter(|m| !m.is_empty()) else {
            continue;
        };
        match response.pointer_mut(into).and_then(Value::as_array_mut) {
            Some(list) => list.extend(more.iter().cloned()),
            None if into == "/sources" => response["sources"] = Value::Array(more.clone()),
            None => {}
        }
    }
}

#[async_trait::async_trait]
impl Planner for RealEstatePlanner {
    async fn intent(&self, cx: &PlanContext<'_>) -> Intent {
        if let Routing::Foreign(matches) = routing(cx) {
            return chronicle_generic::intent_for(&matches);
        }
        let fallback = rules::analyze_intent(cx.query);
        let user = cx.with_history(prompts::intent(cx.query));
        let answer = cx
            .llm
            .ask("intent_analysis", prompts::INTENT_SYSTEM, &user, |text| {
                intent_from_answer(json_object(text)?, &fallback)
            })
            .await;
        let mut intent = answer.unwrap_or(fallback);
        memory::apply_preferences(cx, &mut intent);
        follow_up::complete(cx, &mut intent);
        intent
    }

    async fn plan(&self, cx: &PlanContext<'_>, intent: &Intent) -> Plan {
        let also = match routing(cx) {
            Routing::Foreign(matches) => {
                cx.note("not a real-estate question: planned by the generic rules");
                chronicle_generic::note_routes(cx, &matches);
                return chronicle_generic::plan_for(cx.agents, &matches);
            }
            Routing::Own { also } => also,
        };
        let available: Vec<&str> = cx.agents.names().collect();
        let known = known_agents();
        let allowed: &[&str] = if available.is_empty() {
            &known
        } else {
            &available
        };
        let user = cx.with_history(prompts::plan(cx.query, intent, allowed));
        let answer = cx
            .llm
            .ask("plan_building", prompts::PLAN_SYSTEM, &user, |text| {
                plan_from_answer(json_object(text)?, intent, allowed)
            })
            .await;
        let mut plan = answer.unwrap_or_else(|| rules::build_plan(intent, &available));
        if !also.is_empty() {
            chronicle_generic::note_routes(cx, &also);
            chronicle_generic::append(&mut plan, cx.agents, &also);
        }
        plan
    }

    async fn evaluate(&self, cx: &PlanContext<'_>, results: &[AgentResult]) -> EvaluationOutcome {
        if !results.is_empty() && results.iter().all(|r| !is_own(&r.agent)) {
            return chronicle_generic::evaluate(results);
        }
        let ran = results;
        let results = triples(results);
        let fallback = rules::evaluate(&results);
        let user = prompts::evaluation(&prompts::results_json(&results));
        let answer = cx
            .llm
            .ask("evaluation", prompts::EVALUATION_SYSTEM, &user, |text| {
                chronicle_generic::checked_evaluation(json_object(text)?, ran, &fallback, cx.agents)
            })
            .await;
        answer.unwrap_or(fallback)
    }

    async fn interpret(&self, cx: &PlanContext<'_>, said: &str, _: &RunState) -> Option<String> {
        interpret::interpret(cx, said)
    }

    /// The conditions (districts, types, ranges) a person chose for an earlier step, by an edit
    /// or in words, are the later steps' conditions too.
    fn carry(&self, input: Value, chosen: &[chronicle_engine::hitl::Chosen]) -> Value {
        carry::carry(input, chosen)
    }

    async fn respond(
        &self,
        cx: &PlanContext<'_>,
        intent: &Intent,
        results: &[AgentResult],
    ) -> Value {
        let all = results;
        let (own, foreign): (Vec<AgentResult>, Vec<AgentResult>) =
            all.iter().cloned().partition(|r| is_own(&r.agent));
        // A run the generic rules planned, or one where only other agents answered, is answered
        // by the generic composer alone: their answer is the run's answer.
        if intent.intent_type == INTENT_GENERAL || (own.is_empty() && !foreign.is_empty()) {
            return chronicle_generic::compose(cx.agents, intent, all);
        }
        // The answer reads the results in agent-name order, as the run's `team_results` holds them.
        let mut results: Vec<(String, Value)> = own
            .iter()
            .filter_map(|r| Some((r.agent.clone(), r.result.clone()?)))
            .collect();
        results.sort_by(|a, b| a.0.cmp(&b.0));
        let fallback = rules::format_response(cx.query, intent, &results);
        let user = prompts::format(cx.query, &results, rules::is_english(cx.query));
        let answer = cx
            .llm
            .ask(
                "response_formatting",
                prompts::FORMAT_SYSTEM,
                &user,
                |text| format_from_answer(json_object(text)?, &fallback),
            )
            .await;
        let mut response = answer.unwrap_or(fallback);
        if !foreign.is_empty() {
            let composed = chronicle_generic::compose(cx.agents, intent, &foreign);
            add_foreign(&mut response, &composed);
        }
        response
    }

    /// A deal or property type the query asked for *only* is remembered as a preference.
    async fn remember(
        &self,
        cx: &PlanContext<'_>,
        _intent: &Intent,
        _results: &[AgentResult],
    ) -> Vec<Remembered> {
        memory::remembered(cx.query)
    }
}

/// `{min?, max?}` with numbers.
fn range(key: &str, value: &Value) -> Result<Value, String> {
    let bad = || format!("{key} {value} is not {{min, max}} numbers");
    let map = value.as_object().ok_or_else(bad)?;
    let mut out = Map::new();
    for bound in ["min", "max"] {
        match map.get(bound) {
            None | Some(Value::Null) => {}
            Some(n @ Value::Number(_)) => {
                out.insert(bound.to_owned(), n.clone());
            }
            Some(_) => return Err(bad()),
        }
    }
    Ok(Value::Object(out))
}

/// Checks one entity a model returned and writes it the way the rules would.
fn entity(key: &str, value: &Value) -> Result<Value, String> {
    fn text<'v>(key: &str, v: &'v Value) -> Result<&'v str, String> {
        v.as_str()
            .map(str::trim)
            .ok_or_else(|| format!("{key} {v} is not a string"))
    }
    Ok(match key {
        "region" => {
            let region = text(key, value)?;
            Value::String(rules::canonical_region(region).unwrap_or_else(|| region.to_owned()))
        }
        "regions" => {
            let items = value
                .as_array()
                .ok_or_else(|| format!("regions {value} is not a list"))?;
            let mut regions = Vec::with_capacity(items.len());
            for item in items {
                let region = text(key, item)?;
                regions.push(Value::String(
                    rules::canonical_region(region).unwrap_or_else(|| region.to_owned()),
                ));
            }
            Value::Array(regions)
        }
        "property_type" | "deal_type" => {
            let allowed: &[&str] = if key == "property_type" {
                &PROPERTY_TYPES
            } else {
                &DEAL_TYPES
            };
            let given = text(key, value)?;
            if !allowed.contains(&given) {
                return Err(format!("{key} {given:?} is not one of {allowed:?}"));
            }
            Value::String(given.to_owned())
        }
        "price_range" | "size_range" => range(key, value)?,
        "amounts" => {
            let items = value
                .as_array()
                .ok_or_else(|| format!("amounts {value} is not a list"))?;
            let mut amounts = Vec::with_capacity(items.len());
            for item in items {
                let won = item
                    .as_f64()
                    .filter(|n| *n >= 0.0)
                    .ok_or_else(|| format!("amount {item} is not a sum"))?;
                amounts.push(Value::from(won.round() as u64));
            }
            Value::Array(amounts)
        }
        _ => value.clone(),
    })
}

/// A model's intent, flat (as the intent prompt asks) or with an `entities` object. Entities the
/// model left out are filled from the rules (the prompt does not ask for amounts, which the
/// analysis needs).
fn intent_from_answer(answer: Map<String, Value>, rules_intent: &Intent) -> Result<Intent, String> {
    let intent_type = answer
        .get("intent_type")
        .and_then(Value::as_str)
        .ok_or("the answer has no intent_type string")?
        .trim()
        .to_lowercase();
    if !INTENT_TYPES.contains(&intent_type.as_str()) {
        return Err(format!(
            "intent_type {intent_type:?} is not one of {INTENT_TYPES:?}"
        ));
    }
    let given = answer
        .get("entities")
        .and_then(Value::as_object)
        .unwrap_or(&answer);
    let mut entities = Map::new();
    for key in ENTITY_KEYS {
        match given.get(key) {
            None | Some(Value::Null) => {}
            Some(value) => {
                entities.insert(key.to_owned(), entity(key, value)?);
            }
        }
    }
    if let Some(found) = rules_intent.entities.as_object() {
        for (k, v) in found {
            entities.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let confidence = match answer.get("confidence") {
        None | Some(Value::Null) => LLM_DEFAULT_CONFIDENCE,
        Some(c) => c
            .as_f64()
            .filter(|c| (0.0..=1.0).contains(c))
            .ok_or_else(|| format!("confidence {c} is not in 0..=1"))?,
    };
    let keywords: Vec<String> = answer
        .get("keywords")
        .and_then(Value::as_array)
        .map(|k| {
            k.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .filter(|k: &Vec<String>| !k.is_empty())
        .unwrap_or_else(|| rules_intent.keywords.clone());
    Ok(Intent {
        intent_type,
        confidence,
        keywords,
        entities: Value::Object(entities),
        source: Source::Llm,
    })
}

/// A model's plan (the plan prompt's `{strategy, agents: [{name, order, params, dependencies?}]}`),
/// refused when it names an agent outside `allowed`, repeats one, or depends on a later step.
fn plan_from_answer(
    answer: Map<String, Value>,
    intent: &Intent,
    allowed: &[&str],
) -> Result<Plan, String> {
    let strategy = match answer.get("strategy") {
        None | Some(Value::Null) => Strategy::Sequential,
        Some(s) => match s.as_str().map(str::trim) {
            Some("sequential") => Strategy::Sequential,
            Some("parallel") => Strategy::Parallel,
            Some("dag") => Strategy::Dag,
            _ => return Err(format!("strategy {s} is not sequential, parallel or dag")),
        },
    };
    let items = answer
        .get("agents")
        .or_else(|| answer.get("steps"))
        .and_then(Value::as_array)
        .ok_or("the answer has no agents list")?;
    if items.is_empty() {
        return Err("the plan has no agents".into());
    }
    if items.len() > PLAN_STEPS_MAX {
        return Err(format!(
            "the plan has {} agents, over {PLAN_STEPS_MAX}",
            items.len()
        ));
    }
    let mut specs: Vec<(f64, StepSpec)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let name = item
            .as_str()
            .or_else(|| {
                ["name", "agent_name", "agent"]
                    .iter()
                    .find_map(|k| item.get(*k).and_then(Value::as_str))
            })
            .ok_or_else(|| format!("agent {item} has no name"))?
            .trim();
        if !allowed.contains(&name) {
            return Err(format!(
                "agent {name:?} is not available (available: {allowed:?})"
            ));
        }
        if specs.iter().any(|(_, s)| s.agent == name) {
            return Err(format!("agent {name:?} appears twice"));
        }
        let order = item
            .get("order")
            .and_then(Value::as_f64)
            .unwrap_or(i as f64);
        let params = item
            .get("params")
            .or_else(|| item.get("input_mapping"))
            .and_then(Value::as_object)
            .cloned();
        let dependencies = match item.get("dependencies") {
            None | Some(Value::Null) => None,
            Some(deps) => Some(
                deps.as_array()
                    .ok_or_else(|| format!("dependencies of {name:?} are not a list"))?
                    .iter()
                    .map(|d| {
                        d.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| format!("dependency {d} of {name:?} is not a name"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        specs.push((
            order,
            StepSpec {
                agent: name.to_owned(),
                dependencies,
                params,
            },
        ));
    }
    specs.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (i, (_, spec)) in specs.iter().enumerate() {
        for dep in spec.dependencies.iter().flatten() {
            if !specs[..i].iter().any(|(_, s)| &s.agent == dep) {
                return Err(format!(
                    "{:?} depends on {dep:?}, which is not an earlier step",
                    spec.agent
                ));
            }
        }
    }
    let specs = specs.into_iter().map(|(_, s)| s).collect();
    Ok(rules::assemble_plan(intent, strategy, specs, Source::Llm))
}

/// A model's response over the rules' one: its answer, listings and insights, the rules'
/// counts (they are facts, not prose) and any drafted document.
fn format_from_answer(answer: Map<String, Value>, fallback: &Value) -> Result<Value, String> {
    let text = chronicle_generic::answer_text(&answer)?;
    let mut out = fallback.clone();
    out["answer"] = Value::String(text.to_owned());
    if let Some(listings) = answer
        .get("listings")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    {
        out["listings"] = Value::Array(listings.iter().take(LISTINGS_MAX).cloned().collect());
    }
    if let Some(insights) = answer.get("insights").and_then(Value::as_array) {
        let insights: Vec<Value> = insights.iter().filter(|i| i.is_string()).cloned().collect();
        if !insights.is_empty() {
            out["insights"] = Value::Array(insights);
        }
    }
    if let (Some(given), Some(metadata)) = (
        answer.get("metadata").and_then(Value::as_object),
        out["metadata"].as_object_mut(),
    ) {
        for (k, v) in given {
            metadata.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use chronicle_engine::agents::Registry;
    use chronicle_engine::llm::{Llm, LlmCall, LlmConfig, OpenAiCompat};
    use chronicle_schemas::{Hash, RunId, TodoId};
    use chronicle_testkit::model::{Reply, TestServer};
    use serde_json::json;

    use super::*;

    const KEY: &str = "sk-planner-3c9e1f7a2b5d";
    const DEPOSIT: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
    const GANGNAM_STATION: &str = "강남역 근처 30평대 아파트 매매 시세 알려줘";

    fn llm(server: &TestServer, timeout_ms: u64) -> Llm {
        let config = LlmConfig {
            base_url: server.base_url.clone(),
            model: "gpt-4o-mini".into(),
            api_key: Some(KEY.into()),
            timeout_ms,
        };
        Llm::new(Some(Arc::new(OpenAiCompat::new(config).expect("client"))))
    }

    fn cx<'a>(query: &'a str, agents: &'a Registry, llm: Llm) -> PlanContext<'a> {
        PlanContext::new(RunId::from_u128(1), query, agents, llm)
    }

    /// The one model call a planning step made, if any.
    fn one_call(cx: PlanContext<'_>) -> Option<LlmCall> {
        let (mut calls, _) = cx.finish();
        assert!(calls.len() <= 1, "{calls:?}");
        calls.pop()
    }

    /// Which prompt a request carries, from its system message.
    fn purpose(body: &Value) -> &'static str {
        match body["messages"][0]["content"].as_str() {
            Some(prompts::INTENT_SYSTEM) => "intent",
            Some(prompts::PLAN_SYSTEM) => "plan",
            Some(prompts::EVALUATION_SYSTEM) => "evaluation",
            Some(prompts::FORMAT_SYSTEM) => "format",
            _ => "unknown",
        }
    }

    fn result(agent: &str, result: Option<Value>, error: Option<&str>) -> AgentResult {
        AgentResult {
            agent: agent.into(),
            team: String::new(),
            todo_id: TodoId::default(),
            result,
            error: error.map(str::to_owned),
        }
    }

    fn results() -> Vec<AgentResult> {
        vec![
            result(
                "property_search",
                Some(json!({"status": "success", "data": [{"price": 1_200_000_000u64}]})),
                None,
            ),
            result(
                "market_analysis",
                Some(json!({"status": "success", "data": {"metrics": {"avg_price": 1.3e9}}})),
                None,
            ),
        ]
    }

    fn successes() -> Vec<(String, Value)> {
        let mut v: Vec<(String, Value)> = results()
            .into_iter()
            .filter_map(|r| Some((r.agent, r.result?)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn assert_no_key(calls: &[&Option<LlmCall>]) {
        for call in calls {
            let text = format!("{call:?}");
            assert!(!text.contains(KEY), "{text}");
        }
    }

    fn prompt_hash(system: &str, user: &str) -> Hash {
        Hash::of_content(format!("{system}\n{user}").as_bytes())
    }

    async fn intent_of(query: &str, agents: &Registry, llm: Llm) -> (Intent, Option<LlmCall>) {
        let cx = cx(query, agents, llm);
        let out = RealEstatePlanner.intent(&cx).await;
        (out, one_call(cx))
    }

    async fn plan_of(
        query: &str,
        agents: &Registry,
        intent: &Intent,
        llm: Llm,
    ) -> (Plan, Option<LlmCall>) {
        let cx = cx(query, agents, llm);
        let out = RealEstatePlanner.plan(&cx, intent).await;
        (out, one_call(cx))
    }

    async fn evaluate_of(
        query: &str,
        runs: Vec<AgentResult>,
        llm: Llm,
    ) -> (EvaluationOutcome, Option<LlmCall>) {
        let none = Registry::empty();
        let cx = cx(query, &none, llm);
        let out = RealEstatePlanner.evaluate(&cx, &runs).await;
        (out, one_call(cx))
    }

    async fn respond_of(query: &str, intent: &Intent, llm: Llm) -> (Value, Option<LlmCall>) {
        let none = Registry::empty();
        let cx = cx(query, &none, llm);
        let out = RealEstatePlanner.respond(&cx, intent, &results()).await;
        (out, one_call(cx))
    }

    fn agents(names: &[&str]) -> Registry {
        let all = crate::agents::registry();
        let mut r = Registry::empty();
        for n in names {
            r.register(all.get(n).unwrap().clone());
        }
        r
    }

    #[tokio::test]
    async fn without_a_model_the_rules_answer_and_nothing_is_recorded() {
        let none = Registry::empty();
        let (intent, call) = intent_of(DEPOSIT, &none, Llm::new(None)).await;
        assert_eq!(
            (intent.intent_type.as_str(), intent.source, call),
            ("comprehensive", Source::Rules, None)
        );
        let (plan, call) = plan_of(DEPOSIT, &none, &intent, Llm::new(None)).await;
        assert_eq!((plan, call), (rules::build_plan(&intent, &[]), None));
        let (outcome, call) = evaluate_of(DEPOSIT, results(), Llm::new(None)).await;
        assert_eq!(
            (outcome, call),
            (rules::evaluate(&triples(&results())), None)
        );
        let (response, call) = respond_of(DEPOSIT, &intent, Llm::new(None)).await;
        assert_eq!(
            (response, call),
            (rules::format_response(DEPOSIT, &intent, &successes()), None)
        );
    }

    #[tokio::test]
    async fn good_answers_are_used_and_recorded() {
        let server = TestServer::start(Some(KEY), |body| {
            Reply::Content(match purpose(body) {
                "intent" => "```json\n{\"intent_type\": \"analysis\", \"region\": \"강남\", \"property_type\": \"아파트\", \"deal_type\": \"매매\", \"price_range\": null, \"size_range\": {\"min\": 30, \"max\": 40}}\n```".into(),
                "plan" => json!({
                    "strategy": "sequential",
                    "agents": [
                        {"name": "market_analysis", "order": 2, "params": {"region": "서울특별시 강남구", "property_type": "아파트"}},
                        {"name": "property_search", "order": 1, "params": {"region": "서울특별시 강남구", "size_range": {"min": 30, "max": 40}}},
                    ],
                })
                .to_string(),
                "evaluation" => json!({
                    "quality_score": 0.9, "completeness": true, "accuracy": true, "consistency": true,
                    "needs_retry": false, "retry_agents": [], "feedback": "모든 데이터가 수집되었습니다.",
                })
                .to_string(),
                "format" => json!({
                    "answer": "강남구의 30평대 아파트 매매 시세는 평균 13억 원 수준입니다.",
                    "insights": ["학군 수요가 꾸준합니다"],
                    "metadata": {"analysis_date": "2025-09-27", "total_results": 99},
                })
                .to_string(),
                _ => "?".into(),
            })
        })
        .await;
        let none = Registry::empty();
        let (intent, intent_call) = intent_of(GANGNAM_STATION, &none, llm(&server, 5_000)).await;
        assert_eq!(intent.source, Source::Llm);
        assert_eq!(intent.intent_type, "analysis");
        assert_eq!(intent.confidence, LLM_DEFAULT_CONFIDENCE);
        assert_eq!(intent.keywords, ["시세"]);
        assert_eq!(
            intent.entities,
            json!({"language": "ko", "region": "서울특별시 강남구", "property_type": "아파트", "deal_type": "매매", "size_range": {"min": 30, "max": 40}})
        );
        let call = intent_call.clone().expect("an intent call");
        assert_eq!(
            (call.purpose.as_str(), call.model.as_str(), call.error),
            ("intent_analysis", "gpt-4o-mini", None)
        );
        assert!(
            call.response
                .starts_with("```json\n{\"intent_type\": \"analysis\"")
        );
        let seen = server.requests();
        let sent = |i: usize, role: usize| {
            seen[i].body["messages"][role]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(call.prompt_hash, prompt_hash(&sent(0, 0), &sent(0, 1)));
        assert!(sent(0, 1).contains(GANGNAM_STATION));

        let available = agents(&["property_search", "market_analysis", "search_team"]);
        let (plan, plan_call) =
            plan_of(GANGNAM_STATION, &available, &intent, llm(&server, 5_000)).await;
        assert_eq!(plan.source, Source::Llm);
        let names: Vec<&str> = plan.steps.iter().map(|s| s.agent_name.as_str()).collect();
        assert_eq!(names, ["property_search", "market_analysis"]);
        assert_eq!(plan.steps[1].dependencies, ["property_search"]);
        assert_eq!(
            plan.steps[0].input_mapping["size_range"],
            json!({"min": 30, "max": 40})
        );
        assert_eq!(plan.steps[0].input_mapping["deal_type"], json!("매매"));
        assert_eq!(plan_call.as_ref().map(|c| c.error.clone()), Some(None));

        let (outcome, evaluation_call) =
            evaluate_of(GANGNAM_STATION, results(), llm(&server, 5_000)).await;
        assert_eq!(
            outcome,
            EvaluationOutcome {
                quality_score: 0.9,
                completeness: 1.0,
                needs_retry: false,
                retry_agents: vec![],
                feedback: "모든 데이터가 수집되었습니다.".into(),
                source: Source::Llm,
                add_agents: vec![],
            }
        );

        let (response, format_call) =
            respond_of(GANGNAM_STATION, &intent, llm(&server, 5_000)).await;
        assert_eq!(
            response["answer"],
            json!("강남구의 30평대 아파트 매매 시세는 평균 13억 원 수준입니다.")
        );
        assert_eq!(response["insights"], json!(["학군 수요가 꾸준합니다"]));
        assert_eq!(response["metadata"]["analysis_date"], json!("2025-09-27"));
        // Counts come from the results, not from the model.
        assert_eq!(response["metadata"]["total_results"], json!(1));
        assert_eq!(
            response["metadata"]["agents_used"],
            json!(["market_analysis", "property_search"])
        );
        assert_eq!(response["listings"], json!([{"price": 1_200_000_000u64}]));
        assert_eq!(
            format_call.as_ref().map(|c| c.purpose.as_str()),
            Some("response_formatting")
        );

        let seen = server.requests();
        assert_eq!(seen.len(), 4);
        assert!(
            seen.iter()
                .all(|s| s.authorization.as_deref() == Some(format!("Bearer {KEY}").as_str()))
        );
        assert_no_key(&[&intent_call, &plan_call, &evaluation_call, &format_call]);
    }

    #[tokio::test]
    async fn unusable_answers_fall_back_to_the_rules_and_are_recorded() {
        let server = TestServer::start(Some(KEY), |body| {
            Reply::Content(match purpose(body) {
                "intent" => json!({"intent_type": "weather", "region": "강남"}).to_string(),
                "plan" => json!({"strategy": "sequential", "agents": [{"name": "rm_rf_agent", "order": 1}]}).to_string(),
                "evaluation" => json!({"quality_score": 1.0, "needs_retry": true, "retry_agents": ["ghost"]}).to_string(),
                _ => "Sorry, I cannot answer in JSON today.".into(),
            })
        })
        .await;
        let none = Registry::empty();
        let (intent, call) = intent_of(DEPOSIT, &none, llm(&server, 5_000)).await;
        assert_eq!(intent, rules::analyze_intent(DEPOSIT));
        let call = call.expect("an intent call");
        assert_eq!(
            call.response,
            json!({"intent_type": "weather", "region": "강남"}).to_string()
        );
        let error = call.error.unwrap_or_default();
        assert!(
            error.starts_with("llm response is not usable: intent_type \"weather\" is not one of"),
            "{error}"
        );

        let (plan, call) = plan_of(DEPOSIT, &none, &intent, llm(&server, 5_000)).await;
        assert_eq!(plan, rules::build_plan(&intent, &[]));
        let error = call.and_then(|c| c.error).unwrap_or_default();
        assert!(
            error.contains("agent \"rm_rf_agent\" is not available"),
            "{error}"
        );

        let (outcome, call) = evaluate_of(DEPOSIT, results(), llm(&server, 5_000)).await;
        assert_eq!(outcome, rules::evaluate(&triples(&results())));
        let error = call.and_then(|c| c.error).unwrap_or_default();
        assert!(
            error.contains("retry agent \"ghost\" did not run"),
            "{error}"
        );

        let (response, call) = respond_of(DEPOSIT, &intent, llm(&server, 5_000)).await;
        assert_eq!(
            response,
            rules::format_response(DEPOSIT, &intent, &successes())
        );
        let call = call.expect("a format call");
        assert_eq!(call.response, "Sorry, I cannot answer in JSON today.");
        let error = call.error.unwrap_or_default();
        assert!(
            error.starts_with("llm response is not usable: the answer is not JSON"),
            "{error}"
        );
    }

    /// An `http` agent beside the domain's, as a config file declares it (never run here).
    const WEATHER_AGENT: &str = r#"
        [[agent]]
        name = "weather"
        url = "http://127.0.0.1:9/run"
        team = "weather"
        purpose = "Weather forecasts for a city and a day"
        keywords = ["weather", "forecast", "날씨", "기온"]
        examples = ["Will it be sunny in Busan this weekend?"]
    "#;
    const WEATHER_EN: &str = "What's the weather in Seoul tomorrow?";
    const WEATHER_KO: &str = "내일 서울 날씨 어때?";

    fn with_weather() -> Registry {
        let mut r = crate::agents::registry();
        chronicle_generic::load_agents(&mut r, WEATHER_AGENT).expect("the weather agent");
        r
    }

    /// The plan for `query` and the notes it left.
    async fn plan_and_notes(
        query: &str,
        agents: &Registry,
        llm: Llm,
    ) -> (Intent, Plan, Vec<String>) {
        let cx = cx(query, agents, llm);
        let intent = RealEstatePlanner.intent(&cx).await;
        let plan = RealEstatePlanner.plan(&cx, &intent).await;
        let (calls, notes) = cx.finish();
        assert!(calls.is_empty(), "{calls:?}");
        (intent, plan, notes)
    }

    fn planned(plan: &Plan) -> Vec<&str> {
        plan.steps.iter().map(|s| s.agent_name.as_str()).collect()
    }

    #[tokio::test]
    async fn questions_that_are_not_real_estate_go_to_the_agents_whose_hints_match() {
        // A model is configured, and never asked: its prompts know only real estate.
        let server = TestServer::start(Some(KEY), |_| Reply::Status(500)).await;
        let agents = with_weather();
        for query in [WEATHER_EN, WEATHER_KO] {
            assert!(rules::analyze_intent(query).confidence < REAL_ESTATE_CONFIDENCE_MIN);
            let (intent, plan, notes) = plan_and_notes(query, &agents, llm(&server, 5_000)).await;
            assert_eq!(
                (intent.intent_type.as_str(), intent.source),
                (INTENT_GENERAL, Source::Rules),
                "{query}"
            );
            assert_eq!(planned(&plan), ["weather"], "{query}");
            assert_eq!(
                notes[0],
                "not a real-estate question: planned by the generic rules"
            );
            assert!(
                notes[1].starts_with("routed to weather: keyword "),
                "{notes:?}"
            );

            let replies = [result(
                "weather",
                Some(json!({"answer": "Tomorrow in Seoul: sunny, 21°C", "data": {"temp_c": 21}})),
                None,
            )];
            let cx = cx(query, &agents, llm(&server, 5_000));
            let outcome = RealEstatePlanner.evaluate(&cx, &replies).await;
            assert_eq!(outcome, chronicle_generic::evaluate(&replies));
            let response = RealEstatePlanner.respond(&cx, &intent, &replies).await;
            assert_eq!(response["answer"], "Tomorrow in Seoul: sunny, 21°C");
            assert_eq!(response["agents"], json!(["weather"]));
            assert!(cx.finish().0.is_empty());
        }
        assert!(server.requests().is_empty());
    }

    #[tokio::test]
    async fn a_real_estate_question_stays_the_domains_and_agents_it_names_join_after() {
        let agents = with_weather();
        let (intent, plan, notes) = plan_and_notes(GANGNAM_STATION, &agents, Llm::new(None)).await;
        assert_eq!(intent, rules::analyze_intent(GANGNAM_STATION));
        let available: Vec<&str> = agents.names().collect();
        assert_eq!(plan, rules::build_plan(&intent, &available));
        assert!(notes.is_empty(), "{notes:?}");

        let both = "강남 아파트 시세랑 내일 날씨 알려줘";
        let (intent, plan, notes) = plan_and_notes(both, &agents, Llm::new(None)).await;
        let own = rules::build_plan(&intent, &available);
        let mut want = planned(&own);
        want.push("weather");
        assert_eq!(planned(&plan), want);
        let last = own.steps.last().map(|s| s.agent_name.clone());
        assert_eq!(
            plan.steps.last().unwrap().dependencies,
            Vec::from_iter(last)
        );
        assert_eq!(notes, ["routed to weather: keyword \"날씨\" (score 1.00)"]);

        // No agent of another domain matches: the domain's plan, whatever the query.
        let (intent, plan, _) = plan_and_notes("hello", &agents, Llm::new(None)).await;
        assert_eq!(plan, rules::build_plan(&intent, &available));
    }

    #[tokio::test]
    async fn replies_of_other_agents_are_composed_by_the_generic_composer() {
        let agents = with_weather();
        let intent = rules::analyze_intent(GANGNAM_STATION);
        let weather = result(
            "weather",
            Some(json!({"answer": "Sunny tomorrow", "insights": ["no rain"], "sources": ["KMA"]})),
            None,
        );
        let respond = |runs: Vec<AgentResult>| {
            let agents = &agents;
            let intent = &intent;
            async move {
                let cx = cx(GANGNAM_STATION, agents, Llm::new(None));
                RealEstatePlanner.respond(&cx, intent, &runs).await
            }
        };
        // Beside the domain's agents: their answer after the domain's.
        let mut runs = results();
        runs.push(weather.clone());
        let mixed = respond(runs).await;
        let own = rules::format_response(GANGNAM_STATION, &intent, &successes());
        let own_answer = own["answer"].as_str().unwrap();
        assert_eq!(mixed["answer"], format!("{own_answer}\n\nSunny tomorrow"));
        assert_eq!(
            mixed["metadata"]["agents_used"],
            json!(["market_analysis", "property_search", "weather"])
        );
        assert_eq!(mixed["sources"], json!(["KMA"]));
        assert_eq!(
            mixed["insights"].as_array().unwrap().last(),
            Some(&json!("no rain"))
        );
        // Only other agents answered: theirs is the run's answer.
        let alone = respond(vec![weather.clone()]).await;
        assert_eq!(alone["answer"], "Sunny tomorrow");
        // Another agent's error reply adds nothing.
        let mut runs = results();
        runs.push(result("weather", Some(json!({"status": "error"})), None));
        assert_eq!(respond(runs).await, own);
    }

    #[tokio::test]
    async fn http_500_and_a_slow_model_fall_back_to_the_rules() {
        let server = TestServer::start(Some(KEY), |_| Reply::Status(500)).await;
        let none = Registry::empty();
        let (intent, call) = intent_of(GANGNAM_STATION, &none, llm(&server, 5_000)).await;
        assert_eq!(intent, rules::analyze_intent(GANGNAM_STATION));
        let intent_call = call.expect("an intent call");
        assert_eq!(
            (intent_call.response.as_str(), intent_call.error.as_deref()),
            ("", Some("llm returned status 500"))
        );
        let (plan, plan_call) = plan_of(GANGNAM_STATION, &none, &intent, llm(&server, 5_000)).await;
        assert_eq!(plan, rules::build_plan(&intent, &[]));
        assert_eq!(
            plan_call.as_ref().and_then(|c| c.error.as_deref()),
            Some("llm returned status 500")
        );
        assert_no_key(&[&Some(intent_call), &plan_call]);

        let slow = TestServer::start(Some(KEY), |_| {
            Reply::Delay(
                Duration::from_secs(5),
                Box::new(Reply::Content(json!({"intent_type": "search"}).to_string())),
            )
        })
        .await;
        let (intent, call) = intent_of(DEPOSIT, &none, llm(&slow, 200)).await;
        assert_eq!(
            (intent.intent_type.as_str(), intent.source),
            ("comprehensive", Source::Rules)
        );
        assert_eq!(
            call.and_then(|c| c.error).as_deref(),
            Some("llm call timed out after 200 ms")
        );
    }

    #[tokio::test]
    async fn a_model_cannot_hide_a_failed_agent() {
        let server = TestServer::start(Some(KEY), |_| {
            Reply::Content(
                json!({"quality_score": 0.95, "completeness": 0.9, "needs_retry": false})
                    .to_string(),
            )
        })
        .await;
        let mut runs = results();
        runs[1] = result("market_analysis", None, Some("timed out after 30000 ms"));
        let (outcome, call) = evaluate_of(DEPOSIT, runs, llm(&server, 5_000)).await;
        assert_eq!(outcome.source, Source::Llm);
        assert_eq!((outcome.quality_score, outcome.completeness), (0.95, 0.9));
        assert!(outcome.needs_retry);
        assert_eq!(outcome.retry_agents, ["market_analysis"]);
        assert_eq!(call.and_then(|c| c.error), None);
    }

    #[test]
    fn model_plans_are_checked() {
        let intent = rules::analyze_intent(GANGNAM_STATION);
        let plan = |answer: Value| {
            plan_from_answer(
                answer.as_object().cloned().unwrap_or_default(),
                &intent,
                &known_agents(),
            )
        };
        let ok = plan(
            json!({"strategy": "dag", "agents": ["property_search", {"agent_name": "market_analysis"}]}),
        );
        assert_eq!(
            ok.as_ref().map(|p| (p.strategy, p.steps.len(), p.source)),
            Ok((Strategy::Dag, 2, Source::Llm))
        );
        assert_eq!(
            plan(json!({"strategy": "eventually", "agents": ["property_search"]}))
                .err()
                .as_deref(),
            Some("strategy \"eventually\" is not sequential, parallel or dag")
        );
        assert_eq!(
            plan(json!({"agents": []})).err().as_deref(),
            Some("the plan has no agents")
        );
        assert_eq!(
            plan(json!({"agents": ["property_search", "property_search"]}))
                .err()
                .as_deref(),
            Some("agent \"property_search\" appears twice")
        );
        assert_eq!(
            plan(json!({"agents": [{"name": "market_analysis", "dependencies": ["property_search"]}, "property_search"]}))
                .err()
                .as_deref(),
            Some("\"market_analysis\" depends on \"property_search\", which is not an earlier step")
        );
        let many: Vec<String> = (0..=PLAN_STEPS_MAX).map(|i| format!("a{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let err = plan_from_answer(
            json!({"agents": many})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            &intent,
            &names,
        );
        assert_eq!(
            err.err(),
            Some(format!(
                "the plan has {} agents, over {PLAN_STEPS_MAX}",
                PLAN_STEPS_MAX + 1
            ))
        );
    }

    #[test]
    fn model_entities_are_checked_and_normalised() {
        let rules_intent = rules::analyze_intent(DEPOSIT);
        let intent = |answer: Value| {
            intent_from_answer(
                answer.as_object().cloned().unwrap_or_default(),
                &rules_intent,
            )
        };
        let ok = intent(
            json!({"intent_type": "Comprehensive", "entities": {"deal_type": "전세", "regions": ["Mapo"]}, "confidence": 0.7}),
        );
        let ok = ok.expect("a valid intent");
        assert_eq!(
            (ok.intent_type.as_str(), ok.confidence),
            ("comprehensive", 0.7)
        );
        // The rules' amounts fill what the model left out.
        assert_eq!(
            ok.entities,
            json!({
                "language": "ko",
                "deal_type": "전세",
                "regions": ["서울특별시 마포구"],
                "amounts": [300_000_000u64, 1_000_000_000u64],
                "change": {"subject": "deposit", "old": 300_000_000u64, "new": 1_000_000_000u64},
            })
        );
        assert_eq!(
            intent(json!({"intent_type": "search", "property_type": "castle"}))
                .err()
                .as_deref(),
            Some(
                "property_type \"castle\" is not one of [\"아파트\", \"오피스텔\", \"빌라\", \"단독주택\"]"
            )
        );
        assert_eq!(
            intent(json!({"intent_type": "search", "size_range": {"min": "thirty"}}))
                .err()
                .as_deref(),
            Some("size_range {\"min\":\"thirty\"} is not {min, max} numbers")
        );
        assert_eq!(
            intent(json!({"intent_type": "search", "confidence": 7}))
                .err()
                .as_deref(),
            Some("confidence 7 is not in 0..=1")
        );
        assert_eq!(
            intent(json!({"region": "강남"})).err().as_deref(),
            Some("the answer has no intent_type string")
        );
    }
}
