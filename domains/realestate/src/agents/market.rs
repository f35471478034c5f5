//! seed 002's analysis agents over the bundled dataset: `market_analysis` (statistics and
//! trend), `region_comparison` (two or more districts side by side) and `investment_advisor`
//! (ratings from trend, 전세가율 and prices).

use serde_json::{Value, json};

use super::data::{
    DATASET, DealType, Direction, Listing, PropertyType, Trend, change_pct, pct, price_stats,
    round_manwon, round1, trend,
};
use super::filters::{Filters, input_object};
use super::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, declared, seed_result};
use crate::query::{Lang, format_won};

/// Above this 전세가율 a buyer's equity is thin and a tenant's deposit is at risk (깡통전세),
/// the threshold housing agencies warn at.
pub(crate) const JEONSE_RATIO_RISK_PCT: f64 = 70.0;

/// One district's (or Seoul's) market for one property type and deal type.
#[derive(Clone, Debug)]
pub(crate) struct MarketView {
    /// `None` for the average over every district in the dataset.
    pub region: Option<&'static str>,
    pub property_type: PropertyType,
    pub deal: DealType,
    /// `(month, average)` oldest first.
    pub monthly: Vec<(String, u64)>,
    pub trend: Trend,
    pub transactions_12m: u32,
    pub jeonse_ratio_pct: f64,
}

impl MarketView {
    pub(crate) fn new(
        region: Option<&'static str>,
        property_type: PropertyType,
        deal: DealType,
    ) -> Option<Self> {
        let series: Vec<_> = match region {
            Some(r) => vec![DATASET.series(r, property_type)?],
            None => DATASET
                .history
                .iter()
                .filter(|s| s.property_type == property_type)
                .collect(),
        };
        let first = series.first()?;
        let n = series.len() as u64;
        // Month by month average over the series (one series for a district).
        let monthly: Vec<(String, u64)> = (0..first.months.len())
            .map(|i| {
                let sum: u64 = series.iter().map(|s| s.values(deal)[i]).sum();
                (first.months[i].month.clone(), sum / n)
            })
            .collect();
        let values: Vec<u64> = monthly.iter().map(|(_, v)| *v).collect();
        let sale: u64 = series.iter().map(|s| s.latest().avg_price).sum::<u64>() / n;
        let deposit: u64 = series.iter().map(|s| s.latest().avg_deposit).sum::<u64>() / n;
        Some(Self {
            region,
            property_type,
            deal,
            trend: trend(&values)?,
            monthly,
            transactions_12m: series.iter().map(|s| s.transactions_12m()).sum(),
            jeonse_ratio_pct: pct(deposit, sale),
        })
    }

    pub(crate) fn label(&self, lang: Lang) -> String {
        match self.region {
            Some(r) => DATASET.district(r).to_owned(),
            None => lang
                .pick("서울 6개 구 평균", "average of 6 Seoul districts")
                .to_owned(),
        }
    }

