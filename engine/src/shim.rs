//! TEMPORARY: stands in for `llm::Planner` until it lands.
use std::sync::Arc;
use serde_json::{json, Value};
use crate::llm::{EvaluationOutcome, Intent, LlmCall, LlmProvider, Plan};
pub struct Planner;
impl Planner {
    pub fn new(_p: Option<Arc<dyn LlmProvider>>) -> Self { Planner }
    pub async fn intent(&self, _q: &str) -> (Intent, Option<LlmCall>) {
        (Intent { intent_type: "search".into(), confidence: 0.5, keywords: vec![], entities: json!({}), source: Default::default() }, None)
    }
    pub async fn plan(&self, _q: &str, _i: &Intent, _a: &[&str]) -> (Plan, Option<LlmCall>) {
        (Plan { strategy: Default::default(), steps: vec![], parallel_groups: vec![], estimated_total_time: 0.0, source: Default::default() }, None)
    }
    pub async fn evaluate(&self, _q: &str, _r: &[(String, Option<Value>, Option<String>)]) -> (EvaluationOutcome, Option<LlmCall>) {
        (EvaluationOutcome { quality_score: 1.0, completeness: 1.0, needs_retry: false, retry_agents: vec![], feedback: String::new(), source: Default::default() }, None)
    }
    pub async fn format(&self, _q: &str, _i: &Intent, _r: &[(String, Value)]) -> (Value, Option<LlmCall>) { (json!({}), None) }
}
