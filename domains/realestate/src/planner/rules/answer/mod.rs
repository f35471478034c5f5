//! The answer: `{answer, listings (≤10), insights, metadata{total_results, agents_used, ...}}`,
//! plus `document` when one was drafted, built from the agents' results by rule. English when
//! the query has no Hangul.

use chronicle_engine::Intent;
use serde_json::{Map, Value, json};

use super::{LISTINGS_MAX, is_english};
use crate::query::{DealType, group_thousands};

mod findings;
mod increase;
mod listings;
mod sentences;

use findings::{Findings, push_unique};
use listings::{DealGroup, Subject, deal_groups, price_metadata};

/// `3억 1,500만 원` / `315 million won`.
fn format_won(won: u64, english: bool) -> String {
    if english {
        let (value, unit) = match won {
            w if w >= 1_000_000_000 => (w as f64 / 1e9, " billion won"),
            w if w >= 1_000_000 => (w as f64 / 1e6, " million won"),
            w => return format!("{} won", group_thousands(w)),
        };
        let text = format!("{value:.2}");
        return format!("{}{unit}", text.trim_end_matches('0').trim_end_matches('.'));
    }
    let eok = won / 100_000_000;
    let man = won % 100_000_000 / 10_000;
    match (eok, man) {
        (0, 0) => format!("{} 원", group_thousands(won)),
        (0, m) => format!("{}만 원", group_thousands(m)),
        (e, 0) => format!("{}억 원", group_thousands(e)),
        (e, m) => format!("{}억 {}만 원", group_thousands(e), group_thousands(m)),
    }
}

