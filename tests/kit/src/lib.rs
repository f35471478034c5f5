//! What Chronicle's tests share beyond one crate: test doubles for what cannot run here (a model), a small tmpfs for full-disk tests, and text that does not compress.
//! Only tests depend on this crate.

pub mod model;
pub mod phoenix;
pub mod postgres;
pub mod tmpfs;

/// `bytes` ASCII letters that do not compress (a xorshift sequence seeded by `seed`): the store
/// keeps a record that compresses below its sled value limit inline, so a test of the body file
/// needs records that do not.
pub fn incompressible_text(bytes: usize, seed: u64) -> String {
    let mut x = seed | 1 << 32;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'A' + (x % 58) as u8)
        })
        .collect()
}