    pub(crate) fn latest_month(&self) -> &str {
        self.monthly.last().map_or("", |(m, _)| m.as_str())
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "region": self.region,
            "property_type": self.property_type.ko(),
            "deal_type": self.deal.ko(),
            "latest_month": self.latest_month(),
            "latest_avg": self.trend.latest,
            "change_3m_pct": self.trend.change_3m_pct,
            "change_12m_pct": self.trend.change_12m_pct,
            "trend": self.trend.direction.ko(),
            "transactions_12m": self.transactions_12m,
            "jeonse_ratio_pct": self.jeonse_ratio_pct,
            "monthly": self.monthly.iter().map(|(m, v)| json!({"month": m, "avg": v})).collect::<Vec<_>>(),
        })
    }

    /// `강남구 아파트 매매 평균 14억 5,000만원 (2025-09), 3개월 +4.8%, 1년 +8.7%: 상승`.
    pub(crate) fn headline(&self, lang: Lang) -> String {
        let t = &self.trend;
        match lang {
            Lang::Ko => format!(
                "{} {} {} 평균 {} ({} 기준), 최근 3개월 {:+.1}%, 1년 {:+.1}%: {}",
                self.label(lang),
                self.property_type.ko(),
                self.deal.ko(),
                format_won(t.latest, lang),
                self.latest_month(),
                t.change_3m_pct,
                t.change_12m_pct,
                t.direction.ko()
            ),
            Lang::En => format!(
                "{} {} ({}) averages {} as of {}: {:+.1}% over 3 months, {:+.1}% over 12 months, {}",
                self.label(lang),
                self.property_type.en(),
                self.deal.en(),
                format_won(t.latest, lang),
                self.latest_month(),
                t.change_3m_pct,
                t.change_12m_pct,
                t.direction.en()
            ),
        }
    }

    pub(crate) fn jeonse_ratio_insight(&self, lang: Lang) -> String {
        let r = self.jeonse_ratio_pct;
        let label = self.label(lang);
        match (lang, r >= JEONSE_RATIO_RISK_PCT, r < 60.0) {
            (Lang::Ko, true, _) => format!(
                "{label} 전세가율 {r:.1}%: 매매가 대비 전세가가 높아 깡통전세 위험에 유의해야 합니다 (보증보험 가입 권장)"
            ),
            (Lang::Ko, false, true) => format!(
                "{label} 전세가율 {r:.1}%: 전세가 비율이 낮아 매수 시 자기자본 부담이 큽니다"
            ),
            (Lang::Ko, false, false) => format!("{label} 전세가율 {r:.1}%: 보통 수준입니다"),
            (Lang::En, true, _) => format!(
                "{label} jeonse-to-price ratio {r:.1}%: high, so a tenant's deposit is at risk if prices fall (get deposit insurance)"
            ),
            (Lang::En, false, true) => format!(
                "{label} jeonse-to-price ratio {r:.1}%: low, so buying needs a lot of own capital"
            ),
            (Lang::En, false, false) => format!("{label} jeonse-to-price ratio {r:.1}%: moderate"),
        }
    }
}

