//! Evaluation of the agents' results, by rule.

use chronicle_engine::EvaluationOutcome;
use chronicle_schemas::Source;
use serde_json::Value;

/// True when an agent's result reports a failure itself (`{"status": "error"}`, as the
/// original agents did).
pub(super) fn reports_failure(result: &Value) -> bool {
    matches!(
        result.get("status").and_then(Value::as_str),
        Some("error" | "failed")
    )
}

pub(super) fn has_data(result: &Value) -> bool {
    match result {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(_) | Value::Number(_) => true,
    }
}

/// The original rule-based quality check over `(agent, result, error)`: the share of agents that
/// succeeded, complete when all did and one has data, a retry for every failed one.
pub fn evaluate(results: &[(String, Option<Value>, Option<String>)]) -> EvaluationOutcome {
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, result, error)| {
            error.is_some() || result.as_ref().is_some_and(reports_failure)
        })
        .map(|(agent, _, _)| agent.clone())
        .collect();
    let total = results.len();
    let succeeded = total - failed.len();
    let any_data = results
        .iter()
        .any(|(_, result, _)| result.as_ref().is_some_and(has_data));
    let complete = total > 0 && failed.is_empty() && any_data;
    EvaluationOutcome {
        quality_score: if total == 0 {
            0.0
        } else {
            succeeded as f64 / total as f64
        },
        completeness: if complete { 1.0 } else { 0.0 },
        needs_retry: !failed.is_empty(),
        retry_agents: failed,
        feedback: format!("Rule-based evaluation: {succeeded}/{total} agents succeeded"),
        source: Source::Rules,
        add_agents: vec![],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn evaluation_counts_successes_and_retries_failures() {
        let ok = |a: &str| {
            (
                a.to_owned(),
                Some(json!({"status": "success", "data": [1]})),
                None::<String>,
            )
        };
        let outcome = evaluate(&[ok("property_search"), ok("market_analysis")]);
        assert_eq!(
            outcome,
            EvaluationOutcome {
                quality_score: 1.0,
                completeness: 1.0,
                needs_retry: false,
                retry_agents: vec![],
                feedback: "Rule-based evaluation: 2/2 agents succeeded".into(),
                source: Source::Rules,
                add_agents: vec![],
            }
        );

        let failed = (
            "market_analysis".to_owned(),
            None,
            Some("timed out after 30000 ms".to_owned()),
        );
        let outcome = evaluate(&[ok("property_search"), failed]);
        assert_eq!(outcome.quality_score, 0.5);
        assert_eq!(outcome.completeness, 0.0);
        assert!(outcome.needs_retry);
        assert_eq!(outcome.retry_agents, ["market_analysis"]);
        assert_eq!(
            outcome.feedback,
            "Rule-based evaluation: 1/2 agents succeeded"
        );

        // Agents may report errors in their result.
        let soft = (
            "property_search".to_owned(),
            Some(json!({"status": "error", "error": "x"})),
            None,
        );
        assert_eq!(evaluate(&[soft]).retry_agents, ["property_search"]);

        let empty = ("search_team".to_owned(), Some(json!({})), None);
        let outcome = evaluate(&[empty]);
        assert_eq!(
            (
                outcome.quality_score,
                outcome.completeness,
                outcome.needs_retry
            ),
            (1.0, 0.0, false)
        );

        let outcome = evaluate(&[]);
        assert_eq!((outcome.quality_score, outcome.completeness), (0.0, 0.0));
        assert_eq!(
            outcome.feedback,
            "Rule-based evaluation: 0/0 agents succeeded"
        );
    }
}
