//! Chronicle's one integration-test binary: black-box tests across crates.

mod agents;
mod api;
mod api_audit;
mod api_bounds;
mod api_browser;
mod api_owners;
mod api_sse;
mod api_stream;
mod api_support;
mod api_tools;
mod api_ws;
mod commands;
mod crash;
mod engine;
mod engine_crash;
mod limits;
mod llm_agents;
mod llm_support;
mod memory;
mod scenarios;
mod slow_agent;
mod store;
mod support;
mod tool_agents;
mod tools;
