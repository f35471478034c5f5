//! The analysis team's legal half: a requested change of a deposit or rent judged against
//! 주택임대차보호법 제7조's 5% cap (3억 → 10억 is +233.3%, far over it), with the law, the
//! district's market and what the tenant can do.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use super::data::{
    DATASET, DealType, PropertyType, change_pct, dataset_source, law_source, pct, round1,
};
use super::filters::Filters;
use super::market::MarketView;
use super::search::law_json;
use super::{AgentContext, AgentError};
use crate::query::{ChangeRequest, Lang, Query, Subject, format_won, parse_amount};

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

/// Old and new amounts in won and what they are about.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    old: u64,
    new: u64,
    subject: Subject,
    /// `query`, `input` or `intent`: where the amounts came from.
    source: &'static str,
}

/// The change to judge: `old_amount`/`new_amount` in the input, else the query's wording, else
/// the first two of the intent's `amounts`.
pub(crate) fn change_request(
    ctx: &AgentContext,
    input: &Map<String, Value>,
) -> Result<Option<Change>, AgentError> {
    let q = Query::parse(&ctx.query);
    if let Some(change) = input_change(input, &q)? {
        return Ok(Some(change));
    }
    if let Some(ChangeRequest { old, new, subject }) = q.change {
        return Ok(Some(Change {
            old: old.won,
            new: new.won,
            subject,
            source: "query",
        }));
    }
    Ok(intent_change(ctx, &q))
}

fn input_change(input: &Map<String, Value>, q: &Query) -> Result<Option<Change>, AgentError> {
    let (old, new) = match (input.get("old_amount"), input.get("new_amount")) {
        (None, None) => return Ok(None),
        (Some(old), Some(new)) => (old, new),
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
    };
    let subject = match input.get("subject").and_then(Value::as_str) {
        Some("monthly_rent" | "rent" | "월세" | "차임") => Some(Subject::MonthlyRent),
        Some(_) => Some(Subject::Deposit),
        None => None,
    };
    Ok(Some(Change {
        old: amount_param("old_amount", old)?,
        new: amount_param("new_amount", new)?,
        subject: subject
            .or(q.change.as_ref().map(|c| c.subject))
            .unwrap_or(Subject::Deposit),
        source: "input",
    }))
}

/// The first two of the intent's `amounts` (numbers, text like `"3억"`, or `{won}` objects).
fn intent_change(ctx: &AgentContext, q: &Query) -> Option<Change> {
    let amount = |v: &Value| match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => parse_amount(s),
        _ => None,
    };
    let amounts: Vec<u64> = ctx
        .intent
        .pointer("/entities/amounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| match v {
            Value::Object(o) => ["won", "value", "amount"]
                .iter()
                .find_map(|k| amount(o.get(*k)?)),
            other => amount(other),
        })
        .collect();
    let [old, new, ..] = amounts[..] else {
        return None;
    };
    let subject = if q.deal_type == Some(DealType::Monthly) {
        Subject::MonthlyRent
    } else {
        Subject::Deposit
    };
    Some(Change {
        old,
        new,
        subject,
        source: "intent",
    })
}

fn amount_param(key: &str, v: &Value) -> Result<u64, AgentError> {
    let parsed = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => parse_amount(s),
        _ => None,
    };
    parsed.filter(|&won| won > 0).ok_or_else(|| {
        AgentError::fatal(format!(
            "input field `{key}` must be a positive amount in won (a number or text like \"3억\"), got {v}"
        ))
    })
}

/// The numbers of a change against the cap.
struct Judged {
    rate: f64,
    max_legal: u64,
    within_cap: bool,
    excess: u64,
    direction: &'static str,
}

impl Judged {
    fn of(c: &Change) -> Self {
        let (old, new) = (c.old, c.new);
        // Integer arithmetic for the verdict, so 5.0% exactly is within the cap whatever the
        // float rounding does.
        let max_legal = old + old * LEGAL_CAP_PCT / 100;
        Self {
            rate: change_pct(old, new),
            max_legal,
            within_cap: new <= max_legal,
            excess: new.saturating_sub(max_legal),
            direction: match new.cmp(&old) {
                Ordering::Greater => "increase",
                Ordering::Less => "decrease",
                Ordering::Equal => "unchanged",
            },
        }
    }

