//! What Chronicle's tests share beyond one crate: test doubles for what cannot run here.
//! Only tests depend on this crate.

pub mod model;
