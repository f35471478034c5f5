//! Seed 002's rule-based intent analysis, planning, evaluation and formatting: pure,
//! deterministic functions, used when no model is configured or a model call fails.

use std::collections::BTreeMap;

use chronicle_schemas::{PlanStep, Source, Strategy};
use serde_json::{Map, Value, json};

use chronicle_engine::{EvaluationOutcome, Intent, Plan};

/// Every intent type a plan can be built for; a model's answer outside this set is refused.
pub const INTENT_TYPES: [&str; 6] = [
    "search",
    "analysis",
    "comparison",
    "recommendation",
    "comprehensive",
    "document",
];

/// The agents the rules know how to describe and wire together (seed 000's teams, seed 002's
/// agents). A plan may name other agents only when the caller lists them as available.
pub const KNOWN_AGENTS: [&str; 7] = [
    "search_team",
    "analysis_team",
    "document_team",
    "property_search",
    "market_analysis",
    "region_comparison",
    "investment_advisor",
];

/// Expected seconds per step, for `estimated_total_time`: the bundled agents answer in well under
/// this, an `http` agent or a model call in about this.
const STEP_ESTIMATE_SECS: f64 = 10.0;
/// Per-step agent timeout in seconds (seed 002's 30 s).
const STEP_TIMEOUT_SECS: u64 = 30;
/// Retries per step, which becomes the TODO's `max_retries`.
const STEP_RETRY_COUNT: u32 = 2;
/// Seed 002 shows at most ten listings.
pub const LISTINGS_MAX: usize = 10;
/// Law references named in one answer, so a long search result cannot flood it.
const LAW_REFERENCES_MAX: usize = 3;
/// Recommendations quoted in one answer; the rest stay in `insights`.
const ANSWER_RECOMMENDATIONS_MAX: usize = 2;
/// 주택임대차보호법 제7조 ② with its enforcement decree: an increase of the deposit or rent may
/// not exceed 1/20 of the agreed amount.
const LEGAL_INCREASE_CAP_PCT: f64 = 5.0;

// ---------------------------------------------------------------------------------------------
// Matching

/// A keyword: Korean terms match anywhere (Korean attaches particles to words), English terms
/// match at the start of a word, so `rent` matches `rental` but not `current`.
#[derive(Clone, Copy, Debug)]
enum Term {
    Ko(&'static str),
    En(&'static str),
}

use Term::{En, Ko};

impl Term {
    fn text(self) -> &'static str {
        match self {
            Ko(t) | En(t) => t,
        }
    }

    /// Byte position of the first match in `lower`, the lower-cased query.
    fn find(self, lower: &str) -> Option<usize> {
        match self {
            // A bare 법 is a legal term, but 방법 ("way", as in 해결방법) is not.
            Ko("법") => lower
                .match_indices('법')
                .map(|(i, _)| i)
                .find(|&i| !lower[..i].ends_with('방')),
            Ko(t) => lower.find(t),
            En(t) => lower.match_indices(t).map(|(i, _)| i).find(|&i| {
                lower[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_ascii_alphanumeric())
            }),
        }
    }
}

const DOCUMENT_TERMS: &[Term] = &[
    Ko("계약서"),
    Ko("작성"),
    En("draft"),
    En("contract document"),
    En("lease contract"),
    En("lease agreement"),
    En("write a contract"),
];
const MONEY_TERMS: &[Term] = &[
    Ko("전세금"),
    Ko("보증금"),
    Ko("월세"),
    Ko("임대료"),
    Ko("차임"),
    En("deposit"),
    En("rent"),
];
const RAISE_TERMS: &[Term] = &[
    Ko("인상"),
    Ko("올려"),
    Ko("올리"),
    Ko("올린"),
    Ko("증액"),
    En("raise"),
    En("increase"),
    En("hike"),
];
const LEGAL_TERMS: &[Term] = &[
    Ko("임대차보호법"),
    Ko("법적"),
    Ko("법률"),
    Ko("판례"),
    Ko("소송"),
    Ko("불법"),
    Ko("위법"),
    Ko("법"),
    En("legal"),
    En("illegal"),
    En("law"),
];
const COMPARISON_TERMS: &[Term] = &[
    Ko("비교"),
    En("compare"),
    En("comparison"),
    En("comparing"),
    En("vs"),
    En("versus"),
];
const RECOMMENDATION_TERMS: &[Term] = &[
    Ko("추천"),
    Ko("투자"),
    En("recommend"),
    En("invest"),
    En("suggest"),
];
const SEARCH_TERMS: &[Term] = &[
    Ko("조회"),
    Ko("검색"),
    Ko("찾아"),
    Ko("매물"),
    En("search"),
    En("find"),
    En("list"),
    En("show me"),
];
const ANALYSIS_TERMS: &[Term] = &[
    Ko("시세"),
    Ko("분석"),
    Ko("가격"),
    Ko("동향"),
    Ko("추이"),
    En("trend"),
    En("price"),
    En("analysis"),
    En("analyze"),
    En("analyse"),
    En("market"),
];

/// `(position, term)` of every term of `terms` found in `lower`.
fn hits(terms: &[Term], lower: &str) -> Vec<(usize, &'static str)> {
    terms
        .iter()
        .filter_map(|t| t.find(lower).map(|p| (p, t.text())))
        .collect()
}

/// True when the query has no Hangul, so answers should be in English.
pub fn is_english(query: &str) -> bool {
    !query
        .chars()
        .any(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c) || ('\u{3131}'..='\u{318E}').contains(&c))
}

// ---------------------------------------------------------------------------------------------
// Intent

