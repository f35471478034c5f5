//! The sentences about a requested raise of a deposit or rent against the legal cap.

use chronicle_engine::Intent;
use serde_json::Value;

use super::findings::Findings;
use super::{format_pct, format_won};

/// 주택임대차보호법 제7조 ② with its enforcement decree: an increase of the deposit or rent may
/// not exceed 1/20 of the agreed amount.
const LEGAL_INCREASE_CAP_PCT: f64 = 5.0;

/// The deposit or rent increase the query asks about: `(before, after, rate %, cap %)`.
pub(super) type Increase = (Option<u64>, Option<u64>, f64, f64);

/// The old and new amounts the intent names: its change request, else its first two amounts
/// (a model's intent has no `change`).
fn requested_amounts(intent: &Intent) -> Vec<u64> {
    let e = &intent.entities;
    let change = e
        .get("change")
        .and_then(|c| Some(vec![c.get("old")?.as_u64()?, c.get("new")?.as_u64()?]));
    change.unwrap_or_else(|| {
        e.get("amounts")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    })
}

pub(super) fn increase(findings: &Findings, intent: &Intent) -> Option<Increase> {
    let amounts = requested_amounts(intent);
    let metric_amount = |keys: &[&str]| {
        findings
            .metric(keys)
            .filter(|v| *v > 0.0)
            .map(|v| v.round() as u64)
    };
    let before = metric_amount(&[
        "current_amount",
        "current_deposit",
        "old_amount",
        "original_amount",
    ])
    .or_else(|| amounts.first().copied());
    let after = metric_amount(&[
        "requested_amount",
        "requested_deposit",
        "new_amount",
        "proposed_amount",
    ])
    .or_else(|| amounts.get(1).copied());
    let rate = findings
        .metric(&["increase_rate_pct", "increase_rate"])
        .or_else(|| {
            // Without an analysis, the rules still know what a raise of the named amounts means.
            let raised = intent.intent_type == "comprehensive";
            match (before, after) {
                (Some(b), Some(a)) if raised && b > 0 && a > b => {
                    Some((a - b) as f64 / b as f64 * 100.0)
                }
                _ => None,
            }
        })?;
    let cap = findings
        .metric(&["legal_cap_pct", "legal_cap"])
        .unwrap_or(LEGAL_INCREASE_CAP_PCT);
    Some((before, after, rate, cap))
}

/// Which word the user used for the money being raised.
fn deposit_word(query: &str) -> &'static str {
    ["전세금", "보증금", "월세", "임대료", "차임"]
        .into_iter()
        .find(|w| query.contains(w))
        .unwrap_or("보증금")
}

pub(super) fn increase_sentences(query: &str, inc: Increase, english: bool) -> Vec<String> {
    let (before, after, rate, cap) = inc;
    let over = rate > cap;
    let max_allowed = before.map(|b| (b as f64 * (1.0 + cap / 100.0)).round() as u64);
    let mut out = Vec::new();
    if english {
        let amounts = match (before, after) {
            (Some(b), Some(a)) => format!(" ({} → {})", format_won(b, true), format_won(a, true)),
            _ => String::new(),
        };
        let verdict = if over { "exceeds" } else { "is within" };
        out.push(format!(
            "The requested increase{amounts} is {}, which {verdict} the {} cap set by Article 7 of the Housing Lease Protection Act (주택임대차보호법 제7조).",
            format_pct(rate),
            format_pct(cap),
        ));
        if over {
            let limit = max_allowed
                .map_or_else(String::new, |m| format!(" (up to {})", format_won(m, true)));
            out.push(format!(
                "During the lease or on a renewal under the tenant's renewal right (Article 6-3), an increase is capped at {}{limit}, so you can refuse the excess.",
                format_pct(cap)
            ));
        }
    } else {
        let word = deposit_word(query);
        let amounts = match (before, after) {
            (Some(b), Some(a)) => format!("({} → {})", format_won(b, false), format_won(a, false)),
            _ => String::new(),
        };
        let verdict = if over {
            "초과합니다"
        } else {
            "넘지 않습니다"
        };
        out.push(format!(
            "요청받은 {word} 인상{amounts}은 인상률 {}로, 주택임대차보호법 제7조가 정한 증액 상한 {}를 {verdict}.",
            format_pct(rate),
            format_pct(cap),
        ));
        if over {
            let limit =
                max_allowed.map_or_else(String::new, |m| format!("({}까지)", format_won(m, false)));
            out.push(format!(
                "계약 기간 중이거나 계약갱신요구권(제6조의3)을 행사해 갱신하는 경우 증액은 {}{limit}로 제한되므로, 초과분 요구는 거절할 수 있습니다.",
                format_pct(cap)
            ));
        }
    }
    out
}
