//! `analysis_team` (seed 001's analysis team): judges a requested deposit or rent change
//! against 주택임대차보호법 제7조's 5% cap (seed 000's scenario 1: 3억 → 10억 is +233.3%), and
//! otherwise analyses the market of the region asked about.

use serde_json::{Map, Value, json};

use super::data::{DATASET, DealType, PropertyType, change_pct, round1};
use super::filters::{Filters, input_object};
use super::market::{MarketView, analyze_market};
use super::search::law_json;
use super::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, declared};
use crate::query::{self, ChangeRequest, Lang, Subject, format_won, parse_places};

/// The cap on a raise, in percent of the agreed amount: 주택임대차보호법 제7조 제2항 ("20분의
/// 1"), 시행령 제8조.
pub(crate) const LEGAL_CAP_PCT: u64 = 5;

/// The articles every change analysis cites, in the order a reader needs them.
const CHANGE_LAW_IDS: [&str; 5] = [
    "hlpa-7",
    "hlpa-decree-8",
    "hlpa-6-3",
    "hlpa-10-2",
    "hlpa-14",
];

#[derive(Debug, Default)]
pub struct AnalysisTeam;

#[async_trait::async_trait]
impl Agent for AnalysisTeam {
    fn info(&self) -> &AgentInfo {
        declared("analysis_team")
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let input = input_object(&input)?;
        let mut f = Filters::resolve(ctx, &input)?;
        if f.places.is_empty() && f.unknown_regions.is_empty() {
            // The search team may have resolved the region from an earlier turn's intent.
            if let Some(region) = search_region(ctx) {
                f.places = parse_places(region);
            }
        }
        let lang = Lang::of(&ctx.query);
        let result = match change_request(ctx, &input)? {
            Some(change) => change_analysis(ctx, &f, &change, lang),
            None => market_report(ctx, &f, lang),
        };
        Ok(AgentOutput { result })
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

/// Old and new amounts in won and what they are about.
#[derive(Clone, Debug, PartialEq)]
struct Change {
    old: u64,
    new: u64,
    subject: Subject,
    /// `query`, `input` or `intent`: where the amounts came from.
    source: &'static str,
}

/// The change to judge: `old_amount`/`new_amount` in the input, else the query's wording, else
/// the first two of the intent's `amounts`.
fn change_request(
    ctx: &AgentContext,
    input: &Map<String, Value>,
) -> Result<Option<Change>, AgentError> {
    let subject_of = |s: Option<&Value>| match s.and_then(Value::as_str) {
        Some("monthly_rent" | "rent" | "월세" | "차임") => Some(Subject::MonthlyRent),
        Some(_) => Some(Subject::Deposit),
        None => None,
    };
    let query_change = query::detect_change_request(&ctx.query);
    match (input.get("old_amount"), input.get("new_amount")) {
        (None, None) => {}
        (Some(old), Some(new)) => {
            let old = amount_param("old_amount", old)?;
            let new = amount_param("new_amount", new)?;
            let subject = subject_of(input.get("subject"))
                .or(query_change.map(|c| c.subject))
                .unwrap_or(Subject::Deposit);
            return Ok(Some(Change {
                old,
                new,
                subject,
                source: "input",
            }));
        }
        (Some(_), None) => {
            return Err(AgentError::fatal(
                "input field `new_amount` is missing (`old_amount` is given)",
            ));
        }
        (None, Some(_)) => {
            return Err(AgentError::fatal(
                "input field `old_amount` is missing (`new_amount` is given)",
            ));
        }
    }
    if let Some(ChangeRequest { old, new, subject }) = query_change {
        return Ok(Some(Change {
            old: old.won,
            new: new.won,
            subject,
            source: "query",
        }));
    }
    let amounts: Vec<u64> = ctx
        .intent
        .pointer("/entities/amounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => query::parse_amount(s),
            Value::Object(o) => {
                ["won", "value", "amount"]
                    .iter()
                    .find_map(|k| match o.get(*k)? {
                        Value::Number(n) => n.as_u64(),
                        Value::String(s) => query::parse_amount(s),
                        _ => None,
                    })
            }
            _ => None,
        })
        .collect();
    if let [old, new, ..] = amounts[..] {
        let subject = if query::parse_deal_type(&ctx.query) == Some(DealType::Monthly) {
            Subject::MonthlyRent
        } else {
            Subject::Deposit
        };
        return Ok(Some(Change {
            old,
            new,
            subject,
            source: "intent",
        }));
    }
    Ok(None)
}

fn amount_param(key: &str, v: &Value) -> Result<u64, AgentError> {
    let parsed = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => query::parse_amount(s),
        _ => None,
    };
    parsed.filter(|&won| won > 0).ok_or_else(|| {
        AgentError::fatal(format!(
            "input field `{key}` must be a positive amount in won (a number or text like \"3억\"), got {v}"
        ))
    })
}

