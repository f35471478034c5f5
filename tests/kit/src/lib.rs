//! What Chronicle's tests share beyond one crate: test doubles for what cannot run here (a model), and a small tmpfs for full-disk tests.
//! Only tests depend on this crate.

pub mod model;
pub mod tmpfs;
