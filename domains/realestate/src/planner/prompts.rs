//! The LangGraph supervisor's four prompts: intent analysis, plan building, evaluation and
//! response formatting, with the intent types and teams Chronicle adds to them.

use serde_json::{Map, Value, json};

use chronicle_engine::Intent;

pub(crate) const INTENT_SYSTEM: &str =
    "You are an expert in analyzing real estate queries. Always respond in JSON format.";
pub(crate) const PLAN_SYSTEM: &str =
    "You are an expert in planning agent execution strategies. Always respond in JSON format.";
pub(crate) const EVALUATION_SYSTEM: &str =
    "You are an expert in evaluating agent execution results. Always respond in JSON format.";
pub(crate) const FORMAT_SYSTEM: &str = "You are an expert in formatting real estate information for users. Always respond in JSON format.";

/// Characters of one agent's result shown to the model: a search can return far more than a
/// model needs to judge or summarise it, and every prompt byte costs time and money.
const PROMPT_RESULT_CHARS_MAX: usize = 4_000;

/// The intent analysis prompt, with `comprehensive`, `document` and `report` added, and the
/// size range's convention (half-open, as the query parser writes it).
pub(crate) fn intent(query: &str) -> String {
    format!(
        r#"당신은 부동산 챗봇의 의도 분석 전문가입니다. 사용자의 질문을 분석하여 다음 정보를 JSON 형식으로 추출하세요.

**추출할 정보:**
1. intent_type: 질문의 유형
   - "search": 매물 검색
   - "analysis": 시세 분석
   - "comparison": 지역 비교
   - "recommendation": 추천
   - "comprehensive": 법률 상담, 보증금·전세금·월세 인상 등 종합 분석
   - "document": 계약서 등 문서 작성
   - "report": 매물 조사와 시세 분석을 정리한 보고서 작성

2. region: 지역명
3. property_type: 매물 유형 ("아파트", "오피스텔", "빌라", "단독주택")
4. deal_type: 거래 유형 ("매매", "전세", "월세")
5. price_range: 가격 범위
6. size_range: 평형 범위 (min 이상 max 미만: 30평대는 {{"min": 30, "max": 40}}, 32평은 {{"min": 32, "max": 33}})

**사용자 질문:**
{query}

**응답 형식 (JSON):**
{{
  "intent_type": "search",
  "region": "서울특별시 강남구",
  "property_type": "아파트",
  "deal_type": "매매",
  "price_range": {{"min": 100000, "max": 150000}},
  "size_range": {{"min": 30, "max": 40}}
}}

**중요:** JSON 형식으로만 응답하고, 추가 설명은 하지 마세요."#
    )
}

/// One line per agent for the planning prompt; agents the rules do not know get their name only.
fn agent_line(agent: &str) -> String {
    let what = match agent {
        "search_team" => "검색팀 (법률 조항, 시세, 매물, 대출 정보 검색)",
        "analysis_team" => "분석팀 (인상률·법정 한도 계산, 시세 분석, 리스크 평가)",
        "document_team" => "문서팀 (계약서 작성과 검토)",
        "property_search" => "매물 검색",
        "market_analysis" => "시장 분석",
        "region_comparison" => "지역 비교",
        "investment_advisor" => "투자 자문",
        _ => "외부 에이전트",
    };
    format!("{agent}: {what}")
}

