//! What the answer is built from: the listings, laws, insights, metrics, market figures,
//! comparison and document found in the agents' results, whatever their shape (the built-in
//! agents', the LangGraph supervisor's agents' `{status, data, insights}`, an `http` agent's).

use serde_json::{Map, Value, json};

use super::super::evaluation::{has_data, reports_failure};
use crate::query::{DealType, parse_amounts};

/// Result keys that hold listings.
const LISTING_KEYS: [&str; 3] = ["property_search_results", "listings", "properties"];
/// Listing keys that hold its headline amount: the price of a sale, the deposit of a lease.
const PRICE_KEYS: [&str; 6] = [
    "price",
    "deal_amount",
    "sale_price",
    "price_won",
    "amount",
    "deposit",
];

/// A district's market for one property type and deal type, as an analysis reported it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Market {
    /// `서울특별시 강남구`; `None` for the average over the dataset's districts.
    pub region: Option<String>,
    /// `강남구`, or what the agent called an average over several districts.
    pub label: String,
    pub property_type: String,
    pub deal_type: String,
    pub avg: u64,
    pub change_3m_pct: Option<f64>,
}

#[derive(Debug, Default)]
pub(super) struct Findings {
    /// The listings agents returned, each counted once in the answer.
    pub listings: Vec<Value>,
    /// Results no rule could read, shown as they are (`{agent, result}`).
    pub opaque: Vec<Value>,
    pub insights: Vec<String>,
    pub recommendations: Vec<String>,
    pub laws: Vec<String>,
    pub metrics: Map<String, Value>,
    pub market: Option<Market>,
    /// A region comparison's `data`.
    pub comparison: Option<Value>,
    pub document: Option<Value>,
    /// The agents' own one-sentence summaries (the agent reply contract's `summary`).
    pub summaries: Vec<String>,
}

