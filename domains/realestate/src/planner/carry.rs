//! What a person chose for one step carries to the steps after it: a region or filter edited on
//! the search (`region` 강남구 → 서초구), or a district named in words when letting it run
//! ("서초구로 해줘"), becomes the condition of the analysis and the report that depend on it, so
//! the whole answer is about what the person chose and never mixes two districts.

use chronicle_engine::hitl::Chosen;
use serde_json::{Map, Value, json};

// The conditions the domain's agents search and analyse by: a person's choice of one carries.
use crate::query::{CONDITION_KEYS, parse_places};

/// `input` with the conditions people chose for the earlier steps, oldest first (a later
/// choice wins): the conditions an edit changed, and the districts their words named.
pub(crate) fn carry(input: Value, chosen: &[Chosen]) -> Value {
    let mut map = match input {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        // Not an object: the agent refuses it with its own error; nothing to carry into.
        other => return other,
    };
    for c in chosen {
        let changed = c.changed();
        let region_changed = changed
            .iter()
            .any(|(k, _)| *k == "region" || *k == "regions");
        for (key, new) in changed {
            if !CONDITION_KEYS.contains(&key) {
                continue;
            }
            match new {
                Some(v) => map.insert(key.to_owned(), v.clone()),
                None => map.remove(key),
            };
        }
        if region_changed {
            // `regions` wins over `region` where both are: keep the pair as the edit left it.
            for key in ["region", "regions"] {
                match c.edited.as_ref().and_then(|e| e.get(key)) {
                    Some(v) => map.insert(key.to_owned(), v.clone()),
                    None => map.remove(key),
                };
            }
        }
        let named = c.said.as_deref().map(parse_places).unwrap_or_default();
        if let Some(first) = named.first() {
            map.insert("region".into(), json!(first.region));
            if named.len() > 1 {
                let all: Vec<&str> = named.iter().map(|p| p.region).collect();
                map.insert("regions".into(), json!(all));
            } else {
                map.remove("regions");
            }
        }
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(requested: Value, edited: Option<Value>, said: Option<&str>) -> Chosen {
        Chosen {
            requested,
            edited,
            said: said.map(str::to_owned),
            ..Chosen::default()
        }
    }

    #[test]
    fn an_edited_condition_carries_to_a_later_step() {
        let search = chosen(
            json!({"region": "서울특별시 강남구", "deal_type": "매매", "keywords": ["시세"]}),
            Some(json!({"region": "서울특별시 서초구", "deal_type": "매매", "keywords": []})),
            None,
        );
        // The analysis named the old district, the report none: both get the chosen one;
        // keywords are no condition and stay the step's own.
        let analysis =
            json!({"region": "서울특별시 강남구", "analysis_type": "market", "keywords": ["x"]});
        assert_eq!(
            carry(analysis, std::slice::from_ref(&search)),
            json!({"region": "서울특별시 서초구", "analysis_type": "market", "keywords": ["x"]})
        );
        assert_eq!(
            carry(json!({"document_type": "market_report"}), &[search]),
            json!({"document_type": "market_report", "region": "서울특별시 서초구"})
        );
    }

    #[test]
    fn a_district_said_in_words_carries() {
        let search = chosen(
            json!({"region": "서울특별시 강남구"}),
            Some(json!({"region": "서울특별시 강남구", "feedback": "서초구로 해줘"})),
            Some("서초구로 해줘"),
        );
        let later =
            json!({"regions": ["서울특별시 강남구", "서울특별시 마포구"], "deal_type": "전세"});
        assert_eq!(
            carry(later, &[search]),
            json!({"region": "서울특별시 서초구", "deal_type": "전세"})
        );
        // Words that name no district change nothing; a plain approval neither.
        let plain = chosen(json!({"region": "서울특별시 강남구"}), None, Some("좋아요"));
        let later = json!({"region": "서울특별시 강남구"});
        assert_eq!(carry(later.clone(), &[plain]), later);
    }
}
