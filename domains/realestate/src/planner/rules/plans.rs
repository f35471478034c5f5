//! Plans: which agents an intent needs, in which order, with which parameters.

use std::collections::BTreeMap;

use chronicle_engine::{Intent, Plan};
use chronicle_schemas::{PlanStep, Source, Strategy};
use serde_json::{Map, Value, json};

use crate::query::{CONDITION_KEYS, SEARCH_KEYS};

/// Expected seconds per step, for `estimated_total_time`: the bundled agents answer in well under
/// this, an `http` agent or a model call in about this.
const STEP_ESTIMATE_SECS: f64 = 10.0;
/// Per-step agent timeout in seconds.
const STEP_TIMEOUT_SECS: u64 = 30;
/// Retries per step, which becomes the TODO's `max_retries`.
const STEP_RETRY_COUNT: u32 = 2;

/// One step of a plan before it is wired: the agent, dependencies if someone (a model) gave them,
/// and parameters that override the defaults.
#[derive(Clone, Debug, Default)]
pub(crate) struct StepSpec {
    pub agent: String,
    pub dependencies: Option<Vec<String>>,
    pub params: Option<Map<String, Value>>,
}

/// The plans each intent can use: the first is preferred, the second replaces it when fewer of
/// the first's agents are available (e.g. a registry with only the teams).
fn candidates(intent_type: &str) -> [&'static [&'static str]; 2] {
    match intent_type {
        "comprehensive" => [
            &["search_team", "analysis_team"],
            &["property_search", "market_analysis"],
        ],
        "document" => [&["search_team", "document_team"], &["property_search"]],
        "report" => [
            &["search_team", "analysis_team", "document_team"],
            &["property_search", "market_analysis"],
        ],
        "analysis" => [
            &["property_search", "market_analysis"],
            &["search_team", "analysis_team"],
        ],
        "comparison" => [
            &["property_search", "region_comparison"],
            &["search_team", "analysis_team"],
        ],
        "recommendation" => [
            &[
                "property_search",
                "market_analysis",
                "region_comparison",
                "investment_advisor",
            ],
            &["search_team", "analysis_team"],
        ],
        _ => [&["search_team"], &["property_search"]],
    }
}

/// The rules' plan for an intent: its preferred agents, or the fallback family when more of
/// those are available. Agents missing from `available_agents` are skipped unless the list is
/// empty.
pub fn build_plan(intent: &Intent, available_agents: &[&str]) -> Plan {
    let available = |a: &&str| available_agents.is_empty() || available_agents.contains(a);
    let mut chosen: Vec<&str> = Vec::new();
    for candidate in candidates(&intent.intent_type) {
        let kept: Vec<&str> = candidate.iter().copied().filter(available).collect();
        // Strictly more, so the preferred plan wins a tie.
        if kept.len() > chosen.len() {
            chosen = kept;
        }
    }
    let specs = chosen
        .iter()
        .map(|a| StepSpec {
            agent: (*a).to_owned(),
            ..StepSpec::default()
        })
        .collect();
    assemble_plan(intent, Strategy::Sequential, specs, Source::Rules)
}

/// The dependencies a step gets when nobody named them: teams after `search_team` (a report
/// also after `analysis_team`), the specialists' analyses after `property_search`, the advisor
/// after everything it summarises.
fn default_dependencies(agent: &str, earlier: &[&str]) -> Vec<String> {
    let wanted: &[&str] = match agent {
        "analysis_team" => &["search_team"],
        "document_team" => &["search_team", "analysis_team"],
        "market_analysis" | "region_comparison" => &["property_search"],
        "investment_advisor" => &["property_search", "market_analysis", "region_comparison"],
        _ => &[],
    };
    wanted
        .iter()
        .filter(|w| earlier.contains(w))
        .map(|w| (*w).to_owned())
        .collect()
}