pub(super) fn push_unique(list: &mut Vec<String>, item: String) {
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

/// A market analysis' data (`market_analysis`'s `data`, `analysis_team`'s
/// `raw_analysis.market_analysis`): the district's latest average and its 3-month change.
fn market_of(data: &Value) -> Option<Market> {
    let market = data.get("market")?;
    Some(Market {
        region: data
            .get("region")
            .and_then(Value::as_str)
            .map(str::to_owned),
        label: str_field(data, &["region_label"])?.to_owned(),
        property_type: str_field(data, &["property_type"])?.to_owned(),
        deal_type: str_field(data, &["deal_type"])?.to_owned(),
        avg: market.get("latest_avg")?.as_u64()?,
        change_3m_pct: market.get("change_3m_pct").and_then(Value::as_f64),
    })
}

/// A region comparison's data: districts with their average prices, and a ranking.
fn is_comparison(data: &Value) -> bool {
    data.get("ranking").is_some()
        && data
            .get("regions")
            .and_then(Value::as_array)
            .is_some_and(|rows| rows.iter().all(|r| r.get("avg_price").is_some()))
}

impl Findings {
    pub(super) fn gather(&mut self, agent: &str, result: &Value, depth: u8) {
        if reports_failure(result) {
            return;
        }
        let Some(obj) = result.as_object() else {
            if has_data(result) {
                self.opaque.push(json!({"agent": agent, "result": result}));
            }
            return;
        };
        for key in LISTING_KEYS {
            if let Some(items) = obj.get(key).and_then(Value::as_array) {
                self.listings.extend(items.iter().cloned());
            }
        }
        self.gather_texts(obj);
        if let Some(metrics) = obj.get("metrics").and_then(Value::as_object) {
            for (k, v) in metrics {
                self.metrics.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        if let Some(m) = obj
            .get("raw_analysis")
            .and_then(|r| r.get("market_analysis"))
        {
            self.market = self.market.take().or_else(|| market_of(m));
        }
        self.gather_document(obj);
        self.gather_data(agent, obj.get("data"), depth);
    }

    /// Laws, insights, recommendations, a report's summary and the agent's own.
    fn gather_texts(&mut self, obj: &Map<String, Value>) {
        if let Some(summary) = obj.get("summary").and_then(Value::as_str) {
            push_unique(&mut self.summaries, summary.to_owned());
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
    }

    fn gather_document(&mut self, obj: &Map<String, Value>) {
        let is_document =
            obj.contains_key("final_document") || obj.contains_key("document_content");
        if !is_document || self.document.is_some() {
            return;
        }
        let content = obj.get("document_content");
        let title = content
            .and_then(|c| str_field(c, &["title"]))
            .or_else(|| obj.get("title").and_then(Value::as_str))
            .or_else(|| obj.get("document_type").and_then(Value::as_str))
            .unwrap_or("계약서");
        let text = obj
            .get("final_document")
            .and_then(Value::as_str)
            .or_else(|| content.and_then(|c| str_field(c, &["content", "body", "text"])));
        let mut doc = json!({
            "title": title,
            "document_type": obj.get("document_type").cloned().unwrap_or(Value::Null),
            "content": text,
            "review_needed": obj.get("review_needed").and_then(Value::as_bool).unwrap_or(false),
        });
        if let Some(path) = obj.get("saved_document").and_then(|s| s.get("file_path"))
            && path.is_string()
        {
            doc["file_path"] = path.clone();
        }
        self.document = Some(doc);
    }

    /// An agent's `data`: a list of listings, a market analysis, a comparison, the advisor's
    /// ratings (which its insights already say), an object of the original shape (`{metrics}`)
    /// read like a result, or something to show as it is. Depth bounds the walk on
    /// pathological nesting.
    fn gather_data(&mut self, agent: &str, data: Option<&Value>, depth: u8) {
        match data {
            Some(Value::Array(items)) => self.listings.extend(items.iter().cloned()),
            Some(data @ Value::Object(o)) if depth == 0 => {
                if let Some(m) = market_of(data) {
                    self.market = self.market.take().or(Some(m));
                } else if is_comparison(data) {
                    self.comparison = self.comparison.take().or_else(|| Some(data.clone()));
                } else if !o.contains_key("recommendations") {
                    let before = self.count();
                    self.gather(agent, data, depth + 1);
                    if self.count() == before {
                        self.opaque.push(json!({"agent": agent, "result": data}));
                    }
                }
            }
            Some(data) if has_data(data) => {
                self.opaque.push(json!({"agent": agent, "result": data}));
            }
            _ => {}
        }
    }

    /// How much has been found, to tell whether a nested walk found anything.
    fn count(&self) -> usize {
        self.listings.len() + self.opaque.len() + self.metrics.len() + self.insights.len()
    }

    pub(super) fn metric(&self, keys: &[&str]) -> Option<f64> {
        keys.iter()
            .find_map(|k| self.metrics.get(*k).and_then(Value::as_f64))
    }
}

/// A listing's headline amount in won: its price, or its deposit for a lease.
pub(super) fn listing_price(listing: &Value) -> Option<u64> {
    PRICE_KEYS.iter().find_map(|k| money(listing.get(*k)?))
}

/// A listing's monthly rent in won, when it has one.
pub(super) fn listing_rent(listing: &Value) -> Option<u64> {
    money(listing.get("monthly_rent")?)
}

/// A listing's deal type (`매매`, `sale`, `monthly_rent` ...), when it says.
pub(super) fn listing_deal(listing: &Value) -> Option<DealType> {
    listing
        .get("deal_type")
        .and_then(Value::as_str)
        .and_then(DealType::from_param)
}

/// An amount written as a number of won or as text (`"10억"`).
fn money(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_f64().filter(|p| *p > 0.0).map(|p| p.round() as u64),
        Value::String(s) => parse_amounts(s)
            .first()
            .map(|a| a.won)
            .or_else(|| s.trim().parse::<f64>().ok().map(|n| n.round() as u64)),
        _ => None,
    }
}
