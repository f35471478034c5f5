//! The generic domain: what a deployment needs to run its own agents without writing Rust.
//! Agents are declared in a TOML file — `http` agents (a URL) and `llm` agents (a prompt and the
//! tools a model may call), each with a purpose, a team, a HITL category and routing hints; every
//! agent speaks the agent contract (`chronicle.agent.v1`). The same file may declare MCP servers
//! (`[[mcp_server]]`) whose tools `llm` agents may call.
//!
//! Its planner, [`GenericPlanner`], routes a query to the agents whose routing hints match it
//! ([`route`]), plans them in the order the query names them, judges their results by who
//! answered, and composes the answer from their replies ([`compose`]); with a model configured
//! the model decides over the agents' declared purposes, every answer checked. Other domains use
//! the same pieces for agents that are not their own.

mod compose;
mod http;
mod llm;
mod mcp;
mod planner;
mod prompts;
mod route;
mod rules;
#[cfg(test)]
mod testing;

use std::sync::Arc;

use chronicle_engine::Settings;
use chronicle_engine::texts::English;

pub use compose::{ANSWER_BYTES_MAX, compose};
pub use http::{
    CATEGORIES, ConfigError, ConfigPlace, Declared, HTTP_AGENT_RESPONSE_BYTES_MAX,
    HTTP_AGENT_TIMEOUT_MS_DEFAULT, HTTP_AGENT_TIMEOUT_MS_MAX, HttpAgent, load_agents,
    load_agents_file, load_agents_in, request,
};
pub use llm::SYSTEM_PROMPT_BYTES_MAX;
pub use mcp::{Loaded, load_config_file, load_config_in};
pub use planner::{GenericPlanner, answer_text, checked_evaluation};
pub use route::{EXAMPLE_SCORE_MAX, Hit, HitKind, KEYWORD_SCORE, Match, ROUTE_AGENTS_MAX, route};
pub use rules::{
    CONFIDENCE_EXAMPLE, CONFIDENCE_KEYWORD, INTENT_GENERAL, append, evaluate, intent_for,
    note_routes, plan_for,
};

/// `settings` with the generic domain plugged in: its planner and English texts. It brings no
/// agents of its own; add them with [`load_agents_file`] (the `chronicle` binary's `--agents`).
pub fn install(mut settings: Settings) -> Settings {
    settings.planner = Arc::new(GenericPlanner);
    settings.texts = Arc::new(English);
    settings
}

/// The engine's default settings with the generic domain plugged in (no model: rules only).
pub fn settings() -> Settings {
    install(Settings::default())
}

// The example names this crate as its users do.
#[cfg(test)]
extern crate self as chronicle_generic;

/// The "Add a domain" example of docs/domains.md, compiled and run as a test.
#[cfg(test)]
#[path = "../examples/domain.rs"]
mod domain_example;

#[cfg(test)]
mod tests {
    #[test]
    fn the_domain_example_runs_and_the_domains_guide_shows_it_whole() {
        super::domain_example::main().expect("the example runs");
        let guide = include_str!("../../../docs/domains.md");
        let example = include_str!("../examples/domain.rs");
        assert!(
            guide.contains(example),
            "docs/domains.md must show examples/domain.rs as it is"
        );
    }
}