/// Seed 002's keyword rules: the first matching rule of document, comprehensive, comparison,
/// recommendation, search, analysis wins; `search` when none matches.
pub fn analyze_intent(query: &str) -> Intent {
    let lower = query.to_lowercase();
    let document = hits(DOCUMENT_TERMS, &lower);
    let money = hits(MONEY_TERMS, &lower);
    let raise = hits(RAISE_TERMS, &lower);
    let legal = hits(LEGAL_TERMS, &lower);
    let comparison = hits(COMPARISON_TERMS, &lower);
    let recommendation = hits(RECOMMENDATION_TERMS, &lower);
    let search = hits(SEARCH_TERMS, &lower);
    let analysis = hits(ANALYSIS_TERMS, &lower);

    // One matched term is a hint, two agreeing terms are a strong signal.
    let by_count = |n: usize| if n >= 2 { 0.9 } else { 0.8 };
    let raised = !money.is_empty() && !raise.is_empty();
    let (intent_type, confidence) = if !document.is_empty() {
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

    let mut all: Vec<(usize, &str)> = [
        document,
        money,
        raise,
        legal,
        comparison,
        recommendation,
        search,
        analysis,
    ]
    .into_iter()
    .flatten()
    .collect();
    all.sort_by_key(|&(pos, term)| (pos, std::cmp::Reverse(term.len())));
    let mut keywords: Vec<String> = Vec::new();
    for &(pos, term) in &all {
        // A term inside a longer matched term at the same place (법 in 법적) adds nothing.
        let covered = all.iter().any(|&(p, t)| {
            t.len() > term.len() && p <= pos && pos < p + t.len() && t.contains(term)
        });
        if !covered && !keywords.iter().any(|k| k == term) {
            keywords.push(term.to_owned());
        }
    }

    Intent {
        intent_type: intent_type.to_owned(),
        confidence,
        keywords,
        entities: Value::Object(extract_entities(&lower)),
        source: Source::Rules,
    }
}

/// A Seoul district with the names people use for it.
struct District {
    ko: &'static str,
    en: &'static str,
    aliases: &'static [Term],
}

/// Seoul's 25 districts, each with its short name and well-known neighbourhoods or stations.
/// Ambiguous words (미아, 신정, 가산, 성수기 ...) are left out or spelled with 동.
const DISTRICTS: &[District] = &[
    District {
        ko: "강남구",
        en: "Gangnam-gu",
        aliases: &[
            Ko("강남"),
            Ko("역삼"),
            Ko("삼성동"),
            Ko("대치동"),
            Ko("압구정"),
            Ko("청담"),
            Ko("개포"),
            Ko("도곡"),
            En("gangnam"),
            En("yeoksam"),
            En("apgujeong"),
            En("daechi"),
            En("cheongdam"),
        ],
    },
    District {
        ko: "강동구",
        en: "Gangdong-gu",
        aliases: &[
            Ko("강동"),
            Ko("천호"),
            Ko("고덕"),
            En("gangdong"),
            En("cheonho"),
        ],
    },
    District {
        ko: "강북구",
        en: "Gangbuk-gu",
        aliases: &[Ko("강북"), En("gangbuk")],
    },
    District {
        ko: "강서구",
        en: "Gangseo-gu",
        aliases: &[
            Ko("강서"),
            Ko("마곡"),
            Ko("화곡"),
            En("gangseo"),
            En("magok"),
        ],
    },
    District {
        ko: "관악구",
        en: "Gwanak-gu",
        aliases: &[
            Ko("관악"),
            Ko("신림"),
            Ko("봉천"),
            En("gwanak"),
            En("sillim"),
        ],
    },
    District {
        ko: "광진구",
        en: "Gwangjin-gu",
        aliases: &[Ko("광진"), Ko("건대"), En("gwangjin")],
    },
    District {
        ko: "구로구",
        en: "Guro-gu",
        aliases: &[Ko("구로"), Ko("신도림"), En("guro"), En("sindorim")],
    },
    District {
        ko: "금천구",
        en: "Geumcheon-gu",
        aliases: &[Ko("금천"), Ko("독산"), En("geumcheon")],
    },
    District {
        ko: "노원구",
        en: "Nowon-gu",
        aliases: &[Ko("노원"), Ko("상계동"), En("nowon")],
    },
    District {
        ko: "도봉구",
        en: "Dobong-gu",
        aliases: &[Ko("도봉"), Ko("창동"), En("dobong")],
    },
    District {
        ko: "동대문구",
        en: "Dongdaemun-gu",
        aliases: &[Ko("동대문"), Ko("청량리"), En("dongdaemun")],
    },
    District {
        ko: "동작구",
        en: "Dongjak-gu",
        aliases: &[
            Ko("동작"),
            Ko("노량진"),
            Ko("사당"),
            Ko("흑석"),
            En("dongjak"),
        ],
    },
    District {
        ko: "마포구",
        en: "Mapo-gu",
        aliases: &[
            Ko("마포"),
            Ko("홍대"),
            Ko("상암"),
            Ko("합정"),
            Ko("망원동"),
            Ko("공덕"),
            En("mapo"),
            En("hongdae"),
        ],
    },
    District {
        ko: "서대문구",
        en: "Seodaemun-gu",
        aliases: &[
            Ko("서대문"),
            Ko("신촌"),
            Ko("연희"),
            En("seodaemun"),
            En("sinchon"),
        ],
    },
    District {
        ko: "서초구",
        en: "Seocho-gu",
        aliases: &[
            Ko("서초"),
            Ko("반포"),
            Ko("방배"),
            Ko("잠원"),
            Ko("양재"),
            En("seocho"),
            En("banpo"),
        ],
    },
    District {
        ko: "성동구",
        en: "Seongdong-gu",
        aliases: &[
            Ko("성동"),
            Ko("성수동"),
            Ko("왕십리"),
            Ko("옥수"),
            En("seongdong"),
            En("seongsu"),
        ],
    },
    District {
        ko: "성북구",
        en: "Seongbuk-gu",
        aliases: &[Ko("성북"), Ko("길음"), Ko("정릉"), En("seongbuk")],
    },
    District {
        ko: "송파구",
        en: "Songpa-gu",
        aliases: &[
            Ko("송파"),
            Ko("잠실"),
            Ko("가락동"),
            Ko("위례"),
            En("songpa"),
            En("jamsil"),
        ],
    },
    District {
        ko: "양천구",
        en: "Yangcheon-gu",
        aliases: &[Ko("양천"), Ko("목동"), En("yangcheon"), En("mokdong")],
    },
    District {
        ko: "영등포구",
        en: "Yeongdeungpo-gu",
        aliases: &[
            Ko("영등포"),
            Ko("여의도"),
            Ko("당산"),
            Ko("문래"),
            En("yeongdeungpo"),
            En("yeouido"),
        ],
    },
    District {
        ko: "용산구",
        en: "Yongsan-gu",
        aliases: &[
            Ko("용산"),
            Ko("이태원"),
            Ko("한남"),
            Ko("이촌"),
            En("yongsan"),
            En("itaewon"),
            En("hannam"),
        ],
    },
    District {
        ko: "은평구",
        en: "Eunpyeong-gu",
        aliases: &[Ko("은평"), Ko("불광"), Ko("응암"), En("eunpyeong")],
    },
    District {
        ko: "종로구",
        en: "Jongno-gu",
        aliases: &[Ko("종로"), Ko("광화문"), Ko("평창동"), En("jongno")],
    },
    District {
        ko: "중구",
        en: "Jung-gu",
        aliases: &[
            Ko("중구"),
            Ko("명동"),
            Ko("을지로"),
            En("jung-gu"),
            En("jung gu"),
            En("myeongdong"),
        ],
    },
    District {
        ko: "중랑구",
        en: "Jungnang-gu",
        aliases: &[Ko("중랑"), Ko("상봉"), En("jungnang")],
    },
];

const SEOUL: &str = "서울특별시";

/// Canonical names (`서울특별시 강남구`) of the districts named in `lower`, in order of appearance.
fn find_districts(lower: &str) -> Vec<(usize, &'static District)> {
    let mut found: Vec<(usize, &District)> = DISTRICTS
        .iter()
        .filter_map(|d| {
            d.aliases
                .iter()
                .filter_map(|a| a.find(lower))
                .min()
                .map(|p| (p, d))
        })
        .collect();
    found.sort_by_key(|&(p, _)| p);
    found
}

/// Maps a region a model or a user wrote (`강남`, `Gangnam`, `강남구`) to its canonical name;
/// `None` when it names no Seoul district.
pub(crate) fn canonical_region(region: &str) -> Option<String> {
    let lower = region.to_lowercase();
    find_districts(&lower)
        .first()
        .map(|(_, d)| format!("{SEOUL} {}", d.ko))
}

/// `Gangnam-gu, Seoul` for an English answer, the canonical name otherwise.
fn region_display(canonical: &str, english: bool) -> String {
    if !english {
        return canonical.to_owned();
    }
    DISTRICTS
        .iter()
        .find(|d| canonical.strip_prefix(SEOUL).map(str::trim_start) == Some(d.ko))
        .map_or_else(|| canonical.to_owned(), |d| format!("{}, Seoul", d.en))
}

const PROPERTY_TYPES: &[(&str, &[Term])] = &[
    ("아파트", &[Ko("아파트"), En("apartment"), En("apt")]),
    ("오피스텔", &[Ko("오피스텔"), En("officetel")]),
    ("빌라", &[Ko("빌라"), Ko("연립"), Ko("다세대"), En("villa")]),
    (
        "단독주택",
        &[
            Ko("단독주택"),
            Ko("단독"),
            En("detached house"),
            En("house"),
        ],
    ),
];

const DEAL_TYPES: &[(&str, &[Term])] = &[
    (
        "매매",
        &[
            Ko("매매"),
            Ko("매수"),
            Ko("매도"),
            En("sale"),
            En("buy"),
            En("purchase"),
        ],
    ),
    ("전세", &[Ko("전세"), En("jeonse"), En("chonsei")]),
    ("월세", &[Ko("월세"), En("monthly rent")]),
];

/// The value of the table entry whose term appears first in `lower`.
fn first_of(table: &[(&'static str, &[Term])], lower: &str) -> Option<&'static str> {
    table
        .iter()
        .filter_map(|(value, terms)| {
            terms
                .iter()
                .filter_map(|t| t.find(lower))
                .min()
                .map(|p| (p, *value))
        })
        .min_by_key(|&(p, _)| p)
        .map(|(_, v)| v)
}

fn english_type_name(value: &str) -> &str {
    match value {
        "아파트" => "apartment",
        "오피스텔" => "officetel",
        "빌라" => "villa",
        "단독주택" => "house",
        other => other,
    }
}

/// `region`, `regions` (when several), `property_type`, `deal_type`, `price_range`,
/// `size_range`, `amounts`: only the ones the query names.
fn extract_entities(lower: &str) -> Map<String, Value> {
    let mut entities = Map::new();
    let districts = find_districts(lower);
    if let Some((_, d)) = districts.first() {
        entities.insert("region".into(), json!(format!("{SEOUL} {}", d.ko)));
    } else if lower.contains("서울") || Term::En("seoul").find(lower).is_some() {
        entities.insert("region".into(), json!(SEOUL));
    }
    if districts.len() > 1 {
        let regions: Vec<String> = districts
            .iter()
            .map(|(_, d)| format!("{SEOUL} {}", d.ko))
            .collect();
        entities.insert("regions".into(), json!(regions));
    }
    if let Some(p) = first_of(PROPERTY_TYPES, lower) {
        entities.insert("property_type".into(), json!(p));
    }
    if let Some(d) = first_of(DEAL_TYPES, lower) {
        entities.insert("deal_type".into(), json!(d));
    }
    let amounts = parse_amounts(lower);
    if let Some(range) = price_range(lower, &amounts) {
        entities.insert("price_range".into(), range);
    }
    if let Some(range) = size_range(lower) {
        entities.insert("size_range".into(), range);
    }
    if !amounts.is_empty() {
        entities.insert(
            "amounts".into(),
            json!(amounts.iter().map(|a| a.won).collect::<Vec<_>>()),
        );
    }
    entities
}

// ---------------------------------------------------------------------------------------------
// Numbers: money and sizes

/// A sum of money found in a query, in won, with its byte span.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Amount {
    won: u64,
    start: usize,
    end: usize,
}

/// A decimal number at `i` (`1,000`, `3.5`), and where it ends.
fn parse_number(s: &str, i: usize) -> Option<(f64, usize)> {
    let b = s.as_bytes();
    if !b.get(i)?.is_ascii_digit() {
        return None;
    }
    let mut j = i;
    let mut digits = String::new();
    let mut seen_dot = false;
    while let Some(&c) = b.get(j) {
        let next_is_digit = b.get(j + 1).is_some_and(u8::is_ascii_digit);
        if c.is_ascii_digit() {
            digits.push(char::from(c));
        } else if c == b',' && next_is_digit && !seen_dot {
            // thousands separator
        } else if c == b'.' && next_is_digit && !seen_dot {
            seen_dot = true;
            digits.push('.');
        } else {
            break;
        }
        j += 1;
    }
    digits.parse().ok().map(|n| (n, j))
}

fn skip_spaces(s: &str, i: usize) -> usize {
    s.len() - s[i..].trim_start_matches(' ').len()
}

/// True when the byte at `i` does not continue an English word.
fn word_ends(s: &str, i: usize) -> bool {
    s.as_bytes()
        .get(i)
        .is_none_or(|c| !c.is_ascii_alphanumeric())
}

/// A Korean money unit at `i`: its multiplier and where it ends.
fn korean_unit(s: &str, i: usize, after_eok: bool) -> Option<(u64, usize)> {
    let rest = &s[i..];
    for (unit, mult) in [
        ("조", 1_000_000_000_000),
        ("억", 100_000_000),
        ("천만", 10_000_000),
        ("백만", 1_000_000),
        ("만", 10_000),
    ] {
        if rest.starts_with(unit) {
            return Some((mult, i + unit.len()));
        }
    }
    if rest.starts_with('천') {
        let after = i + '천'.len_utf8();
        // "3억 5천" is everyday speech for 3억 5천만; a bare 천 counts only before 원.
        if after_eok {
            return Some((10_000_000, after));
        }
        return s[skip_spaces(s, after)..]
            .starts_with('원')
            .then_some((1_000, after));
    }
    rest.starts_with('원').then_some((1, i + '원'.len_utf8()))
}

/// `3억 5천만원`, `10억`, `5000만원`, `3.5억`, `500,000원`.
fn korean_amount(s: &str, start: usize) -> Option<Amount> {
    let mut total = 0.0;
    let mut j = start;
    let mut last = u64::MAX;
    let mut end = None;
    while let Some((n, k)) = parse_number(s, j) {
        let Some((mult, k2)) = korean_unit(s, skip_spaces(s, k), last == 100_000_000) else {
            break;
        };
        // Units must shrink (3억 5천만); "3억 10억" is two amounts.
        if mult >= last {
            break;
        }
        total += n * mult as f64;
        last = mult;
        end = Some(k2);
        let next = skip_spaces(s, k2);
        if mult == 1 || !s.as_bytes().get(next).is_some_and(u8::is_ascii_digit) {
            break;
        }
        j = next;
    }
    let mut end = end?;
    let after = skip_spaces(s, end);
    if last != 1 && s[after..].starts_with('원') {
        end = after + '원'.len_utf8();
    }
    Some(Amount {
        won: total.round() as u64,
        start,
        end,
    })
}

/// `300 million won`, `1.5 billion`, `₩300,000,000`, `300,000,000 KRW`: a scale word or a
/// currency is required, so a bare number is not money.
fn english_amount(s: &str, start: usize) -> Option<Amount> {
    let (n, k) = parse_number(s, start)?;
    let before = s[..start].trim_end();
    let mut money = before.ends_with('₩') || before.ends_with("krw");
    let mut mult = 1u64;
    let mut end = k;
    let at = skip_spaces(s, k);
    for (word, m) in [
        ("trillion", 1_000_000_000_000),
        ("billion", 1_000_000_000),
        ("million", 1_000_000),
        ("thousand", 1_000),
    ] {
        if s[at..].starts_with(word) && word_ends(s, at + word.len()) {
            mult = m;
            end = at + word.len();
            money = true;
            break;
        }
    }
    let at = skip_spaces(s, end);
    for currency in ["won", "krw"] {
        if s[at..].starts_with(currency) && word_ends(s, at + currency.len()) {
            end = at + currency.len();
            money = true;
        }
    }
    money.then(|| Amount {
        won: (n * mult as f64).round() as u64,
        start,
        end,
    })
}

/// Every sum of money in `lower`, in order of appearance.
fn parse_amounts(lower: &str) -> Vec<Amount> {
    let b = lower.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // A number starts at a digit that does not continue a word or another number; ASCII bytes
        // are always char boundaries, so slicing at `i` is safe.
        let starts = b[i].is_ascii_digit()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b".,".contains(&b[i - 1])));
        if !starts {
            i += 1;
            continue;
        }
        if let Some(a) = korean_amount(lower, i).or_else(|| english_amount(lower, i)) {
            i = a.end;
            out.push(a);
        } else {
            i = parse_number(lower, i).map_or(i + 1, |(_, j)| j);
        }
    }
    out
}

