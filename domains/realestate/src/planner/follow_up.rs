//! A follow-up question is read against the session's previous turn: "서초구는?" after
//! "강남구 아파트 전세 시세 알려줘" asks the same thing of another district. What the follow-up
//! does not say (the property type, the deal type, the sizes and prices, the kind of question)
//! is kept from the previous turn; what it says (here the district) replaces it.

use chronicle_engine::{Intent, PlanContext};
use serde_json::Value;

use super::rules;

/// Entity keys a follow-up keeps from the previous turn when it does not give them itself.
const KEPT: [&str; 5] = [
    "property_type",
    "deal_type",
    "size_range",
    "price_range",
    "region",
];

/// The confidence of the rules' intent when no word of the query named a kind of question.
const UNCLASSIFIED: f64 = 0.5;

/// Completes `intent` from the previous turn when the query is a follow-up of it.
pub(super) fn complete(cx: &PlanContext<'_>, intent: &mut Intent) {
    let Some(previous) = cx.turn.history.last() else {
        return;
    };
    if !is_follow_up(cx.query) {
        return;
    }
    let before = rules::analyze_intent(&previous.query);
    let (Value::Object(now), Value::Object(then)) = (&mut intent.entities, &before.entities) else {
        return;
    };
    let mut kept = Vec::new();
    for key in KEPT {
        if now.get(key).is_none_or(Value::is_null)
            && let Some(v) = then.get(key).filter(|v| !v.is_null())
        {
            now.insert(key.to_owned(), v.clone());
            kept.push(format!(
                "{key} {}",
                v.as_str().map_or(v.to_string(), str::to_owned)
            ));
        }
    }
    if intent.confidence <= UNCLASSIFIED && before.confidence > UNCLASSIFIED {
        intent.intent_type = before.intent_type;
        intent.confidence = before.confidence;
        intent.keywords = before.keywords;
        kept.push(format!("the question ({})", intent.intent_type));
    }
    if !kept.is_empty() {
        cx.note(format!(
            "a follow-up of the previous turn ({:?}): kept {}",
            previous.query,
            kept.join(", ")
        ));
    }
}

/// A short question that leans on what was asked before: "서초구는?", "매매는?", "what about
/// Seocho?", "and in Mapo?".
fn is_follow_up(query: &str) -> bool {
    let q = query.trim();
    let lower = q.to_lowercase();
    let words = q.split_whitespace().count();
    let korean = ["는?", "은?", "는", "은", "도?", "도"].iter().any(|end| {
        q.trim_end_matches(['?', '？', '.', ' '])
            .ends_with(end.trim_end_matches('?'))
    }) && words <= 3;
    let english = ["what about", "how about", "and in", "and for", "same for"]
        .iter()
        .any(|start| lower.starts_with(start))
        && words <= 6;
    korean || english
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_questions_that_lean_on_the_previous_turn_are_follow_ups() {
        for q in [
            "서초구는?",
            "매매는?",
            "마포구도?",
            "What about Seocho?",
            "and in Mapo?",
        ] {
            assert!(is_follow_up(q), "{q}");
        }
        for q in [
            "강남구 아파트 시세 알려줘",
            "전세 계약서 작성해줘",
            "서초구 아파트 전세는 얼마나 올랐는지 알려줘",
        ] {
            assert!(!is_follow_up(q), "{q}");
        }
    }
}
