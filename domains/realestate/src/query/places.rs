//! Places: Seoul's 25 districts with the names people use for them, and for the districts the
//! dataset covers also their dongs and subway stations (`data/regions.json`). Every spelling
//! resolves to one canonical district, `서울특별시 강남구`.

use std::sync::LazyLock;

use super::terms::find_all_terms;
use crate::agents::data::DATASET;

/// The city every district belongs to; a query that names it and no district asks about all of
/// Seoul.
pub(crate) const SEOUL: &str = "서울특별시";

/// A Seoul district with its English name and the names people use for it.
struct District {
    /// `서울특별시 강남구`: the canonical name every agent reports.
    region: &'static str,
    en: &'static str,
    aliases: &'static [&'static str],
}

/// Seoul's 25 districts, each with its short name and well-known neighbourhoods or stations.
/// Ambiguous words (미아, 신정, 가산, 성수기 ...) are left out or spelled with 동; the dataset adds
/// the dongs and stations of the districts it covers.
const DISTRICTS: &[District] = &[
    District {
        region: "서울특별시 강남구",
        en: "Gangnam-gu",
        aliases: &[
            "강남구",
            "강남",
            "역삼",
            "삼성동",
            "대치동",
            "압구정",
            "청담",
            "개포",
            "도곡",
            "gangnam",
            "yeoksam",
            "apgujeong",
            "daechi",
            "cheongdam",
        ],
    },
    District {
        region: "서울특별시 강동구",
        en: "Gangdong-gu",
        aliases: &["강동구", "강동", "천호", "고덕", "gangdong", "cheonho"],
    },
    District {
        region: "서울특별시 강북구",
        en: "Gangbuk-gu",
        aliases: &["강북구", "강북", "gangbuk"],
    },
    District {
        region: "서울특별시 강서구",
        en: "Gangseo-gu",
        aliases: &["강서구", "강서", "마곡", "화곡", "gangseo", "magok"],
    },
    District {
        region: "서울특별시 관악구",
        en: "Gwanak-gu",
        aliases: &["관악구", "관악", "신림", "봉천", "gwanak", "sillim"],
    },
    District {
        region: "서울특별시 광진구",
        en: "Gwangjin-gu",
        aliases: &["광진구", "광진", "건대", "gwangjin"],
    },
    District {
        region: "서울특별시 구로구",
        en: "Guro-gu",
        aliases: &["구로구", "구로", "신도림", "guro", "sindorim"],
    },
    District {
        region: "서울특별시 금천구",
        en: "Geumcheon-gu",
        aliases: &["금천구", "금천", "독산", "geumcheon"],
    },
    District {
        region: "서울특별시 노원구",
        en: "Nowon-gu",
        aliases: &["노원구", "노원", "상계동", "nowon"],
    },
    District {
        region: "서울특별시 도봉구",
        en: "Dobong-gu",
        aliases: &["도봉구", "도봉", "창동", "dobong"],
    },
    District {
        region: "서울특별시 동대문구",
        en: "Dongdaemun-gu",
        aliases: &["동대문구", "동대문", "청량리", "dongdaemun"],
    },
    District {
        region: "서울특별시 동작구",
        en: "Dongjak-gu",
        aliases: &["동작구", "동작", "노량진", "사당", "흑석", "dongjak"],
    },
    District {
        region: "서울특별시 마포구",
        en: "Mapo-gu",
        aliases: &[
            "마포구",
            "마포",
            "홍대",
            "상암",
            "합정",
            "망원동",
            "공덕",
            "mapo",
            "hongdae",
        ],
    },
    District {
        region: "서울특별시 서대문구",
        en: "Seodaemun-gu",
        aliases: &["서대문구", "서대문", "신촌", "연희", "seodaemun", "sinchon"],
    },
    District {
        region: "서울특별시 서초구",
        en: "Seocho-gu",
        aliases: &[
            "서초구",
            "서초",
            "반포",
            "방배",
            "잠원",
            "양재",
            "seocho",
            "banpo",
        ],
    },
    District {
        region: "서울특별시 성동구",
        en: "Seongdong-gu",
        aliases: &[
            "성동구",
            "성동",
            "성수동",
            "왕십리",
            "옥수",
            "seongdong",
            "seongsu",
        ],
    },
    District {
        region: "서울특별시 성북구",
        en: "Seongbuk-gu",
        aliases: &["성북구", "성북", "길음", "정릉", "seongbuk"],
    },
    District {
        region: "서울특별시 송파구",
        en: "Songpa-gu",
        aliases: &[
            "송파구",
            "송파",
            "잠실",
            "가락동",
            "위례",
            "songpa",
            "jamsil",
        ],
    },
    District {
        region: "서울특별시 양천구",
        en: "Yangcheon-gu",
        aliases: &["양천구", "양천", "목동", "yangcheon", "mokdong"],
    },
    District {
        region: "서울특별시 영등포구",
        en: "Yeongdeungpo-gu",
        aliases: &[
            "영등포구",
            "영등포",
            "여의도",
            "당산",
            "문래",
            "yeongdeungpo",
            "yeouido",
        ],
    },
    District {
        region: "서울특별시 용산구",
        en: "Yongsan-gu",
        aliases: &[
            "용산구",
            "용산",
            "이태원",
            "한남",
            "이촌",
            "yongsan",
            "itaewon",
            "hannam",
        ],
    },
    District {
        region: "서울특별시 은평구",
        en: "Eunpyeong-gu",
        aliases: &["은평구", "은평", "불광", "응암", "eunpyeong"],
    },
    District {
        region: "서울특별시 종로구",
        en: "Jongno-gu",
        aliases: &["종로구", "종로", "광화문", "평창동", "jongno"],
    },
    District {
        region: "서울특별시 중구",
        en: "Jung-gu",
        aliases: &["중구", "명동", "을지로", "jung-gu", "jung gu", "myeongdong"],
    },
    District {
        region: "서울특별시 중랑구",
        en: "Jungnang-gu",
        aliases: &["중랑구", "중랑", "상봉", "jungnang"],
    },
];

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
    for d in DISTRICTS {
        let spellings = [d.region, d.en]
            .into_iter()
            .chain(d.aliases.iter().copied());
        for a in spellings {
            let a = a.to_lowercase();
            if !out.iter().any(|(known, _)| *known == a) {
                out.push((a, PlaceRef::district(d.region)));
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

/// `(start, end, place)` of every place name in `lower`, in order, none inside another.
fn place_hits(lower: &str) -> Vec<(usize, usize, &'static PlaceRef)> {
    let mut hits: Vec<(usize, usize, &PlaceRef)> = Vec::new();
    for (alias, place) in PLACE_ALIASES.iter() {
        for pos in find_all_terms(lower, alias) {
            hits.push((pos, pos + alias.len(), place));
        }
    }
    hits.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out = Vec::new();
    let mut covered_to = 0;
    for hit in hits {
        if hit.0 >= covered_to {
            covered_to = hit.1;
            out.push(hit);
        }
    }
    out
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

    /// Every district of the dataset is one of Seoul's, under the same canonical name.
    #[test]
    fn the_dataset_covers_seoul_districts() {
        for r in &DATASET.regions {
            assert_eq!(canonical_region(&r.region), Some(r.region.as_str()));
            assert_eq!(district_name(&r.region), r.district);
        }
    }
}
