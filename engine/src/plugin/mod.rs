//! What a domain plugs in: the traits it implements ([`agents::Agent`], [`tools::Tool`],
//! [`planner::Planner`], [`llm::LlmProvider`], [`texts::Texts`]) and the settings that bring them
//! together, with what the engine ships of each (the built-in tools, the LLM agent, the
//! OpenAI-compatible client, [`texts::English`], [`planner::NoPlanner`]).
//!
//! Architecture Invariant: nothing here imports the runtime (`runtime/`); the `layers`
//! test reads these sources to keep it so. What a plug-in needs of a running engine comes as a
//! narrow handle the runtime lends it: [`tools::ToolHandle`] (an agent's tool and model calls,
//! through the run) and the child runs of a `task` call ([`tools::ChildRuns`]).

pub mod agents;
pub mod chunks;
pub mod hitl;
pub mod llm;
pub mod planner;
pub mod said;
pub mod settings;
pub mod texts;
pub mod tools;
pub mod trace;
