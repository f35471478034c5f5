//! The bundled real-estate dataset (listings, monthly price history, law articles, loan products,
//! the region gazetteer) and the statistics computed over it.
//!
//! The JSON files under `data/` are compiled into the binary with `include_str!` so the built-in
//! agents give the same answers offline, on every machine, in every replay. They are parsed once,
//! on first use.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

pub(crate) use crate::query::{DealType, PropertyType};
use crate::query::{Lang, format_won};

/// 1 평 in square metres (the legal conversion, 400/121).
pub(crate) const SQUARE_METRES_PER_PYEONG: f64 = 3.305_785;

/// A change of less than this over three months is 보합 (flat), because monthly averages of a
/// few hundred deals move by about that much without any real trend.
pub(crate) const TREND_FLAT_PCT_MAX: f64 = 1.0;

/// One listing. `price` is the headline amount in won: the sale price for 매매, the deposit
/// (보증금) for 전세 and 월세, so one field sorts and filters every deal type.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Listing {
    pub id: String,
    pub name: String,
    pub region: String,
    pub dong: String,
    pub property_type: PropertyType,
    pub deal_type: DealType,
    pub price: u64,
    pub deposit: Option<u64>,
    pub monthly_rent: Option<u64>,
    pub size_pyeong: u32,
    pub floor: i32,
    pub near_station: String,
    pub walk_minutes: u32,
    pub built_year: u32,
    pub features: Vec<String>,
}

impl Listing {
    pub(crate) fn price_per_pyeong(&self) -> u64 {
        self.price / u64::from(self.size_pyeong.max(1))
    }

    /// The listing as agents report it: its fields plus the address, the area in m², the
    /// price per 평 and the price in Korean notation.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.insert(
                "address".into(),
                format!("{} {}", self.region, self.dong).into(),
            );
            let area = f64::from(self.size_pyeong) * SQUARE_METRES_PER_PYEONG;
            m.insert("area_m2".into(), round1(area).into());
            m.insert("price_per_pyeong".into(), self.price_per_pyeong().into());
            let mut text = format_won(self.price, Lang::Ko);
            if let Some(rent) = self.monthly_rent {
                text = format!("{text} / 월 {}", format_won(rent, Lang::Ko));
            }
            m.insert("price_text".into(), text.into());
        }
        v
    }
}

/// A named place with the spellings users type for it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Place {
    pub name: String,
    pub aliases: Vec<String>,
}

/// A district (구) with its dongs and subway stations.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Region {
    /// `서울특별시 강남구`: the canonical name every agent reports.
    pub region: String,
    /// `강남구`.
    pub district: String,
    pub aliases: Vec<String>,
    pub dongs: Vec<Place>,
    pub stations: Vec<Place>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MonthStat {
    /// `YYYY-MM`.
    pub month: String,
    pub avg_price: u64,
    pub avg_deposit: u64,
    pub avg_monthly_rent: u64,
    pub transactions: u32,
}

/// Monthly averages for one region and property type, oldest first. Thirteen months, so the
/// 12-month change compares a month with the same month a year before.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PriceSeries {
    pub region: String,
    pub property_type: PropertyType,
    pub months: Vec<MonthStat>,
}

impl PriceSeries {
    /// The series of the average that matters for a deal type.
    pub(crate) fn values(&self, deal: DealType) -> Vec<u64> {
        self.months
            .iter()
            .map(|m| match deal {
                DealType::Sale => m.avg_price,
                DealType::Jeonse => m.avg_deposit,
                DealType::Monthly => m.avg_monthly_rent,
            })
            .collect()
    }

    /// Deals in the last twelve months.
    pub(crate) fn transactions_12m(&self) -> u32 {
        self.months
            .iter()
            .rev()
            .take(12)
            .map(|m| m.transactions)
            .sum()
    }

    pub(crate) fn latest(&self) -> &MonthStat {
        // The dataset test guarantees every series is non-empty.
        &self.months[self.months.len() - 1]
    }
}

