//! The real-estate domain: a Korean real-estate supervisor, first written on LangGraph, as one
//! domain among others. It brings its agents (search, analysis and document teams and four
//! specialists over a bundled dataset), its planner (rules, and prompts for a model), its query
//! parser and its Korean texts. `chronicle serve` plugs it in by default.

pub mod agents;
mod planner;
mod query;
mod texts;

#[cfg(test)]
mod e2e;

use std::sync::Arc;

use chronicle_engine::Settings;

pub use planner::RealEstatePlanner;
pub use texts::{HELP_KO, Korean};

/// `settings` with this domain plugged in: its agents added to the registry, its planner, its
/// Korean texts.
pub fn install(mut settings: Settings) -> Settings {
    let own = agents::registry();
    for info in own.infos() {
        if let Some(a) = own.get(&info.name) {
            settings.registry.register(a.clone());
        }
    }
    settings.planner = Arc::new(RealEstatePlanner);
    settings.texts = Arc::new(Korean);
    settings
}

/// The engine's default settings with this domain plugged in (no model: rules only).
pub fn settings() -> Settings {
    install(Settings::default())
}
