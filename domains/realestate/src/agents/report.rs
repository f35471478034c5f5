//! The document team's market report: what the search and the analysis found, written up in
//! the user's language — the listings per deal type (a sale price and a deposit are never
//! averaged together), the market's trend, the recommended steps, the sources.

use serde_json::{Value, json};

use super::AgentContext;
use super::data::{DATASET, dataset_source};
use super::document::created_at;
use super::filters::Filters;
use super::market::analyze_market;
use super::search::LISTINGS_DEFAULT;
use crate::query::{DealType, Lang, english_region, format_won};

/// Market lines and recommendations a report quotes at most.
const REPORT_LINES_MAX: usize = 5;

/// The listings the search steps found (`search_team`, `property_search`), else the dataset's
/// matches: the report describes what the run found.
fn listings(ctx: &AgentContext, f: &Filters) -> Vec<Value> {
    let found = ctx
        .team_results
        .get("search_team")
        .and_then(|r| r.get("property_search_results"))
        .or_else(|| {
            ctx.team_results
                .get("property_search")
                .and_then(|r| r.get("data"))
        })
        .and_then(Value::as_array);
    match found {
        Some(items) => items.clone(),
        None => f
            .listings()
            .iter()
            .take(LISTINGS_DEFAULT)
            .map(|l| l.to_json())
            .collect(),
    }
}

/// The market lines and recommendations of the analysis step, else the domain's own analysis.
fn analysis(ctx: &AgentContext, f: &Filters, lang: Lang) -> (Vec<String>, Vec<String>) {
    let texts = |r: &Value, key: &str| -> Vec<String> {
        r.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let step = ["analysis_team", "market_analysis"]
        .iter()
        .find_map(|a| ctx.team_results.get(*a));
    match step {
        Some(r) => (texts(r, "insights"), texts(r, "recommendations")),
        None => (analyze_market(f, lang).1, Vec::new()),
    }
}

/// `for sale`, `on jeonse`, `on monthly rent`.
fn english_deal(deal: DealType) -> &'static str {
    match deal {
        DealType::Sale => "for sale",
        DealType::Jeonse => "on jeonse",
        DealType::Monthly => "on monthly rent",
    }
}

fn deal_of(l: &Value) -> Option<DealType> {
    l.get("deal_type")
        .and_then(Value::as_str)
        .and_then(DealType::from_param)
}

/// `- 매매 7건: 9억 8,000만원 ~ 21억 5,000만원` per deal type, then one line per listing.
fn listing_lines(listings: &[Value], lang: Lang) -> Vec<String> {
    let won = |x: u64| format_won(x, lang);
    let mut out = Vec::new();
    for deal in DealType::ALL {
        let group: Vec<&Value> = listings
            .iter()
            .filter(|l| deal_of(l) == Some(deal))
            .collect();
        let prices: Vec<u64> = group.iter().filter_map(|l| l["price"].as_u64()).collect();
        let (Some(lo), Some(hi)) = (prices.iter().min(), prices.iter().max()) else {
            continue;
        };
        let what = match (deal, lang) {
            (DealType::Sale, Lang::Ko) => "매매가",
            (_, Lang::Ko) => "보증금",
            (DealType::Sale, Lang::En) => "prices",
            (_, Lang::En) => "deposits",
        };
        out.push(match lang {
            Lang::Ko => format!(
                "- {} {}건: {what} {} ~ {}",
                deal.ko(),
                group.len(),
                won(*lo),
                won(*hi)
            ),
            Lang::En => format!(
                "- {} {}: {what} {} to {}",
                group.len(),
                english_deal(deal),
                won(*lo),
                won(*hi)
            ),
        });
    }
    out.push(String::new());
    for l in listings {
        let name = l["name"].as_str().unwrap_or_default();
        let dong = l["dong"].as_str().unwrap_or_default();
        let size = l["size_pyeong"].as_u64().unwrap_or_default();
        let deal = deal_of(l).map_or("", |d| lang.pick(d.ko(), d.en()));
        let mut price = l["price"].as_u64().map(won).unwrap_or_default();
        if let Some(rent) = l["monthly_rent"].as_u64() {
            price = format!("{price} / {} {}", won(rent), lang.pick("(월)", "a month"));
        }
        out.push(match lang {
            Lang::Ko => format!("- {name} ({dong}, {size}평): {deal} {price}"),
            Lang::En => format!("- {name} ({dong}, {size} pyeong): {deal} {price}"),
        });
    }
    out
}

