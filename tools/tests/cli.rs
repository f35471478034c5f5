//! The `chronicle` binary, black-box: one integration-test binary for the CLI.
mod cli_agents;
mod cli_bench;
mod cli_chat;
mod cli_inspect;
mod cli_mcp;
mod cli_remote;
mod cli_run;
mod cli_sessions;
mod cluster;
mod durability;
mod lazyfs;
mod postgres;
mod readme;
mod serve_bounds;