/// The market analysis shared by `market_analysis` and `analysis_team`: statistics over the
/// matching listings plus the district's trend. Returns the data and its insights.
pub(crate) fn analyze_market(f: &Filters, lang: Lang) -> (Value, Vec<String>) {
    if f.region_unknown() {
        let msg = match lang {
            Lang::Ko => format!(
                "{}: 데이터셋에 없는 지역입니다",
                f.unknown_regions.join(", ")
            ),
            Lang::En => format!(
                "{}: not covered by the dataset",
                f.unknown_regions.join(", ")
            ),
        };
        return (
            json!({"region": null, "unknown_regions": f.unknown_regions, "statistics": null}),
            vec![msg],
        );
    }
    // A trend needs one property type and one deal; the commonest question is about apartments
    // for sale, so those are the defaults, and the result says they were assumed.
    let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
    let deal = f.deal_type.unwrap_or(DealType::Sale);
    let scoped = Filters {
        property_type: Some(property_type),
        deal_type: Some(deal),
        ..f.clone()
    };
    let listings = scoped.listings();
    let stats = price_stats(&listings);
    let view = MarketView::new(f.region(), property_type, deal);

    let mut insights = Vec::new();
    if let Some(v) = &view {
        insights.push(v.headline(lang));
    }
    match (&stats, lang) {
        (Some(s), Lang::Ko) => insights.push(format!(
            "{} 매물 {}건: 평균 {}, 최저 {} ~ 최고 {}, 평당 {}",
            scoped.describe(lang),
            s.count,
            format_won(s.avg_price, lang),
            format_won(s.min_price, lang),
            format_won(s.max_price, lang),
            format_won(round_manwon(s.avg_price_per_pyeong), lang)
        )),
        (Some(s), Lang::En) => insights.push(format!(
            "{} listings for {}: average {}, from {} to {}, {} per pyeong",
            s.count,
            scoped.describe(lang),
            format_won(s.avg_price, lang),
            format_won(s.min_price, lang),
            format_won(s.max_price, lang),
            format_won(round_manwon(s.avg_price_per_pyeong), lang)
        )),
        (None, _) => insights.push(match lang {
            Lang::Ko => format!(
                "{} 조건의 매물이 데이터셋에 없습니다",
                scoped.describe(lang)
            ),
            Lang::En => format!("No listings in the dataset for {}", scoped.describe(lang)),
        }),
    }
    if let (Some(v), Some(s)) = (&view, &stats)
        && deal == DealType::Sale
        && v.trend.latest > 0
    {
        let gap = change_pct(v.trend.latest, s.avg_price);
        insights.push(match lang {
            Lang::Ko => format!("조건에 맞는 매물의 평균가는 지역 평균 대비 {gap:+.1}%입니다"),
            Lang::En => {
                format!("The matching listings average {gap:+.1}% against the district average")
            }
        });
    }
    if let Some(v) = &view {
        insights.push(v.jeonse_ratio_insight(lang));
        insights.push(match lang {
            Lang::Ko => format!("최근 12개월 거래 {}건", v.transactions_12m),
            Lang::En => format!("{} deals in the last 12 months", v.transactions_12m),
        });
    }
    if let Some(station) = f.station() {
        let near = listings
            .iter()
            .filter(|l| l.near_station == station && l.walk_minutes <= 10)
            .count();
        insights.push(match lang {
            Lang::Ko => {
                format!("{station} 도보 10분 이내 매물 {near}건: 역세권은 수요가 꾸준합니다")
            }
            Lang::En => format!("{near} listings within a 10-minute walk of {station}"),
        });
    }

    let data = json!({
        "region": f.region(),
        "region_label": view.as_ref().map(|v| v.label(Lang::Ko)),
        "property_type": property_type.ko(),
        "deal_type": deal.ko(),
        "assumed": {
            "property_type": f.property_type.is_none(),
            "deal_type": f.deal_type.is_none(),
        },
        "statistics": stats,
        "trend": view.as_ref().map(|v| v.trend.direction.ko()),
        "change_3m_pct": view.as_ref().map(|v| v.trend.change_3m_pct),
        "change_12m_pct": view.as_ref().map(|v| v.trend.change_12m_pct),
        "market": view.as_ref().map(MarketView::to_json),
    });
    (data, insights)
}

/// seed 002's market analysis.
#[derive(Debug, Default)]
pub struct MarketAnalysis;

#[async_trait::async_trait]
impl Agent for MarketAnalysis {
    fn info(&self) -> &AgentInfo {
        declared("market_analysis")
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let input = input_object(&input)?;
        let f = Filters::resolve(ctx, &input)?;
        let (data, insights) = analyze_market(&f, Lang::of(&ctx.query));
        Ok(AgentOutput {
            result: seed_result(self.name(), data, insights, f.to_json()),
        })
    }
}

/// The districts to compare: those named, or every district when fewer than two are named.
fn comparison_regions(f: &Filters) -> (Vec<&'static str>, bool) {
    if f.places.len() >= 2 {
        (f.places.iter().map(|p| p.region).collect(), false)
    } else {
        (
            DATASET.regions.iter().map(|r| r.region.as_str()).collect(),
            true,
        )
    }
}

/// seed 002's region comparison.
#[derive(Debug, Default)]
pub struct RegionComparison;