    fn over_cap(&self) -> bool {
        self.direction == "increase" && !self.within_cap
    }

    /// `법정 상한(5%) 초과: 인상률 233.3%`.
    fn verdict(&self, lang: Lang) -> String {
        let (rate, cap) = (self.rate, LEGAL_CAP_PCT);
        match (self.direction, self.within_cap, lang) {
            ("increase", false, Lang::Ko) => format!("법정 상한({cap}%) 초과: 인상률 {rate:.1}%"),
            ("increase", true, Lang::Ko) => format!("법정 상한({cap}%) 이내: 인상률 {rate:.1}%"),
            ("increase", false, Lang::En) => format!("over the {cap}% legal cap: +{rate:.1}%"),
            ("increase", true, Lang::En) => format!("within the {cap}% legal cap: +{rate:.1}%"),
            (_, _, Lang::Ko) => format!("증액 아님: {rate:.1}%"),
            (_, _, Lang::En) => format!("not an increase: {rate:.1}%"),
        }
    }
}

fn subject_text(subject: Subject, lang: Lang) -> &'static str {
    match (subject, lang) {
        (Subject::Deposit, Lang::Ko) => "보증금(전세금)",
        (Subject::MonthlyRent, Lang::Ko) => "월세(차임)",
        (Subject::Deposit, Lang::En) => "deposit",
        (Subject::MonthlyRent, Lang::En) => "monthly rent",
    }
}

/// What the numbers mean: the rate, the cap, the rules around it.
fn increase_insights(c: &Change, j: &Judged, lang: Lang) -> Vec<String> {
    let won = |x: u64| format_won(x, lang);
    let (rate, cap, subject) = (j.rate, LEGAL_CAP_PCT, subject_text(c.subject, lang));
    let mut insights = vec![match lang {
        Lang::Ko => format!(
            "요청된 {subject} 인상은 {} → {}, 인상률 {rate:.1}%입니다",
            won(c.old),
            won(c.new)
        ),
        Lang::En => format!(
            "The requested {subject} increase is {} → {}, a rise of {rate:.1}%",
            won(c.old),
            won(c.new)
        ),
    }];
    insights.push(match (j.within_cap, lang) {
        (true, Lang::Ko) => format!("인상률 {rate:.1}%는 주택임대차보호법 제7조의 법정 상한 {cap}% 이내입니다 (상한액 {})", won(j.max_legal)),
        (true, Lang::En) => format!("{rate:.1}% is within the {cap}% legal cap of Article 7 of the Housing Lease Protection Act (at most {})", won(j.max_legal)),
        (false, Lang::Ko) => format!(
            "주택임대차보호법 제7조 제2항(시행령 제8조)에 따라 증액청구는 약정 금액의 20분의 1({cap}%)을 넘을 수 없어 법정 상한은 {}입니다. 요구액은 법정 상한을 {}({:.1}%p) 초과합니다",
            won(j.max_legal), won(j.excess), rate - cap as f64
        ),
        (false, Lang::En) => format!(
            "Under Article 7(2) of the Housing Lease Protection Act (Enforcement Decree Art. 8) an increase may not exceed 1/20 ({cap}%) of the agreed amount, so the legal maximum is {}. The demand exceeds it by {} ({:.1} percentage points): over the legal cap",
            won(j.max_legal), won(j.excess), rate - cap as f64
        ),
    });
    insights.extend([
        lang.pick(
            "증액청구는 임대차계약 또는 직전 증액이 있은 후 1년 이내에는 할 수 없습니다 (제7조 제1항)",
            "No increase may be claimed within one year of the contract or of the last increase (Art. 7(1))",
        ),
        lang.pick(
            "5% 상한은 계약 기간 중의 증액과 계약갱신요구권(제6조의3)에 따른 갱신에 적용되며, 새 임차인과의 신규 계약에는 적용되지 않습니다",
            "The 5% cap applies to increases during the lease and to renewals under the right to demand renewal (Art. 6-3); it does not bind a new contract with a new tenant",
        ),
        lang.pick(
            "이미 상한을 넘겨 지급했다면 초과분의 반환을 청구할 수 있습니다 (제10조의2)",
            "Any amount already paid above the cap can be claimed back (Art. 10-2)",
        ),
    ].map(str::to_owned));
    insights
}