/// `(team, task, description, purpose)` of an agent for an intent.
fn describe(
    agent: &str,
    intent_type: &str,
) -> (&'static str, &'static str, &'static str, &'static str) {
    let legal = intent_type == "comprehensive";
    match agent {
        "search_team" if legal => (
            "search",
            "법률 정보 검색",
            "관련 법률 조항, 판례와 시세 정보 검색",
            "법률 조항과 시세 정보 수집",
        ),
        "search_team" if intent_type == "document" => (
            "search",
            "계약 관련 정보 검색",
            "계약서 작성에 필요한 법률 조항과 표준 계약 조건 검색",
            "계약서 작성에 필요한 법률 정보 수집",
        ),
        "search_team" if intent_type == "report" => (
            "search",
            "시장 조사",
            "보고서에 쓸 매물, 시세, 대출 정보 검색",
            "보고서에 쓸 매물과 시세 정보 수집",
        ),
        "search_team" => (
            "search",
            "부동산 정보 검색",
            "매물, 시세, 대출 정보 검색",
            "매물과 시세 정보 수집",
        ),
        "analysis_team" if legal => (
            "analysis",
            "법률 데이터 분석",
            "보증금 인상률 계산, 법정 상한 비교 및 리스크 평가",
            "인상률과 법정 한도 분석",
        ),
        "analysis_team" => (
            "analysis",
            "시장 데이터 분석",
            "검색 결과의 시세 분석과 인사이트 도출",
            "시세 분석",
        ),
        "document_team" if intent_type == "report" => (
            "document",
            "보고서 작성",
            "검색과 분석 결과를 정리한 시장 보고서 작성",
            "시장 보고서 작성",
        ),
        "document_team" => (
            "document",
            "계약서 작성",
            "검색된 법률 정보를 반영한 계약서 초안 작성과 검토",
            "계약서 초안 작성",
        ),
        "property_search" => ("search", "매물 검색", "조건에 맞는 매물 검색", "매물 검색"),
        "market_analysis" => (
            "analysis",
            "시세 분석",
            "시세와 가격 추이 분석",
            "시장 분석",
        ),
        "region_comparison" => (
            "analysis",
            "지역 비교",
            "지역별 시세와 여건 비교",
            "지역 비교",
        ),
        "investment_advisor" => (
            "analysis",
            "투자 자문",
            "검색과 분석 결과를 종합한 투자 자문",
            "투자 자문",
        ),
        _ => ("external", "외부 에이전트 실행", "외부 에이전트 실행", ""),
    }
}

/// The intent's entities an agent needs, plus what only that agent uses.
fn default_params(agent: &str, intent: &Intent) -> Map<String, Value> {
    let keys: &[&str] = match agent {
        "search_team" => &SEARCH_KEYS,
        "analysis_team" | "document_team" => &["region", "property_type", "deal_type", "amounts"],
        // The listing search takes the search team's conditions but not the amounts.
        "property_search" => CONDITION_KEYS,
        "market_analysis" => &["region", "property_type"],
        "region_comparison" => &["property_type"],
        "investment_advisor" => &["region", "property_type", "price_range"],
        _ => &["region", "property_type", "deal_type"],
    };
    let mut params = Map::new();
    for key in keys {
        if let Some(v) = intent.entities.get(*key).filter(|v| !v.is_null()) {
            params.insert((*key).to_owned(), v.clone());
        }
    }
    let entity = |k: &str| intent.entities.get(k).and_then(Value::as_str);
    match agent {
        "search_team" if !intent.keywords.is_empty() => {
            params.insert("keywords".into(), json!(intent.keywords));
        }
        "analysis_team" => {
            let raised = intent.entities.get("change").is_some();
            let kind = if intent.intent_type == "comprehensive" || raised {
                "legal"
            } else {
                "market"
            };
            params.insert("analysis_type".into(), json!(kind));
        }
        "document_team" => {
            // The document agent's vocabulary (agents/document.rs): a market report, a sale,
            // or a lease (전세 and 월세 are both leases; the deal type tells the agent which).
            let document_type = match (intent.intent_type.as_str(), entity("deal_type")) {
                ("report", _) => "market_report",
                (_, Some("매매")) => "sales_contract",
                _ => "lease_contract",
            };
            params.insert("document_type".into(), json!(document_type));
        }
        "region_comparison" => {
            let regions = intent
                .entities
                .get("regions")
                .cloned()
                .or_else(|| entity("region").map(|r| json!([r])));
            if let Some(regions) = regions {
                params.insert("regions".into(), regions);
            }
        }
        _ => {}
    }
    params
}

/// Team steps are numbered from 1 (`search_team` has priority 1, as the original TODO list
/// shows it); the specialist agents keep the 0-based order.
fn priority(agent: &str, index: usize) -> u32 {
    let index = u32::try_from(index).unwrap_or(u32::MAX);
    if agent.ends_with("_team") {
        index.saturating_add(1)
    } else {
        index
    }
}

