//! Chronicle's one integration-test binary: black-box tests across crates.

mod agents;
mod commands;
mod crash;
mod engine;
mod store;
mod support;