/// What the tenant can do about a raise.
fn increase_recommendations(j: &Judged, lang: Lang) -> Vec<String> {
    if j.within_cap {
        return [
            lang.pick("법정 상한 이내이므로 협의해 증액에 응할 수 있습니다. 다만 직전 계약·증액 후 1년이 지났는지 확인하세요", "The raise is within the cap, so it can be agreed; first check that a year has passed since the contract or the last increase"),
            lang.pick("증액분은 계약서(변경계약서)를 쓰고 새로 확정일자를 받아 우선변제권을 지키세요", "Put the increase in a written amendment and get a new fixed date (확정일자) on it to keep priority for the added amount"),
            lang.pick("갱신이라면 계약갱신요구권 사용 여부를 정하세요 (1회 한정, 2년 연장)", "If this is a renewal, decide whether to use the one-time right to demand renewal (2 more years)"),
        ]
        .map(str::to_owned)
        .to_vec();
    }
    let cap = LEGAL_CAP_PCT;
    let max = format_won(j.max_legal, lang);
    let mut out = vec![match lang {
        Lang::Ko => format!(
            "{cap}%를 넘는 증액 요구는 거절할 수 있습니다. 응하더라도 법정 상한({max})까지만 응하면 됩니다"
        ),
        Lang::En => format!(
            "You may refuse any increase above {cap}%; at most you need to accept the legal maximum ({max})"
        ),
    }];
    out.extend(
        [
            lang.pick("임대차기간이 끝나기 6개월 전부터 2개월 전까지 계약갱신요구권(제6조의3)을 행사하세요. 임대인은 실거주 등 정당한 사유 없이 거절할 수 없습니다", "Exercise the right to demand renewal (Art. 6-3) between 6 and 2 months before the lease ends; the landlord cannot refuse without a legitimate reason such as moving in"),
            lang.pick("갱신 요구와 5% 초과 증액 거절 의사를 내용증명으로 보내 기록을 남기세요", "Send the renewal demand and the refusal of the excess increase by certified mail (내용증명) to keep a record"),
            lang.pick("합의가 안 되면 주택임대차분쟁조정위원회(대한법률구조공단·한국부동산원·LH)에 조정을 신청하세요. 소송보다 빠르고 비용이 적습니다", "If you cannot agree, apply to the Housing Lease Dispute Mediation Committee (Korea Legal Aid Corporation, Korea Real Estate Board, LH): faster and cheaper than a lawsuit"),
            lang.pick("전입신고와 확정일자를 유지해 대항력과 우선변제권을 지키세요 (제3조, 제3조의2)", "Keep your move-in registration and fixed date to preserve opposability and priority repayment (Arts. 3, 3-2)"),
            lang.pick("증액에 합의한다면 증액분에 대해 새 확정일자를 받으세요", "If you do agree to an increase, get a new fixed date for the added amount"),
        ]
        .map(str::to_owned),
    );
    out
}