/// A price range when the query bounds the price: `5억~7억`, `5억에서 7억 사이`, `10억 이하`,
/// `under 1 billion won`, `between 500 million and 700 million won`.
fn price_range(lower: &str, amounts: &[Amount]) -> Option<Value> {
    for pair in amounts.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let between = lower[a.end..b.start].trim();
        let after = lower[b.end..].trim_start();
        let before = lower[..a.start].trim_end();
        let ranged = matches!(between, "~" | "-" | "–" | "〜")
            || (matches!(between, "에서" | "부터")
                && (after.starts_with("사이") || after.starts_with("까지")))
            || (between == "and" && before.ends_with("between"));
        if ranged {
            return Some(json!({"min": a.won.min(b.won), "max": a.won.max(b.won)}));
        }
    }
    for a in amounts {
        let after = lower[a.end..].trim_start();
        let before = lower[..a.start].trim_end();
        let below = ["이하", "이내", "미만", "까지", "아래"]
            .iter()
            .any(|w| after.starts_with(w))
            || [
                "under",
                "below",
                "less than",
                "up to",
                "at most",
                "within",
                "max",
            ]
            .iter()
            .any(|w| before.ends_with(w));
        let above = ["이상", "초과", "넘"].iter().any(|w| after.starts_with(w))
            || ["over", "above", "more than", "at least", "min"]
                .iter()
                .any(|w| before.ends_with(w));
        if below {
            return Some(json!({"max": a.won}));
        }
        if above {
            return Some(json!({"min": a.won}));
        }
    }
    None
}

