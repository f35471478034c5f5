//! The user's long-term memory in this domain, by rules: a deal or property type a query asks
//! for *only* (`전세만 보여줘`, `아파트만`, `only jeonse`) is remembered as a preference, and a
//! later query that names no type of that kind gets the preferred one. A type the query names
//! wins over the preference.

use chronicle_engine::{Intent, PlanContext, Remembered};
use chronicle_schemas::MemoryKind;
use serde_json::{Value, json};

use crate::query::{
    DealType, PropertyType, only_deal_type, only_property_type, parse_property_type,
};

/// The preference keys, which are also the intent's entity keys they fill.
const DEAL_TYPE: &str = "deal_type";
const PROPERTY_TYPE: &str = "property_type";

/// What a query asks for *only*, as preferences (values in English, as agents' parameters take
/// them: `"jeonse"`, `"apartment"`).
pub(crate) fn remembered(query: &str) -> Vec<Remembered> {
    let deal = only_deal_type(query).map(|d| Remembered {
        kind: MemoryKind::Preference,
        key: DEAL_TYPE.into(),
        value: json!(d.en()),
        text: format!("only {} deals ({})", d.en(), d.ko()),
    });
    let property = only_property_type(query).map(|t| Remembered {
        kind: MemoryKind::Preference,
        key: PROPERTY_TYPE.into(),
        value: json!(t.en()),
        text: format!("only {} homes ({})", t.en(), t.ko()),
    });
    deal.into_iter().chain(property).collect()
}

/// The saved preference for `key`, as the turn loaded it (the newest per key).
fn preference<'a>(cx: &'a PlanContext<'_>, key: &str) -> Option<&'a str> {
    cx.turn
        .memories
        .iter()
        .find(|m| m.kind == MemoryKind::Preference && m.key == key)
        .and_then(|m| m.value.as_str())
}

/// Fills the intent's deal and property type from the user's saved preferences where the
/// query names none, with a note for each.
pub(crate) fn apply_preferences(cx: &PlanContext<'_>, intent: &mut Intent) {
    let deal = preference(cx, DEAL_TYPE)
        .and_then(DealType::from_param)
        .map(DealType::ko);
    let property = preference(cx, PROPERTY_TYPE)
        .and_then(parse_property_type)
        .map(PropertyType::ko);
    for (key, preferred) in [(DEAL_TYPE, deal), (PROPERTY_TYPE, property)] {
        let Some(preferred) = preferred else { continue };
        if !intent.entities.is_object() {
            intent.entities = Value::Object(Default::default());
        }
        let named = intent.entities.get(key).is_some_and(|v| !v.is_null());
        if !named {
            intent.entities[key] = json!(preferred);
            cx.note(format!("applied your saved preference: {preferred}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_kind_is_remembered() {
        let r = remembered("강남구 전세만 보여줘");
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].key.as_str(), &r[0].value),
            ("deal_type", &json!("jeonse"))
        );
        let r = remembered("아파트만 매매만");
        let keys: Vec<&str> = r.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["deal_type", "property_type"]);
        assert!(remembered("강남구 아파트 시세 알려줘").is_empty());
    }
}
