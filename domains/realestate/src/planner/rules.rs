//! The domain's rules: intent analysis, planning, evaluation and the answer, as pure,
//! deterministic functions, used when no model is configured or a model call fails. The
//! entities come from the domain's one query parser (`crate::query`).
//!
//! How intents map to plans: the first matching rule of report, document, comprehensive,
//! comparison, recommendation, search, analysis picks the intent (`search` when none matches),
//! and each intent has a preferred plan and a fallback over other agents (`plans.rs`).

use chronicle_engine::Intent;
use chronicle_schemas::Source;
use serde_json::Value;

use crate::query::{Lang, Query, REPORT_TERMS, find_term};

mod answer;
mod evaluation;
mod plans;

pub use answer::format_response;
pub use evaluation::evaluate;
pub use plans::build_plan;
pub(crate) use plans::{StepSpec, assemble_plan};

/// Every intent type a plan can be built for; a model's answer outside this set is refused.
pub const INTENT_TYPES: [&str; 7] = [
    "search",
    "analysis",
    "comparison",
    "recommendation",
    "comprehensive",
    "document",
    "report",
];

/// The agents the rules know how to describe and wire together: the domain's own (the three
/// teams, then the four specialists). A plan may name other agents only when the caller lists
/// them as available.
pub fn known_agents() -> Vec<&'static str> {
    crate::agents::names().collect()
}

/// Listings shown in one answer at most, as the original formatter did.
pub const LISTINGS_MAX: usize = 10;

// ---------------------------------------------------------------------------------------------
// Intent

const DOCUMENT_TERMS: &[&str] = &[
    "계약서",
    "작성",
    "draft",
    "contract document",
    "lease contract",
    "lease agreement",
    "write a contract",
];
const MONEY_TERMS: &[&str] = &[
    "전세금",
    "보증금",
    "월세",
    "임대료",
    "차임",
    "deposit",
    "rent",
];
const RAISE_TERMS: &[&str] = &[
    "인상", "올려", "올리", "올린", "증액", "raise", "increase", "hike",
];
/// `법` alone is a legal term, but not inside `방법` ("way", as in 해결방법); see `find`.
const LEGAL_TERMS: &[&str] = &[
    "임대차보호법",
    "법적",
    "법률",
    "판례",
    "소송",
    "불법",
    "위법",
    "법",
    "legal",
    "illegal",
    "law",
];
const COMPARISON_TERMS: &[&str] = &["비교", "compare", "comparison", "comparing", "vs", "versus"];
const RECOMMENDATION_TERMS: &[&str] = &["추천", "투자", "recommend", "invest", "suggest"];
const SEARCH_TERMS: &[&str] = &[
    "조회", "검색", "찾아", "매물", "search", "find", "list", "show me", "research",
];
const ANALYSIS_TERMS: &[&str] = &[
    "시세", "분석", "가격", "동향", "추이", "trend", "price", "analysis", "analyze", "analyse",
    "market",
];

/// Where `term` first appears in `lower`, the lower-cased query.
fn find(lower: &str, term: &str) -> Option<usize> {
    if term == "법" {
        return lower
            .match_indices('법')
            .map(|(i, _)| i)
            .find(|&i| !lower[..i].ends_with('방'));
    }
    find_term(lower, term)
}

