//! The search conditions of a built-in agent, resolved from its input (the plan's params or a
//! human's edit), then the analysed intent, then the query text, in that order of precedence.

use serde_json::{Map, Value, json};

use super::data::{DATASET, Listing};
use super::{AgentContext, AgentError};
use crate::query::{
    DealType, Lang, PlaceRef, PriceRange, PropertyType, Query, SizeRange, names_seoul,
    parse_amount, parse_places, parse_price_range, parse_property_type, parse_size_range,
};
use chronicle_engine::agents::json_type;

/// A price in a parameter below this is taken to be in 만원, because LLM intents write
/// `{"min": 100000}` for 10억 (the original prompt's example) and no home costs less than
/// 100만원.
const PRICE_PARAM_MANWON_BELOW: u64 = 1_000_000;

/// An agent's input as an object: `null` is an empty input, anything else but an object is a
/// caller's mistake that retrying cannot fix.
pub(crate) fn input_object(input: &Value) -> Result<Map<String, Value>, AgentError> {
    match input {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map.clone()),
        other => Err(AgentError::fatal(format!(
            "agent input must be a JSON object, got {}",
            json_type(other)
        ))),
    }
}

/// Where a parameter was found. Input parameters are checked strictly (a human or a plan wrote
/// them and can fix them); the intent's entities leniently (a model wrote them, and a
/// malformed one should not fail the run when the query still says what is meant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Input,
    Intent,
}

/// The first non-null value of `key`: in the input, in `intent.entities`, then at the intent's
/// top level (the original flat intent puts `region` there).
fn lookup<'a>(
    input: &'a Map<String, Value>,
    ctx: &'a AgentContext,
    keys: &[&str],
) -> Option<(&'a Value, Origin)> {
    let present = |v: Option<&'a Value>| v.filter(|v| !v.is_null());
    for key in keys {
        if let Some(v) = present(input.get(*key)) {
            return Some((v, Origin::Input));
        }
    }
    for key in keys {
        if let Some(v) = present(ctx.intent.get("entities").and_then(|e| e.get(*key)))
            .or_else(|| present(ctx.intent.get(*key)))
        {
            return Some((v, Origin::Intent));
        }
    }
    None
}

fn bad_param(key: &str, want: &str, got: &Value) -> AgentError {
    AgentError::fatal(format!(
        "input field `{key}` must be {want}, got {}",
        json_type(got)
    ))
}

/// The resolved conditions.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Filters {
    /// Districts in order of mention; the first is the primary one.
    pub places: Vec<PlaceRef>,
    /// Region names given that the dataset does not cover.
    pub unknown_regions: Vec<String>,
    pub property_type: Option<PropertyType>,
    pub deal_type: Option<DealType>,
    pub size_range: Option<SizeRange>,
    pub price_range: Option<PriceRange>,
}

impl Filters {
    pub(crate) fn resolve(
        ctx: &AgentContext,
        input: &Map<String, Value>,
    ) -> Result<Self, AgentError> {
        let q = Query::parse(&ctx.query);
        let mut f = Filters::default();
        f.resolve_places(ctx, input, &q)?;
        f.property_type =
            typed(input, ctx, "property_type", parse_property_type)?.or(q.property_type);
        f.deal_type = typed(input, ctx, "deal_type", DealType::from_param)?.or(q.deal_type);
        f.size_range = range_param(
            input,
            ctx,
            "size_range",
            "{min, max} in 평 or text like \"30평대\"",
            size_param,
            q.size_range,
        )?;
        f.price_range = range_param(
            input,
            ctx,
            "price_range",
            "{min, max} in won or text like \"10억 이하\"",
            price_param,
            q.price_range,
        )?;
        Ok(f)
    }

    /// The districts asked about: those a person's feedback names ("서초구로 해줘" when
    /// approving), else the input's or the intent's `regions`/`region`, else the query's.
    /// Districts the dataset does not cover, and names that are no Seoul district,
    /// go to `unknown_regions`; `서울`/`서울특별시` means all of Seoul.
    fn resolve_places(
        &mut self,
        ctx: &AgentContext,
        input: &Map<String, Value>,
        q: &Query,
    ) -> Result<(), AgentError> {
        let told = ctx.turn.feedback.as_deref().map(parse_places);
        if let Some(places) = told.filter(|p| !p.is_empty()) {
            places.into_iter().for_each(|p| self.add_place(p));
            return Ok(());
        }
        let named = match lookup(input, ctx, &["regions", "region"]) {
            Some((v, origin)) => match region_names(v) {
                Some(names) => Some(names),
                None if origin == Origin::Input => {
                    return Err(bad_param("region", "a string or a list of strings", v));
                }
                None => None,
            },
            None => None,
        };
        match named {
            Some(names) => {
                for name in names {
                    let found = parse_places(name);
                    if found.is_empty() && !names_seoul(name) {
                        self.unknown_regions.push(name.to_owned());
                    }
                    found.into_iter().for_each(|p| self.add_place(p));
                }
            }
            None => q.places.iter().cloned().for_each(|p| self.add_place(p)),
        }
        // The query may name the station or dong that a bare district parameter leaves out
        // (`강남역 근처` with `region: 서울특별시 강남구`).
        for qp in &q.places {
            if let Some(p) = self.places.iter_mut().find(|p| p.region == qp.region) {
                p.dong = p.dong.or(qp.dong);
                p.station = p.station.or(qp.station);
            }
        }
        Ok(())
    }

