//! Places: Seoul's 25 districts with the names people use for them, and for the districts the
//! dataset covers also their dongs and subway stations (`data/regions.json`). Every spelling
//! resolves to one canonical district, `서울특별시 강남구`.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use serde::Deserialize;

use super::terms::{find_all_terms, is_term_at};
use crate::agents::data::DATASET;

/// The city every district belongs to; a query that names it and no district asks about all of
/// Seoul.
pub(crate) const SEOUL: &str = "서울특별시";

/// A Seoul district with its English name and the names people use for it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct District {
    /// `서울특별시 강남구`: the canonical name every agent reports.
    region: String,
    en: String,
    aliases: Vec<String>,
}

/// Seoul's 25 districts (`districts.json`), each with its short name and well-known
/// neighbourhoods or stations. Ambiguous words (미아, 신정, 가산, 성수기 ...) are left out or
/// spelled with 동; the dataset adds the dongs and stations of the districts it covers. The file
/// is compiled in and a test parses it, so a failure here is a build defect.
static DISTRICTS: LazyLock<Vec<District>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("districts.json")).expect("the district table is valid JSON")
});

/// A place named in a query, resolved to its canonical district.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlaceRef {
    /// `서울특별시 강남구`.
    pub region: &'static str,
    pub dong: Option<&'static str>,
    pub station: Option<&'static str>,
}

impl PlaceRef {
    fn district(region: &'static str) -> Self {
        Self {
            region,
            dong: None,
            station: None,
        }
    }
}

/// Every spelling of every place, lower-cased, longest first. The dataset's entries come
/// before the district table's, so an alias both know resolves to the dataset's dong or
/// station (`압구정` → 압구정동).
static PLACE_ALIASES: LazyLock<Vec<(String, PlaceRef)>> = LazyLock::new(|| {
    let mut out: Vec<(String, PlaceRef)> = Vec::new();
    for r in &DATASET.regions {
        let region = r.region.as_str();
        let at = |dong, station| PlaceRef {
            region,
            dong,
            station,
        };
        for d in &r.dongs {
            for a in std::iter::once(&d.name).chain(&d.aliases) {
                out.push((a.to_lowercase(), at(Some(d.name.as_str()), None)));
            }
        }
        for s in &r.stations {
            for a in std::iter::once(&s.name).chain(&s.aliases) {
                out.push((a.to_lowercase(), at(None, Some(s.name.as_str()))));
            }
        }
        for a in &r.aliases {
            out.push((a.to_lowercase(), at(None, None)));
        }
    }
    for d in DISTRICTS.iter() {
        let spellings = [&d.region, &d.en].into_iter().chain(&d.aliases);
        for a in spellings {
            let a = a.to_lowercase();
            if !out.iter().any(|(known, _)| *known == a) {
                out.push((a, PlaceRef::district(&d.region)));
            }
        }
    }
    // Longest first, so `강남역` wins over `강남` and `seocho-dong` over `seocho`; the sort is
    // stable, so the dataset's entries stay first among equals.
    out.sort_by_key(|(alias, _)| std::cmp::Reverse(alias.chars().count()));
    out
});

/// The places named in `text`, one per district, in order of first mention. `강남`, `강남역`,
/// `강남구`, `Gangnam`, `역삼동` all resolve to `서울특별시 강남구` (with the dong or station
/// kept when named). A name inside a longer one counts once: `삼성동` is in 강남구, not also in
/// 성동구.
pub(crate) fn parse_places(text: &str) -> Vec<PlaceRef> {
    let lower = text.to_lowercase();
    let mut out: Vec<PlaceRef> = Vec::new();
    for (_, _, place) in place_hits(&lower) {
        match out.iter_mut().find(|p| p.region == place.region) {
            Some(seen) => {
                seen.dong = seen.dong.or(place.dong);
                seen.station = seen.station.or(place.station);
            }
            None => out.push(place.clone()),
        }
    }
    out
}

/// One automaton for every alias of [`PLACE_ALIASES`] (pattern `i` is alias `i`): a query is
/// scanned once, not once per alias.
static PLACE_FINDER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::new(PLACE_ALIASES.iter().map(|(alias, _)| alias))
        .expect("the place aliases build an automaton")
});

/// `(start, end, place)` of every place name in `lower`, in order, none inside another.
fn place_hits(lower: &str) -> Vec<(usize, usize, &'static PlaceRef)> {
    let mut out = Vec::new();
    let mut covered_to = 0;
    for hit in alias_hits(lower) {
        if hit.0 >= covered_to {
            covered_to = hit.1;
            out.push(hit);
        }
    }
    out
}

/// `(start, end, place)` of every alias in `lower` where [`find_all_terms`] finds it, by start,
/// the longer first.
fn alias_hits(lower: &str) -> Vec<(usize, usize, &'static PlaceRef)> {
    let mut hits: Vec<(usize, usize, usize)> = Vec::new();
    // Each alias left to right, none overlapping an earlier one of the same alias (the
    // automaton reports those too), then the term rule: as a search for that alias alone.
    let mut alias_end = vec![0; PLACE_ALIASES.len()];
    for m in PLACE_FINDER.find_overlapping_iter(lower) {
        let i = m.pattern().as_usize();
        if m.is_empty() || m.start() < alias_end[i] {
            continue;
        }
        alias_end[i] = m.end();
        if is_term_at(lower, &PLACE_ALIASES[i].0, m.start()) {
            hits.push((m.start(), m.end(), i));
        }
    }
    // Of the aliases at the same place, the one listed first (the dataset's) comes first.
    hits.sort_by_key(|&(start, end, i)| (start, std::cmp::Reverse(end), i));
    hits.into_iter()
        .map(|(start, end, i)| (start, end, &PLACE_ALIASES[i].1))
        .collect()
}