/// Where a 평 (pyeong) unit at `i` ends; not 평균, 평가 ... which only start with 평.
fn pyeong_at(s: &str, i: usize) -> Option<usize> {
    let rest = &s[i..];
    if rest.starts_with('평') {
        let not_a_unit = ["평균", "평가", "평일", "평화", "평소", "평생", "평면"];
        return (!not_a_unit.iter().any(|w| rest.starts_with(w))).then_some(i + '평'.len_utf8());
    }
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let skipped = s.len() - rest.len();
    (rest.starts_with("pyeong") && word_ends(s, skipped + 6)).then_some(skipped + 6)
}

/// `30평대` → 30..40, `25~35평` → 25..35, `30평` / `30 pyeong` → 30..30.
fn size_range(lower: &str) -> Option<Value> {
    let b = lower.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts =
            b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.'));
        let Some((n, k)) = starts.then(|| parse_number(lower, i)).flatten() else {
            i += 1;
            continue;
        };
        let n = n.round() as u64;
        let after = skip_spaces(lower, k);
        if lower[after..].starts_with('~') || lower[after..].starts_with('-') {
            let j = skip_spaces(lower, after + 1);
            if let Some((m, k2)) = parse_number(lower, j)
                && pyeong_at(lower, skip_spaces(lower, k2)).is_some()
            {
                let m = m.round() as u64;
                return Some(json!({"min": n.min(m), "max": n.max(m)}));
            }
        }
        if let Some(end) = pyeong_at(lower, after) {
            return Some(if lower[end..].starts_with('대') {
                json!({"min": n, "max": n + 10})
            } else {
                json!({"min": n, "max": n})
            });
        }
        i = k;
    }
    None
}

