//! What kind of home (`아파트`, `officetel` ...) and what kind of deal (`매매`, `전세`, `월세`)
//! a query is about.

use serde::{Deserialize, Serialize};

use super::terms::{find_all_terms, first_mentioned};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum PropertyType {
    #[serde(rename = "아파트")]
    Apartment,
    #[serde(rename = "오피스텔")]
    Officetel,
    #[serde(rename = "빌라")]
    Villa,
    /// A detached house: users ask about them, the dataset has none.
    #[serde(rename = "단독주택")]
    House,
}

impl PropertyType {
    /// The types the dataset has listings and price history for.
    pub(crate) const IN_DATASET: [PropertyType; 3] =
        [Self::Apartment, Self::Officetel, Self::Villa];

    pub(crate) fn ko(self) -> &'static str {
        match self {
            Self::Apartment => "아파트",
            Self::Officetel => "오피스텔",
            Self::Villa => "빌라",
            Self::House => "단독주택",
        }
    }

    pub(crate) fn en(self) -> &'static str {
        match self {
            Self::Apartment => "apartment",
            Self::Officetel => "officetel",
            Self::Villa => "villa",
            Self::House => "house",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum DealType {
    #[serde(rename = "매매")]
    Sale,
    #[serde(rename = "전세")]
    Jeonse,
    #[serde(rename = "월세")]
    Monthly,
}

impl DealType {
    pub(crate) const ALL: [DealType; 3] = [Self::Sale, Self::Jeonse, Self::Monthly];

    pub(crate) fn ko(self) -> &'static str {
        match self {
            Self::Sale => "매매",
            Self::Jeonse => "전세",
            Self::Monthly => "월세",
        }
    }

    pub(crate) fn en(self) -> &'static str {
        match self {
            Self::Sale => "sale",
            Self::Jeonse => "jeonse",
            Self::Monthly => "monthly rent",
        }
    }

    /// A deal type as a parameter spells it: a word of a query, or the plain `rent`, `monthly`,
    /// `monthly_rent`, `lease`, which are too loose to read inside a sentence.
    pub(crate) fn from_param(text: &str) -> Option<DealType> {
        parse_deal_type(text).or_else(|| match text.trim().to_lowercase().as_str() {
            "rent" | "monthly" | "monthly_rent" => Some(DealType::Monthly),
            "lease" => Some(DealType::Jeonse),
            _ => None,
        })
    }
}

/// English endings (`apartments`, `villas`) match without entries of their own, see `terms`.
/// Plain `house` is not a type: "house prices" are home prices.
const PROPERTY_TYPE_TERMS: &[(&str, PropertyType)] = &[
    ("아파트", PropertyType::Apartment),
    ("apartment", PropertyType::Apartment),
    ("apt", PropertyType::Apartment),
    ("오피스텔", PropertyType::Officetel),
    ("officetel", PropertyType::Officetel),
    ("빌라", PropertyType::Villa),
    ("다세대", PropertyType::Villa),
    ("연립", PropertyType::Villa),
    ("villa", PropertyType::Villa),
    ("단독주택", PropertyType::House),
    ("단독 주택", PropertyType::House),
    ("detached house", PropertyType::House),
    ("single-family house", PropertyType::House),
];

/// `반전세` (a large deposit plus rent) is a monthly rent, and longer than the `전세` in it.
const DEAL_TYPE_TERMS: &[(&str, DealType)] = &[
    ("매매", DealType::Sale),
    ("매수", DealType::Sale),
    ("매도", DealType::Sale),
    ("구매", DealType::Sale),
    ("구입", DealType::Sale),
    ("sale", DealType::Sale),
    ("buy", DealType::Sale),
    ("purchase", DealType::Sale),
    ("반전세", DealType::Monthly),
    ("월세", DealType::Monthly),
    ("monthly rent", DealType::Monthly),
    ("wolse", DealType::Monthly),
    ("전세", DealType::Jeonse),
    ("jeonse", DealType::Jeonse),
    ("chonsei", DealType::Jeonse),
];

/// The property type mentioned first: `아파트`/`apartment`/`apt`, `오피스텔`/`officetel`,
/// `빌라`/`다세대`/`villa`, `단독주택`/`detached house`.
pub(crate) fn parse_property_type(text: &str) -> Option<PropertyType> {
    first_mentioned(&text.to_lowercase(), PROPERTY_TYPE_TERMS)
}

/// The deal type mentioned first: `매매`/`sale`/`buy` → 매매; `전세`/`jeonse` → 전세;
/// `월세`/`반전세`/`monthly rent` → 월세.
pub(crate) fn parse_deal_type(text: &str) -> Option<DealType> {
    first_mentioned(&text.to_lowercase(), DEAL_TYPE_TERMS)
}