#[async_trait::async_trait]
impl Agent for RegionComparison {
    fn info(&self) -> &AgentInfo {
        declared("region_comparison")
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let input = input_object(&input)?;
        let f = Filters::resolve(ctx, &input)?;
        let lang = Lang::of(&ctx.query);
        let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
        let deal = f.deal_type.unwrap_or(DealType::Sale);
        let (regions, all) = comparison_regions(&f);

        let mut rows: Vec<(MarketView, Option<u64>, usize)> = Vec::new();
        for region in regions {
            let Some(view) = MarketView::new(Some(region), property_type, deal) else {
                continue;
            };
            let scoped = Filters {
                places: vec![crate::query::PlaceRef {
                    region,
                    dong: None,
                    station: None,
                }],
                unknown_regions: Vec::new(),
                property_type: Some(property_type),
                deal_type: Some(deal),
                ..f.clone()
            };
            let listings = scoped.listings();
            let per_pyeong = price_stats(&listings).map(|s| s.avg_price_per_pyeong);
            rows.push((view, per_pyeong, listings.len()));
        }
        let mut insights = Vec::new();
        if all {
            insights.push(match lang {
                Lang::Ko => {
                    "비교할 지역이 두 곳 미만이라 데이터셋의 모든 구를 비교합니다".to_owned()
                }
                Lang::En => {
                    "Fewer than two districts named, so every district in the dataset is compared"
                        .to_owned()
                }
            });
        }
        let by_price = ranked(&rows, |(v, _, _)| v.trend.latest as f64);
        let by_change = ranked(&rows, |(v, _, _)| v.trend.change_3m_pct);
        if let (Some(hi), Some(lo)) = (by_price.first(), by_price.last()) {
            let (hi, lo) = (&rows[*hi].0, &rows[*lo].0);
            let gap = change_pct(lo.trend.latest, hi.trend.latest);
            insights.push(match lang {
                Lang::Ko => format!(
                    "{} 평균 {}가 가장 높고 {}({})보다 {gap:.1}% 높습니다",
                    hi.label(lang),
                    format_won(hi.trend.latest, lang),
                    lo.label(lang),
                    format_won(lo.trend.latest, lang)
                ),
                Lang::En => format!(
                    "{} is the most expensive at {}, {gap:.1}% above {} ({})",
                    hi.label(lang),
                    format_won(hi.trend.latest, lang),
                    lo.label(lang),
                    format_won(lo.trend.latest, lang)
                ),
            });
        }
        if let Some(&fast) = by_change.first() {
            let v = &rows[fast].0;
            insights.push(match lang {
                Lang::Ko => format!(
                    "최근 3개월 상승률은 {}가 {:+.1}%로 가장 높습니다",
                    v.label(lang),
                    v.trend.change_3m_pct
                ),
                Lang::En => format!(
                    "{} moved most over 3 months: {:+.1}%",
                    v.label(lang),
                    v.trend.change_3m_pct
                ),
            });
        }
        for (v, _, _) in &rows {
            insights.push(v.headline(lang));
        }
        let label = |i: &usize| rows[*i].0.label(Lang::Ko);
        let data = json!({
            "property_type": property_type.ko(),
            "deal_type": deal.ko(),
            "all_regions": all,
            "regions": rows.iter().map(|(v, per_pyeong, count)| json!({
                "region": v.region,
                "district": v.label(Lang::Ko),
                "avg_price": v.trend.latest,
                "change_3m_pct": v.trend.change_3m_pct,
                "change_12m_pct": v.trend.change_12m_pct,
                "trend": v.trend.direction.ko(),
                "transactions_12m": v.transactions_12m,
                "jeonse_ratio_pct": v.jeonse_ratio_pct,
                "listing_count": count,
                "listing_avg_price_per_pyeong": per_pyeong,
            })).collect::<Vec<_>>(),
            "ranking": {
                "by_price": by_price.iter().map(label).collect::<Vec<_>>(),
                "by_change_3m": by_change.iter().map(label).collect::<Vec<_>>(),
            },
            "summary": {
                "highest_price": by_price.first().map(label),
                "lowest_price": by_price.last().map(label),
                "price_gap_pct": match (by_price.first(), by_price.last()) {
                    (Some(h), Some(l)) => Some(change_pct(rows[*l].0.trend.latest, rows[*h].0.trend.latest)),
                    _ => None,
                },
                "fastest_rising": by_change.first().map(label),
            },
        });
        Ok(AgentOutput {
            result: seed_result(self.name(), data, insights, f.to_json()),
        })
    }
}