/// The amounts of money a text names, in won, in order (used on listing prices too).
fn money_in(text: &str) -> Option<u64> {
    let lower = text.to_lowercase();
    parse_amounts(&lower)
        .first()
        .map(|a| a.won)
        .or_else(|| lower.trim().parse::<f64>().ok().map(|n| n.round() as u64))
}

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

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `233.3%`, `5%`.
fn format_pct(pct: f64) -> String {
    let text = format!("{pct:.1}");
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

// ---------------------------------------------------------------------------------------------
// Plans

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

/// Seed 002's rule-based planning, extended with seed 000's teams. Agents missing from
/// `available_agents` are skipped unless the list is empty.
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

/// The dependencies a step gets when nobody named them: teams after `search_team`, seed 002's
/// analyses after `property_search`, the advisor after everything it summarises.
fn default_dependencies(agent: &str, earlier: &[&str]) -> Vec<String> {
    let wanted: &[&str] = match agent {
        "analysis_team" | "document_team" => &["search_team"],
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
        "search_team" => &[
            "region",
            "property_type",
            "deal_type",
            "size_range",
            "price_range",
            "amounts",
        ],
        "analysis_team" | "document_team" => &["region", "property_type", "deal_type", "amounts"],
        "property_search" => &[
            "region",
            "property_type",
            "deal_type",
            "size_range",
            "price_range",
        ],
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
            let kind = if intent.intent_type == "comprehensive" {
                "legal"
            } else {
                "market"
            };
            params.insert("analysis_type".into(), json!(kind));
        }
        "document_team" => {
            // The document agent's vocabulary (agents/document.rs): a sale, or a lease (전세 and
            // 월세 are both leases; the deal type tells the agent which kind).
            let document_type = match entity("deal_type") {
                Some("매매") => "sales_contract",
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

/// Seed 000 scenario 1 numbers team steps from 1 (search_team priority=1); seed 002's agents
/// keep the 0-based order.
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

// ---------------------------------------------------------------------------------------------
// Evaluation

/// True when an agent's result reports a failure itself (seed 002's `{"status": "error"}`).
fn reports_failure(result: &Value) -> bool {
    matches!(
        result.get("status").and_then(Value::as_str),
        Some("error" | "failed")
    )
}

fn has_data(result: &Value) -> bool {
    match result {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(_) | Value::Number(_) => true,
    }
}

/// Seed 002's `evaluate_quality_rule_based` over `(agent, result, error)`.
pub fn evaluate(results: &[(String, Option<Value>, Option<String>)]) -> EvaluationOutcome {
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, result, error)| {
            error.is_some() || result.as_ref().is_some_and(reports_failure)
        })
        .map(|(agent, _, _)| agent.clone())
        .collect();
    let total = results.len();
    let succeeded = total - failed.len();
    let any_data = results
        .iter()
        .any(|(_, result, _)| result.as_ref().is_some_and(has_data));
    let complete = total > 0 && failed.is_empty() && any_data;
    EvaluationOutcome {
        quality_score: if total == 0 {
            0.0
        } else {
            succeeded as f64 / total as f64
        },
        completeness: if complete { 1.0 } else { 0.0 },
        needs_retry: !failed.is_empty(),
        retry_agents: failed,
        feedback: format!("Rule-based evaluation: {succeeded}/{total} agents succeeded"),
        source: Source::Rules,
    }
}

// ---------------------------------------------------------------------------------------------
// Formatting

/// What the formatter found in the agents' results, whatever their shape.
#[derive(Debug, Default)]
struct Findings {
    listings: Vec<Value>,
    insights: Vec<String>,
    recommendations: Vec<String>,
    laws: Vec<String>,
    metrics: Map<String, Value>,
    document: Option<Value>,
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
}

fn str_field<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| {
        value
            .get(*k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    })
}

/// `주택임대차보호법 제7조(차임 등의 증감청구권)` from a loosely shaped law search hit.
fn describe_law(item: &Value) -> Option<String> {
    if let Some(s) = item.as_str() {
        return Some(s.to_owned());
    }
    let law = str_field(item, &["law_name", "law", "law_title", "source"]);
    let article = str_field(item, &["article", "article_no", "article_number"])
        .map(str::to_owned)
        .or_else(|| {
            item.get("article_no")
                .or_else(|| item.get("article"))
                .and_then(Value::as_u64)
                .map(|n| format!("제{n}조"))
        });
    let title = str_field(item, &["title", "article_title", "name"]);
    let head = match (law, article) {
        (Some(l), Some(a)) => format!("{l} {a}"),
        (Some(l), None) => l.to_owned(),
        (None, Some(a)) => a,
        (None, None) => return title.map(str::to_owned),
    };
    Some(match title {
        Some(t) if !head.contains(t) => format!("{head}({t})"),
        _ => head,
    })
}

impl Findings {
    fn gather(&mut self, agent: &str, result: &Value, depth: u8) {
        if reports_failure(result) {
            return;
        }
        let Some(obj) = result.as_object() else {
            if has_data(result) {
                self.listings
                    .push(json!({"agent": agent, "result": result}));
            }
            return;
        };
        for key in [
            "property_search_results",
            "real_estate_results",
            "listings",
            "properties",
        ] {
            if let Some(items) = obj.get(key).and_then(Value::as_array) {
                self.listings.extend(items.iter().cloned());
            }
        }
        for law in obj
            .get("legal_results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(text) = describe_law(law) {
                push_unique(&mut self.laws, text);
            }
        }
        for insight in strings(obj.get("insights")) {
            push_unique(&mut self.insights, insight);
        }
        for recommendation in strings(obj.get("recommendations")) {
            push_unique(&mut self.recommendations, recommendation);
        }
        if let Some(summary) = obj
            .get("report")
            .and_then(|r| r.get("summary"))
            .and_then(Value::as_str)
        {
            push_unique(&mut self.insights, summary.to_owned());
        }
        if let Some(metrics) = obj.get("metrics").and_then(Value::as_object) {
            for (k, v) in metrics {
                self.metrics.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let is_document =
            obj.contains_key("final_document") || obj.contains_key("document_content");
        if is_document && self.document.is_none() {
            let content = obj.get("document_content");
            let title = content
                .and_then(|c| str_field(c, &["title"]))
                .or_else(|| str_field(result, &["title", "document_type"]))
                .unwrap_or("계약서");
            let text = obj
                .get("final_document")
                .and_then(Value::as_str)
                .or_else(|| content.and_then(|c| str_field(c, &["content", "body", "text"])));
            self.document = Some(json!({
                "title": title,
                "document_type": obj.get("document_type").cloned().unwrap_or(Value::Null),
                "content": text,
                "review_needed": obj.get("review_needed").and_then(Value::as_bool).unwrap_or(false),
            }));
        }
        // Seed 002's agents wrap their output in `data`: a list of items, an object, or text.
        // Depth bounds the walk on pathological nesting.
        match obj.get("data") {
            Some(Value::Array(items)) => self.listings.extend(items.iter().cloned()),
            Some(data @ Value::Object(_)) if depth == 0 => {
                let before = self.listings.len() + self.metrics.len() + self.insights.len();
                self.gather(agent, data, depth + 1);
                if self.listings.len() + self.metrics.len() + self.insights.len() == before {
                    self.listings.push(data.clone());
                }
            }
            Some(data) if has_data(data) => {
                self.listings.push(json!({"agent": agent, "result": data}))
            }
            _ => {}
        }
    }

    fn metric(&self, keys: &[&str]) -> Option<f64> {
        keys.iter()
            .find_map(|k| self.metrics.get(*k).and_then(Value::as_f64))
    }

    fn listing_prices(&self) -> Vec<u64> {
        let keys = [
            "price",
            "deal_amount",
            "sale_price",
            "price_won",
            "amount",
            "deposit",
        ];
        self.listings
            .iter()
            .filter_map(|l| {
                keys.iter().find_map(|k| match l.get(*k)? {
                    Value::Number(n) => n.as_f64().filter(|p| *p > 0.0).map(|p| p.round() as u64),
                    Value::String(s) => money_in(s),
                    _ => None,
                })
            })
            .collect()
    }
}

/// The deposit or rent increase the query asks about: `(before, after, rate %, cap %)`.
fn increase(findings: &Findings, intent: &Intent) -> Option<(Option<u64>, Option<u64>, f64, f64)> {
    let amounts: Vec<u64> = intent
        .entities
        .get("amounts")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
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

fn increase_sentences(
    query: &str,
    inc: (Option<u64>, Option<u64>, f64, f64),
    english: bool,
) -> Vec<String> {
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

/// Seed 002's `format_response_simple` with an answer built from the results:
/// `{answer, listings (≤10), insights, metadata{total_results, agents_used, ...}}`, plus
/// `document` when one was drafted. English when the query has no Hangul.
pub fn format_response(query: &str, intent: &Intent, results: &[(String, Value)]) -> Value {
    let english = is_english(query);
    let mut findings = Findings::default();
    for (agent, result) in results {
        findings.gather(agent, result, 0);
    }
    let region = intent.entities.get("region").and_then(Value::as_str);
    let property_type = intent.entities.get("property_type").and_then(Value::as_str);
    let prices = findings.listing_prices();
    let price_min = prices.iter().copied().min();
    let price_max = prices.iter().copied().max();
    // In f64, so a pathological price list cannot overflow the sum.
    let price_avg = (!prices.is_empty()).then(|| {
        (prices.iter().map(|&p| p as f64).sum::<f64>() / prices.len() as f64).round() as u64
    });

    let mut answer: Vec<String> = Vec::new();
    if let Some(inc) = increase(&findings, intent) {
        answer.extend(increase_sentences(query, inc, english));
    }
    if !findings.listings.is_empty() {
        let n = findings.listings.len();
        let range = match (price_min, price_max) {
            (Some(lo), Some(hi)) if lo != hi => {
                Some((format_won(lo, english), Some(format_won(hi, english))))
            }
            (Some(p), Some(_)) => Some((format_won(p, english), None)),
            _ => None,
        };
        if english {
            let place =
                region.map_or_else(String::new, |r| format!(" in {}", region_display(r, true)));
            let kind = property_type.map_or("listing", english_type_name);
            let plural = if n == 1 { "" } else { "s" };
            let priced = match &range {
                Some((lo, Some(hi))) => format!(", priced from {lo} to {hi}"),
                Some((p, None)) => format!(", priced at {p}"),
                None => String::new(),
            };
            answer.push(format!("Found {n} {kind}{plural}{place}{priced}."));
        } else {
            let subject: Vec<&str> = [region, property_type].into_iter().flatten().collect();
            let subject = if subject.is_empty() {
                String::new()
            } else {
                format!("{} ", subject.join(" "))
            };
            let priced = match &range {
                Some((lo, Some(hi))) => format!(" 가격은 {lo}에서 {hi} 사이입니다."),
                Some((p, None)) => format!(" 가격은 {p}입니다."),
                None => String::new(),
            };
            let noun = if prices.is_empty() {
                "검색 결과"
            } else {
                "매물"
            };
            answer.push(format!("{subject}{noun} {n}건을 찾았습니다.{priced}"));
        }
    }
    let avg = findings
        .metric(&["avg_price", "average_price", "mean_price"])
        .map(|v| v.round() as u64);
    let change = findings.metric(&[
        "price_change_pct",
        "change_rate_pct",
        "yoy_change_pct",
        "trend_pct",
    ]);
    match (avg, change, english) {
        (Some(a), Some(c), false) => answer.push(format!(
            "평균 시세는 {}이며, 변동률은 {c:+.1}%입니다.",
            format_won(a, false)
        )),
        (Some(a), None, false) => {
            answer.push(format!("평균 시세는 {}입니다.", format_won(a, false)))
        }
        (None, Some(c), false) => answer.push(format!("시세 변동률은 {c:+.1}%입니다.")),
        (Some(a), Some(c), true) => answer.push(format!(
            "The average price is {}, a change of {c:+.1}%.",
            format_won(a, true)
        )),
        (Some(a), None, true) => {
            answer.push(format!("The average price is {}.", format_won(a, true)))
        }
        (None, Some(c), true) => answer.push(format!("Prices changed by {c:+.1}%.")),
        (None, None, _) => {}
    }
    if let Some(doc) = &findings.document {
        let title = doc.get("title").and_then(Value::as_str).unwrap_or_default();
        let review = doc
            .get("review_needed")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if english {
            let review = if review {
                " It needs a review before signing."
            } else {
                ""
            };
            answer.push(format!("Drafted \"{title}\".{review}"));
        } else {
            let review = if review {
                " 서명 전에 검토가 필요합니다."
            } else {
                ""
            };
            answer.push(format!("요청하신 「{title}」 초안을 작성했습니다.{review}"));
        }
    }
    if !findings.laws.is_empty() {
        let laws: Vec<&str> = findings
            .laws
            .iter()
            .take(LAW_REFERENCES_MAX)
            .map(String::as_str)
            .collect();
        let laws = laws.join(", ");
        answer.push(if english {
            format!("Relevant law: {laws}.")
        } else {
            format!("관련 법령: {laws}.")
        });
    }
    if !findings.recommendations.is_empty() {
        let recs: Vec<&str> = findings
            .recommendations
            .iter()
            .take(ANSWER_RECOMMENDATIONS_MAX)
            .map(|r| r.trim_end_matches('.'))
            .collect();
        let recs = recs.join("; ");
        answer.push(if english {
            format!("Recommended: {recs}.")
        } else {
            format!("권장 조치: {recs}.")
        });
    }
    let total_results = findings.listings.len() + findings.laws.len();
    if answer.is_empty() {
        answer.push(if english {
            format!("Search complete: found {total_results} results.")
        } else {
            format!("검색 완료: {total_results}개의 결과를 찾았습니다.")
        });
    }

    let mut insights = findings.insights;
    for r in findings.recommendations {
        push_unique(&mut insights, r);
    }
    for law in &findings.laws {
        push_unique(
            &mut insights,
            if english {
                format!("Relevant law: {law}")
            } else {
                format!("관련 법령: {law}")
            },
        );
    }
    let mut metadata = Map::new();
    metadata.insert("total_results".into(), json!(total_results));
    metadata.insert(
        "agents_used".into(),
        json!(results.iter().map(|(a, _)| a).collect::<Vec<_>>()),
    );
    if let Some(r) = region {
        metadata.insert("region".into(), json!(r));
    }
    if let (Some(lo), Some(hi)) = (price_min, price_max) {
        metadata.insert("price_range".into(), json!({"min": lo, "max": hi}));
    }
    if let Some(a) = price_avg {
        metadata.insert("avg_price".into(), json!(a));
    }
    let mut listings = findings.listings;
    listings.truncate(LISTINGS_MAX);
    let mut out = json!({
        "answer": answer.join(" "),
        "listings": listings,
        "insights": insights,
        "metadata": metadata,
    });
    if let Some(doc) = findings.document {
        out["document"] = doc;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entities(query: &str) -> Value {
        analyze_intent(query).entities
    }

    #[test]
    fn intent_table_for_the_seed_queries() {
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
        let intent =
            analyze_intent("집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘");
        assert_eq!(intent.confidence, 0.95);
        assert_eq!(intent.keywords, ["전세금", "올려", "법적"]);
        assert_eq!(
            intent.entities,
            json!({"deal_type": "전세", "amounts": [300_000_000u64, 1_000_000_000u64]})
        );
    }

    #[test]
    fn the_seed_002_query_has_its_entities() {
        let intent = analyze_intent("강남역 근처 30평대 아파트 매매 시세 알려줘");
        assert_eq!(intent.keywords, ["시세"]);
        assert_eq!(intent.confidence, 0.8);
        assert_eq!(
            intent.entities,
            json!({
                "region": "서울특별시 강남구",
                "property_type": "아파트",
                "deal_type": "매매",
                "size_range": {"min": 30, "max": 40},
            })
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
        assert_eq!(intent.entities, json!({}));
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
            ("서울 아파트", "서울특별시"),
        ] {
            assert_eq!(entities(query)["region"], json!(want), "{query}");
        }
        assert_eq!(entities("해결방법 알려줘").get("region"), None);
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
    }

    #[test]
    fn korean_and_english_money() {
        let won = |q: &str| {
            parse_amounts(&q.to_lowercase())
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
    }

    #[test]
    fn price_and_size_ranges() {
        assert_eq!(
            entities("10억 이하 아파트")["price_range"],
            json!({"max": 1_000_000_000u64})
        );
        assert_eq!(
            entities("5억 이상 아파트")["price_range"],
            json!({"min": 500_000_000u64})
        );
        assert_eq!(
            entities("5억~7억 아파트")["price_range"],
            json!({"min": 500_000_000u64, "max": 700_000_000u64})
        );
        assert_eq!(
            entities("5억에서 7억 사이")["price_range"],
            json!({"min": 500_000_000u64, "max": 700_000_000u64})
        );
        assert_eq!(
            entities("under 1 billion won")["price_range"],
            json!({"max": 1_000_000_000u64})
        );
        assert_eq!(
            entities("between 500 million and 700 million won")["price_range"],
            json!({"min": 500_000_000u64, "max": 700_000_000u64})
        );
        // A raise from one sum to another is not a price range.
        assert_eq!(entities("3억을 10억으로 올려").get("price_range"), None);
        assert_eq!(
            entities("from 300 million won to 1 billion won").get("price_range"),
            None
        );

        assert_eq!(
            entities("30평대")["size_range"],
            json!({"min": 30, "max": 40})
        );
        assert_eq!(
            entities("25~35평")["size_range"],
            json!({"min": 25, "max": 35})
        );
        assert_eq!(
            entities("32평 아파트")["size_range"],
            json!({"min": 32, "max": 32})
        );
        assert_eq!(
            entities("30 pyeong apartment")["size_range"],
            json!({"min": 30, "max": 30})
        );
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
            json!({"amounts": [300_000_000u64, 1_000_000_000u64]})
        );
    }

    fn intent(query: &str) -> Intent {
        analyze_intent(query)
    }

    fn agents(plan: &Plan) -> Vec<&str> {
        plan.steps.iter().map(|s| s.agent_name.as_str()).collect()
    }

    #[test]
    fn comprehensive_plans_search_then_analysis_like_seed_000() {
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
        let specs = KNOWN_AGENTS[3..]
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

    #[test]
    fn evaluation_follows_seed_002() {
        let ok = |a: &str| {
            (
                a.to_owned(),
                Some(json!({"status": "success", "data": [1]})),
                None::<String>,
            )
        };
        let outcome = evaluate(&[ok("property_search"), ok("market_analysis")]);
        assert_eq!(
            outcome,
            EvaluationOutcome {
                quality_score: 1.0,
                completeness: 1.0,
                needs_retry: false,
                retry_agents: vec![],
                feedback: "Rule-based evaluation: 2/2 agents succeeded".into(),
                source: Source::Rules,
            }
        );

        let failed = (
            "market_analysis".to_owned(),
            None,
            Some("timed out after 30000 ms".to_owned()),
        );
        let outcome = evaluate(&[ok("property_search"), failed]);
        assert_eq!(outcome.quality_score, 0.5);
        assert_eq!(outcome.completeness, 0.0);
        assert!(outcome.needs_retry);
        assert_eq!(outcome.retry_agents, ["market_analysis"]);
        assert_eq!(
            outcome.feedback,
            "Rule-based evaluation: 1/2 agents succeeded"
        );

        // Seed 002's agents report errors in their result.
        let soft = (
            "property_search".to_owned(),
            Some(json!({"status": "error", "error": "x"})),
            None,
        );
        assert_eq!(evaluate(&[soft]).retry_agents, ["property_search"]);

        let empty = ("search_team".to_owned(), Some(json!({})), None);
        let outcome = evaluate(&[empty]);
        assert_eq!(
            (
                outcome.quality_score,
                outcome.completeness,
                outcome.needs_retry
            ),
            (1.0, 0.0, false)
        );

        let outcome = evaluate(&[]);
        assert_eq!((outcome.quality_score, outcome.completeness), (0.0, 0.0));
        assert_eq!(
            outcome.feedback,
            "Rule-based evaluation: 0/0 agents succeeded"
        );
    }

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
    fn format_snapshot_for_the_seed_002_query() {
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
        insta::assert_json_snapshot!("format_seed_002_query", out);
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
    fn format_keeps_seed_002_fallback_for_opaque_results() {
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
