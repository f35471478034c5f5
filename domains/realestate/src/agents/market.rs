//! The analysis agents over the bundled dataset: `market_analysis` (statistics and
//! trend), `region_comparison` (two or more districts side by side) and `investment_advisor`
//! (ratings from trend, 전세가율 and prices).

use serde_json::{Value, json};

use super::data::{
    DATASET, DealType, Direction, Listing, PriceStats, PropertyType, Trend, change_pct, pct,
    price_stats, round_manwon, round1, trend,
};
use super::filters::Filters;
use super::{AgentError, Asked, DatasetAgent, Reply};
use crate::query::{Lang, PlaceRef, format_won};

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
        let unknown = f.unknown_regions.join(", ");
        let msg = match lang {
            Lang::Ko => format!("{unknown}: 데이터셋에 없는 지역입니다"),
            Lang::En => format!("{unknown}: not covered by the dataset"),
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
    let insights = market_insights(&scoped, view.as_ref(), stats.as_ref(), &listings, lang);
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

/// The market's headline, the matching listings' statistics, how they compare with the
/// district, the 전세가율, the deals of the year and the listings near a named station. The
/// first insight is never missing.
fn market_insights(
    scoped: &Filters,
    view: Option<&MarketView>,
    stats: Option<&PriceStats>,
    listings: &[&Listing],
    lang: Lang,
) -> Vec<String> {
    let won = |x: u64| format_won(x, lang);
    let what = scoped.describe(lang);
    let mut insights: Vec<String> = view.map(|v| v.headline(lang)).into_iter().collect();
    insights.push(match (stats, lang) {
        (Some(s), Lang::Ko) => format!(
            "{what} 매물 {}건: 평균 {}, 최저 {} ~ 최고 {}, 평당 {}",
            s.count,
            won(round_manwon(s.avg_price)),
            won(s.min_price),
            won(s.max_price),
            won(round_manwon(s.avg_price_per_pyeong))
        ),
        (Some(s), Lang::En) => format!(
            "{} listings for {what}: average {}, from {} to {}, {} per pyeong",
            s.count,
            won(round_manwon(s.avg_price)),
            won(s.min_price),
            won(s.max_price),
            won(round_manwon(s.avg_price_per_pyeong))
        ),
        (None, Lang::Ko) => format!("{what} 조건의 매물이 데이터셋에 없습니다"),
        (None, Lang::En) => format!("No listings in the dataset for {what}"),
    });
    if let (Some(v), Some(s)) = (view, stats)
        && v.deal == DealType::Sale
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
    if let Some(v) = view {
        insights.push(v.jeonse_ratio_insight(lang));
        insights.push(match lang {
            Lang::Ko => format!("최근 12개월 거래 {}건", v.transactions_12m),
            Lang::En => format!("{} deals in the last 12 months", v.transactions_12m),
        });
    }
    if let Some(station) = scoped.station() {
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
    insights
}

/// The market analysis of a district: statistics and trend.
#[derive(Debug, Default)]
pub struct MarketAnalysis;

impl DatasetAgent for MarketAnalysis {
    const NAME: &'static str = "market_analysis";

    async fn answer(&self, Asked { f, lang, .. }: Asked<'_>) -> Result<Value, AgentError> {
        let (data, insights) = analyze_market(&f, lang);
        let reply = Reply {
            summary: format!("{}.", insights[0]),
            data,
            insights,
        };
        Ok(reply.into_result(Self::NAME, &f, lang))
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

/// The comparison of two or more districts: prices, trends, 전세가율.
#[derive(Debug, Default)]
pub struct RegionComparison;

/// One district of a comparison: its market, its listings' price per 평, how many listings.
type Compared = (MarketView, Option<u64>, usize);

impl DatasetAgent for RegionComparison {
    const NAME: &'static str = "region_comparison";

    async fn answer(&self, Asked { f, lang, .. }: Asked<'_>) -> Result<Value, AgentError> {
        let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
        let deal = f.deal_type.unwrap_or(DealType::Sale);
        let (regions, all) = comparison_regions(&f);
        let rows = compared(&f, &regions, property_type, deal);
        let by_price = ranked(&rows, |(v, _, _)| v.trend.latest as f64);
        let by_change = ranked(&rows, |(v, _, _)| v.trend.change_3m_pct);
        let gap = match (by_price.first(), by_price.last()) {
            (Some(&hi), Some(&lo)) if hi != lo => Some((&rows[hi].0, &rows[lo].0)),
            _ => None,
        };
        let mut insights = Vec::new();
        if all {
            insights.push(
                lang.pick(
                    "비교할 지역이 두 곳 미만이라 데이터셋의 모든 구를 비교합니다",
                    "Fewer than two districts named, so every district in the dataset is compared",
                )
                .to_owned(),
            );
        }
        insights.extend(gap.map(|(hi, lo)| gap_insight(hi, lo, lang)));
        if let Some(&fast) = by_change.first() {
            insights.push(fastest_insight(&rows[fast].0, lang));
        }
        insights.extend(rows.iter().map(|(v, _, _)| v.headline(lang)));
        let summary = match gap {
            Some((hi, lo)) => format!("{}.", gap_insight(hi, lo, lang)),
            None => lang
                .pick(
                    "비교할 지역의 시세가 없습니다.",
                    "No district had market data to compare.",
                )
                .to_owned(),
        };
        let reply = Reply {
            summary,
            data: comparison_json(&rows, property_type, deal, all, (&by_price, &by_change)),
            insights,
        };
        Ok(reply.into_result(Self::NAME, &f, lang))
    }
}

/// Each district's market and listings for one property type and deal type.
fn compared(
    f: &Filters,
    regions: &[&'static str],
    property_type: PropertyType,
    deal: DealType,
) -> Vec<Compared> {
    regions
        .iter()
        .filter_map(|&region| {
            let view = MarketView::new(Some(region), property_type, deal)?;
            let scoped = Filters {
                places: vec![PlaceRef {
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
            Some((view, per_pyeong, listings.len()))
        })
        .collect()
}

/// `서초구가 평균 19억원으로 가장 높고 강남구(14억 5,000만원)보다 31.0% 높습니다`.
fn gap_insight(hi: &MarketView, lo: &MarketView, lang: Lang) -> String {
    let gap = change_pct(lo.trend.latest, hi.trend.latest);
    let (hi_name, hi_avg) = (hi.label(lang), format_won(hi.trend.latest, lang));
    let (lo_name, lo_avg) = (lo.label(lang), format_won(lo.trend.latest, lang));
    match lang {
        Lang::Ko => format!(
            "{hi_name}가 평균 {hi_avg}으로 가장 높고 {lo_name}({lo_avg})보다 {gap:.1}% 높습니다"
        ),
        Lang::En => format!(
            "{hi_name} is the most expensive at {hi_avg}, {gap:.1}% above {lo_name} ({lo_avg})"
        ),
    }
}

fn fastest_insight(v: &MarketView, lang: Lang) -> String {
    match lang {
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
    }
}

/// The comparison's `data`: each district's figures, the rankings and a summary.
fn comparison_json(
    rows: &[Compared],
    property_type: PropertyType,
    deal: DealType,
    all: bool,
    (by_price, by_change): (&[usize], &[usize]),
) -> Value {
    let label = |i: &usize| rows[*i].0.label(Lang::Ko);
    let price_gap_pct = match (by_price.first(), by_price.last()) {
        (Some(h), Some(l)) => Some(change_pct(rows[*l].0.trend.latest, rows[*h].0.trend.latest)),
        _ => None,
    };
    let regions: Vec<Value> = rows
        .iter()
        .map(|(v, per_pyeong, count)| {
            json!({
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
            })
        })
        .collect();
    json!({
        "property_type": property_type.ko(),
        "deal_type": deal.ko(),
        "all_regions": all,
        "regions": regions,
        "ranking": {
            "by_price": by_price.iter().map(label).collect::<Vec<_>>(),
            "by_change_3m": by_change.iter().map(label).collect::<Vec<_>>(),
        },
        "summary": {
            "highest_price": by_price.first().map(label),
            "lowest_price": by_price.last().map(label),
            "price_gap_pct": price_gap_pct,
            "fastest_rising": by_change.first().map(label),
        },
    })
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

/// The investment advisor: a rating per district from its trend, 전세가율 and prices, and the
/// listings priced below their district.
#[derive(Debug, Default)]
pub struct InvestmentAdvisor;

/// One district's score, market and rating.
type Scored = (f64, MarketView, Rating);

impl DatasetAgent for InvestmentAdvisor {
    const NAME: &'static str = "investment_advisor";

    async fn answer(&self, Asked { ctx, f, lang, .. }: Asked<'_>) -> Result<Value, AgentError> {
        let property_type = f.property_type.unwrap_or(PropertyType::Apartment);
        let scored = scored_regions(&f, property_type);
        let picks = value_picks(&f, property_type);
        let mut insights: Vec<String> = scored
            .iter()
            .take(3)
            .map(|s| rating_line(s, lang))
            .collect();
        insights.extend(picks.iter().take(3).map(|p| pick_line(p, lang)));
        let summary = match scored.first() {
            Some(best) => match lang {
                Lang::Ko => format!("가장 점수가 높은 곳은 {}.", rating_line(best, lang)),
                Lang::En => format!("The best-scoring district is {}.", rating_line(best, lang)),
            },
            None => lang
                .pick(
                    "평가할 지역의 시세가 없습니다.",
                    "No district had market data to rate.",
                )
                .to_owned(),
        };
        let data = json!({
            "property_type": property_type.ko(),
            "recommendations": scored.iter().map(|s| recommendation_json(s, property_type, lang)).collect::<Vec<_>>(),
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
        let reply = Reply {
            summary,
            data,
            insights,
        };
        Ok(reply.into_result(Self::NAME, &f, lang))
    }
}

/// The districts asked about (all when none), best score first. Momentum now counts most, the
/// year's direction less, and a high 전세가율 (thin equity, deposit risk) counts against.
fn scored_regions(f: &Filters, property_type: PropertyType) -> Vec<Scored> {
    let regions: Vec<&'static str> = if f.places.is_empty() {
        DATASET.regions.iter().map(|r| r.region.as_str()).collect()
    } else {
        f.places.iter().map(|p| p.region).collect()
    };
    let mut scored: Vec<Scored> = regions
        .into_iter()
        .filter_map(|r| MarketView::new(Some(r), property_type, DealType::Sale))
        .map(|v| {
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
    scored
}

/// `강남구: 매수 검토 (점수 12.0, 상승)`.
fn rating_line((score, v, rating): &Scored, lang: Lang) -> String {
    let direction = lang.pick(v.trend.direction.ko(), v.trend.direction.en());
    let score_word = lang.pick("점수", "score");
    format!(
        "{}: {} ({score_word} {score:.1}, {direction})",
        v.label(lang),
        rating.label(lang)
    )
}

/// `역삼 자이 (역삼동 25평, 9억 8,000만원): 같은 구 평균보다 평당가가 7.2% 낮습니다`.
fn pick_line((l, discount): &(&'static Listing, f64), lang: Lang) -> String {
    let price = format_won(l.price, lang);
    match lang {
        Lang::Ko => format!(
            "{} ({} {}평, {price}): 같은 구 평균보다 평당가가 {discount:.1}% 낮습니다",
            l.name, l.dong, l.size_pyeong
        ),
        Lang::En => format!(
            "{} ({}, {} pyeong, {price}): {discount:.1}% below its district's price per pyeong",
            l.name, l.dong, l.size_pyeong
        ),
    }
}

fn recommendation_json(
    (score, v, rating): &Scored,
    property_type: PropertyType,
    lang: Lang,
) -> Value {
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
    use crate::agents::Agent;
    use crate::agents::testing::ctx;

    #[tokio::test]
    async fn gangnam_station_query_gets_statistics_and_trend() {
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