/// `(position, term)` of every term of `terms` found in `lower`.
fn hits(terms: &[&'static str], lower: &str) -> Vec<(usize, &'static str)> {
    terms
        .iter()
        .filter_map(|t| find(lower, t).map(|p| (p, *t)))
        .collect()
}

/// True when the query is English (no Hangul), so answers should be in English.
pub fn is_english(query: &str) -> bool {
    Lang::of(query) == Lang::En
}

/// The intent type and its confidence: the first matching rule of report, document,
/// comprehensive (a raise of a deposit or rent, or a legal question), comparison,
/// recommendation, search, analysis wins; `search` when none matches. One matched term is a
/// hint, two agreeing terms are a strong signal. A report is this domain's only when it is
/// about homes (a search or analysis word, or a place, type or deal named: `about_homes`), so a
/// weather report stays another domain's question.
fn classify(lower: &str, about_homes: bool) -> (&'static str, f64, Vec<(usize, &'static str)>) {
    let found = [
        REPORT_TERMS,
        DOCUMENT_TERMS,
        MONEY_TERMS,
        RAISE_TERMS,
        LEGAL_TERMS,
        COMPARISON_TERMS,
        RECOMMENDATION_TERMS,
        SEARCH_TERMS,
        ANALYSIS_TERMS,
    ]
    .map(|terms| hits(terms, lower));
    let [
        report,
        document,
        money,
        raise,
        legal,
        comparison,
        recommendation,
        search,
        analysis,
    ] = &found;
    let by_count = |n: usize| if n >= 2 { 0.9 } else { 0.8 };
    let raised = !money.is_empty() && !raise.is_empty();
    let real_estate_report =
        !report.is_empty() && (about_homes || !search.is_empty() || !analysis.is_empty());
    let (intent_type, confidence) = if real_estate_report {
        (
            "report",
            by_count(report.len() + search.len() + analysis.len()),
        )
    } else if !document.is_empty() {
        ("document", by_count(document.len()))
    } else if raised || !legal.is_empty() {
        let confidence = match (raised, legal.is_empty()) {
            (true, false) => 0.95,
            (true, true) => 0.9,
            _ => 0.8,
        };
        ("comprehensive", confidence)
    } else if !comparison.is_empty() {
        ("comparison", by_count(comparison.len()))
    } else if !recommendation.is_empty() {
        ("recommendation", by_count(recommendation.len()))
    } else if !search.is_empty() {
        ("search", by_count(search.len()))
    } else if !analysis.is_empty() {
        ("analysis", by_count(analysis.len()))
    } else {
        ("search", 0.5)
    };
    let all = found.iter().flatten().copied().collect();
    (intent_type, confidence, all)
}

