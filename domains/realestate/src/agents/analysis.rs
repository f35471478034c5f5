//! `analysis_team` (the analysis team): judges a requested deposit or rent change against
//! 주택임대차보호법 제7조's 5% cap (`increase.rs`), and otherwise analyses the market of the
//! region asked about.

use serde_json::{Value, json};

use super::data::{dataset_source, round1};
use super::filters::Filters;
use super::increase::{change_analysis, change_request};
use super::market::analyze_market;
use super::{AgentContext, AgentError, Asked, DatasetAgent};
use crate::query::{Lang, parse_places};

/// The analysis team: a change request against the legal cap, or the market.
#[derive(Debug, Default)]
pub struct AnalysisTeam;

impl DatasetAgent for AnalysisTeam {
    const NAME: &'static str = "analysis_team";

    async fn answer(
        &self,
        Asked {
            ctx,
            input,
            mut f,
            lang,
        }: Asked<'_>,
    ) -> Result<Value, AgentError> {
        if f.places.is_empty() && f.unknown_regions.is_empty() {
            // The search team may have resolved the region from an earlier turn's intent.
            if let Some(region) = search_region(ctx) {
                f.places = parse_places(region);
            }
        }
        let mut result = match change_request(ctx, &input)? {
            Some(change) => change_analysis(ctx, &f, &change, lang),
            None => market_report(ctx, &f, lang),
        };
        if let Some(feedback) = &ctx.turn.feedback {
            with_focus(&mut result, feedback, lang);
        }
        Ok(result)
    }
}

/// A person's feedback to the analysis is its focus: recorded as `focus`, and said in the
/// insights so that the answer built from them mentions it.
fn with_focus(result: &mut Value, feedback: &str, lang: Lang) {
    result["focus"] = feedback.into();
    let said = match lang {
        Lang::Ko => format!("요청하신 관점을 반영했습니다: {feedback}"),
        Lang::En => format!("Focused as asked: {feedback}"),
    };
    if let Some(insights) = result.get_mut("insights").and_then(Value::as_array_mut) {
        insights.push(said.into());
    } else {
        result["insights"] = json!([said]);
    }
}

fn search_region(ctx: &AgentContext) -> Option<&str> {
    let search = ctx.team_results.get("search_team")?;
    search
        .pointer("/filters/region")
        .and_then(Value::as_str)
        .or_else(|| {
            search
                .pointer("/real_estate_results/0/region")
                .and_then(Value::as_str)
        })
}

