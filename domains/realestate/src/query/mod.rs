//! The one query parser of the domain, Korean and English: a query becomes a [`Query`] of
//! typed entities — places, property and deal type, size and price range, amounts of money, a
//! request to change a deposit or rent, dates, a lease term, the language. The planner writes
//! the intent's `entities` from it ([`Query::entities`]); the agents resolve their conditions
//! from it (`agents/filters.rs`). Everything here is a pure function of the text, so an answer
//! depends only on its input.
//!
//! The domain used to parse queries twice, in the planner's rules and in the agents, and the
//! two disagreed. Run over the queries of every test and a corpus of new ones, they differed
//! on these, decided as follows:
//!
//! | text | planner said | agents said | now |
//! | --- | --- | --- | --- |
//! | `5억 아래` | ≤ 5억 | no range | ≤ 5억 |
//! | `5억부터 7억까지`, `5억에서 7억 사이/까지` | 5억..=7억 | `5억부터`: ≥ 5억; else none | 5억..=7억 |
//! | `5억부터` alone | no range | ≥ 5억 | ≥ 5억 |
//! | `15억 미만`, `5억 초과` | ≤ 15억, ≥ 5억 | < 15억, > 5억 | < 15억, > 5억 |
//! | `from 500 million to 1 billion won` | no range | change request | a range; a change only with a word of change (`raise`, `올려`) or `으로`/`→` |
//! | `deposit 500 million and rent 1 million won` | no range | a range (`A and B`) | no range: `and` needs `between` |
//! | `32평`, `25~35평` | `{32, 32}`, `{25, 35}`, which the agents read as empty or missing 35평 | `32..33`, `25..36` | half-open as `30평대` = `{30, 40}`: `{32, 33}`, `{25, 36}` |
//! | `30평 이상`, `40평 이하`, `40평 미만` | exactly 30, 40, 40 | `30..`, `..41`, `..40` | the agents' |
//! | `30 평균`, `30s pyeong` | none, none | 30평, 30평대 | none, 30평대 |
//! | `1조 2천억`, `1천5백만원`, `3억 5000`, `99999999999조` | 1조, 500만, 3억, `u64::MAX` | 1.2조, 1,500만, 3.5억, none | the agents' |
//! | `5만명`, `3억년`, `500k won`, `2 bn krw` | 5만, 3억, none, none | none, none, 50만, 20억 | the agents' |
//! | `3 억`, `10억 원` (spaced unit and 원) | 3억, `10억 원` | none, `10억` | 3억, `10억 원` |
//! | 23 districts outside the dataset (`관악구`, `여의도`, `Itaewon`), `청담`, `도곡` | known | unknown, so all of Seoul was searched | known; agents say the dataset does not cover them |
//! | `대치`, `논현동`, `망원`, stations | unknown | known | known |
//! | `삼성동`, `평창동` | 강남구 and 성동구, 종로구 and 도봉구 (`성동`, `창동` inside) | one district | one district: a name inside a longer name counts once |
//! | `mapology`, `household`, `village`, `aptitude` | 마포구, 단독주택, 빌라, 아파트 (English prefixes) | nothing | nothing: English terms match words and their endings (`listings`, `rental`) |
//! | `서울`, `Seoul` | region `서울특별시`, which the agents took for an unknown region | nothing | region `서울특별시`, all of Seoul |
//! | `단독주택`, `detached house` | 단독주택, which the agents refused (a failed run) | nothing | 단독주택, of which the dataset has none |
//! | `house` alone | 단독주택 | nothing | nothing: "house prices" are home prices |
//! | `반전세` | 전세 (the `전세` inside) | 월세 | 월세 |
//! | `구매`, `구입` | nothing | 매매 | 매매 |
//! | `ㅋㅋ apartment` | Korean | English | Korean |

mod amounts;
mod change;
mod dates;
mod kinds;
mod parties;
mod places;
mod ranges;
mod terms;

use serde_json::{Map, Value, json};

pub(crate) use amounts::{Amount, format_won, group_thousands, parse_amount, parse_amounts};
pub(crate) use change::{ChangeRequest, Subject, amount_subjects, detect_change_request};
pub(crate) use dates::{Date, parse_dates, parse_term_months};
pub(crate) use kinds::{
    DealType, PropertyType, only_deal_type, only_property_type, parse_deal_type,
    parse_property_type,
};
pub(crate) use parties::party_name;
pub(crate) use places::{
    PlaceRef, SEOUL, canonical_region, district_name, english_region, names_seoul, parse_places,
};
pub(crate) use ranges::{PriceRange, SizeRange, parse_price_range, parse_size_range};
pub(crate) use terms::{Lang, contains_any, contains_term, find_term};

/// Words that ask for a written report of findings, not a contract (`보고서 작성`).
pub(crate) const REPORT_TERMS: &[&str] = &[
    "보고서",
    "리포트",
    "레포트",
    "report",
    "write-up",
    "write up",
];

/// The search's entities, in the order people say them: where, what, which deal, how big, how
/// much (the listing conditions), then the amounts.
pub(crate) const SEARCH_KEYS: [&str; 7] = [
    "region",
    "regions",
    "property_type",
    "deal_type",
    "size_range",
    "price_range",
    "amounts",
];