    /// A district the dataset covers becomes a place to search, any other an unknown region.
    fn add_place(&mut self, p: PlaceRef) {
        if DATASET.region(p.region).is_none() {
            if !self.unknown_regions.iter().any(|r| r == p.region) {
                self.unknown_regions.push(p.region.to_owned());
            }
        } else if !self.places.iter().any(|q| q.region == p.region) {
            self.places.push(p);
        }
    }

    /// The primary region, `서울특별시 강남구`.
    pub(crate) fn region(&self) -> Option<&'static str> {
        self.places.first().map(|p| p.region)
    }

    pub(crate) fn station(&self) -> Option<&'static str> {
        self.places.iter().find_map(|p| p.station)
    }

    /// Whether a region was asked for that the dataset does not know, so nothing can match.
    pub(crate) fn region_unknown(&self) -> bool {
        self.places.is_empty() && !self.unknown_regions.is_empty()
    }

    pub(crate) fn matches(&self, l: &Listing) -> bool {
        let place_ok = self.places.is_empty()
            || self
                .places
                .iter()
                .any(|p| p.region == l.region && p.dong.is_none_or(|d| d == l.dong));
        !self.region_unknown()
            && place_ok
            && self.property_type.is_none_or(|t| t == l.property_type)
            && self.deal_type.is_none_or(|d| d == l.deal_type)
            && self.size_range.is_none_or(|r| r.contains(l.size_pyeong))
            && self.price_range.is_none_or(|r| r.contains(l.price))
    }

    /// The matching listings: those near a named station first (closest first), then the
    /// rest in dataset order, so the answer to `강남역 근처` starts at 강남역.
    pub(crate) fn listings(&self) -> Vec<&'static Listing> {
        let mut out: Vec<&Listing> = DATASET
            .listings
            .iter()
            .filter(|l| self.matches(l))
            .collect();
        if let Some(station) = self.station() {
            out.sort_by_key(|l| {
                let near = l.near_station == station;
                (!near, if near { l.walk_minutes } else { 0 })
            });
        }
        out
    }

    /// The conditions as reported in results (`params`).
    pub(crate) fn to_json(&self) -> Value {
        let range = |min: Option<u64>, max: Option<u64>| json!({"min": min, "max": max});
        let mut m = Map::new();
        m.insert("region".into(), json!(self.region()));
        if self.places.len() > 1 {
            m.insert(
                "regions".into(),
                json!(self.places.iter().map(|p| p.region).collect::<Vec<_>>()),
            );
        }
        if let Some(d) = self.places.iter().find_map(|p| p.dong) {
            m.insert("dong".into(), json!(d));
        }
        if let Some(s) = self.station() {
            m.insert("near_station".into(), json!(s));
        }
        if !self.unknown_regions.is_empty() {
            m.insert("unknown_regions".into(), json!(self.unknown_regions));
        }
        m.insert(
            "property_type".into(),
            json!(self.property_type.map(PropertyType::ko)),
        );
        m.insert("deal_type".into(), json!(self.deal_type.map(DealType::ko)));
        m.insert(
            "size_range".into(),
            self.size_range.map_or(Value::Null, |r| {
                range(r.min.map(u64::from), r.max.map(u64::from))
            }),
        );
        if let Some(r) = self.price_range {
            m.insert("price_range".into(), range(r.min, r.max));
        }
        Value::Object(m)
    }

    /// `강남구 아파트 매매 30~39평` / `Gangnam-gu apartment sale 30-39 pyeong`, for insights.
    pub(crate) fn describe(&self, lang: Lang) -> String {
        let mut parts: Vec<String> = Vec::new();
        match self.places.as_slice() {
            [] if self.unknown_regions.is_empty() => {
                parts.push(lang.pick("서울 전체", "all of Seoul").to_owned());
            }
            [] => parts.push(self.unknown_regions.join(", ")),
            places => {
                let names: Vec<String> = places
                    .iter()
                    .map(|p| {
                        let district = DATASET.district(p.region);
                        match (p.dong, lang) {
                            (Some(d), Lang::Ko) => format!("{district} {d}"),
                            (Some(d), Lang::En) => format!("{district} ({d})"),
                            (None, _) => district.to_owned(),
                        }
                    })
                    .collect();
                parts.push(names.join(", "));
            }
        }
        if let Some(t) = self.property_type {
            parts.push(lang.pick(t.ko(), t.en()).to_owned());
        }
        if let Some(d) = self.deal_type {
            parts.push(lang.pick(d.ko(), d.en()).to_owned());
        }
        if let Some(r) = self.size_range {
            let unit = lang.pick("평", " pyeong");
            parts.push(match (r.min, r.max) {
                (Some(a), Some(b)) if b == a + 1 => format!("{a}{unit}"),
                (Some(a), Some(b)) => format!("{a}~{}{unit}", b - 1),
                (Some(a), None) => format!("{a}{unit}+"),
                (None, Some(b)) => format!("~{}{unit}", b - 1),
                (None, None) => String::new(),
            });
        }
        parts.retain(|p| !p.is_empty());
        parts.join(" ")
    }
}