fn market_report(ctx: &AgentContext, f: &Filters, lang: Lang) -> Value {
    let (data, mut insights) = analyze_market(f, lang);
    let num = |p: &str| data.pointer(p).cloned().unwrap_or(Value::Null);
    let trend = data
        .get("trend")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut recommendations: Vec<String> = match trend.as_str() {
        "상승" => vec![
            lang.pick("상승세입니다. 매수를 서두르기보다 급매·저평가 매물을 비교하고 자금 계획(DSR)을 먼저 점검하세요", "Prices are rising: compare discounted listings and check your financing (DSR) before rushing to buy").to_owned(),
            lang.pick("전세라면 계약 전 등기부등본의 근저당과 보증보험 가입 가능 여부를 확인하세요", "For a lease, check the registry for mortgages and whether deposit insurance is available before signing").to_owned(),
        ],
        "하락" => vec![
            lang.pick("하락세입니다. 매수는 추세 전환을 확인한 뒤 검토하세요", "Prices are falling: wait for the trend to turn before buying").to_owned(),
            lang.pick("임차인은 전세가율과 선순위 채권을 확인하고 보증보험에 가입하세요", "Tenants should check the jeonse ratio and senior liens, and insure the deposit").to_owned(),
        ],
        "보합" => vec![lang.pick("보합세입니다. 가격보다 입지·학군·교통 등 실거주 조건으로 비교하세요", "Prices are flat: compare on location, schools and transport rather than price").to_owned()],
        _ => Vec::new(),
    };
    if f.region().is_none() && !f.region_unknown() {
        recommendations.push(match lang {
            Lang::Ko => format!(
                "지역을 지정하면 더 정확한 분석이 가능합니다 (지원 지역: {})",
                super::search::supported_regions()
            ),
            Lang::En => format!(
                "Name a district for a sharper analysis (covered: {})",
                super::search::supported_regions()
            ),
        });
    }
    let property_listings = ctx
        .team_results
        .get("search_team")
        .and_then(|s| s.get("property_search_results"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if property_listings > 0 {
        insights.push(match lang {
            Lang::Ko => format!("검색 팀이 찾은 매물 {property_listings}건을 함께 검토했습니다"),
            Lang::En => format!(
                "Reviewed together with the {property_listings} listings the search team found"
            ),
        });
    }
    let has_stats = !data["statistics"].is_null();
    let confidence = round1(
        0.5 + if f.region().is_some() { 0.2 } else { 0.0 } + if has_stats { 0.2 } else { 0.0 },
    );
    let title = match lang {
        Lang::Ko => format!("{} 시장 분석", f.describe(lang)),
        Lang::En => format!("Market analysis: {}", f.describe(lang)),
    };
    json!({
        "team_name": "analysis",
        "status": "completed",
        "analysis_type": "market",
        "input_data": {"property_search_results": property_listings},
        "raw_analysis": {"market_analysis": data},
        "metrics": {
            "avg_price": num("/statistics/avg_price"),
            "min_price": num("/statistics/min_price"),
            "max_price": num("/statistics/max_price"),
            "listing_count": num("/statistics/count"),
            "change_3m_pct": num("/change_3m_pct"),
            "change_12m_pct": num("/change_12m_pct"),
            "jeonse_ratio_pct": num("/market/jeonse_ratio_pct"),
        },
        "summary": format!("{}.", insights[0]),
        "insights": insights,
        "sources": [dataset_source(lang)],
        "report": {
            "title": title,
            "summary": insights.first(),
            "sections": insights.iter().skip(1).map(|i| json!({"content": i})).collect::<Vec<_>>(),
            "conclusion": recommendations.first(),
        },
        "recommendations": recommendations,
        "confidence_score": confidence,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::agents::Agent;
    use crate::agents::SearchTeam;
    use crate::agents::testing::ctx;

    const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

    #[tokio::test]
    async fn scenario_1_is_233_3_percent_over_the_cap() {
        // As in a run: search_team runs first, and analysis_team gets its result.
        let mut c = ctx(SCENARIO_1);
        let search = SearchTeam.run(&c, Value::Null).await.unwrap().result;
        c.team_results = BTreeMap::from([("search_team".to_owned(), search)]);
        let out = AnalysisTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["metrics"]["increase_rate_pct"], 233.3);
        assert_eq!(out["metrics"]["legal_cap_pct"], 5);
        assert_eq!(out["metrics"]["max_legal_amount"], 315_000_000u64);
        assert_eq!(out["metrics"]["excess_amount"], 685_000_000u64);
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["over_legal_cap"],
            true
        );
        let insights = out["insights"].as_array().unwrap();
        assert!(insights[0].as_str().unwrap().contains("233.3%"));
        let cap = insights[1].as_str().unwrap();
        assert!(
            cap.contains("제7조") && cap.contains("법정 상한을 6억 8,500만원(228.3%p) 초과합니다"),
            "{cap}"
        );
        let recs = out["recommendations"].to_string();
        for needle in [
            "거절할 수 있습니다",
            "계약갱신요구권",
            "내용증명",
            "주택임대차분쟁조정위원회",
        ] {
            assert!(recs.contains(needle), "{needle} missing from {recs}");
        }
        assert_eq!(out["raw_analysis"]["legal_basis"][0]["article"], "제7조");
        assert!(
            out["input_data"]["legal_search"]
                .as_array()
                .unwrap()
                .contains(&json!("주택임대차보호법 제7조"))
        );
        insta::assert_json_snapshot!("analysis_team_scenario_1", out);
    }

    #[tokio::test]
    async fn english_lease_increase() {
        let c = ctx(
            "My landlord wants to raise my jeonse deposit from 300 million won to 1 billion won. What can I do legally?",
        );
        let out = AnalysisTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["metrics"]["increase_rate_pct"], 233.3);
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["within_legal_cap"],
            false
        );
        let insights = out["insights"].as_array().unwrap();
        assert!(
            insights[1].as_str().unwrap().contains("over the legal cap"),
            "{}",
            insights[1]
        );
        assert!(
            out["recommendations"][0]
                .as_str()
                .unwrap()
                .starts_with("You may refuse")
        );
        assert_eq!(out["report"]["verdict"], "over the 5% legal cap: +233.3%");
    }

    #[tokio::test]
    async fn rent_raise_within_and_at_the_cap() {
        let out = AnalysisTeam
            .run(
                &ctx("마포구 아파트 월세 200만원인데 208만원으로 올려달래요"),
                Value::Null,
            )
            .await
            .unwrap()
            .result;
        assert_eq!(out["metrics"]["increase_rate_pct"], 4.0);
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["subject"],
            "monthly_rent"
        );
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["within_legal_cap"],
            true
        );
        assert_eq!(
            out["raw_analysis"]["market_context"]["region"],
            "서울특별시 마포구"
        );
        // Exactly 5% is allowed ("초과하지 못한다").
        let out = AnalysisTeam
            .run(
                &ctx("전세 보증금"),
                json!({"old_amount": "4억", "new_amount": 420_000_000}),
            )
            .await
            .unwrap()
            .result;
        assert_eq!(out["metrics"]["increase_rate_pct"], 5.0);
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["within_legal_cap"],
            true
        );
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["amounts_from"],
            "input"
        );
        let out = AnalysisTeam
            .run(
                &ctx("전세 보증금"),
                json!({"old_amount": "4억", "new_amount": 420_000_001}),
            )
            .await
            .unwrap()
            .result;
        assert_eq!(
            out["raw_analysis"]["increase_analysis"]["within_legal_cap"],
            false
        );
    }

    #[tokio::test]
    async fn amounts_from_the_intent_and_bad_amounts() {
        let mut c = ctx("보증금 인상 요구가 적법한가요?");
        c.intent = json!({"entities": {"amounts": ["3억", {"won": 330_000_000u64}]}});
        let out = AnalysisTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["metrics"]["increase_rate_pct"], 10.0);
        assert_eq!(out["confidence_score"], 0.85);
        let err = AnalysisTeam
            .run(&c, json!({"old_amount": "lots", "new_amount": 1}))
            .await
            .unwrap_err();
        assert!(!err.retryable);
        assert!(
            err.message
                .starts_with("input field `old_amount` must be a positive amount"),
            "{}",
            err.message
        );
        let err = AnalysisTeam
            .run(&c, json!({"old_amount": 1}))
            .await
            .unwrap_err();
        assert_eq!(
            err.message,
            "input field `new_amount` is missing (`old_amount` is given)"
        );
    }

    #[tokio::test]
    async fn without_amounts_it_analyses_the_market() {
        let out = AnalysisTeam
            .run(
                &ctx("강남역 근처 30평대 아파트 매매 시세 알려줘"),
                Value::Null,
            )
            .await
            .unwrap()
            .result;
        assert_eq!(out["analysis_type"], "market");
        assert_eq!(out["metrics"]["listing_count"], 5);
        assert_eq!(out["metrics"]["change_3m_pct"], 4.8);
        assert_eq!(out["confidence_score"], 0.9);
        assert!(!out["recommendations"].as_array().unwrap().is_empty());
        // The region can come from the search team's result.
        let mut c = ctx("시세 분석해줘");
        c.team_results.insert(
            "search_team".into(),
            json!({"filters": {"region": "서울특별시 송파구"}}),
        );
        let out = AnalysisTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(
            out["raw_analysis"]["market_analysis"]["region"],
            "서울특별시 송파구"
        );
    }
}