fn change_analysis(ctx: &AgentContext, f: &Filters, c: &Change, lang: Lang) -> Value {
    let (old, new) = (c.old, c.new);
    let rate = change_pct(old, new);
    // Integer arithmetic for the verdict, so 5.0% exactly is within the cap whatever the float
    // rounding does.
    let max_legal = old + old * LEGAL_CAP_PCT / 100;
    let within_cap = new <= max_legal;
    let excess = new.saturating_sub(max_legal);
    let direction = match new.cmp(&old) {
        std::cmp::Ordering::Greater => "increase",
        std::cmp::Ordering::Less => "decrease",
        std::cmp::Ordering::Equal => "unchanged",
    };
    let subject = match (c.subject, lang) {
        (Subject::Deposit, Lang::Ko) => "보증금(전세금)",
        (Subject::MonthlyRent, Lang::Ko) => "월세(차임)",
        (Subject::Deposit, Lang::En) => "deposit",
        (Subject::MonthlyRent, Lang::En) => "monthly rent",
    };
    let won = |x: u64| format_won(x, lang);
    let cap = LEGAL_CAP_PCT;

    let mut insights = Vec::new();
    let mut recommendations: Vec<String> = Vec::new();
    match direction {
        "increase" => {
            insights.push(match lang {
                Lang::Ko => format!(
                    "요청된 {subject} 인상은 {} → {}, 인상률 {rate:.1}%입니다",
                    won(old),
                    won(new)
                ),
                Lang::En => format!(
                    "The requested {subject} increase is {} → {}, a rise of {rate:.1}%",
                    won(old),
                    won(new)
                ),
            });
            if within_cap {
                insights.push(match lang {
                    Lang::Ko => format!("인상률 {rate:.1}%는 주택임대차보호법 제7조의 법정 상한 {cap}% 이내입니다 (상한액 {})", won(max_legal)),
                    Lang::En => format!("{rate:.1}% is within the {cap}% legal cap of Article 7 of the Housing Lease Protection Act (at most {})", won(max_legal)),
                });
            } else {
                insights.push(match lang {
                    Lang::Ko => format!(
                        "주택임대차보호법 제7조 제2항(시행령 제8조)에 따라 증액청구는 약정 금액의 20분의 1({cap}%)을 넘을 수 없어 법정 상한은 {}입니다. 요구액은 법정 상한을 {}({:.1}%p) 초과합니다",
                        won(max_legal),
                        won(excess),
                        rate - cap as f64
                    ),
                    Lang::En => format!(
                        "Under Article 7(2) of the Housing Lease Protection Act (Enforcement Decree Art. 8) an increase may not exceed 1/20 ({cap}%) of the agreed amount, so the legal maximum is {}. The demand exceeds it by {} ({:.1} percentage points): over the legal cap",
                        won(max_legal),
                        won(excess),
                        rate - cap as f64
                    ),
                });
            }
            insights.push(lang.pick(
                "증액청구는 임대차계약 또는 직전 증액이 있은 후 1년 이내에는 할 수 없습니다 (제7조 제1항)",
                "No increase may be claimed within one year of the contract or of the last increase (Art. 7(1))",
            ).to_owned());
            insights.push(lang.pick(
                "5% 상한은 계약 기간 중의 증액과 계약갱신요구권(제6조의3)에 따른 갱신에 적용되며, 새 임차인과의 신규 계약에는 적용되지 않습니다",
                "The 5% cap applies to increases during the lease and to renewals under the right to demand renewal (Art. 6-3); it does not bind a new contract with a new tenant",
            ).to_owned());
            insights.push(
                lang.pick(
                    "이미 상한을 넘겨 지급했다면 초과분의 반환을 청구할 수 있습니다 (제10조의2)",
                    "Any amount already paid above the cap can be claimed back (Art. 10-2)",
                )
                .to_owned(),
            );
            if within_cap {
                recommendations.extend(
                    [
                        lang.pick("법정 상한 이내이므로 협의해 증액에 응할 수 있습니다. 다만 직전 계약·증액 후 1년이 지났는지 확인하세요", "The raise is within the cap, so it can be agreed; first check that a year has passed since the contract or the last increase"),
                        lang.pick("증액분은 계약서(변경계약서)를 쓰고 새로 확정일자를 받아 우선변제권을 지키세요", "Put the increase in a written amendment and get a new fixed date (확정일자) on it to keep priority for the added amount"),
                        lang.pick("갱신이라면 계약갱신요구권 사용 여부를 정하세요 (1회 한정, 2년 연장)", "If this is a renewal, decide whether to use the one-time right to demand renewal (2 more years)"),
                    ]
                    .map(str::to_owned),
                );
            } else {
                recommendations.push(match lang {
                    Lang::Ko => format!("{cap}%를 넘는 증액 요구는 거절할 수 있습니다. 응하더라도 법정 상한({})까지만 응하면 됩니다", won(max_legal)),
                    Lang::En => format!("You may refuse any increase above {cap}%; at most you need to accept the legal maximum ({})", won(max_legal)),
                });
                recommendations.extend(
                    [
                        lang.pick("임대차기간이 끝나기 6개월 전부터 2개월 전까지 계약갱신요구권(제6조의3)을 행사하세요. 임대인은 실거주 등 정당한 사유 없이 거절할 수 없습니다", "Exercise the right to demand renewal (Art. 6-3) between 6 and 2 months before the lease ends; the landlord cannot refuse without a legitimate reason such as moving in"),
                        lang.pick("갱신 요구와 5% 초과 증액 거절 의사를 내용증명으로 보내 기록을 남기세요", "Send the renewal demand and the refusal of the excess increase by certified mail (내용증명) to keep a record"),
                        lang.pick("합의가 안 되면 주택임대차분쟁조정위원회(대한법률구조공단·한국부동산원·LH)에 조정을 신청하세요. 소송보다 빠르고 비용이 적습니다", "If you cannot agree, apply to the Housing Lease Dispute Mediation Committee (Korea Legal Aid Corporation, Korea Real Estate Board, LH): faster and cheaper than a lawsuit"),
                        lang.pick("전입신고와 확정일자를 유지해 대항력과 우선변제권을 지키세요 (제3조, 제3조의2)", "Keep your move-in registration and fixed date to preserve opposability and priority repayment (Arts. 3, 3-2)"),
                        lang.pick("증액에 합의한다면 증액분에 대해 새 확정일자를 받으세요", "If you do agree to an increase, get a new fixed date for the added amount"),
                    ]
                    .map(str::to_owned),
                );
            }
        }
        "decrease" => {
            insights.push(match lang {
                Lang::Ko => format!(
                    "요청된 {subject} 변경은 {} → {}, {rate:.1}% 감액입니다",
                    won(old),
                    won(new)
                ),
                Lang::En => format!(
                    "The requested {subject} change is {} → {}, a {rate:.1}% decrease",
                    won(old),
                    won(new)
                ),
            });
            insights.push(lang.pick(
                "제7조는 경제사정의 변동 등으로 금액이 적절하지 않게 된 경우 감액청구도 허용하며, 감액에는 5% 상한이 없습니다",
                "Article 7 also allows claiming a decrease when the amount has become inappropriate; the 5% cap does not limit decreases",
            ).to_owned());
            recommendations.extend(
                [
                    lang.pick("주변 시세 하락 자료를 근거로 감액을 요청하세요", "Support the request with evidence of falling market prices"),
                    lang.pick("합의가 안 되면 주택임대차분쟁조정위원회에 조정을 신청할 수 있습니다", "If you cannot agree, apply to the Housing Lease Dispute Mediation Committee"),
                ]
                .map(str::to_owned),
            );
        }
        _ => {
            insights.push(
                lang.pick(
                    "요청 전후 금액이 같아 변경이 없습니다",
                    "The amounts are equal: nothing changes",
                )
                .to_owned(),
            );
        }
    }

    // The market around the home, when the region is known: how the demand compares.
    let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
    let deal = match c.subject {
        Subject::Deposit => DealType::Jeonse,
        Subject::MonthlyRent => DealType::Monthly,
    };
    let market = f
        .region()
        .and_then(|r| MarketView::new(Some(r), property_type, deal));
    if let Some(m) = &market {
        let avg = m.trend.latest;
        let ratio = super::data::pct(new, avg);
        insights.push(match (lang, c.subject) {
            (Lang::Ko, Subject::Deposit) => format!(
                "{} {} 평균 전세 보증금은 {}이며, 요구액은 평균의 {ratio:.1}%입니다",
                m.label(lang),
                property_type.ko(),
                won(avg)
            ),
            (Lang::Ko, Subject::MonthlyRent) => format!(
                "{} {} 평균 월세는 {}이며, 요구액은 평균의 {ratio:.1}%입니다",
                m.label(lang),
                property_type.ko(),
                won(avg)
            ),
            (Lang::En, _) => format!(
                "The average {} for {} {} is {}; the demand is {ratio:.1}% of it",
                deal.en(),
                m.label(lang),
                property_type.en(),
                won(avg)
            ),
        });
    }

    let mut legal_basis: Vec<Value> = CHANGE_LAW_IDS
        .iter()
        .filter_map(|id| DATASET.law(id))
        .map(|l| law_json(l, 1.0))
        .collect();
    for v in legal_basis.iter_mut() {
        if let Some(m) = v.as_object_mut() {
            m.remove("similarity");
        }
    }
    let searched: Vec<String> = ctx
        .team_results
        .get("search_team")
        .and_then(|s| s.get("legal_results"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| {
            Some(format!(
                "{} {}",
                l.get("law_name")?.as_str()?,
                l.get("article")?.as_str()?
            ))
        })
        .collect();

    let verdict = match (direction, within_cap, lang) {
        ("increase", false, Lang::Ko) => format!("법정 상한({cap}%) 초과: 인상률 {rate:.1}%"),
        ("increase", true, Lang::Ko) => format!("법정 상한({cap}%) 이내: 인상률 {rate:.1}%"),
        ("increase", false, Lang::En) => format!("over the {cap}% legal cap: +{rate:.1}%"),
        ("increase", true, Lang::En) => format!("within the {cap}% legal cap: +{rate:.1}%"),
        (_, _, Lang::Ko) => format!("증액 아님: {rate:.1}%"),
        (_, _, Lang::En) => format!("not an increase: {rate:.1}%"),
    };
    let title = match (c.subject, lang) {
        (Subject::Deposit, Lang::Ko) => "전세금(보증금) 인상 요구 법률 분석",
        (Subject::MonthlyRent, Lang::Ko) => "월세(차임) 인상 요구 법률 분석",
        (Subject::Deposit, Lang::En) => "Legal analysis of the requested deposit change",
        (Subject::MonthlyRent, Lang::En) => "Legal analysis of the requested rent change",
    };
    let summary = format!("{} → {}: {verdict}", won(old), won(new));
    let conclusion = if direction == "increase" && !within_cap {
        match lang {
            Lang::Ko => format!(
                "임차인은 {cap}%를 넘는 증액을 거절할 수 있습니다. 계약 기간 중이거나 계약갱신요구권으로 갱신할 때 임대인이 청구할 수 있는 최대 금액은 {}입니다",
                won(max_legal)
            ),
            Lang::En => format!(
                "The tenant can refuse anything above {cap}%: during the lease, or on a renewal under the right to demand renewal, the most the landlord can claim is {}",
                won(max_legal)
            ),
        }
    } else {
        recommendations
            .first()
            .cloned()
            .unwrap_or_else(|| verdict.clone())
    };
    let report = json!({
        "title": title,
        "summary": summary,
        "verdict": verdict,
        "sections": [
            {"heading": lang.pick("인상률 분석", "Rate of change"), "content": insights.first()},
            {"heading": lang.pick("법적 근거", "Legal basis"), "content": legal_basis.iter().map(|l| format!("{} {} ({})", l["law_name"].as_str().unwrap_or_default(), l["article"].as_str().unwrap_or_default(), l["title"].as_str().unwrap_or_default())).collect::<Vec<_>>().join(", ")},
            {"heading": lang.pick("대응 방안", "What to do"), "content": recommendations.join(" / ")},
        ],
        "conclusion": conclusion,
    });
    let increase_analysis = json!({
        "subject": match c.subject { Subject::Deposit => "deposit", Subject::MonthlyRent => "monthly_rent" },
        "direction": direction,
        "old_amount": old,
        "new_amount": new,
        "old_text": format_won(old, Lang::Ko),
        "new_text": format_won(new, Lang::Ko),
        "increase_amount": new as i128 - old as i128,
        "increase_rate_pct": rate,
        "legal_cap_pct": cap,
        "max_legal_amount": max_legal,
        "excess_amount": excess,
        "within_legal_cap": within_cap,
        "over_legal_cap": !within_cap,
        "amounts_from": c.source,
    });
    json!({
        "team_name": "analysis",
        "status": "completed",
        "analysis_type": "comprehensive",
        "input_data": {"legal_search": searched},
        "raw_analysis": {
            "increase_analysis": increase_analysis,
            "legal_basis": legal_basis,
            "market_context": market.as_ref().map(MarketView::to_json),
        },
        "metrics": {
            "increase_rate_pct": rate,
            "legal_cap_pct": cap,
            "excess_rate_pct": round1((rate - cap as f64).max(0.0)),
            "old_amount": old,
            "new_amount": new,
            "increase_amount": new as i128 - old as i128,
            "max_legal_amount": max_legal,
            "excess_amount": excess,
        },
        "insights": insights,
        "report": report,
        "recommendations": recommendations,
        // The amounts and the rule are certain; how they apply to the user's contract (dates,
        // renewal history) is what the text cannot know.
        "confidence_score": if c.source == "intent" { 0.85 } else { 0.95 },
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
        "insights": insights,
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
    use crate::agents::SearchTeam;

    fn ctx(query: &str) -> AgentContext {
        AgentContext {
            query: query.into(),
            ..AgentContext::default()
        }
    }

    const SCENARIO_1: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

    #[tokio::test]
    async fn scenario_1_is_233_3_percent_over_the_cap() {
        // As in seed 000: search_team runs first, and analysis_team gets its result.
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
