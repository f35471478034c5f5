//! The answer's other sentences: the market's average and trend, a comparison of districts, a
//! drafted document, the relevant laws and the recommended steps.

use serde_json::Value;

use super::findings::{Findings, Market};
use super::format_won;
use crate::query::{DealType, PropertyType, english_region, parse_property_type};

/// Law references named in one answer, so a long search result cannot flood it.
const LAW_REFERENCES_MAX: usize = 3;
/// Recommendations quoted in one answer; the rest stay in `insights`.
const ANSWER_RECOMMENDATIONS_MAX: usize = 2;

/// `apartments`, `detached houses` for a Korean property type.
fn english_kind(property_type: &str) -> String {
    let kind = parse_property_type(property_type).map_or("home", PropertyType::en);
    format!("{kind}s")
}

/// `sale`, `jeonse`, `monthly rent` for a Korean deal type.
fn english_deal(deal_type: &str) -> &str {
    match DealType::from_param(deal_type) {
        Some(d) => d.en(),
        None => deal_type,
    }
}

/// `강남구 아파트 매매 평균 시세는 14억 5,000만 원이며, 최근 3개월 변동률은 +4.8%입니다.`: one
/// district, one property type, one deal type, labelled.
pub(super) fn market_sentence(m: &Market, english: bool) -> String {
    if english {
        let place = m
            .region
            .as_deref()
            .map_or("Seoul".to_owned(), english_region);
        let change = m
            .change_3m_pct
            .map_or_else(String::new, |c| format!(", {c:+.1}% over 3 months"));
        return format!(
            "{} in {place} ({}) average {}{change}.",
            capitalised(&english_kind(&m.property_type)),
            english_deal(&m.deal_type),
            format_won(m.avg, true)
        );
    }
    let change = m.change_3m_pct.map_or_else(String::new, |c| {
        format!("이며, 최근 3개월 변동률은 {c:+.1}%")
    });
    format!(
        "{} {} {} 평균 시세는 {}{change}입니다.",
        m.label,
        m.property_type,
        m.deal_type,
        format_won(m.avg, false)
    )
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// Metrics as the LangGraph supervisor's agents report them (`avg_price`, `price_change_pct` ...),
/// without labels:
/// `평균 시세는 13억 5,000만 원이며, 변동률은 +5.0%입니다.`
pub(super) fn metrics_sentence(findings: &Findings, english: bool) -> Option<String> {
    let avg = findings
        .metric(&["avg_price", "average_price", "mean_price"])
        .map(|v| v.round() as u64);
    let change = findings.metric(&[
        "price_change_pct",
        "change_rate_pct",
        "yoy_change_pct",
        "trend_pct",
    ]);
    Some(match (avg, change, english) {
        (Some(a), Some(c), false) => format!(
            "평균 시세는 {}이며, 변동률은 {c:+.1}%입니다.",
            format_won(a, false)
        ),
        (Some(a), None, false) => format!("평균 시세는 {}입니다.", format_won(a, false)),
        (None, Some(c), false) => format!("시세 변동률은 {c:+.1}%입니다."),
        (Some(a), Some(c), true) => format!(
            "The average price is {}, a change of {c:+.1}%.",
            format_won(a, true)
        ),
        (Some(a), None, true) => format!("The average price is {}.", format_won(a, true)),
        (None, Some(c), true) => format!("Prices changed by {c:+.1}%."),
        (None, None, _) => return None,
    })
}

/// One district of a comparison: its name and average price.
struct Compared {
    region: Option<String>,
    district: String,
    avg: u64,
}

/// `아파트 매매 평균 시세는 강남구 14억 5,000만 원, 서초구 19억 원으로 서초구가 강남구보다 4억
/// 5,000만 원(31.0%) 높습니다.`: every district with its figure, which is higher, by how much.
pub(super) fn comparison_sentence(data: &Value, english: bool) -> Option<String> {
    let rows: Vec<Compared> = data
        .get("regions")?
        .as_array()?
        .iter()
        .filter_map(|r| {
            Some(Compared {
                region: r.get("region").and_then(Value::as_str).map(str::to_owned),
                district: r.get("district")?.as_str()?.to_owned(),
                avg: r.get("avg_price")?.as_u64()?,
            })
        })
        .collect();
    let hi = rows.iter().max_by_key(|r| r.avg)?;
    let lo = rows.iter().min_by_key(|r| r.avg)?;
    if rows.len() < 2 {
        return None;
    }
    let property_type = data
        .get("property_type")
        .and_then(Value::as_str)
        .unwrap_or("아파트");
    let deal_type = data
        .get("deal_type")
        .and_then(Value::as_str)
        .unwrap_or("매매");
    let gap = hi.avg - lo.avg;
    let pct = if lo.avg == 0 {
        0.0
    } else {
        gap as f64 / lo.avg as f64 * 100.0
    };
    let gap_pct = format!("{pct:.1}%");
    if english {
        return Some(english_comparison(
            &rows,
            (hi, lo),
            property_type,
            deal_type,
            &gap_pct,
        ));
    }
    let figures: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.district, format_won(r.avg, false)))
        .collect();
    let verdict = match (gap, rows.len()) {
        (0, _) => "모두 같습니다".to_owned(),
        (_, 2) => format!(
            "{}가 {}보다 {}({gap_pct}) 높습니다",
            hi.district,
            lo.district,
            format_won(gap, false)
        ),
        _ => format!(
            "가장 높은 {}가 가장 낮은 {}보다 {}({gap_pct}) 높습니다",
            hi.district,
            lo.district,
            format_won(gap, false)
        ),
    };
    Some(format!(
        "{property_type} {deal_type} 평균 시세는 {}으로 {verdict}.",
        figures.join(", ")
    ))
}