/// The insights and recommendations for the change's direction.
fn change_texts(c: &Change, j: &Judged, lang: Lang) -> (Vec<String>, Vec<String>) {
    match j.direction {
        "increase" => (
            increase_insights(c, j, lang),
            increase_recommendations(j, lang),
        ),
        "decrease" => {
            let (subject, rate) = (subject_text(c.subject, lang), j.rate);
            let won = |x: u64| format_won(x, lang);
            let insights = vec![
                match lang {
                    Lang::Ko => format!("요청된 {subject} 변경은 {} → {}, {rate:.1}% 감액입니다", won(c.old), won(c.new)),
                    Lang::En => format!("The requested {subject} change is {} → {}, a {rate:.1}% decrease", won(c.old), won(c.new)),
                },
                lang.pick(
                    "제7조는 경제사정의 변동 등으로 금액이 적절하지 않게 된 경우 감액청구도 허용하며, 감액에는 5% 상한이 없습니다",
                    "Article 7 also allows claiming a decrease when the amount has become inappropriate; the 5% cap does not limit decreases",
                ).to_owned(),
            ];
            let recommendations = [
                lang.pick(
                    "주변 시세 하락 자료를 근거로 감액을 요청하세요",
                    "Support the request with evidence of falling market prices",
                ),
                lang.pick(
                    "합의가 안 되면 주택임대차분쟁조정위원회에 조정을 신청할 수 있습니다",
                    "If you cannot agree, apply to the Housing Lease Dispute Mediation Committee",
                ),
            ]
            .map(str::to_owned)
            .to_vec();
            (insights, recommendations)
        }
        _ => (
            vec![
                lang.pick(
                    "요청 전후 금액이 같아 변경이 없습니다",
                    "The amounts are equal: nothing changes",
                )
                .to_owned(),
            ],
            Vec::new(),
        ),
    }
}

/// The market around the home, when the region is known: how the demand compares.
fn market_context(f: &Filters, c: &Change, lang: Lang) -> (Option<MarketView>, Option<String>) {
    let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
    let deal = match c.subject {
        Subject::Deposit => DealType::Jeonse,
        Subject::MonthlyRent => DealType::Monthly,
    };
    let Some(m) = f
        .region()
        .and_then(|r| MarketView::new(Some(r), property_type, deal))
    else {
        return (None, None);
    };
    let avg = m.trend.latest;
    let ratio = pct(c.new, avg);
    let (label, won) = (m.label(lang), format_won(avg, lang));
    let insight = match (lang, c.subject) {
        (Lang::Ko, Subject::Deposit) => format!(
            "{label} {} 평균 전세 보증금은 {won}이며, 요구액은 평균의 {ratio:.1}%입니다",
            property_type.ko()
        ),
        (Lang::Ko, Subject::MonthlyRent) => format!(
            "{label} {} 평균 월세는 {won}이며, 요구액은 평균의 {ratio:.1}%입니다",
            property_type.ko()
        ),
        (Lang::En, _) => format!(
            "The average {} for {label} {} is {won}; the demand is {ratio:.1}% of it",
            deal.en(),
            property_type.en()
        ),
    };
    (Some(m), Some(insight))
}

/// The articles cited, without the search's similarity.
fn legal_basis() -> Vec<Value> {
    CHANGE_LAW_IDS
        .iter()
        .filter_map(|id| DATASET.law(id))
        .map(|l| {
            let mut v = law_json(l, 1.0);
            if let Some(m) = v.as_object_mut() {
                m.remove("similarity");
            }
            v
        })
        .collect()
}

/// `주택임대차보호법 제7조` for each law the search team found.
fn searched_laws(ctx: &AgentContext) -> Vec<String> {
    ctx.team_results
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
        .collect()
}