/// Wires steps into a plan: descriptions, parameters, dependencies (only on earlier steps),
/// dependency levels as `parallel_groups`, and the time estimate.
pub(crate) fn assemble_plan(
    intent: &Intent,
    strategy: Strategy,
    specs: Vec<StepSpec>,
    source: Source,
) -> Plan {
    let names: Vec<String> = specs.iter().map(|s| s.agent.clone()).collect();
    let mut steps = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let earlier: Vec<&str> = names[..i].iter().map(String::as_str).collect();
        let dependencies = match spec.dependencies {
            Some(deps) => deps
                .into_iter()
                .filter(|d| earlier.contains(&d.as_str()))
                .collect(),
            None => default_dependencies(&spec.agent, &earlier),
        };
        let (team, task, description, purpose) = describe(&spec.agent, &intent.intent_type);
        let mut input = Map::new();
        input.insert("purpose".into(), json!(purpose));
        input.extend(default_params(&spec.agent, intent));
        // A model's parameters win over the defaults: it read the whole query.
        input.extend(
            spec.params
                .unwrap_or_default()
                .into_iter()
                .filter(|(_, v)| !v.is_null()),
        );
        steps.push(PlanStep {
            team: team.to_owned(),
            task: task.to_owned(),
            description: description.to_owned(),
            priority: priority(&spec.agent, i),
            dependencies,
            input_mapping: Value::Object(input),
            timeout: STEP_TIMEOUT_SECS,
            retry_count: STEP_RETRY_COUNT,
            optional: false,
            agent_name: spec.agent,
        });
    }
    let parallel_groups = dependency_levels(&steps);
    let critical_steps = match strategy {
        Strategy::Sequential => steps.len(),
        Strategy::Parallel | Strategy::Dag => parallel_groups.len(),
    };
    Plan {
        strategy,
        steps,
        parallel_groups,
        estimated_total_time: critical_steps as f64 * STEP_ESTIMATE_SECS,
        source,
    }
}