fn english_comparison(
    rows: &[Compared],
    (hi, lo): (&Compared, &Compared),
    property_type: &str,
    deal_type: &str,
    gap_pct: &str,
) -> String {
    let name = |r: &Compared| {
        r.region.as_deref().map_or(r.district.clone(), |region| {
            english_region(region)
                .trim_end_matches(", Seoul")
                .to_owned()
        })
    };
    let figures: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", name(r), format_won(r.avg, true)))
        .collect();
    let gap = hi.avg - lo.avg;
    let verdict = match (gap, rows.len()) {
        (0, _) => "all the same".to_owned(),
        (_, 2) => format!(
            "{} is higher by {} ({gap_pct})",
            name(hi),
            format_won(gap, true)
        ),
        _ => format!(
            "{}, the highest, is {} ({gap_pct}) above {}, the lowest",
            name(hi),
            format_won(gap, true),
            name(lo)
        ),
    };
    format!(
        "Average {} prices ({}): {}; {verdict}.",
        english_kind(property_type).trim_end_matches('s'),
        english_deal(deal_type),
        figures.join(", ")
    )
}

/// `요청하신 「주택임대차표준계약서」 초안을 작성했습니다.`, or for a report `「…」 보고서를
/// 작성했습니다 (저장 위치: …).`
pub(super) fn document_sentence(doc: &Value, english: bool) -> String {
    let title = doc.get("title").and_then(Value::as_str).unwrap_or_default();
    let review = doc
        .get("review_needed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let path = doc.get("file_path").and_then(Value::as_str);
    let report = doc.get("document_type").and_then(Value::as_str) == Some("market_report");
    match (report, english) {
        (true, true) => {
            let saved = path.map_or_else(String::new, |p| format!(" (saved to {p})"));
            format!("Wrote the report \"{title}\"{saved}.")
        }
        (true, false) => {
            let saved = path.map_or_else(String::new, |p| format!(" (저장 위치: {p})"));
            format!("「{title}」 보고서를 작성했습니다{saved}.")
        }
        (false, true) => {
            let review = if review {
                " It needs a review before signing."
            } else {
                ""
            };
            format!("Drafted \"{title}\".{review}")
        }
        (false, false) => {
            let review = if review {
                " 서명 전에 검토가 필요합니다."
            } else {
                ""
            };
            format!("요청하신 「{title}」 초안을 작성했습니다.{review}")
        }
    }
}

/// `label: a<sep>b.`, or nothing without items.
fn labelled(label: (&str, &str), items: &[String], sep: &str, english: bool) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let (ko, en) = label;
    Some(format!(
        "{}: {}.",
        if english { en } else { ko },
        items.join(sep)
    ))
}

/// `관련 법령: …` with the first laws found.
pub(super) fn laws_sentence(laws: &[String], english: bool) -> Option<String> {
    let laws: Vec<String> = laws.iter().take(LAW_REFERENCES_MAX).cloned().collect();
    labelled(("관련 법령", "Relevant law"), &laws, ", ", english)
}

/// `권장 조치: …` with the first recommendations; in English the items after the first go on
/// the same sentence.
pub(super) fn recommendations_sentence(recs: &[String], english: bool) -> Option<String> {
    let recs: Vec<String> = recs
        .iter()
        .take(ANSWER_RECOMMENDATIONS_MAX)
        .enumerate()
        .map(|(i, r)| {
            let r = r.trim_end_matches('.');
            match r.chars().next() {
                Some(c) if english && i > 0 && c.is_ascii_uppercase() => {
                    c.to_ascii_lowercase().to_string() + &r[1..]
                }
                _ => r.to_owned(),
            }
        })
        .collect();
    labelled(("권장 조치", "Recommended"), &recs, "; ", english)
}