/// Indices of `rows` by `key`, highest first; ties keep the order of mention.
fn ranked<T>(rows: &[T], key: impl Fn(&T) -> f64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by(|&a, &b| key(&rows[b]).total_cmp(&key(&rows[a])).then(a.cmp(&b)));
    idx
}

/// A rating for one district.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rating {
    Consider,
    Caution,
    Hold,
    Avoid,
}

impl Rating {
    fn of(v: &MarketView) -> Self {
        match v.trend.direction {
            Direction::Rising if v.jeonse_ratio_pct >= JEONSE_RATIO_RISK_PCT => Self::Caution,
            Direction::Rising => Self::Consider,
            Direction::Flat => Self::Hold,
            Direction::Falling => Self::Avoid,
        }
    }

    fn code(self) -> &'static str {
        match self {
            Self::Consider => "consider",
            Self::Caution => "caution",
            Self::Hold => "hold",
            Self::Avoid => "avoid",
        }
    }

    fn label(self, lang: Lang) -> &'static str {
        match self {
            Self::Consider => lang.pick("매수 검토", "consider buying"),
            Self::Caution => lang.pick("신중 접근", "proceed with caution"),
            Self::Hold => lang.pick("관망", "wait and see"),
            Self::Avoid => lang.pick("매수 보류", "hold off"),
        }
    }
}

/// seed 002's investment advisor.
#[derive(Debug, Default)]
pub struct InvestmentAdvisor;

#[async_trait::async_trait]
impl Agent for InvestmentAdvisor {
    fn info(&self) -> &AgentInfo {
        declared("investment_advisor")
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let input = input_object(&input)?;
        let f = Filters::resolve(ctx, &input)?;
        let lang = Lang::of(&ctx.query);
        let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
        let regions: Vec<&'static str> = if f.places.is_empty() {
            DATASET.regions.iter().map(|r| r.region.as_str()).collect()
        } else {
            f.places.iter().map(|p| p.region).collect()
        };
        let mut scored: Vec<(f64, MarketView, Rating)> = regions
            .into_iter()
            .filter_map(|r| MarketView::new(Some(r), property_type, DealType::Sale))
            .map(|v| {
                // Momentum now counts most, the year's direction less, and a high 전세가율
                // (thin equity, deposit risk) counts against.
                let t = &v.trend;
                let score = round1(
                    t.change_3m_pct * 2.0 + t.change_12m_pct * 0.5
                        - (v.jeonse_ratio_pct - 60.0).max(0.0) * 0.2,
                );
                let rating = Rating::of(&v);
                (score, v, rating)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));

        let recommendations: Vec<Value> = scored
            .iter()
            .map(|(score, v, rating)| {
                let mut reasons = vec![v.headline(lang), v.jeonse_ratio_insight(lang)];
                if v.transactions_12m < 300 {
                    reasons.push(match lang {
                        Lang::Ko => format!(
                            "거래량이 적어(12개월 {}건) 환금성에 유의",
                            v.transactions_12m
                        ),
                        Lang::En => format!(
                            "Thin trading ({} deals in 12 months): harder to sell",
                            v.transactions_12m
                        ),
                    });
                }
                json!({
                    "region": v.region,
                    "district": v.label(Lang::Ko),
                    "property_type": property_type.ko(),
                    "rating": rating.code(),
                    "rating_label": rating.label(lang),
                    "score": score,
                    "trend": v.trend.direction.ko(),
                    "change_3m_pct": v.trend.change_3m_pct,
                    "change_12m_pct": v.trend.change_12m_pct,
                    "jeonse_ratio_pct": v.jeonse_ratio_pct,
                    "reasons": reasons,
                })
            })
            .collect();