/// A summary of one law article (not the official text; `meta.json` says so).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LawArticle {
    pub id: String,
    pub law_name: String,
    pub article: String,
    pub title: String,
    pub content: String,
    pub keywords: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoanProduct {
    pub id: String,
    pub name: String,
    pub provider: String,
    /// `전세자금` or `구입자금`.
    pub loan_type: String,
    pub rate_min_pct: f64,
    pub rate_max_pct: f64,
    pub limit_won: u64,
    pub conditions: String,
    pub keywords: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Meta {
    /// `YYYY-MM-DD`: the date the dataset describes; also the fallback creation date of drafts.
    pub as_of: String,
    /// Says that the data is illustrative; search results carry it so no answer passes it off
    /// as real market data.
    pub note: String,
}

#[derive(Debug)]
pub(crate) struct Dataset {
    pub meta: Meta,
    pub regions: Vec<Region>,
    pub listings: Vec<Listing>,
    pub history: Vec<PriceSeries>,
    pub laws: Vec<LawArticle>,
    pub loans: Vec<LoanProduct>,
}

/// The one parsed copy. The files are compiled in and `dataset_is_consistent` parses and checks
/// them, so a failure here is a build defect, not a runtime condition.
pub(crate) static DATASET: LazyLock<Dataset> =
    LazyLock::new(|| Dataset::parse().expect("the bundled agent dataset is valid JSON"));

impl Dataset {
    fn parse() -> Result<Self, serde_json::Error> {
        Ok(Self {
            meta: serde_json::from_str(include_str!("data/meta.json"))?,
            regions: serde_json::from_str(include_str!("data/regions.json"))?,
            listings: serde_json::from_str(include_str!("data/listings.json"))?,
            history: serde_json::from_str(include_str!("data/price_history.json"))?,
            laws: serde_json::from_str(include_str!("data/laws.json"))?,
            loans: serde_json::from_str(include_str!("data/loans.json"))?,
        })
    }

    pub(crate) fn region(&self, name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.region == name)
    }

    pub(crate) fn series(&self, region: &str, property_type: PropertyType) -> Option<&PriceSeries> {
        self.history
            .iter()
            .find(|s| s.region == region && s.property_type == property_type)
    }

    pub(crate) fn law(&self, id: &str) -> Option<&LawArticle> {
        self.laws.iter().find(|l| l.id == id)
    }

    /// The district part of a canonical region name (`서울특별시 강남구` → `강남구`).
    pub(crate) fn district<'a>(&'a self, region: &'a str) -> &'a str {
        self.region(region).map_or(region, |r| r.district.as_str())
    }
}

/// The bundled dataset as a source of an answer, saying that it is illustrative.
pub(crate) fn dataset_source(lang: Lang) -> String {
    let as_of = &DATASET.meta.as_of;
    match lang {
        Lang::Ko => format!("Chronicle 예시 데이터셋 ({as_of} 기준, 실제 거래 아님)"),
        Lang::En => format!("Chronicle demo dataset (as of {as_of}, illustrative, not real deals)"),
    }
}

/// A law article as a source: `주택임대차보호법 제7조 (차임 등의 증감청구권)`.
pub(crate) fn law_source(law: &LawArticle) -> String {
    format!("{} {} ({})", law.law_name, law.article, law.title)
}

/// `part / whole * 100`, rounded to 0.1; 0 when `whole` is 0.
pub(crate) fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    round1(part as f64 / whole as f64 * 100.0)
}

/// The change from `old` to `new` in percent, rounded to 0.1; 0 when `old` is 0.
pub(crate) fn change_pct(old: u64, new: u64) -> f64 {
    if old == 0 {
        return 0.0;
    }
    round1((new as f64 - old as f64) / old as f64 * 100.0)
}

/// A price rounded to the nearest 만원, for display: `4,227만원`, not `4,227만 2,572원`.
pub(crate) fn round_manwon(won: u64) -> u64 {
    won.saturating_add(5_000) / 10_000 * 10_000
}

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Summary statistics over a set of prices.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct PriceStats {
    pub count: usize,
    pub avg_price: u64,
    pub min_price: u64,
    pub max_price: u64,
    pub median_price: u64,
    pub avg_price_per_pyeong: u64,
}

pub(crate) fn price_stats(listings: &[&Listing]) -> Option<PriceStats> {
    if listings.is_empty() {
        return None;
    }
    let mut prices: Vec<u64> = listings.iter().map(|l| l.price).collect();
    prices.sort_unstable();
    let count = prices.len();
    let n = count as u64;
    let median_price = if count % 2 == 1 {
        prices[count / 2]
    } else {
        (prices[count / 2 - 1] + prices[count / 2]) / 2
    };
    Some(PriceStats {
        count,
        avg_price: prices.iter().sum::<u64>() / n,
        min_price: prices[0],
        max_price: prices[count - 1],
        median_price,
        avg_price_per_pyeong: listings.iter().map(|l| l.price_per_pyeong()).sum::<u64>() / n,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Rising,
    Falling,
    Flat,
}

impl Direction {
    pub(crate) fn ko(self) -> &'static str {
        match self {
            Self::Rising => "상승",
            Self::Falling => "하락",
            Self::Flat => "보합",
        }
    }

    pub(crate) fn en(self) -> &'static str {
        match self {
            Self::Rising => "rising",
            Self::Falling => "falling",
            Self::Flat => "flat",
        }
    }
}