/// The deal type the text asks for *only* (`전세만`, `only jeonse`, `jeonse only`): a lasting
/// preference, not just this query's condition.
pub(crate) fn only_deal_type(text: &str) -> Option<DealType> {
    first_only(&text.to_lowercase(), DEAL_TYPE_TERMS)
}

/// The property type the text asks for *only* (`아파트만`, `only apartments`).
pub(crate) fn only_property_type(text: &str) -> Option<PropertyType> {
    first_only(&text.to_lowercase(), PROPERTY_TYPE_TERMS)
}

/// The value of the first term of `terms` in `lower` that is marked as the only one wanted (the
/// longer term at the same place: `반전세만` is 월세).
fn first_only<T: Copy>(lower: &str, terms: &[(&str, T)]) -> Option<T> {
    terms
        .iter()
        .flat_map(|&(term, v)| {
            find_all_terms(lower, term)
                .into_iter()
                .filter(move |&at| marked_only(lower, at, at + term.len()))
                .map(move |at| (at, std::cmp::Reverse(term.len()), v))
        })
        .min_by_key(|&(at, len, _)| (at, len))
        .map(|(_, _, v)| v)
}

/// Whether the term at `start..end` is marked "only": the particle `만` right after it (not the
/// `만원` of an amount), or the word `only` right before or after it.
fn marked_only(lower: &str, start: usize, end: usize) -> bool {
    let after = &lower[end..];
    let particle = after
        .strip_prefix('만')
        .is_some_and(|rest| !rest.starts_with('원'));
    let before = lower[..start].trim_end();
    let only_before = before.strip_suffix("only").is_some_and(|rest| {
        !rest
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric())
    });
    let word_after = after.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let only_after = word_after.trim_start().starts_with("only");
    particle || only_before || only_after
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_types() {
        let table = [
            ("30평대 아파트 매매", Some(PropertyType::Apartment)),
            ("apartments in Gangnam", Some(PropertyType::Apartment)),
            ("an officetel near Gangnam", Some(PropertyType::Officetel)),
            ("다세대 빌라", Some(PropertyType::Villa)),
            ("villas in Songpa", Some(PropertyType::Villa)),
            ("단독주택 매매", Some(PropertyType::House)),
            ("a detached house in Seocho", Some(PropertyType::House)),
            ("house prices in Mapo", None),
            ("a village near Mapo", None),
            ("I want to adapt", None),
            ("aptitude test", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_property_type(text), want, "{text}");
        }
    }

    #[test]
    fn deal_types() {
        let table = [
            ("아파트 매매 시세", Some(DealType::Sale)),
            ("아파트 구입", Some(DealType::Sale)),
            ("전세금 3억", Some(DealType::Jeonse)),
            ("반전세 매물", Some(DealType::Monthly)),
            ("apartments for sale in Mapo", Some(DealType::Sale)),
            ("buying an apartment", Some(DealType::Sale)),
            ("jeonse deposit", Some(DealType::Jeonse)),
            ("officetel on monthly rent", Some(DealType::Monthly)),
            ("rental apartments", None),
            ("어디가 좋아?", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_deal_type(text), want, "{text}");
        }
        assert_eq!(
            DealType::from_param("monthly_rent"),
            Some(DealType::Monthly)
        );
        assert_eq!(DealType::from_param("lease"), Some(DealType::Jeonse));
        assert_eq!(DealType::from_param("barter"), None);
    }

    #[test]
    fn only_one_kind() {
        let deals = [
            ("강남구 전세만 보여줘", Some(DealType::Jeonse)),
            ("월세만", Some(DealType::Monthly)),
            ("반전세만 찾아줘", Some(DealType::Monthly)),
            ("매매만 알려줘", Some(DealType::Sale)),
            ("show me only jeonse in Mapo", Some(DealType::Jeonse)),
            ("monthly rent only please", Some(DealType::Monthly)),
            ("강남구 전세 시세", None),
            ("전세만원", None),
            ("jeonse deposits", None),
            ("commonly jeonse", None),
        ];
        for (text, want) in deals {
            assert_eq!(only_deal_type(text), want, "{text}");
        }
        assert_eq!(
            only_property_type("아파트만 보여줘"),
            Some(PropertyType::Apartment)
        );
        assert_eq!(only_property_type("only villas"), Some(PropertyType::Villa));
        assert_eq!(only_property_type("아파트 전세만"), None);
    }
}