fn region_names(v: &Value) -> Option<Vec<&str>> {
    match v {
        Value::String(s) => Some(vec![s.as_str()]),
        Value::Array(items) => items.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn typed<T>(
    input: &Map<String, Value>,
    ctx: &AgentContext,
    key: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Option<T>, AgentError> {
    let Some((v, origin)) = lookup(input, ctx, &[key]) else {
        return Ok(None);
    };
    let parsed = v.as_str().and_then(parse);
    if parsed.is_none() && origin == Origin::Input {
        let want = match key {
            "property_type" => {
                "one of 아파트/오피스텔/빌라/단독주택 (apartment/officetel/villa/detached house)"
            }
            _ => "one of 매매/전세/월세 (sale/jeonse/monthly rent)",
        };
        return Err(AgentError::fatal(format!(
            "input field `{key}` must be {want}, got {v}"
        )));
    }
    Ok(parsed)
}

/// A range parameter read by `parse`: the input's or the intent's, else the query's. One in the
/// input that does not read is refused (`want` says what reads); one in the intent falls back to
/// the query's.
fn range_param<R>(
    input: &Map<String, Value>,
    ctx: &AgentContext,
    key: &str,
    want: &str,
    parse: fn(&Value) -> Option<R>,
    from_query: Option<R>,
) -> Result<Option<R>, AgentError> {
    match lookup(input, ctx, &[key]) {
        Some((v, origin)) => match parse(v) {
            Some(r) => Ok(Some(r)),
            None if origin == Origin::Input => Err(bad_param(key, want, v)),
            None => Ok(from_query),
        },
        None => Ok(from_query),
    }
}

fn size_param(v: &Value) -> Option<SizeRange> {
    match v {
        Value::String(s) => parse_size_range(s),
        Value::Number(n) => {
            let n = u32::try_from(n.as_u64()?).ok()?;
            Some(SizeRange {
                min: Some(n),
                max: Some(n + 1),
            })
        }
        Value::Object(m) => {
            let bound = |key: &str| -> Option<Option<u32>> {
                match m.get(key) {
                    None | Some(Value::Null) => Some(None),
                    Some(Value::Number(n)) => {
                        let x = n.as_f64()?;
                        (x >= 0.0 && x < f64::from(u32::MAX)).then(|| Some(x.floor() as u32))
                    }
                    Some(_) => None,
                }
            };
            let (min, max) = match (bound("min")?, bound("max")?) {
                // `{min: 32, max: 32}` (as a model may write `32평`) is that one size: the
                // range is half-open, so taken literally it would hold nothing.
                (Some(a), Some(b)) if a == b => (Some(a), Some(a.saturating_add(1))),
                bounds => bounds,
            };
            (min.is_some() || max.is_some()).then_some(SizeRange { min, max })
        }
        _ => None,
    }
}

fn price_param(v: &Value) -> Option<PriceRange> {
    let amount = |v: &Value| -> Option<Option<u64>> {
        match v {
            Value::Null => Some(None),
            Value::Number(n) => {
                let x = n.as_u64()?;
                Some(Some(if x < PRICE_PARAM_MANWON_BELOW {
                    x.checked_mul(10_000)?
                } else {
                    x
                }))
            }
            Value::String(s) => Some(Some(parse_amount(s)?)),
            _ => None,
        }
    };
    match v {
        Value::String(s) => parse_price_range(s),
        Value::Object(m) => {
            let min = amount(m.get("min").unwrap_or(&Value::Null))?;
            let max = amount(m.get("max").unwrap_or(&Value::Null))?;
            (min.is_some() || max.is_some()).then_some(PriceRange { min, max })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(query: &str, intent: Value) -> AgentContext {
        AgentContext {
            turn: Default::default(),
            query: query.into(),
            intent,
            ..AgentContext::default()
        }
    }

    #[test]
    fn query_only() {
        let c = ctx("강남역 근처 30평대 아파트 매매 시세 알려줘", Value::Null);
        let f = Filters::resolve(&c, &Map::new()).unwrap();
        assert_eq!(f.region(), Some("서울특별시 강남구"));
        assert_eq!(f.station(), Some("강남역"));
        assert_eq!(f.property_type, Some(PropertyType::Apartment));
        assert_eq!(f.deal_type, Some(DealType::Sale));
        assert_eq!(
            f.size_range,
            Some(SizeRange {
                min: Some(30),
                max: Some(40)
            })
        );
        assert_eq!(f.describe(Lang::Ko), "강남구 아파트 매매 30~39평");
        let names: Vec<&str> = f.listings().iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names[0], "래미안 강남아파트", "the closest to 강남역 first");
        assert_eq!(names.len(), 5);
    }

    #[test]
    fn input_beats_intent_beats_query() {
        let c = ctx(
            "강남 아파트",
            json!({"region": "Mapo", "entities": {"property_type": "오피스텔", "deal_type": "월세"}}),
        );
        let input = json!({"deal_type": "sale", "size_range": {"min": 30, "max": 40}});
        let f = Filters::resolve(&c, input.as_object().unwrap()).unwrap();
        assert_eq!(f.region(), Some("서울특별시 마포구"));
        assert_eq!(f.property_type, Some(PropertyType::Officetel));
        assert_eq!(f.deal_type, Some(DealType::Sale));
        assert_eq!(
            f.size_range,
            Some(SizeRange {
                min: Some(30),
                max: Some(40)
            })
        );
    }

    #[test]
    fn bad_input_is_a_fatal_error_naming_the_field() {
        let c = ctx("강남 아파트", Value::Null);
        let err = Filters::resolve(&c, json!({"region": 5}).as_object().unwrap()).unwrap_err();
        assert_eq!(
            err,
            AgentError::fatal(
                "input field `region` must be a string or a list of strings, got a number"
            )
        );
        let err =
            Filters::resolve(&c, json!({"deal_type": "barter"}).as_object().unwrap()).unwrap_err();
        assert!(
            !err.retryable && err.message.contains("`deal_type`") && err.message.contains("barter")
        );
        let err =
            Filters::resolve(&c, json!({"size_range": [1]}).as_object().unwrap()).unwrap_err();
        assert!(
            err.message.starts_with("input field `size_range` must be"),
            "{}",
            err.message
        );
        assert_eq!(
            input_object(&json!("x")).unwrap_err(),
            AgentError::fatal("agent input must be a JSON object, got a string")
        );
        // A malformed intent entity is ignored and the query decides.
        let c = ctx(
            "강남 아파트",
            json!({"entities": {"region": 5, "property_type": 7}}),
        );
        let f = Filters::resolve(&c, &Map::new()).unwrap();
        assert_eq!(
            (f.region(), f.property_type),
            (Some("서울특별시 강남구"), Some(PropertyType::Apartment))
        );
    }

    #[test]
    fn unknown_region_matches_nothing() {
        let c = ctx(
            "아파트",
            json!({"entities": {"region": "부산광역시 해운대구"}}),
        );
        let f = Filters::resolve(&c, &Map::new()).unwrap();
        assert!(f.region_unknown());
        assert!(f.listings().is_empty());
        assert_eq!(
            f.to_json()["unknown_regions"],
            json!(["부산광역시 해운대구"])
        );
    }

    #[test]
    fn price_params_in_manwon_and_won() {
        let c = ctx("", Value::Null);
        let input = json!({"price_range": {"min": 100000, "max": "15억"}});
        let f = Filters::resolve(&c, input.as_object().unwrap()).unwrap();
        assert_eq!(
            f.price_range,
            Some(PriceRange {
                min: Some(1_000_000_000),
                max: Some(1_500_000_000)
            })
        );
        let c = ctx("전세금 3억을 10억으로 올려달래", Value::Null);
        assert_eq!(Filters::resolve(&c, &Map::new()).unwrap().price_range, None);
    }
}