/// Whether `text` names Seoul itself (`서울`, `Seoul`) outside a place name (`서울숲역`).
pub(crate) fn names_seoul(text: &str) -> bool {
    let lower = text.to_lowercase();
    let hits = place_hits(&lower);
    ["서울", "seoul"].iter().any(|city| {
        find_all_terms(&lower, city)
            .into_iter()
            .any(|pos| !hits.iter().any(|&(s, e, _)| s <= pos && pos < e))
    })
}

/// Maps a region a model or a user wrote (`강남`, `Gangnam`, `강남구`) to its canonical name;
/// `None` when it names no Seoul district.
pub(crate) fn canonical_region(region: &str) -> Option<&'static str> {
    parse_places(region).first().map(|p| p.region)
}

/// `강남구` for `서울특별시 강남구`.
pub(crate) fn district_name(region: &str) -> &str {
    region.strip_prefix(SEOUL).map_or(region, str::trim_start)
}

/// `Gangnam-gu, Seoul` for `서울특별시 강남구`; other names unchanged.
pub(crate) fn english_region(region: &str) -> String {
    match DISTRICTS.iter().find(|d| d.region == region) {
        Some(d) => format!("{}, Seoul", d.en),
        None if region == SEOUL => "Seoul".to_owned(),
        None => region.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(text: &str) -> Vec<&'static str> {
        parse_places(text).iter().map(|p| p.region).collect()
    }

    #[test]
    fn places() {
        let g = "서울특별시 강남구";
        for text in [
            "강남",
            "강남역 근처",
            "강남구 아파트",
            "Gangnam apartments",
            "서울특별시 강남구",
            "대치 아파트",
            "청담동 빌라",
            "도곡동",
        ] {
            assert_eq!(regions(text), vec![g], "{text}");
        }
        let p = parse_places("강남역 근처 30평대 아파트 매매 시세 알려줘");
        assert_eq!(
            p,
            vec![PlaceRef {
                region: g,
                dong: None,
                station: Some("강남역")
            }]
        );
        assert_eq!(parse_places("역삼동 오피스텔")[0].dong, Some("역삼동"));
        assert_eq!(parse_places("압구정 아파트")[0].dong, Some("압구정동"));
        let p = parse_places("강남구와 마포구 비교, 그리고 Seocho-dong");
        let found: Vec<&str> = p.iter().map(|p| p.region).collect();
        assert_eq!(found, vec![g, "서울특별시 마포구", "서울특별시 서초구"]);
        assert_eq!(p[2].dong, Some("서초동"));
        assert_eq!(regions("compare Mapo and Songpa")[1], "서울특별시 송파구");
        assert_eq!(regions("부산 해운대구"), Vec::<&str>::new());
        assert_eq!(regions("mapology"), Vec::<&str>::new(), "whole words only");
    }

    #[test]
    fn districts_beyond_the_dataset_and_names_inside_names() {
        assert_eq!(regions("관악구 아파트"), ["서울특별시 관악구"]);
        assert_eq!(regions("Yeouido officetel"), ["서울특별시 영등포구"]);
        assert_eq!(regions("삼성동 아파트"), ["서울특별시 강남구"], "not 성동");
        assert_eq!(regions("평창동 주택"), ["서울특별시 종로구"], "not 창동");
        assert_eq!(regions("서울숲역 근처"), ["서울특별시 성동구"]);
        assert!(names_seoul("서울 아파트") && names_seoul("Seoul apartments"));
        assert!(!names_seoul("서울숲역 근처") && !names_seoul("강남 아파트"));
        assert_eq!(canonical_region("강남"), Some("서울특별시 강남구"));
        assert_eq!(canonical_region("부산광역시 해운대구"), None);
        assert_eq!(english_region("서울특별시 강남구"), "Gangnam-gu, Seoul");
        assert_eq!(district_name("서울특별시 강남구"), "강남구");
    }

    /// Every alias, alone, doubled, inside longer words and beside each other, is found where
    /// searching for each alias on its own finds it.
    #[test]
    fn one_scan_finds_what_a_search_per_alias_finds() {
        fn per_alias(lower: &str) -> Vec<(usize, usize, &'static PlaceRef)> {
            let mut hits = Vec::new();
            for (alias, place) in PLACE_ALIASES.iter() {
                for pos in find_all_terms(lower, alias) {
                    hits.push((pos, pos + alias.len(), place));
                }
            }
            hits.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            hits
        }
        let aliases: Vec<&str> = PLACE_ALIASES.iter().map(|(a, _)| a.as_str()).collect();
        let mut texts = Vec::new();
        for (i, a) in aliases.iter().enumerate() {
            let b = aliases[(i * 7 + 3) % aliases.len()];
            texts.extend([
                (*a).to_owned(),
                format!("{a}{a}"),
                format!("{a}s and {b}ing, {a}-{b}"),
                format!("x{a}x {b}{a} 근처"),
                format!(
                    "{}{a}",
                    &a[..a.len() - a.chars().next_back().map_or(0, char::len_utf8)]
                ),
            ]);
        }
        for text in &texts {
            assert_eq!(alias_hits(text), per_alias(text), "{text}");
        }
    }

    /// The district table holds Seoul's 25 districts, and every district of the dataset is one
    /// of them, under the same canonical name.
    #[test]
    fn the_dataset_covers_seoul_districts() {
        assert_eq!(DISTRICTS.len(), 25);
        for r in &DATASET.regions {
            assert_eq!(canonical_region(&r.region), Some(r.region.as_str()));
            assert_eq!(district_name(&r.region), r.district);
        }
    }
}