/// The matched terms in order of appearance, each once; a term inside a longer matched term at
/// the same place (법 in 법적) adds nothing.
fn keywords(mut all: Vec<(usize, &'static str)>) -> Vec<String> {
    all.sort_by_key(|&(pos, term)| (pos, std::cmp::Reverse(term.len())));
    let mut out: Vec<String> = Vec::new();
    for &(pos, term) in &all {
        let covered = all.iter().any(|&(p, t)| {
            t.len() > term.len() && p <= pos && pos < p + t.len() && t.contains(term)
        });
        if !covered && !out.iter().any(|k| k == term) {
            out.push(term.to_owned());
        }
    }
    out
}

/// The intent of a query by keyword rules, with the entities the query parser finds.
pub fn analyze_intent(query: &str) -> Intent {
    let lower = query.to_lowercase();
    let q = Query::parse(query);
    let about_homes = !q.places.is_empty() || q.property_type.is_some() || q.deal_type.is_some();
    let (intent_type, confidence, matched) = classify(&lower, about_homes);
    Intent {
        intent_type: intent_type.to_owned(),
        confidence,
        keywords: keywords(matched),
        entities: Value::Object(q.entities()),
        source: Source::Rules,
    }
}

/// Maps a region a model or a user wrote (`강남`, `Gangnam`, `강남구`) to its canonical name;
/// `None` when it names no Seoul district.
pub(crate) fn canonical_region(region: &str) -> Option<String> {
    crate::query::canonical_region(region).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entities(query: &str) -> Value {
        analyze_intent(query).entities
    }

    #[test]
    fn intent_table() {
        let table = [
            (
                "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘",
                "comprehensive",
            ),
            ("강남구 아파트 시세 조회", "search"),
            ("강남역 근처 30평대 아파트 매매 시세 알려줘", "analysis"),
            ("전세 계약서 작성해줘", "document"),
            ("강남구와 마포구 아파트 시세 비교", "comparison"),
            ("10억 이하 아파트 투자 추천해줘", "recommendation"),
            ("월세 임대료 인상 가능한가요", "comprehensive"),
            ("안녕하세요", "search"),
            ("draft a lease contract", "document"),
            (
                "My landlord wants to raise my deposit from 300 million won to 1 billion won. Is that legal?",
                "comprehensive",
            ),
            ("compare Gangnam and Mapo apartment prices", "comparison"),
            ("find officetels in Mapo", "search"),
            ("apartment price trend in Songpa", "analysis"),
            ("recommend an investment in Seoul", "recommendation"),
            (
                "Research the latest listings in Gangnam, analyze the trends and write a short report",
                "report",
            ),
            ("강남구 아파트 시장 보고서 작성해줘", "report"),
        ];
        for (query, want) in table {
            let intent = analyze_intent(query);
            assert_eq!(intent.intent_type, want, "{query}");
            assert_eq!(intent.source, Source::Rules);
            assert!(INTENT_TYPES.contains(&intent.intent_type.as_str()));
        }
    }

    #[test]
    fn the_deposit_question_is_comprehensive_with_its_amounts() {
        let query = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
        let intent = analyze_intent(query);
        assert_eq!(intent.confidence, 0.95);
        assert_eq!(intent.keywords, ["전세금", "올려", "법적"]);
        // The entities are the query parser's, as it writes them.
        assert_eq!(
            intent.entities,
            Value::Object(Query::parse(query).entities())
        );
        assert_eq!(
            intent.entities["amounts"],
            json!([300_000_000u64, 1_000_000_000u64])
        );
    }

    #[test]
    fn the_gangnam_station_query_has_its_entities() {
        let intent = analyze_intent("강남역 근처 30평대 아파트 매매 시세 알려줘");
        assert_eq!(intent.keywords, ["시세"]);
        assert_eq!(intent.confidence, 0.8);
        assert_eq!(
            intent.entities,
            json!({
                "language": "ko",
                "region": "서울특별시 강남구",
                "property_type": "아파트",
                "deal_type": "매매",
                "size_range": {"min": 30, "max": 40},
            })
        );
    }

    /// A report about something else than homes is not this domain's question.
    #[test]
    fn a_report_is_about_homes() {
        for query in [
            "Give me the weather report for Seoul",
            "내일 서울 날씨 보고서",
        ] {
            let intent = analyze_intent(query);
            assert_eq!(
                (intent.intent_type.as_str(), intent.confidence),
                ("search", 0.5),
                "{query}"
            );
        }
        assert_eq!(
            analyze_intent("write a report on Mapo villas").intent_type,
            "report"
        );
    }

    #[test]
    fn a_query_that_matches_nothing_is_a_low_confidence_search() {
        let intent = analyze_intent("hello");
        assert_eq!(
            (intent.intent_type.as_str(), intent.confidence),
            ("search", 0.5)
        );
        assert!(intent.keywords.is_empty());
        assert_eq!(intent.entities, json!({"language": "en"}));
    }

    #[test]
    fn regions_resolve_to_canonical_districts() {
        for (query, want) in [
            ("강남 아파트", "서울특별시 강남구"),
            ("강남역 근처", "서울특별시 강남구"),
            ("강남구 시세", "서울특별시 강남구"),
            ("Gangnam apartments", "서울특별시 강남구"),
            ("잠실 전세", "서울특별시 송파구"),
            ("여의도 오피스텔", "서울특별시 영등포구"),
            ("Mapo-gu villas", "서울특별시 마포구"),
            ("삼성동 아파트", "서울특별시 강남구"),
            ("서울 아파트", "서울특별시"),
        ] {
            assert_eq!(entities(query)["region"], json!(want), "{query}");
        }
        assert_eq!(entities("해결방법 알려줘").get("region"), None);
        assert_eq!(
            entities("삼성동 아파트").get("regions"),
            None,
            "not also 성동구"
        );
        assert_eq!(
            entities("compare Gangnam and Mapo apartment prices")["regions"],
            json!(["서울특별시 강남구", "서울특별시 마포구"])
        );
        assert_eq!(canonical_region("강남"), Some("서울특별시 강남구".into()));
        assert_eq!(canonical_region("부산광역시 해운대구"), None);
    }

    #[test]
    fn property_and_deal_types_in_both_languages() {
        assert_eq!(
            entities("오피스텔 월세")["property_type"],
            json!("오피스텔")
        );
        assert_eq!(entities("오피스텔 월세")["deal_type"], json!("월세"));
        assert_eq!(entities("빌라 전세")["deal_type"], json!("전세"));
        assert_eq!(
            entities("an apartment for sale")["property_type"],
            json!("아파트")
        );
        assert_eq!(
            entities("an apartment for sale")["deal_type"],
            json!("매매")
        );
        assert_eq!(entities("jeonse villa")["property_type"], json!("빌라"));
        assert_eq!(entities("jeonse villa")["deal_type"], json!("전세"));
        assert_eq!(
            entities("officetel on monthly rent")["deal_type"],
            json!("월세")
        );
        assert_eq!(
            entities("a detached house")["property_type"],
            json!("단독주택")
        );
        // `house` alone is any home; `반전세` is a monthly rent.
        assert_eq!(entities("house prices in Mapo").get("property_type"), None);
        assert_eq!(entities("반전세 매물")["deal_type"], json!("월세"));
    }

    #[test]
    fn korean_and_english_money() {
        let won = |q: &str| {
            crate::query::parse_amounts(&q.to_lowercase())
                .iter()
                .map(|a| a.won)
                .collect::<Vec<_>>()
        };
        assert_eq!(won("3억을 10억으로"), [300_000_000, 1_000_000_000]);
        assert_eq!(won("3억 5천만원"), [350_000_000]);
        assert_eq!(won("3억5000만원"), [350_000_000]);
        assert_eq!(won("3억 5천"), [350_000_000]);
        assert_eq!(won("5000만원"), [50_000_000]);
        assert_eq!(won("5천만원"), [50_000_000]);
        assert_eq!(won("1,000만원"), [10_000_000]);
        assert_eq!(won("3.5억"), [350_000_000]);
        assert_eq!(won("월세 50만원"), [500_000]);
        assert_eq!(won("500,000원"), [500_000]);
        assert_eq!(won("5천 세대"), Vec::<u64>::new());
        assert_eq!(won("30평대 2024년 5%"), Vec::<u64>::new());
        assert_eq!(
            won("300 million won to 1 billion won"),
            [300_000_000, 1_000_000_000]
        );
        assert_eq!(won("1.5 billion"), [1_500_000_000]);
        assert_eq!(won("KRW 300,000,000"), [300_000_000]);
        assert_eq!(won("₩300,000,000"), [300_000_000]);
        assert_eq!(won("3 bedrooms for 2 people"), Vec::<u64>::new());
        assert_eq!(won("a wonderful 3 won"), [3]);
        assert_eq!(won("1조 2천억"), [1_200_000_000_000]);
        assert_eq!(won("5만명"), Vec::<u64>::new());
    }

    #[test]
    fn price_and_size_ranges() {
        let table = [
            ("10억 이하 아파트", json!({"max": 1_000_000_000u64})),
            ("5억 이상 아파트", json!({"min": 500_000_000u64})),
            ("5억 아래", json!({"max": 500_000_000u64})),
            ("under 1 billion won", json!({"max": 1_000_000_000u64})),
        ];
        for (query, want) in table {
            assert_eq!(entities(query)["price_range"], want, "{query}");
        }
        let five_to_seven = json!({"min": 500_000_000u64, "max": 700_000_000u64});
        for query in [
            "5억~7억 아파트",
            "5억에서 7억 사이",
            "5억부터 7억까지",
            "between 500 million and 700 million won",
        ] {
            assert_eq!(entities(query)["price_range"], five_to_seven, "{query}");
        }
        // A raise from one sum to another is not a price range; without a word of change,
        // `from A to B` is one.
        assert_eq!(entities("3억을 10억으로 올려").get("price_range"), None);
        assert_eq!(
            entities("raise it from 300 million won to 1 billion won").get("price_range"),
            None
        );
        assert_eq!(
            entities("apartments from 300 million won to 1 billion won")["price_range"],
            json!({"min": 300_000_000u64, "max": 1_000_000_000u64})
        );

        assert_eq!(
            entities("30평대")["size_range"],
            json!({"min": 30, "max": 40})
        );
        // Half-open like `30평대`: the agents read `{32, 32}` as no size at all.
        assert_eq!(
            entities("25~35평")["size_range"],
            json!({"min": 25, "max": 36})
        );
        assert_eq!(
            entities("32평 아파트")["size_range"],
            json!({"min": 32, "max": 33})
        );
        assert_eq!(
            entities("30 pyeong apartment")["size_range"],
            json!({"min": 30, "max": 31})
        );
        assert_eq!(entities("30평 이상")["size_range"], json!({"min": 30}));
        assert_eq!(entities("30 평균").get("size_range"), None);
    }

    #[test]
    fn english_entities_for_the_english_deposit_question() {
        let intent = analyze_intent(
            "My landlord wants to raise my deposit from 300 million won to 1 billion won. Is that legal?",
        );
        assert_eq!(intent.keywords, ["raise", "deposit", "legal"]);
        assert_eq!(
            intent.entities,
            json!({
                "language": "en",
                "amounts": [300_000_000u64, 1_000_000_000u64],
                "change": {"subject": "deposit", "old": 300_000_000u64, "new": 1_000_000_000u64},
            })
        );
    }
}