/// The intent as the planner is shown it: the type next to the entities.
fn intent_json(intent: &Intent) -> Value {
    let mut shown = Map::new();
    shown.insert("intent_type".into(), json!(intent.intent_type));
    if let Some(entities) = intent.entities.as_object() {
        shown.extend(entities.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Value::Object(shown)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The plan building prompt over the agents this run may use.
pub(crate) fn plan(query: &str, intent: &Intent, agents: &[&str]) -> String {
    let agent_list: Vec<String> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{}. {}", i + 1, agent_line(a)))
        .collect();
    format!(
        r#"당신은 부동산 챗봇의 실행 계획 수립 전문가입니다.

**사용 가능한 Agent:**
{agents}

**실행 전략:**
- "sequential": 순차 실행
- "parallel": 병렬 실행
- "dag": DAG 방식

**사용자 질문:**
{query}

**사용자 의도:**
{intent}

**규칙:**
1. intent_type이 "search"면 search_team만 (없으면 property_search만)
2. intent_type이 "analysis"면 property_search + market_analysis
3. intent_type이 "comparison"면 property_search + region_comparison
4. intent_type이 "recommendation"면 property_search, market_analysis, region_comparison, investment_advisor 모두
5. intent_type이 "comprehensive"면 search_team 다음 analysis_team
6. intent_type이 "document"면 search_team 다음 document_team
7. intent_type이 "report"면 search_team, analysis_team, document_team 순서 (document_team의 params에 "document_type": "market_report")
8. 위 목록에 없는 Agent는 사용하지 마세요.

**응답 형식 (JSON):**
{{
  "strategy": "sequential",
  "agents": [
    {{"name": "property_search", "order": 1, "params": {{"region": "서울특별시 강남구"}}, "dependencies": []}},
    {{"name": "market_analysis", "order": 2, "params": {{"region": "서울특별시 강남구"}}, "dependencies": ["property_search"]}}
  ]
}}

**중요:** JSON 형식으로만 응답하고, 추가 설명은 하지 마세요."#,
        agents = agent_list.join("\n"),
        intent = pretty(&intent_json(intent)),
    )
}

/// A result cut to `PROMPT_RESULT_CHARS_MAX` characters, on a char boundary.
fn bounded(value: &Value) -> Value {
    let text = value.to_string();
    match text.char_indices().nth(PROMPT_RESULT_CHARS_MAX) {
        Some((cut, _)) => json!(format!(
            "{}…(truncated, {} chars in all)",
            &text[..cut],
            text.chars().count()
        )),
        None => value.clone(),
    }
}

/// The results as the model is shown them: `{agent: {status, data | error}}`.
pub(crate) fn results_json(results: &[(String, Option<Value>, Option<String>)]) -> Value {
    let mut shown = Map::new();
    for (agent, result, error) in results {
        let entry = match error {
            Some(e) => json!({"status": "error", "error": e}),
            None => {
                json!({"status": "success", "data": result.as_ref().map_or(Value::Null, bounded)})
            }
        };
        shown.insert(agent.clone(), entry);
    }
    Value::Object(shown)
}

/// The evaluation prompt.
pub(crate) fn evaluation(results: &Value) -> String {
    format!(
        r#"당신은 부동산 챗봇의 결과 평가 전문가입니다.

**Agent 실행 결과:**
{results}

**평가 기준:**
1. **완전성 (completeness):** 모든 필요한 데이터가 수집되었는가?
2. **정확성 (accuracy):** 데이터가 정확하고 신뢰할 수 있는가?
3. **일관성 (consistency):** Agent 결과들이 서로 모순되지 않는가?

**응답 형식 (JSON):**
{{
  "quality_score": 0.85,
  "completeness": true,
  "accuracy": true,
  "consistency": true,
  "needs_retry": false,
  "retry_agents": [],
  "feedback": "모든 데이터가 성공적으로 수집되었습니다."
}}

**재시도 조건:**
- Agent가 에러를 반환했을 때
- 데이터가 불완전할 때
- 데이터가 부정확할 때"#,
        results = pretty(results),
    )
}

/// The response formatting prompt; English queries get an English answer.
pub(crate) fn format(query: &str, results: &[(String, Value)], english: bool) -> String {
    let shown: Map<String, Value> = results
        .iter()
        .map(|(a, r)| (a.clone(), bounded(r)))
        .collect();
    let language = if english {
        "**중요:** 영어로(in English), 사용자가 이해하기 쉽게, JSON 형식으로"
    } else {
        "**중요:** 한국어로, 사용자가 이해하기 쉽게, JSON 형식으로"
    };
    format!(
        r#"당신은 부동산 챗봇의 응답 생성 전문가입니다.

**사용자 질문:**
{query}

**Agent 결과:**
{results}

**응답 형식:**
1. **간단한 답변 (answer):** 2-3문장
2. **매물 목록 (listings):** 최대 10개
3. **인사이트 (insights):** bullet points
4. **메타데이터 (metadata):** 통계 정보

**응답 예시:**
{{
  "answer": "강남구의 30평대 아파트 매매 시세는...",
  "listings": [...],
  "insights": [...],
  "metadata": {{...}}
}}

{language}"#,
        results = pretty(&Value::Object(shown)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rules;

    #[test]
    fn prompts_carry_the_query_the_intent_and_the_agents() {
        let query = "강남역 근처 30평대 아파트 매매 시세 알려줘";
        let text = intent(query);
        assert!(
            text.contains(query)
                && text.contains("\"comprehensive\"")
                && text.contains("\"report\"")
                && text.ends_with("하지 마세요.")
        );

        let analysed = rules::analyze_intent(query);
        let text = plan(
            query,
            &analysed,
            &["property_search", "market_analysis", "my_http_agent"],
        );
        assert!(text.contains("1. property_search: 매물 검색\n2. market_analysis: 시장 분석\n3. my_http_agent: 외부 에이전트"));
        assert!(
            text.contains("\"intent_type\": \"analysis\"")
                && text.contains("\"region\": \"서울특별시 강남구\"")
        );

        assert!(
            format("find apartments", &[], true)
                .ends_with("영어로(in English), 사용자가 이해하기 쉽게, JSON 형식으로")
        );
        assert!(
            format(query, &[], false)
                .ends_with("**중요:** 한국어로, 사용자가 이해하기 쉽게, JSON 형식으로")
        );
    }

    #[test]
    fn results_are_shown_with_their_status_and_bounded() {
        let long = json!({"text": "가".repeat(PROMPT_RESULT_CHARS_MAX * 2)});
        let shown = results_json(&[
            ("search_team".into(), Some(long), None),
            (
                "analysis_team".into(),
                None,
                Some("timed out after 30000 ms".into()),
            ),
        ]);
        assert_eq!(
            shown["analysis_team"],
            json!({"status": "error", "error": "timed out after 30000 ms"})
        );
        let data = shown["search_team"]["data"].as_str().unwrap_or_default();
        assert!(data.ends_with("chars in all)"), "{data}");
        assert!(data.chars().count() < PROMPT_RESULT_CHARS_MAX + 50);
        assert!(evaluation(&shown).contains("\"status\": \"error\""));
    }
}
