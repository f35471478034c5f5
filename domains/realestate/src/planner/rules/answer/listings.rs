//! The sentence about the listings found: how many, and their prices per deal type, so a sale
//! price and a deposit are never put in one range or one average.

use serde_json::{Map, Value, json};

use super::findings::{listing_deal, listing_price, listing_rent};
use super::format_won;
use crate::query::{DealType, PropertyType, district_name, english_region, parse_property_type};

/// The listings of one deal type (`None`: the listings do not say, nor does the query).
#[derive(Debug)]
pub(super) struct DealGroup {
    pub deal: Option<DealType>,
    pub count: usize,
    /// Headline amounts: sale prices, or deposits of leases.
    pub prices: Vec<u64>,
    pub rents: Vec<u64>,
}

impl DealGroup {
    fn min_max(values: &[u64]) -> Option<(u64, u64)> {
        Some((*values.iter().min()?, *values.iter().max()?))
    }

    pub(super) fn price_range(&self) -> Option<(u64, u64)> {
        Self::min_max(&self.prices)
    }

    /// In f64, so a pathological price list cannot overflow the sum.
    pub(super) fn avg_price(&self) -> Option<u64> {
        (!self.prices.is_empty()).then(|| {
            let sum: f64 = self.prices.iter().map(|&p| p as f64).sum();
            (sum / self.prices.len() as f64).round() as u64
        })
    }
}

/// The listings grouped by deal type, in the order sale, jeonse, monthly rent, unknown. A
/// listing that does not say takes the deal type the query asked for.
pub(super) fn deal_groups(listings: &[Value], asked: Option<DealType>) -> Vec<DealGroup> {
    let order = DealType::ALL.map(Some).into_iter().chain([None]);
    order
        .filter_map(|deal| {
            let members: Vec<&Value> = listings
                .iter()
                .filter(|l| listing_deal(l).or(asked) == deal)
                .collect();
            (!members.is_empty()).then(|| DealGroup {
                deal,
                count: members.len(),
                prices: members.iter().filter_map(|l| listing_price(l)).collect(),
                rents: members.iter().filter_map(|l| listing_rent(l)).collect(),
            })
        })
        .collect()
}

/// `lo ~ hi` (or one amount) for a compact list.
fn span(range: (u64, u64), english: bool) -> String {
    match range {
        (lo, hi) if lo == hi => format_won(lo, english),
        (lo, hi) if english => format!("{} to {}", format_won(lo, true), format_won(hi, true)),
        (lo, hi) => format!("{}~{}", format_won(lo, false), format_won(hi, false)),
    }
}

/// What the query's places and type make of the listings: `서울특별시 강남구 아파트 ` /
/// ` in Gangnam-gu, Seoul`.
pub(super) struct Subject<'a> {
    pub regions: &'a [String],
    pub property_type: Option<&'a str>,
}

impl Subject<'_> {
    fn korean(&self) -> String {
        let place = match self.regions {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(
                many.iter()
                    .map(|r| district_name(r))
                    .collect::<Vec<_>>()
                    .join("·"),
            ),
        };
        let parts: Vec<String> = place
            .into_iter()
            .chain(self.property_type.map(str::to_owned))
            .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!("{} ", parts.join(" "))
        }
    }

    fn english_place(&self) -> String {
        match self.regions {
            [] => String::new(),
            [one] => format!(" in {}", english_region(one)),
            many => {
                let names: Vec<String> = many
                    .iter()
                    .map(|r| english_region(r).trim_end_matches(", Seoul").to_owned())
                    .collect();
                format!(" in {}, Seoul", names.join(" and "))
            }
        }
    }

    fn english_kind(&self) -> &str {
        self.property_type
            .and_then(parse_property_type)
            .map_or("listing", PropertyType::en)
    }
}

/// `서울특별시 강남구 아파트 매물 5건을 찾았습니다. 가격은 12억 원에서 16억 5,000만 원 사이입니다.`,
/// or with several deal types each group with its own prices.
pub(super) fn sentence(subject: &Subject, groups: &[DealGroup], english: bool) -> String {
    let n: usize = groups.iter().map(|g| g.count).sum();
    let priced = groups.iter().any(|g| !g.prices.is_empty());
    match (groups, english) {
        ([one], false) => {
            let noun = if priced { "매물" } else { "검색 결과" };
            format!(
                "{}{noun} {n}건을 찾았습니다.{}",
                subject.korean(),
                korean_prices(one)
            )
        }
        ([one], true) => format!(
            "Found {n} {}{}{}{}.",
            subject.english_kind(),
            if n == 1 { "" } else { "s" },
            subject.english_place(),
            english_prices(one)
        ),
        (many, false) => {
            let parts: Vec<String> = many.iter().map(|g| group_text(g, false)).collect();
            format!(
                "{}매물 {n}건을 찾았습니다. 거래 유형별로 {}입니다.",
                subject.korean(),
                parts.join(", ")
            )
        }
        (many, true) => {
            let parts: Vec<String> = many.iter().map(|g| group_text(g, true)).collect();
            format!(
                "Found {n} {}s{}: {}.",
                subject.english_kind(),
                subject.english_place(),
                parts.join(", ")
            )
        }
    }
}