/// The report: title, summary, verdict, sections, conclusion.
fn change_report(
    c: &Change,
    j: &Judged,
    texts: (&[String], &[String], &[Value]),
    lang: Lang,
) -> Value {
    let (insights, recommendations, legal_basis) = texts;
    let won = |x: u64| format_won(x, lang);
    let verdict = j.verdict(lang);
    let title = match (c.subject, lang) {
        (Subject::Deposit, Lang::Ko) => "전세금(보증금) 인상 요구 법률 분석",
        (Subject::MonthlyRent, Lang::Ko) => "월세(차임) 인상 요구 법률 분석",
        (Subject::Deposit, Lang::En) => "Legal analysis of the requested deposit change",
        (Subject::MonthlyRent, Lang::En) => "Legal analysis of the requested rent change",
    };
    let cap = LEGAL_CAP_PCT;
    let conclusion = if j.over_cap() {
        match lang {
            Lang::Ko => format!(
                "임차인은 {cap}%를 넘는 증액을 거절할 수 있습니다. 계약 기간 중이거나 계약갱신요구권으로 갱신할 때 임대인이 청구할 수 있는 최대 금액은 {}입니다",
                won(j.max_legal)
            ),
            Lang::En => format!(
                "The tenant can refuse anything above {cap}%: during the lease, or on a renewal under the right to demand renewal, the most the landlord can claim is {}",
                won(j.max_legal)
            ),
        }
    } else {
        recommendations
            .first()
            .cloned()
            .unwrap_or_else(|| verdict.clone())
    };
    let laws: Vec<String> = legal_basis
        .iter()
        .map(|l| {
            format!(
                "{} {} ({})",
                l["law_name"].as_str().unwrap_or_default(),
                l["article"].as_str().unwrap_or_default(),
                l["title"].as_str().unwrap_or_default()
            )
        })
        .collect();
    json!({
        "title": title,
        "summary": format!("{} → {}: {verdict}", won(c.old), won(c.new)),
        "verdict": verdict,
        "sections": [
            {"heading": lang.pick("인상률 분석", "Rate of change"), "content": insights.first()},
            {"heading": lang.pick("법적 근거", "Legal basis"), "content": laws.join(", ")},
            {"heading": lang.pick("대응 방안", "What to do"), "content": recommendations.join(" / ")},
        ],
        "conclusion": conclusion,
    })
}

/// `{old, new, rate, cap, verdict ...}` of the change.
fn increase_json(c: &Change, j: &Judged) -> Value {
    json!({
        "subject": c.subject.code(),
        "direction": j.direction,
        "old_amount": c.old,
        "new_amount": c.new,
        "old_text": format_won(c.old, Lang::Ko),
        "new_text": format_won(c.new, Lang::Ko),
        "increase_amount": c.new as i128 - c.old as i128,
        "increase_rate_pct": j.rate,
        "legal_cap_pct": LEGAL_CAP_PCT,
        "max_legal_amount": j.max_legal,
        "excess_amount": j.excess,
        "within_legal_cap": j.within_cap,
        "over_legal_cap": !j.within_cap,
        "amounts_from": c.source,
    })
}

/// The analysis team's result for a change request.
pub(crate) fn change_analysis(ctx: &AgentContext, f: &Filters, c: &Change, lang: Lang) -> Value {
    let j = Judged::of(c);
    let (mut insights, recommendations) = change_texts(c, &j, lang);
    let (market, market_insight) = market_context(f, c, lang);
    insights.extend(market_insight);
    let legal_basis = legal_basis();
    let report = change_report(c, &j, (&insights, &recommendations, &legal_basis), lang);
    let mut sources: Vec<String> = CHANGE_LAW_IDS
        .iter()
        .filter_map(|id| DATASET.law(id))
        .map(law_source)
        .collect();
    if market.is_some() {
        sources.push(dataset_source(lang));
    }
    json!({
        "team_name": "analysis",
        "status": "completed",
        "analysis_type": "comprehensive",
        "summary": format!("{}.", report["summary"].as_str().unwrap_or_default()),
        "input_data": {"legal_search": searched_laws(ctx)},
        "raw_analysis": {
            "increase_analysis": increase_json(c, &j),
            "legal_basis": legal_basis,
            "market_context": market.as_ref().map(MarketView::to_json),
        },
        "metrics": {
            "increase_rate_pct": j.rate,
            "legal_cap_pct": LEGAL_CAP_PCT,
            "excess_rate_pct": round1((j.rate - LEGAL_CAP_PCT as f64).max(0.0)),
            "old_amount": c.old,
            "new_amount": c.new,
            "increase_amount": c.new as i128 - c.old as i128,
            "max_legal_amount": j.max_legal,
            "excess_amount": j.excess,
        },
        "insights": insights,
        "report": report,
        "recommendations": recommendations,
        "sources": sources,
        // The amounts and the rule are certain; how they apply to the user's contract (dates,
        // renewal history) is what the text cannot know.
        "confidence_score": if c.source == "intent" { 0.85 } else { 0.95 },
    })
}
