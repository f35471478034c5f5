//! The benchmark domain: the workflow Chronicle is measured with side by side with the Restate
//! and LangGraph implementations of the same work. Keyword rules plan up to three mock agents
//! (search, analysis, document), each TODO depending on the one before; each agent returns a
//! small fixed result (130–230 bytes of JSON) with no model and no I/O; the answer counts what
//! completed. The runs go through the whole engine (plan → TODOs → approval policy → agents →
//! evaluate → aggregate → answer), so what is measured is the engine's own work, and HITL works
//! as in any domain. `chronicle serve --domain bench` plugs it in.

mod agents;
mod planner;
mod rules;

#[cfg(test)]
mod e2e;

use std::sync::Arc;

use chronicle_engine::Settings;
use chronicle_engine::texts::English;

pub use agents::{AGENT_DELAY_ENV, MockAgent, agents};
pub use planner::BenchPlanner;
pub use rules::{
    AGENTS, BENCH_QUERY, BenchPlan, INTENT_ANALYSIS, INTENT_REPORT, Role, aggregate, answer_text,
    plan_for_query,
};

/// `settings` with this domain plugged in: its three mock agents added to the registry, its
/// planner, English texts.
pub fn install(mut settings: Settings) -> Settings {
    for agent in agents() {
        settings.registry.register(agent);
    }
    settings.planner = Arc::new(BenchPlanner);
    settings.texts = Arc::new(English);
    settings
}

/// The engine's default settings with this domain plugged in.
pub fn settings() -> Settings {
    install(Settings::default())
}
