//! The generic domain: what a deployment needs to run its own agents without writing Rust.
//! Agents are declared in a TOML file (`http` agents: a URL, a purpose, a team, a HITL category
//! and routing hints); every agent speaks the agent contract (`chronicle.agent.v1`).

mod http;

pub use http::{
    CATEGORIES, ConfigError, HTTP_AGENT_RESPONSE_BYTES_MAX, HTTP_AGENT_TIMEOUT_MS_DEFAULT,
    HTTP_AGENT_TIMEOUT_MS_MAX, HttpAgent, load_agents, load_agents_file, request,
};