/// Where a monthly series stands and where it is heading.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Trend {
    pub latest: u64,
    pub change_3m_pct: f64,
    pub change_12m_pct: f64,
    pub direction: Direction,
}

/// The trend of a monthly series (oldest first). The direction follows the 3-month change,
/// because the question users ask is "where is it going now".
pub(crate) fn trend(values: &[u64]) -> Option<Trend> {
    let latest = *values.last()?;
    let back = |months: usize| values[values.len().saturating_sub(months + 1)];
    let change_3m_pct = change_pct(back(3), latest);
    let change_12m_pct = change_pct(back(12), latest);
    let direction = if change_3m_pct >= TREND_FLAT_PCT_MAX {
        Direction::Rising
    } else if change_3m_pct <= -TREND_FLAT_PCT_MAX {
        Direction::Falling
    } else {
        Direction::Flat
    };
    Some(Trend {
        latest,
        change_3m_pct,
        change_12m_pct,
        direction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reference inside the dataset resolves, so the agents never meet a dangling name.
    #[test]
    fn dataset_is_consistent() {
        let d = &*DATASET;
        assert!(
            (30..=40).contains(&d.listings.len()),
            "{} listings",
            d.listings.len()
        );
        for (i, l) in d.listings.iter().enumerate() {
            assert_eq!(l.id, format!("L{:03}", i + 1));
            let region = d
                .region(&l.region)
                .unwrap_or_else(|| panic!("{}: {}", l.id, l.region));
            assert!(
                region.dongs.iter().any(|p| p.name == l.dong),
                "{}: {}",
                l.id,
                l.dong
            );
            assert!(
                region.stations.iter().any(|p| p.name == l.near_station),
                "{}",
                l.id
            );
            match l.deal_type {
                DealType::Sale => assert!(l.deposit.is_none() && l.monthly_rent.is_none()),
                DealType::Jeonse => assert_eq!((l.deposit, l.monthly_rent), (Some(l.price), None)),
                DealType::Monthly => {
                    assert_eq!(l.deposit, Some(l.price));
                    assert!(l.monthly_rent.is_some());
                }
            }
        }
        for r in &d.regions {
            for t in PropertyType::IN_DATASET {
                let s = d
                    .series(&r.region, t)
                    .unwrap_or_else(|| panic!("{} {t:?}", r.region));
                assert_eq!(s.months.len(), 13);
                assert!(s.months.windows(2).all(|w| w[0].month < w[1].month));
            }
        }
        assert_eq!(
            d.history.len(),
            d.regions.len() * PropertyType::IN_DATASET.len()
        );
        for id in [
            "hlpa-3",
            "hlpa-6-3",
            "hlpa-7",
            "hlpa-decree-8",
            "hlpa-8",
            "hlpa-10-2",
            "hlpa-14",
        ] {
            assert!(d.law(id).is_some(), "{id}");
        }
        assert!(!d.loans.is_empty());
        assert_eq!(d.meta.as_of.len(), 10);
    }

    #[test]
    fn trend_follows_the_three_month_change() {
        let s = d_series("서울특별시 강남구", PropertyType::Apartment);
        let t = trend(&s.values(DealType::Sale)).unwrap();
        assert_eq!(t.direction, Direction::Rising);
        assert_eq!(t.change_3m_pct, 4.8);
        assert_eq!(t.latest, 1_450_000_000);
        let t =
            trend(&d_series("서울특별시 마포구", PropertyType::Officetel).values(DealType::Sale));
        assert_eq!(t.unwrap().direction, Direction::Falling);
        let t =
            trend(&d_series("서울특별시 마포구", PropertyType::Apartment).values(DealType::Sale));
        assert_eq!(t.unwrap().direction, Direction::Flat);
        assert_eq!(trend(&[]), None);
        // A single point has no history: no change.
        assert_eq!(trend(&[5]).unwrap().change_12m_pct, 0.0);
    }

    #[test]
    fn stats_and_percentages() {
        let d = &*DATASET;
        let ls: Vec<&Listing> = d.listings.iter().take(2).collect();
        let s = price_stats(&ls).unwrap();
        assert_eq!(
            (s.count, s.min_price, s.max_price),
            (2, 1_200_000_000, 1_500_000_000)
        );
        assert_eq!(
            (s.avg_price, s.median_price),
            (1_350_000_000, 1_350_000_000)
        );
        assert_eq!(price_stats(&[]), None);
        assert_eq!(change_pct(300_000_000, 1_000_000_000), 233.3);
        assert_eq!(change_pct(0, 5), 0.0);
        assert_eq!(pct(1, 3), 33.3);
    }

    fn d_series(region: &str, t: PropertyType) -> &'static PriceSeries {
        DATASET.series(region, t).unwrap()
    }
}