/// `233.3%`, `5%`.
fn format_pct(pct: f64) -> String {
    let text = format!("{pct:.1}");
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

/// The districts the query names: `regions` when several, else `region`.
fn asked_regions(intent: &Intent) -> Vec<String> {
    let e = &intent.entities;
    let several: Vec<String> = e
        .get("regions")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if several.len() > 1 {
        return several;
    }
    e.get("region")
        .and_then(Value::as_str)
        .map(|r| vec![r.to_owned()])
        .unwrap_or_default()
}

/// The intent with the conditions the search worked with: a person may have chosen another
/// district or type than the query named (an edit of the search, or words when letting it run),
/// and the answer speaks of what was searched, as the later steps worked on it too.
fn as_searched(intent: &Intent, results: &[(String, Value)]) -> Intent {
    let searched = ["search_team", "property_search"].iter().find_map(|name| {
        let (_, r) = results.iter().find(|(a, _)| a == name)?;
        r.get("filters").or_else(|| r.get("params"))
    });
    let mut intent = intent.clone();
    let (Some(searched), Some(entities)) = (searched, intent.entities.as_object_mut()) else {
        return intent;
    };
    if let Some(region) = searched.get("region").filter(|r| r.is_string()) {
        entities.insert("region".into(), region.clone());
        match searched.get("regions").filter(|r| r.is_array()) {
            Some(regions) => entities.insert("regions".into(), regions.clone()),
            None => entities.remove("regions"),
        };
    }
    for key in ["property_type", "deal_type"] {
        if let Some(v) = searched.get(key).filter(|v| v.is_string()) {
            entities.insert(key.into(), v.clone());
        }
    }
    intent
}

/// The answer's sentences, in the order a reader needs them: a raise against the legal cap,
/// a comparison, the listings, the market, a document, laws, recommended steps.
fn sentences(query: &str, intent: &Intent, f: &Findings, groups: &[DealGroup]) -> Vec<String> {
    let english = is_english(query);
    let mut answer: Vec<String> = Vec::new();
    if let Some(inc) = increase::increase(f, intent) {
        answer.extend(increase::increase_sentences(query, inc, english));
    }
    answer.extend(
        f.comparison
            .as_ref()
            .and_then(|c| sentences::comparison_sentence(c, english)),
    );
    let regions = asked_regions(intent);
    let subject = Subject {
        regions: &regions,
        property_type: intent.entities.get("property_type").and_then(Value::as_str),
    };
    if !groups.is_empty() {
        answer.push(listings::sentence(&subject, groups, english));
    } else if !f.opaque.is_empty() {
        let unread = DealGroup {
            deal: None,
            count: f.opaque.len(),
            prices: Vec::new(),
            rents: Vec::new(),
        };
        answer.push(listings::sentence(&subject, &[unread], english));
    }
    match &f.market {
        Some(m) => answer.push(sentences::market_sentence(m, english)),
        None => answer.extend(sentences::metrics_sentence(f, english)),
    }
    answer.extend(
        f.document
            .as_ref()
            .map(|d| sentences::document_sentence(d, english)),
    );
    answer.extend(sentences::laws_sentence(&f.laws, english));
    answer.extend(sentences::recommendations_sentence(
        &f.recommendations,
        english,
    ));
    answer
}

/// The insights of every agent, then the recommendations and the laws, each once.
fn insights(f: &Findings, english: bool) -> Vec<String> {
    let mut insights = f.insights.clone();
    for r in &f.recommendations {
        push_unique(&mut insights, r.clone());
    }
    for law in &f.laws {
        let line = if english {
            format!("Relevant law: {law}")
        } else {
            format!("관련 법령: {law}")
        };
        push_unique(&mut insights, line);
    }
    insights
}

/// The LangGraph supervisor's response shape, with an answer built from the results. Every count in
/// the answer is a count of what the agents returned: listings are listings (not the market
/// summaries beside them), and prices are given per deal type.
pub fn format_response(query: &str, intent: &Intent, results: &[(String, Value)]) -> Value {
    let intent = &as_searched(intent, results);
    let english = is_english(query);
    let mut f = Findings::default();
    for (agent, result) in results {
        f.gather(agent, result, 0);
    }
    let asked_deal = intent
        .entities
        .get("deal_type")
        .and_then(Value::as_str)
        .and_then(DealType::from_param);
    let groups = deal_groups(&f.listings, asked_deal);
    let mut answer = sentences(query, intent, &f, &groups);
    let total_results = f.listings.len() + f.opaque.len() + f.laws.len();
    if answer.is_empty() {
        // Nothing to count or compare: what the agents say they found.
        answer.extend(f.summaries.iter().cloned());
    }
    if answer.is_empty() {
        answer.push(if english {
            format!("Search complete: found {total_results} results.")
        } else {
            format!("검색 완료: {total_results}개의 결과를 찾았습니다.")
        });
    }
    let mut metadata = Map::new();
    metadata.insert("total_results".into(), json!(total_results));
    metadata.insert(
        "agents_used".into(),
        json!(results.iter().map(|(a, _)| a).collect::<Vec<_>>()),
    );
    if let Some(r) = intent.entities.get("region").and_then(Value::as_str) {
        metadata.insert("region".into(), json!(r));
    }
    price_metadata(&groups, &mut metadata);
    let insights = insights(&f, english);
    let mut listings = f.listings;
    listings.extend(f.opaque);
    listings.truncate(LISTINGS_MAX);
    let mut out = json!({
        "answer": answer.join(" "),
        "listings": listings,
        "insights": insights,
        "metadata": metadata,
    });
    if let Some(doc) = f.document {
        out["document"] = doc;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rules::analyze_intent;

    #[test]
    fn money_and_percent_formatting() {
        assert_eq!(format_won(315_000_000, false), "3억 1,500만 원");
        assert_eq!(format_won(1_000_000_000, false), "10억 원");
        assert_eq!(format_won(50_000_000, false), "5,000만 원");
        assert_eq!(format_won(123_450_000_000, false), "1,234억 5,000만 원");
        assert_eq!(format_won(9_000, false), "9,000 원");
        assert_eq!(format_won(315_000_000, true), "315 million won");
        assert_eq!(format_won(1_000_000_000, true), "1 billion won");
        assert_eq!(format_won(1_250_000_000, true), "1.25 billion won");
        assert_eq!(format_pct(233.333), "233.3%");
        assert_eq!(format_pct(5.0), "5%");
    }

    pub(crate) fn deposit_results() -> Vec<(String, Value)> {
        vec![
            (
                "search_team".into(),
                json!({
                    "team_name": "search",
                    "status": "completed",
                    "legal_results": [
                        {"law_name": "주택임대차보호법", "article": "제7조", "title": "차임 등의 증감청구권",
                         "content": "증액청구는 약정한 차임이나 보증금의 20분의 1의 금액을 초과하지 못한다."},
                        {"law_name": "주택임대차보호법", "article": "제6조의3", "title": "계약갱신 요구 등"}
                    ],
                    "real_estate_results": [],
                    "property_search_results": [],
                    "total_results": 2,
                }),
            ),
            (
                "analysis_team".into(),
                json!({
                    "team_name": "analysis",
                    "status": "completed",
                    "analysis_type": "legal",
                    "metrics": {
                        "current_amount": 300_000_000.0,
                        "requested_amount": 1_000_000_000.0,
                        "increase_rate_pct": 233.333_333_333_333_3,
                        "legal_cap_pct": 5.0,
                    },
                    "insights": ["요청 인상률 233.3%는 법정 상한 5%의 46배가 넘습니다"],
                    "recommendations": [
                        "계약갱신요구권을 행사하고 5% 이내 증액만 수용하세요.",
                        "합의가 어려우면 주택임대차분쟁조정위원회에 조정을 신청하세요.",
                    ],
                    "report": {"summary": "법정 상한 초과"},
                    "confidence_score": 0.9,
                }),
            ),
        ]
    }

    #[test]
    fn format_snapshot_for_the_deposit_question() {
        let query = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
        let out = format_response(query, &analyze_intent(query), &deposit_results());
        let answer = out["answer"].as_str().unwrap_or_default();
        assert!(
            answer.contains("233.3%")
                && answer.contains("5%")
                && answer.contains("주택임대차보호법 제7조")
        );
        assert!(answer.contains("3억 1,500만 원"));
        insta::assert_json_snapshot!("format_deposit_question", out);
    }

    #[test]
    fn format_snapshot_for_the_gangnam_station_query() {
        let query = "강남역 근처 30평대 아파트 매매 시세 알려줘";
        let results = vec![
            (
                "property_search".to_owned(),
                json!({
                    "status": "success",
                    "agent": "property_search",
                    "data": [
                        {"name": "래미안 강남아파트", "region": "서울특별시 강남구 역삼동", "price": 1_200_000_000u64, "size": 32, "deal_type": "매매"},
                        {"name": "타워팰리스", "region": "서울특별시 강남구 대치동", "price": 1_500_000_000u64, "size": 35, "deal_type": "매매"},
                    ],
                    "insights": ["30평대는 실수요자 선호도가 높아 유동성이 좋습니다"],
                }),
            ),
            (
                "market_analysis".to_owned(),
                json!({
                    "status": "success",
                    "agent": "market_analysis",
                    "data": {"metrics": {"avg_price": 1_350_000_000.0, "price_change_pct": 5.0}},
                    "insights": ["최근 3개월 간 약 5% 상승했습니다"],
                }),
            ),
        ];
        let out = format_response(query, &analyze_intent(query), &results);
        assert_eq!(out["listings"].as_array().map(Vec::len), Some(2));
        insta::assert_json_snapshot!("format_gangnam_station_query", out);
    }

    #[test]
    fn format_answers_in_english_for_english_queries() {
        let query = "My landlord wants to raise my deposit from 300 million won to 1 billion won. Is that legal?";
        let out = format_response(query, &analyze_intent(query), &deposit_results());
        let answer = out["answer"].as_str().unwrap_or_default();
        assert!(answer.starts_with("The requested increase (300 million won → 1 billion won) is 233.3%, which exceeds the 5% cap"), "{answer}");
        assert!(answer.contains("up to 315 million won"), "{answer}");

        // No analysis ran, but the rules still know what the raise means.
        let out = format_response(query, &analyze_intent(query), &[]);
        let answer = out["answer"].as_str().unwrap_or_default();
        assert!(answer.contains("233.3%"), "{answer}");
        assert_eq!(
            out["metadata"],
            json!({"total_results": 0, "agents_used": []})
        );
    }

    #[test]
    fn format_reports_a_drafted_document_and_listings() {
        let query = "draft a lease contract";
        let results = vec![(
            "document_team".to_owned(),
            json!({
                "document_type": "lease_contract",
                "document_content": {"title": "주택임대차표준계약서", "sections": []},
                "final_document": "주택임대차표준계약서\n제1조 ...",
                "review_needed": true,
            }),
        )];
        let out = format_response(query, &analyze_intent(query), &results);
        assert_eq!(
            out["answer"],
            json!("Drafted \"주택임대차표준계약서\". It needs a review before signing.")
        );
        assert_eq!(
            out["document"]["content"],
            json!("주택임대차표준계약서\n제1조 ...")
        );

        let query = "강남구 아파트 시세 조회";
        let listings: Vec<Value> = (0..12)
            .map(|i| json!({"id": i, "price": format!("{}억", 10 + i)}))
            .collect();
        let results = vec![(
            "search_team".to_owned(),
            json!({"property_search_results": listings}),
        )];
        let out = format_response(query, &analyze_intent(query), &results);
        assert_eq!(
            out["answer"],
            json!(
                "서울특별시 강남구 아파트 매물 12건을 찾았습니다. 가격은 10억 원에서 21억 원 사이입니다."
            )
        );
        assert_eq!(out["listings"].as_array().map(Vec::len), Some(LISTINGS_MAX));
        assert_eq!(out["metadata"]["total_results"], json!(12));
        assert_eq!(
            out["metadata"]["price_range"],
            json!({"min": 1_000_000_000u64, "max": 2_100_000_000u64})
        );
    }

    #[test]
    fn format_shows_opaque_results_as_they_are() {
        let query = "강남구 아파트 시세 조회";
        let results = vec![
            (
                "property_search".to_owned(),
                json!({"status": "success", "data": "Mock result from property_search"}),
            ),
            (
                "market_analysis".to_owned(),
                json!({"status": "error", "error": "boom"}),
            ),
        ];
        let out = format_response(query, &analyze_intent(query), &results);
        assert_eq!(
            out["answer"],
            json!("서울특별시 강남구 아파트 검색 결과 1건을 찾았습니다.")
        );
        assert_eq!(
            out["listings"],
            json!([{"agent": "property_search", "result": "Mock result from property_search"}])
        );
        assert_eq!(
            out["metadata"]["agents_used"],
            json!(["property_search", "market_analysis"])
        );

        let out = format_response("hello", &analyze_intent("hello"), &[]);
        assert_eq!(out["answer"], json!("Search complete: found 0 results."));
    }
}