        let picks = value_picks(&f, property_type);
        let mut insights: Vec<String> = scored
            .iter()
            .take(3)
            .map(|(score, v, rating)| match lang {
                Lang::Ko => format!(
                    "{}: {} (점수 {score:.1}, {})",
                    v.label(lang),
                    rating.label(lang),
                    v.trend.direction.ko()
                ),
                Lang::En => format!(
                    "{}: {} (score {score:.1}, {})",
                    v.label(lang),
                    rating.label(lang),
                    v.trend.direction.en()
                ),
            })
            .collect();
        for (l, discount) in picks.iter().take(3) {
            insights.push(match lang {
                Lang::Ko => format!(
                    "{} ({} {}평, {}): 같은 구 평균보다 평당가가 {discount:.1}% 낮습니다",
                    l.name,
                    l.dong,
                    l.size_pyeong,
                    format_won(l.price, lang)
                ),
                Lang::En => format!(
                    "{} ({}, {} pyeong, {}): {discount:.1}% below its district's price per pyeong",
                    l.name,
                    l.dong,
                    l.size_pyeong,
                    format_won(l.price, lang)
                ),
            });
        }
        let data = json!({
            "property_type": property_type.ko(),
            "recommendations": recommendations,
            "value_picks": picks.iter().map(|(l, d)| {
                let mut v = l.to_json();
                v["discount_vs_district_pct"] = json!(d);
                v
            }).collect::<Vec<_>>(),
            "based_on": ctx.team_results.keys().collect::<Vec<_>>(),
            "disclaimer": lang.pick(
                "예시 데이터에 기반한 참고 의견이며 투자 권유가 아닙니다",
                "Indicative opinion on demo data, not investment advice",
            ),
        });
        Ok(AgentOutput {
            result: seed_result(self.name(), data, insights, f.to_json()),
        })
    }
}