/// Steps grouped by dependency depth: each group can run together once the previous groups are
/// done.
fn dependency_levels(steps: &[PlanStep]) -> Vec<Vec<String>> {
    let mut level_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for step in steps {
        let level = step
            .dependencies
            .iter()
            .filter_map(|d| level_of.get(d.as_str()))
            .map(|l| l + 1)
            .max()
            .unwrap_or(0);
        level_of.insert(&step.agent_name, level);
        if groups.len() <= level {
            groups.resize_with(level + 1, Vec::new);
        }
        groups[level].push(step.agent_name.clone());
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rules::{analyze_intent, known_agents};

    fn intent(query: &str) -> Intent {
        analyze_intent(query)
    }

    fn agents(plan: &Plan) -> Vec<&str> {
        plan.steps.iter().map(|s| s.agent_name.as_str()).collect()
    }

    #[test]
    fn comprehensive_plans_search_then_analysis() {
        let plan = build_plan(
            &intent("집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘"),
            &[],
        );
        assert_eq!(agents(&plan), ["search_team", "analysis_team"]);
        assert_eq!(plan.source, Source::Rules);
        assert_eq!(plan.strategy, Strategy::Sequential);
        let (search, analysis) = (&plan.steps[0], &plan.steps[1]);
        assert_eq!((search.priority, analysis.priority), (1, 2));
        assert!(search.dependencies.is_empty());
        assert_eq!(analysis.dependencies, ["search_team"]);
        assert_eq!(
            (search.team.as_str(), analysis.team.as_str()),
            ("search", "analysis")
        );
        assert_eq!(
            (search.timeout, search.retry_count, search.optional),
            (30, 2, false)
        );
        assert_eq!(
            analysis.input_mapping["purpose"],
            json!("인상률과 법정 한도 분석")
        );
        assert_eq!(
            analysis.input_mapping["amounts"],
            json!([300_000_000u64, 1_000_000_000u64])
        );
        assert_eq!(analysis.input_mapping["analysis_type"], json!("legal"));
        assert_eq!(
            plan.parallel_groups,
            [vec!["search_team"], vec!["analysis_team"]]
        );
        assert_eq!(plan.estimated_total_time, 20.0);
    }

    #[test]
    fn plans_per_intent() {
        let plan = build_plan(&intent("전세 계약서 작성해줘"), &[]);
        assert_eq!(agents(&plan), ["search_team", "document_team"]);
        assert_eq!(plan.steps[1].dependencies, ["search_team"]);
        assert_eq!(
            plan.steps[1].input_mapping["document_type"],
            json!("lease_contract")
        );

        let plan = build_plan(&intent("강남구 아파트 시세 조회"), &[]);
        assert_eq!(agents(&plan), ["search_team"]);
        assert_eq!(plan.steps[0].priority, 1);
        assert_eq!(
            plan.steps[0].input_mapping["region"],
            json!("서울특별시 강남구")
        );

        let plan = build_plan(&intent("강남역 근처 30평대 아파트 매매 시세 알려줘"), &[]);
        assert_eq!(agents(&plan), ["property_search", "market_analysis"]);
        assert_eq!((plan.steps[0].priority, plan.steps[1].priority), (0, 1));
        assert_eq!(plan.steps[1].dependencies, ["property_search"]);
        assert_eq!(
            plan.steps[0].input_mapping,
            json!({
                "purpose": "매물 검색",
                "region": "서울특별시 강남구",
                "property_type": "아파트",
                "deal_type": "매매",
                "size_range": {"min": 30, "max": 40},
            })
        );
        assert_eq!(
            plan.steps[1].input_mapping,
            json!({"purpose": "시장 분석", "region": "서울특별시 강남구", "property_type": "아파트"})
        );

        let plan = build_plan(&intent("compare Gangnam and Mapo apartment prices"), &[]);
        assert_eq!(agents(&plan), ["property_search", "region_comparison"]);
        assert_eq!(
            plan.steps[1].input_mapping["regions"],
            json!(["서울특별시 강남구", "서울특별시 마포구"])
        );

        let plan = build_plan(&intent("10억 이하 아파트 투자 추천해줘"), &[]);
        assert_eq!(
            agents(&plan),
            [
                "property_search",
                "market_analysis",
                "region_comparison",
                "investment_advisor"
            ]
        );
        assert_eq!(plan.steps[1].dependencies, ["property_search"]);
        assert_eq!(plan.steps[2].dependencies, ["property_search"]);
        assert_eq!(
            plan.steps[3].dependencies,
            ["property_search", "market_analysis", "region_comparison"]
        );
        assert_eq!(
            plan.parallel_groups,
            [
                vec!["property_search"],
                vec!["market_analysis", "region_comparison"],
                vec!["investment_advisor"]
            ]
        );
        assert_eq!(plan.estimated_total_time, 40.0);
        assert_eq!(
            plan.steps[3].input_mapping["price_range"],
            json!({"max": 1_000_000_000u64})
        );
    }

    #[test]
    fn plans_skip_unavailable_agents_and_fall_back_to_the_other_family() {
        let teams = ["search_team", "analysis_team", "document_team"];
        let plan = build_plan(
            &intent("강남역 근처 30평대 아파트 매매 시세 알려줘"),
            &teams,
        );
        assert_eq!(agents(&plan), ["search_team", "analysis_team"]);
        assert_eq!(
            plan.steps[1].input_mapping["analysis_type"],
            json!("market")
        );

        // Only half of the preferred plan is there, and the other family has nothing more.
        let plan = build_plan(
            &intent("10억 이하 아파트 투자 추천해줘"),
            &["property_search", "investment_advisor"],
        );
        assert_eq!(agents(&plan), ["property_search", "investment_advisor"]);
        assert_eq!(plan.steps[1].dependencies, ["property_search"]);

        let plan = build_plan(
            &intent("집주인이 전세금 3억을 10억으로 올려달래"),
            &["analysis_team"],
        );
        assert_eq!(agents(&plan), ["analysis_team"]);
        assert!(plan.steps[0].dependencies.is_empty());

        let plan = build_plan(&intent("강남구 아파트 시세 조회"), &["something_else"]);
        assert!(plan.steps.is_empty());
        assert!(plan.parallel_groups.is_empty());
        assert_eq!(plan.estimated_total_time, 0.0);
    }

    #[test]
    fn a_dag_plan_is_estimated_on_its_critical_path() {
        let intent = intent("10억 이하 아파트 투자 추천해줘");
        let specs = known_agents()[3..]
            .iter()
            .map(|a| StepSpec {
                agent: (*a).into(),
                ..StepSpec::default()
            })
            .collect();
        let plan = assemble_plan(&intent, Strategy::Dag, specs, Source::Llm);
        assert_eq!(plan.estimated_total_time, 30.0);
        assert_eq!(plan.source, Source::Llm);
    }
}
