//! Chronicle's one integration-test binary: black-box tests across crates.

mod crash;
mod store;
mod support;