/// Listings for sale priced per 평 below their district's listing average, biggest discount
/// first.
fn value_picks(f: &Filters, property_type: PropertyType) -> Vec<(&'static Listing, f64)> {
    let scoped = Filters {
        property_type: Some(property_type),
        deal_type: Some(DealType::Sale),
        ..f.clone()
    };
    let listings = scoped.listings();
    let mut picks: Vec<(&Listing, f64)> = Vec::new();
    for l in &listings {
        let peers: Vec<&Listing> = DATASET
            .listings
            .iter()
            .filter(|p| {
                p.region == l.region
                    && p.property_type == property_type
                    && p.deal_type == DealType::Sale
            })
            .collect();
        if peers.len() < 2 {
            continue;
        }
        let Some(stats) = price_stats(&peers) else {
            continue;
        };
        let discount = -change_pct(stats.avg_price_per_pyeong, l.price_per_pyeong());
        if discount > 0.0 {
            picks.push((l, discount));
        }
    }
    picks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.id.cmp(&b.0.id)));
    picks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(query: &str) -> AgentContext {
        AgentContext {
            query: query.into(),
            ..AgentContext::default()
        }
    }

    #[tokio::test]
    async fn seed_002_query_gets_statistics_and_trend() {
        let out = MarketAnalysis
            .run(
                &ctx("강남역 근처 30평대 아파트 매매 시세 알려줘"),
                Value::Null,
            )
            .await
            .unwrap()
            .result;
        assert_eq!(out["status"], "success");
        assert_eq!(out["agent"], "market_analysis");
        let d = &out["data"];
        assert_eq!(d["region"], "서울특별시 강남구");
        assert_eq!(d["statistics"]["count"], 5);
        assert_eq!(d["statistics"]["min_price"], 1_200_000_000u64);
        assert_eq!(d["statistics"]["max_price"], 1_650_000_000u64);
        assert_eq!(d["trend"], "상승");
        assert_eq!(d["change_3m_pct"], 4.8);
        assert_eq!(d["change_12m_pct"], 8.7);
        assert_eq!(d["market"]["monthly"].as_array().unwrap().len(), 13);
        let first = out["insights"][0].as_str().unwrap();
        assert!(
            first.starts_with("강남구 아파트 매매 평균 14억 5,000만원"),
            "{first}"
        );
    }

    #[tokio::test]
    async fn market_without_region_is_seoul_wide_and_says_what_it_assumed() {
        let out = MarketAnalysis
            .run(&ctx("What is the market doing?"), Value::Null)
            .await
            .unwrap()
            .result;
        let d = &out["data"];
        assert_eq!(d["region"], Value::Null);
        assert_eq!(d["region_label"], "서울 6개 구 평균");
        assert_eq!(
            d["assumed"],
            json!({"property_type": true, "deal_type": true})
        );
        assert!(
            out["insights"][0]
                .as_str()
                .unwrap()
                .starts_with("average of 6 Seoul districts apartment")
        );
        let out = MarketAnalysis
            .run(&ctx("마포 오피스텔 매매"), Value::Null)
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"]["trend"], "하락");
    }

    #[tokio::test]
    async fn compares_named_regions() {
        let out = RegionComparison
            .run(&ctx("강남구랑 마포구 아파트 매매가 비교해줘"), Value::Null)
            .await
            .unwrap()
            .result;
        let d = &out["data"];
        assert_eq!(d["all_regions"], false);
        let regions = d["regions"].as_array().unwrap();
        assert_eq!(regions.len(), 2);
        assert_eq!(regions[0]["district"], "강남구");
        assert_eq!(regions[1]["district"], "마포구");
        assert_eq!(d["ranking"]["by_price"], json!(["강남구", "마포구"]));
        assert_eq!(d["summary"]["price_gap_pct"], 38.1);
        assert_eq!(d["summary"]["fastest_rising"], "강남구");
        let first = out["insights"][0].as_str().unwrap();
        assert!(first.contains("38.1% 높습니다"), "{first}");

        let out = RegionComparison
            .run(&ctx("compare Seocho and Songpa villas"), Value::Null)
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"]["property_type"], "빌라");
        assert_eq!(out["data"]["summary"]["highest_price"], "서초구");

        let out = RegionComparison
            .run(&ctx("어디가 제일 비싸?"), Value::Null)
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"]["all_regions"], true);
        assert_eq!(out["data"]["regions"].as_array().unwrap().len(), 6);
        assert_eq!(out["data"]["summary"]["highest_price"], "용산구");
    }

    #[tokio::test]
    async fn advisor_rates_by_trend_and_jeonse_ratio() {
        let out = InvestmentAdvisor
            .run(&ctx("투자 추천해줘"), Value::Null)
            .await
            .unwrap()
            .result;
        let recs = out["data"]["recommendations"].as_array().unwrap();
        assert_eq!(recs.len(), 6);
        assert_eq!(recs[0]["district"], "강남구");
        assert_eq!(recs[0]["rating"], "consider");
        let mapo = recs.iter().find(|r| r["district"] == "마포구").unwrap();
        assert_eq!(mapo["rating"], "hold");
        let out = InvestmentAdvisor
            .run(&ctx("송파 빌라 투자"), Value::Null)
            .await
            .unwrap()
            .result;
        assert_eq!(out["data"]["recommendations"][0]["rating"], "avoid");
        let out = InvestmentAdvisor
            .run(&ctx("강남 아파트 투자"), Value::Null)
            .await
            .unwrap()
            .result;
        let picks = out["data"]["value_picks"].as_array().unwrap();
        assert!(!picks.is_empty());
        assert!(picks.iter().all(|p| p["region"] == "서울특별시 강남구"));
    }
}