/// The prices of the only deal type found, labelled when they are deposits.
fn korean_prices(g: &DealGroup) -> String {
    let Some((lo, hi)) = g.price_range() else {
        return String::new();
    };
    let range = if lo == hi {
        format!("{}입니다", format_won(lo, false))
    } else {
        format!(
            "{}에서 {} 사이입니다",
            format_won(lo, false),
            format_won(hi, false)
        )
    };
    match (g.deal, DealGroup::min_max(&g.rents)) {
        (Some(DealType::Monthly), Some(rents)) => format!(
            " 보증금은 {}, 월세는 {}입니다.",
            span((lo, hi), false),
            span(rents, false)
        ),
        (Some(DealType::Jeonse | DealType::Monthly), _) => format!(" 보증금은 {range}."),
        _ => format!(" 가격은 {range}."),
    }
}

fn english_prices(g: &DealGroup) -> String {
    let Some((lo, hi)) = g.price_range() else {
        return String::new();
    };
    match (g.deal, DealGroup::min_max(&g.rents)) {
        (Some(DealType::Monthly), Some(rents)) => format!(
            ", with deposits of {} and monthly rent of {}",
            span((lo, hi), true),
            span(rents, true)
        ),
        (Some(DealType::Jeonse | DealType::Monthly), _) => {
            format!(", with deposits of {}", span((lo, hi), true))
        }
        _ if lo == hi => format!(", priced at {}", format_won(lo, true)),
        _ => format!(", priced from {}", span((lo, hi), true)),
    }
}

/// `매매 7건(9억 8,000만 원~21억 5,000만 원)`, `월세 1건(보증금 1,000만 원, 월 120만 원)`;
/// `7 for sale (980 million won to 2.15 billion won)`, `1 on monthly rent (deposit …, … a
/// month)`.
fn group_text(g: &DealGroup, english: bool) -> String {
    let range = g.price_range().map(|r| span(r, english));
    let rents = DealGroup::min_max(&g.rents).map(|r| span(r, english));
    let deposit = if english { "deposit" } else { "보증금" };
    let detail = match (g.deal, range, rents) {
        (_, None, _) => None,
        (Some(DealType::Monthly), Some(d), Some(r)) if english => {
            Some(format!("deposit {d}, {r} a month"))
        }
        (Some(DealType::Monthly), Some(d), Some(r)) => Some(format!("보증금 {d}, 월 {r}")),
        (Some(DealType::Jeonse | DealType::Monthly), Some(d), _) => Some(format!("{deposit} {d}")),
        (_, Some(p), _) => Some(p),
    };
    if english {
        let label = match g.deal {
            Some(DealType::Sale) => "for sale",
            Some(DealType::Jeonse) => "on jeonse",
            Some(DealType::Monthly) => "on monthly rent",
            None => "of unknown deal type",
        };
        let detail = detail.map_or_else(String::new, |d| format!(" ({d})"));
        format!("{} {label}{detail}", g.count)
    } else {
        let label = g.deal.map_or("거래 유형 미상", DealType::ko);
        let detail = detail.map_or_else(String::new, |d| format!("({d})"));
        format!("{label} {}건{detail}", g.count)
    }
}

/// The price facts for `metadata`: `price_range` and `avg_price` when the listings are of one
/// deal type, else `prices_by_deal_type` (never one average over sales and leases).
pub(super) fn price_metadata(groups: &[DealGroup], metadata: &mut Map<String, Value>) {
    match groups {
        [one] => {
            if let Some((lo, hi)) = one.price_range() {
                metadata.insert("price_range".into(), json!({"min": lo, "max": hi}));
            }
            if let Some(a) = one.avg_price() {
                metadata.insert("avg_price".into(), json!(a));
            }
        }
        many => {
            let by_deal: Map<String, Value> = many
                .iter()
                .filter_map(|g| {
                    let (lo, hi) = g.price_range()?;
                    let key = g.deal.map_or("unknown", DealType::ko);
                    let avg = g.avg_price();
                    Some((
                        key.to_owned(),
                        json!({"count": g.count, "min": lo, "max": hi, "avg": avg}),
                    ))
                })
                .collect();
            if !by_deal.is_empty() {
                metadata.insert("prices_by_deal_type".into(), Value::Object(by_deal));
            }
        }
    }
}
