//! What Chronicle's tests share beyond one crate: test doubles for what cannot run here (a model), a small tmpfs for full-disk tests, and text that does not compress.
//! Only tests depend on this crate.

pub mod model;
pub mod phoenix;
pub mod postgres;
pub mod tmpfs;

/// A server the tests share: the address in `var` (what `make test` sets after starting it),
/// else what `tests/<dir>/server.sh start` prints (the script starts one, or finds it running).
fn throwaway(var: &str, dir: &str, what: &str) -> String {
    if let Ok(url) = std::env::var(var)
        && !url.is_empty()
    {
        return url;
    }
    let script = format!("{}/../{dir}/server.sh", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("start")
        .output()
        .unwrap_or_else(|e| panic!("bash runs {script}: {e}"));
    assert!(
        out.status.success(),
        "the throwaway {what} did not start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("a UTF-8 URL")
        .trim()
        .to_owned()
}

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
