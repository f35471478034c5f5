//! The search agents: `search_team` (the search team: laws, market data, listings, loans) and
//! `property_search` (the listing search).

use serde_json::{Map, Value, json};

use super::data::{
    DATASET, DealType, LawArticle, Listing, PropertyType, dataset_source, law_source, price_stats,
    round_manwon, trend,
};
use super::filters::Filters;
use super::{AgentContext, AgentError, Asked, DatasetAgent, Reply};
use crate::query::{
    Lang, Query, contains_any, contains_term, find_term, format_won, parse_amounts,
};

/// Law articles a search returns at most.
pub(crate) const LEGAL_RESULTS_MAX: usize = 5;
/// Listings a search returns by default, and at most when the input asks for more.
pub(crate) const LISTINGS_DEFAULT: usize = 10;
pub(crate) const LISTINGS_MAX: usize = 50;

const SCOPES: [&str; 3] = ["legal", "real_estate", "loan"];

/// Words that ask for market data or listings even when no place or type is named.
const REAL_ESTATE_TERMS: &[&str] = &[
    "시세",
    "매물",
    "가격",
    "집값",
    "실거래",
    "평균",
    "동향",
    "추세",
    "price",
    "prices",
    "market",
    "listing",
    "listings",
    "trend",
];
const LOAN_TERMS: &[&str] = &[
    "대출",
    "금리",
    "담보",
    "주담대",
    "디딤돌",
    "버팀목",
    "보금자리",
    "loan",
    "loans",
    "mortgage",
    "interest rate",
];

/// The search team: law articles, market statistics, listings and loan products.
#[derive(Debug, Default)]
pub struct SearchTeam;

impl DatasetAgent for SearchTeam {
    const NAME: &'static str = "search_team";

    async fn answer(&self, Asked { ctx, input, f, .. }: Asked<'_>) -> Result<Value, AgentError> {
        search_team(ctx, &input, &f)
    }
}

/// What the search team looks for, by scope.
#[derive(Debug, Default)]
struct Found {
    legal: Vec<(&'static LawArticle, f64, Vec<String>)>,
    real_estate: Vec<Value>,
    listings: Vec<Value>,
    /// All listings that match, of which `listings` holds the first `LISTINGS_DEFAULT`.
    listings_total: usize,
    loans: Vec<Value>,
}

fn search_team(
    ctx: &AgentContext,
    input: &Map<String, Value>,
    f: &Filters,
) -> Result<Value, AgentError> {
    let lower = ctx.query.to_lowercase();
    let q = Query::parse(&ctx.query);
    let lang = q.lang;
    let legal = legal_search(&lower, q.change.is_some());
    let scope: Vec<&str> = match input.get("search_scope") {
        Some(v) => scope_param(v)?,
        None => default_scope(&lower, &q, f, !legal.is_empty()),
    };
    let in_scope = |s: &str| scope.contains(&s);
    let mut found = Found::default();
    if in_scope("legal") {
        found.legal = legal;
    }
    if in_scope("real_estate") {
        found.real_estate = market_rows(f);
        if has_filter(f) {
            let all = f.listings();
            found.listings_total = all.len();
            found.listings = all
                .iter()
                .take(LISTINGS_DEFAULT)
                .map(|l| l.to_json())
                .collect();
        }
    }
    if in_scope("loan") {
        found.loans = loan_search(&lower, f.deal_type);
    }
    let sources_used: Vec<&str> = [
        ("legal", "legal_db"),
        ("real_estate", "market_data"),
        ("real_estate", "listings"),
        ("loan", "loan_products"),
    ]
    .into_iter()
    .filter(|(s, _)| in_scope(s))
    .map(|(_, source)| source)
    .collect();
    Ok(json!({
        "team_name": "search",
        "status": "completed",
        "summary": search_summary(&found, f, lang),
        "keywords": search_keywords(ctx, &lower, &found.legal, f),
        "search_scope": scope,
        "filters": f.to_json(),
        "aggregated_results": {
            "legal": found.legal.len(),
            "real_estate": found.real_estate.len(),
            "property_search": found.listings.len(),
            "loan": found.loans.len(),
        },
        "legal_results": found.legal.iter().map(|(law, score, _)| law_json(law, *score)).collect::<Vec<_>>(),
        "real_estate_results": found.real_estate,
        "property_search_results": found.listings,
        "property_search_total": found.listings_total,
        "loan_results": found.loans,
        "total_results": found.legal.len() + found.real_estate.len() + found.listings.len() + found.loans.len(),
        "sources_used": sources_used,
        "sources": search_sources(&found, in_scope("real_estate"), lang),
        "dataset": {"as_of": DATASET.meta.as_of, "note": DATASET.meta.note},
    }))
}

/// Whether the conditions name anything to look listings up by.
fn has_filter(f: &Filters) -> bool {
    !f.places.is_empty()
        || !f.unknown_regions.is_empty()
        || f.property_type.is_some()
        || f.deal_type.is_some()
        || f.size_range.is_some()
}

/// The scopes a query asks for: laws for a legal question or a change request, the market for
/// a place, type or price question, loans when it says so; everything when it says nothing.
fn default_scope(lower: &str, q: &Query, f: &Filters, laws_found: bool) -> Vec<&'static str> {
    let change = q.change.is_some();
    let wants = [
        laws_found || change,
        (has_filter(f) && !change) || contains_any(lower, REAL_ESTATE_TERMS),
        contains_any(lower, LOAN_TERMS),
    ];
    let scope: Vec<&str> = SCOPES
        .into_iter()
        .zip(wants)
        .filter_map(|(s, on)| on.then_some(s))
        .collect();
    if scope.is_empty() {
        // Nothing recognisable: look everywhere rather than answer with nothing.
        return SCOPES.to_vec();
    }
    scope
}

