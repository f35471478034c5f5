//! Helpers shared by the integration tests.

use chronicle_engine::store::{Options, Store};
pub use chronicle_store::conformance::{note, run, run_started};

pub fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, Options::default()).expect("store opens")
}

pub use chronicle_testkit::tmpfs::Tmpfs;
