//! Chronicle's one integration-test binary: black-box tests across crates.

mod agents;
mod commands;
mod crash;
mod engine;
mod engine_crash;
mod scenarios;
mod store;
mod support;