/// The words the search went by, per scope; the intent's other keywords are `general`.
fn search_keywords(
    ctx: &AgentContext,
    lower: &str,
    legal: &[(&'static LawArticle, f64, Vec<String>)],
    f: &Filters,
) -> Value {
    let mut legal_kw: Vec<String> = Vec::new();
    for w in legal.iter().flat_map(|(_, _, words)| words) {
        if !legal_kw.contains(w) {
            legal_kw.push(w.clone());
        }
    }
    let mut real_estate_kw: Vec<String> = f
        .places
        .iter()
        .flat_map(|p| [Some(DATASET.district(p.region)), p.dong, p.station])
        .flatten()
        .map(str::to_owned)
        .collect();
    real_estate_kw.extend(f.property_type.map(|t| t.ko().to_owned()));
    real_estate_kw.extend(f.deal_type.map(|d| d.ko().to_owned()));
    let mentioned = |terms: &[&str]| -> Vec<String> {
        terms
            .iter()
            .filter(|t| contains_term(lower, t))
            .map(|t| (*t).to_owned())
            .collect()
    };
    real_estate_kw.extend(mentioned(REAL_ESTATE_TERMS));
    let loan_kw = mentioned(LOAN_TERMS);
    let query = ctx.query.as_str();
    let mut general_kw: Vec<String> = parse_amounts(query)
        .iter()
        .map(|a| query[a.start..a.end].to_owned())
        .collect();
    let intent_keywords = ctx.intent.get("keywords").and_then(Value::as_array);
    for k in intent_keywords
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let known = [&legal_kw, &real_estate_kw, &loan_kw, &general_kw]
            .iter()
            .any(|l| l.iter().any(|x| x == k));
        if !known {
            general_kw.push(k.to_owned());
        }
    }
    json!({"legal": legal_kw, "real_estate": real_estate_kw, "loan": loan_kw, "general": general_kw})
}

/// `법령 5건, 매물 9건을 찾았습니다.` / `Found 5 law articles and 9 listings.`
fn search_summary(found: &Found, f: &Filters, lang: Lang) -> String {
    let shown = found.listings.len();
    let listings = if found.listings_total > shown {
        match lang {
            Lang::Ko => format!("매물 {shown}건(전체 {}건 중)", found.listings_total),
            Lang::En => format!("{shown} listings (of {} that match)", found.listings_total),
        }
    } else {
        match lang {
            Lang::Ko => format!("매물 {shown}건"),
            Lang::En => format!("{shown} listings"),
        }
    };
    let parts: Vec<String> = [
        (found.legal.len(), "법령", "law articles"),
        (found.real_estate.len(), "시세 요약", "market summaries"),
        (found.loans.len(), "대출 상품", "loan products"),
    ]
    .into_iter()
    .filter(|(n, _, _)| *n > 0)
    .map(|(n, ko, en)| match lang {
        Lang::Ko => format!("{ko} {n}건"),
        Lang::En => format!("{n} {en}"),
    })
    .chain((shown > 0).then_some(listings))
    .collect();
    let unknown = f.unknown_regions.join(", ");
    match (parts.is_empty(), lang) {
        (true, Lang::Ko) if f.region_unknown() => {
            format!("{unknown}: 데이터셋에 없는 지역이라 찾은 결과가 없습니다.")
        }
        (true, Lang::En) if f.region_unknown() => {
            format!("Nothing found: {unknown} is not covered by the dataset.")
        }
        (true, Lang::Ko) => "조건에 맞는 검색 결과가 없습니다.".to_owned(),
        (true, Lang::En) => "Nothing matched the search.".to_owned(),
        (false, Lang::Ko) => format!("{}을 찾았습니다.", parts.join(", ")),
        (false, Lang::En) => format!("Found {}.", parts.join(", ")),
    }
}

/// The laws found, the dataset when market data and listings were searched, the lenders for
/// loans.
fn search_sources(found: &Found, searched_market: bool, lang: Lang) -> Vec<String> {
    let mut out: Vec<String> = found
        .legal
        .iter()
        .map(|(law, _, _)| law_source(law))
        .collect();
    if searched_market {
        out.push(dataset_source(lang));
    }
    for loan in &found.loans {
        let provider = loan["provider"].as_str().unwrap_or_default();
        let name = loan["name"].as_str().unwrap_or_default();
        let source = format!("{provider} {name}");
        if !out.contains(&source) {
            out.push(source);
        }
    }
    out
}

fn scope_param(v: &Value) -> Result<Vec<&'static str>, AgentError> {
    let bad = || {
        AgentError::fatal(format!(
            "input field `search_scope` must be a list of \"legal\", \"real_estate\", \"loan\", got {v}"
        ))
    };
    let items = v.as_array().ok_or_else(bad)?;
    let mut out = Vec::new();
    for item in items {
        let s = item
            .as_str()
            .and_then(|s| SCOPES.into_iter().find(|k| *k == s))
            .ok_or_else(bad)?;
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// Law articles whose keywords the query mentions, best first, each with its matched keywords.
/// A change request always brings the articles that decide it, because a query such as
/// "1 billion instead of 300 million" may not say "increase".
pub(crate) fn legal_search(
    lower_query: &str,
    change_request: bool,
) -> Vec<(&'static LawArticle, f64, Vec<String>)> {
    let boost = |id: &str| -> usize {
        if !change_request {
            return 0;
        }
        match id {
            "hlpa-7" => 3,
            "hlpa-decree-8" => 2,
            "hlpa-6-3" | "hlpa-10-2" => 1,
            _ => 0,
        }
    };
    let mut scored: Vec<(usize, usize, &LawArticle, Vec<String>)> = DATASET
        .laws
        .iter()
        .enumerate()
        .filter_map(|(i, law)| {
            let mut words: Vec<(usize, String)> = law
                .keywords
                .iter()
                .filter_map(|k| {
                    find_term(lower_query, &k.to_lowercase()).map(|pos| (pos, k.clone()))
                })
                .collect();
            words.sort();
            let hits = words.len() + boost(&law.id);
            (hits > 0).then(|| (hits, i, law, words.into_iter().map(|(_, w)| w).collect()))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(LEGAL_RESULTS_MAX)
        .map(|(hits, _, law, words)| {
            // A similarity-like score in 0.6..=0.99 that grows with the evidence.
            let score = (0.5 + 0.1 * hits as f64).min(0.99);
            (law, (score * 100.0).round() / 100.0, words)
        })
        .collect()
}

pub(crate) fn law_json(law: &LawArticle, similarity: f64) -> Value {
    json!({
        "law_name": law.law_name,
        "article": law.article,
        "title": law.title,
        "content": law.content,
        "similarity": similarity,
    })
}

/// Market statistics rows: one per region and property type asked for (all regions when only
/// a type or deal is named).
fn market_rows(f: &Filters) -> Vec<Value> {
    if f.region_unknown() {
        return Vec::new();
    }
    let regions: Vec<&str> = if f.places.is_empty() {
        DATASET.regions.iter().map(|r| r.region.as_str()).collect()
    } else {
        f.places.iter().map(|p| p.region).collect()
    };
    let types: Vec<PropertyType> = f
        .property_type
        .map_or(PropertyType::IN_DATASET.to_vec(), |t| vec![t]);
    let deal = f.deal_type.unwrap_or(DealType::Sale);
    let mut rows = Vec::new();
    for region in regions {
        for &t in &types {
            let Some(series) = DATASET.series(region, t) else {
                continue;
            };
            let latest = series.latest();
            let tr = trend(&series.values(deal));
            rows.push(json!({
                "region": region,
                "property_type": t.ko(),
                "deal_type": deal.ko(),
                "avg_price": latest.avg_price,
                "avg_deposit": latest.avg_deposit,
                "avg_monthly_rent": latest.avg_monthly_rent,
                "transaction_count": series.transactions_12m(),
                "as_of": latest.month,
                "change_3m_pct": tr.as_ref().map(|t| t.change_3m_pct),
                "trend": tr.as_ref().map(|t| t.direction.ko()),
            }));
        }
    }
    rows
}

/// Loan products: those for the deal type (전세 자금 for leases, 구입 자금 for purchases),
/// the ones the query names first.
fn loan_search(lower_query: &str, deal: Option<DealType>) -> Vec<Value> {
    let wanted = |loan_type: &str| match deal {
        Some(DealType::Sale) => loan_type == "구입자금",
        Some(DealType::Jeonse | DealType::Monthly) => loan_type == "전세자금",
        None => true,
    };
    let mut products: Vec<(usize, usize, Value)> = DATASET
        .loans
        .iter()
        .enumerate()
        .filter(|(_, p)| wanted(&p.loan_type))
        .map(|(i, p)| {
            let hits = p
                .keywords
                .iter()
                .filter(|k| contains_term(lower_query, &k.to_lowercase()))
                .count();
            let mut v = serde_json::to_value(p).unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                m.remove("keywords");
                m.insert(
                    "limit_text".into(),
                    format_won(p.limit_won, Lang::Ko).into(),
                );
            }
            (hits, i, v)
        })
        .collect();
    products.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    products.into_iter().map(|(_, _, v)| v).collect()
}

/// The listing search.
#[derive(Debug, Default)]
pub struct PropertySearch;

impl DatasetAgent for PropertySearch {
    const NAME: &'static str = "property_search";

    async fn answer(&self, Asked { input, f, lang, .. }: Asked<'_>) -> Result<Value, AgentError> {
        let limit = match input.get("limit") {
            None | Some(Value::Null) => LISTINGS_DEFAULT,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=LISTINGS_MAX as u64).contains(&n) => n as usize,
                _ => {
                    return Err(AgentError::fatal(format!(
                        "input field `limit` must be an integer in 1..={LISTINGS_MAX}, got {v}"
                    )));
                }
            },
        };
        let found = f.listings();
        let insights = property_insights(&f, &found, limit, lang);
        let data: Vec<Value> = found.iter().take(limit).map(|l| l.to_json()).collect();
        let reply = Reply {
            summary: format!("{}.", insights[0]),
            data: Value::Array(data),
            insights,
        };
        let mut result = reply.into_result(Self::NAME, &f, lang);
        result["total_count"] = found.len().into();
        Ok(result)
    }
}

/// What the listing search found: how many (and how many are shown), their prices per deal
/// type (a sale price and a deposit are never averaged together), the price per 평, and how
/// many are near the station asked about. The first insight is never missing.
fn property_insights(
    f: &Filters,
    found: &[&'static Listing],
    shown: usize,
    lang: Lang,
) -> Vec<String> {
    let what = f.describe(lang);
    if f.region_unknown() {
        let unknown = f.unknown_regions.join(", ");
        return vec![match lang {
            Lang::Ko => format!(
                "{unknown}: 데이터셋에 없는 지역입니다 (지원 지역: {})",
                supported_regions()
            ),
            Lang::En => format!(
                "{unknown}: not covered by the dataset (covered: {})",
                supported_regions()
            ),
        }];
    }
    if found.is_empty() {
        return vec![match lang {
            Lang::Ko => {
                format!("{what} 조건에 맞는 매물이 없습니다. 평형이나 거래 유형 조건을 넓혀 보세요")
            }
            Lang::En => {
                format!("No listings match {what}; try a wider size range or another deal type")
            }
        }];
    }
    let count = found.len();
    let mut out = vec![match (lang, count > shown) {
        (Lang::Ko, false) => format!("{what} 조건의 매물 {count}건을 찾았습니다"),
        (Lang::Ko, true) => {
            format!("{what} 조건의 매물 {count}건을 찾았습니다 (상위 {shown}건 표시)")
        }
        (Lang::En, false) => format!("Found {count} listings for {what}"),
        (Lang::En, true) => {
            format!("Found {count} listings for {what} (showing the first {shown})")
        }
    }];
    let groups: Vec<(DealType, Vec<&Listing>)> = DealType::ALL
        .into_iter()
        .map(|d| {
            (
                d,
                found
                    .iter()
                    .copied()
                    .filter(|l| l.deal_type == d)
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, ls)| !ls.is_empty())
        .collect();
    let labelled = groups.len() > 1;
    for (deal, listings) in &groups {
        out.extend(price_lines(listings, labelled.then_some(*deal), lang));
    }
    if let Some(station) = f.station() {
        let near = found
            .iter()
            .filter(|l| l.near_station == station && l.walk_minutes <= 10)
            .count();
        out.push(match lang {
            Lang::Ko => format!("{station} 도보 10분 이내 매물 {near}건"),
            Lang::En => format!("{near} of them within a 10-minute walk of {station}"),
        });
    }
    out
}

/// `평균 14억 5,600만원, 최저 12억원(래미안 강남아파트) ~ 최고 …` and the price per 평, for
/// listings of one deal type; labelled with it (`매매 7건: …`) when there are several.
fn price_lines(listings: &[&Listing], deal: Option<DealType>, lang: Lang) -> Vec<String> {
    let Some(stats) = price_stats(listings) else {
        return Vec::new();
    };
    let cheapest = listings
        .iter()
        .min_by_key(|l| (l.price, &l.id))
        .map_or("", |l| l.name.as_str());
    let dearest = listings
        .iter()
        .max_by_key(|l| (l.price, std::cmp::Reverse(&l.id)))
        .map_or("", |l| l.name.as_str());
    let won = |x: u64| format_won(x, lang);
    let label = match (deal, lang) {
        (None, _) => String::new(),
        (Some(DealType::Sale), Lang::Ko) => format!("매매 {}건: ", stats.count),
        (Some(d), Lang::Ko) => format!("{} {}건 (보증금): ", d.ko(), stats.count),
        (Some(DealType::Sale), Lang::En) => format!("{} for sale: ", stats.count),
        (Some(d), Lang::En) => format!("{} on {} (deposits): ", stats.count, d.en()),
    };
    let mut out = vec![match lang {
        Lang::Ko => format!(
            "{label}평균 {}, 최저 {}({cheapest}) ~ 최고 {}({dearest})",
            won(round_manwon(stats.avg_price)),
            won(stats.min_price),
            won(stats.max_price)
        ),
        Lang::En => format!(
            "{label}average {}, from {} ({cheapest}) to {} ({dearest})",
            won(round_manwon(stats.avg_price)),
            won(stats.min_price),
            won(stats.max_price)
        ),
    }];
    if deal.is_none() || deal == Some(DealType::Sale) {
        let per_pyeong = won(round_manwon(stats.avg_price_per_pyeong));
        out.push(match lang {
            Lang::Ko => format!("평당 평균 {per_pyeong}"),
            Lang::En => format!("Average {per_pyeong} per pyeong"),
        });
    }
    out
}

pub(crate) fn supported_regions() -> String {
    DATASET
        .regions
        .iter()
        .map(|r| r.district.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::Agent;
    use crate::agents::testing::ctx;

    #[tokio::test]
    async fn gangnam_station_query_finds_30_pyeong_apartments_for_sale() {
        let c = ctx("강남역 근처 30평대 아파트 매매 시세 알려줘");
        let out = PropertySearch.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["status"], "success");
        assert_eq!(out["agent"], "property_search");
        let data = out["data"].as_array().unwrap();
        assert!(data.len() >= 3, "{data:?}");
        for l in data {
            assert_eq!(l["region"], "서울특별시 강남구");
            assert_eq!(l["property_type"], "아파트");
            assert_eq!(l["deal_type"], "매매");
            let size = l["size_pyeong"].as_u64().unwrap();
            assert!((30..40).contains(&size), "{size}");
        }
        assert_eq!(data[0]["name"], "래미안 강남아파트");
        assert_eq!(out["params"]["size_range"], json!({"min": 30, "max": 40}));
        assert!(out["insights"][0].as_str().unwrap().contains("5건"));
        insta::assert_json_snapshot!("property_search_gangnam_station", out);
    }

    #[tokio::test]
    async fn plan_params_drive_the_search() {
        // A rules plan passes the intent as params; the query alone says nothing.
        let params = json!({
            "region": "서울특별시 강남구", "property_type": "아파트", "deal_type": "매매",
            "size_range": {"min": 30, "max": 40}
        });
        let out = PropertySearch
            .run(&ctx("시세 알려줘"), params)
            .await
            .unwrap()
            .result;
        assert_eq!(out["total_count"], 5);
        let out = PropertySearch
            .run(
                &ctx("officetels for monthly rent in Mapo"),
                json!({"limit": 1}),
            )
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"][0]["name"], "홍대 스테이 오피스텔");
        assert!(
            out["insights"][0]
                .as_str()
                .unwrap()
                .starts_with("Found 1 listings")
        );
        let err = PropertySearch
            .run(&ctx("x"), json!({"limit": 0}))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            AgentError::fatal("input field `limit` must be an integer in 1..=50, got 0")
        );
    }

    #[tokio::test]
    async fn a_district_named_in_feedback_replaces_the_one_asked_for() {
        let mut c = ctx("강남구 아파트 매매 시세 알려줘");
        let params = json!({"region": "서울특별시 강남구"});
        c.turn.feedback = Some("서초구로 해줘".into());
        let out = PropertySearch.run(&c, params).await.unwrap().result;
        let data = out["data"].as_array().unwrap();
        assert!(!data.is_empty(), "{out}");
        assert!(
            data.iter().all(|l| l["region"] == "서울특별시 서초구"),
            "{out}"
        );
        // Feedback that names no district leaves the search as asked.
        c.turn.feedback = Some("싼 것부터 보여줘".into());
        let out = PropertySearch.run(&c, Value::Null).await.unwrap().result;
        let data = out["data"].as_array().unwrap();
        assert!(
            data.iter().all(|l| l["region"] == "서울특별시 강남구"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn no_match_and_unknown_region_say_so() {
        let out = PropertySearch
            .run(&ctx("용산 빌라 월세"), Value::Null)
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"], json!([]));
        assert!(
            out["insights"][0]
                .as_str()
                .unwrap()
                .contains("매물이 없습니다")
        );
        let out = PropertySearch
            .run(&ctx("아파트"), json!({"region": "부산 해운대구"}))
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"], json!([]));
        assert!(
            out["insights"][0]
                .as_str()
                .unwrap()
                .contains("데이터셋에 없는 지역")
        );
    }

    #[tokio::test]
    async fn search_team_for_the_deposit_increase_finds_the_law() {
        let c = ctx("집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘");
        let out = SearchTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["search_scope"], json!(["legal"]));
        let articles: Vec<&str> = out["legal_results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["article"].as_str().unwrap())
            .collect();
        assert_eq!(articles[0], "제7조", "{articles:?}");
        assert!(
            articles.contains(&"제6조의3") && articles.contains(&"제14조"),
            "{articles:?}"
        );
        assert_eq!(out["keywords"]["general"], json!(["3억", "10억"]));
        assert!(
            out["keywords"]["legal"]
                .as_array()
                .unwrap()
                .contains(&json!("올려"))
        );
        assert_eq!(
            out["total_results"],
            out["legal_results"].as_array().unwrap().len()
        );
        assert_eq!(out["sources_used"], json!(["legal_db"]));
    }

    #[tokio::test]
    async fn search_team_market_listings_and_loans() {
        let c = ctx("강남구 아파트 매매 시세와 대출 금리 알려줘");
        let out = SearchTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["search_scope"], json!(["real_estate", "loan"]));
        let rows = out["real_estate_results"].as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["region"], "서울특별시 강남구");
        assert_eq!(rows[0]["avg_price"], 1_450_000_000u64);
        assert_eq!(rows[0]["trend"], "상승");
        assert!(
            !out["property_search_results"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        let loans = out["loan_results"].as_array().unwrap();
        assert!(!loans.is_empty() && loans.iter().all(|l| l["loan_type"] == "구입자금"));
        let err = SearchTeam
            .run(&c, json!({"search_scope": ["web"]}))
            .await
            .unwrap_err();
        assert!(err.message.contains("`search_scope`") && !err.retryable);
    }
}