/// The listing conditions: [`SEARCH_KEYS`] without the amounts.
pub(crate) const CONDITION_KEYS: &[&str] = SEARCH_KEYS.split_at(SEARCH_KEYS.len() - 1).0;

/// Everything the domain reads from a query.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Query {
    pub lang: Lang,
    /// Districts in order of mention, one each, with a dong or station when named.
    pub places: Vec<PlaceRef>,
    /// Seoul itself is named (`서울 아파트`): all of its districts.
    pub seoul: bool,
    pub property_type: Option<PropertyType>,
    pub deal_type: Option<DealType>,
    pub size_range: Option<SizeRange>,
    /// A budget; never the amounts of a change request.
    pub price_range: Option<PriceRange>,
    pub amounts: Vec<Amount>,
    pub change: Option<ChangeRequest>,
    pub dates: Vec<Date>,
    pub term_months: Option<u32>,
}

impl Query {
    pub(crate) fn parse(text: &str) -> Query {
        let change = detect_change_request(text);
        let price_range = match change {
            Some(_) => None,
            None => parse_price_range(text),
        };
        Query {
            lang: Lang::of(text),
            places: parse_places(text),
            seoul: names_seoul(text),
            property_type: parse_property_type(text),
            deal_type: parse_deal_type(text),
            size_range: parse_size_range(text),
            price_range,
            amounts: parse_amounts(text),
            change,
            dates: parse_dates(text),
            term_months: parse_term_months(text),
        }
    }

    /// The primary region: the first district named, else Seoul when named.
    pub(crate) fn region(&self) -> Option<&'static str> {
        self.places
            .first()
            .map(|p| p.region)
            .or(self.seoul.then_some(SEOUL))
    }

    /// The intent's `entities`: `language` always, the rest only when the query names it —
    /// `region`, `regions` (when several), `property_type`, `deal_type`, `size_range`
    /// (half-open, in 평), `price_range` (won, inclusive), `amounts` (won), `change`
    /// (`{subject, old, new}`), `dates` (ISO), `term_months`.
    pub(crate) fn entities(&self) -> Map<String, Value> {
        let mut e = Map::new();
        e.insert("language".into(), json!(self.lang.code()));
        if let Some(r) = self.region() {
            e.insert("region".into(), json!(r));
        }
        if self.places.len() > 1 {
            let regions: Vec<&str> = self.places.iter().map(|p| p.region).collect();
            e.insert("regions".into(), json!(regions));
        }
        if let Some(t) = self.property_type {
            e.insert("property_type".into(), json!(t.ko()));
        }
        if let Some(d) = self.deal_type {
            e.insert("deal_type".into(), json!(d.ko()));
        }
        if let Some(r) = self.size_range {
            e.insert("size_range".into(), r.to_json());
        }
        if let Some(r) = self.price_range {
            e.insert("price_range".into(), r.to_json());
        }
        if !self.amounts.is_empty() {
            let won: Vec<u64> = self.amounts.iter().map(|a| a.won).collect();
            e.insert("amounts".into(), json!(won));
        }
        if let Some(c) = &self.change {
            e.insert("change".into(), c.to_json());
        }
        if !self.dates.is_empty() {
            let dates: Vec<String> = self.dates.iter().map(|d| d.iso()).collect();
            e.insert("dates".into(), json!(dates));
        }
        if let Some(m) = self.term_months {
            e.insert("term_months".into(), json!(m));
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entities(text: &str) -> Value {
        Value::Object(Query::parse(text).entities())
    }

    #[test]
    fn entities_of_an_english_query() {
        assert_eq!(
            entities("30s pyeong apartments for sale near Gangnam station, under 2 billion won"),
            json!({
                "language": "en",
                "region": "서울특별시 강남구",
                "property_type": "아파트",
                "deal_type": "매매",
                "size_range": {"min": 30, "max": 40},
                "price_range": {"max": 2_000_000_000u64},
                "amounts": [2_000_000_000u64],
            })
        );
    }

    #[test]
    fn a_change_request_is_not_a_budget() {
        assert_eq!(
            entities("집주인이 전세금 3억을 10억으로 올려달래. 2025-10-01부터 2년"),
            json!({
                "language": "ko",
                "deal_type": "전세",
                "amounts": [300_000_000u64, 1_000_000_000u64],
                "change": {"subject": "deposit", "old": 300_000_000u64, "new": 1_000_000_000u64},
                "dates": ["2025-10-01"],
                "term_months": 24,
            })
        );
        let q = Query::parse("raise my deposit from 300 million won to 1 billion won");
        assert_eq!((q.price_range, q.change.is_some()), (None, true));
        let q = Query::parse("apartments from 300 million won to 1 billion won");
        assert_eq!(q.change, None);
        assert_eq!(
            q.price_range,
            Some(PriceRange {
                min: Some(300_000_000),
                max: Some(1_000_000_000)
            })
        );
    }

    #[test]
    fn seoul_and_several_districts() {
        assert_eq!(entities("서울 아파트")["region"], json!(SEOUL));
        assert_eq!(entities("hello"), json!({"language": "en"}));
        let e = entities("강남구랑 서초구 아파트 매매 시세 비교해줘");
        assert_eq!(e["region"], json!("서울특별시 강남구"));
        assert_eq!(
            e["regions"],
            json!(["서울특별시 강남구", "서울특별시 서초구"])
        );
    }
}