/// `서울특별시 강남구` → `강남구`; several joined; Seoul when none.
fn place(f: &Filters, lang: Lang) -> String {
    let names: Vec<String> = f
        .places
        .iter()
        .map(|p| match lang {
            Lang::Ko => DATASET.district(p.region).to_owned(),
            Lang::En => english_region(p.region)
                .trim_end_matches(", Seoul")
                .to_owned(),
        })
        .collect();
    match names.as_slice() {
        [] => lang.pick("서울", "Seoul").to_owned(),
        _ => names.join(", "),
    }
}

/// `10 listings (7 for sale, 2 on jeonse, 1 on monthly rent)`.
fn counts(listings: &[Value], lang: Lang) -> String {
    let parts: Vec<String> = DealType::ALL
        .into_iter()
        .filter_map(|d| {
            let n = listings.iter().filter(|l| deal_of(l) == Some(d)).count();
            (n > 0).then(|| match lang {
                Lang::Ko => format!("{} {n}", d.ko()),
                Lang::En => format!("{n} {}", d.en()),
            })
        })
        .collect();
    match lang {
        Lang::Ko => format!("매물 {}건({})", listings.len(), parts.join(", ")),
        Lang::En => format!("{} listings ({})", listings.len(), parts.join(", ")),
    }
}

/// The document team's result for a market report.
pub(crate) fn market_report(ctx: &AgentContext, f: &Filters, lang: Lang) -> Value {
    let title = match lang {
        Lang::Ko => format!("{} 부동산 시장 보고서", place(f, lang)),
        Lang::En => format!("Market report: {}", place(f, lang)),
    };
    let listings = listings(ctx, f);
    let (trend, recommendations) = analysis(ctx, f, lang);
    let source = dataset_source(lang);
    let mut body: Vec<String> = vec![
        format!("## {}", lang.pick("매물 현황", "Listings")),
        String::new(),
    ];
    body.extend(listing_lines(&listings, lang));
    body.extend([
        String::new(),
        format!("## {}", lang.pick("시장 동향", "Market trend")),
        String::new(),
    ]);
    body.extend(
        trend
            .iter()
            .take(REPORT_LINES_MAX)
            .map(|t| format!("- {t}")),
    );
    if !recommendations.is_empty() {
        body.extend([
            String::new(),
            format!("## {}", lang.pick("권장 사항", "Recommendations")),
            String::new(),
        ]);
        body.extend(
            recommendations
                .iter()
                .take(REPORT_LINES_MAX)
                .map(|r| format!("- {r}")),
        );
    }
    body.extend([
        String::new(),
        format!("## {}", lang.pick("자료", "Sources")),
        String::new(),
        format!("- {source}"),
    ]);
    let content = body.join("\n") + "\n";
    let summary = match lang {
        Lang::Ko => format!(
            "「{title}」를 작성했습니다: {}과 시장 동향.",
            counts(&listings, lang)
        ),
        Lang::En => format!(
            "Wrote \"{title}\": {} and the market trend.",
            counts(&listings, lang)
        ),
    };
    json!({
        "team_name": "document",
        "status": "completed",
        "summary": summary,
        "document_type": "market_report",
        "document_content": {
            "title": title,
            "content": content,
            "metadata": {
                "language": lang.code(),
                "regions": f.places.iter().map(|p| p.region).collect::<Vec<_>>(),
                "listing_count": listings.len(),
                "based_on": ctx.team_results.keys().collect::<Vec<_>>(),
                "dataset_as_of": DATASET.meta.as_of,
            },
            "created_at": created_at(ctx),
        },
        "review_needed": false,
        "final_document": format!("# {title}\n\n{content}"),
        "sources": [source],
    })
}
