//! Chronicle's event store.

mod sled_log;

pub use sled_log::*;
