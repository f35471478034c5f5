//! The PostgreSQL the tests run against: the URL in `CHRONICLE_TEST_PG` (what `make test` sets
//! after starting its throwaway server), else the throwaway server itself, started on first use
//! by `tests/postgres/server.sh` (which reuses one already running).

use std::sync::OnceLock;

/// The test server's URL (a database the tests may make schemas in).
pub fn url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| crate::throwaway("CHRONICLE_TEST_PG", "postgres", "PostgreSQL"))
        .clone()
}

/// A schema name no other test uses (`t_` and 24 hex digits).
pub fn fresh_schema() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "t_{:08x}{:08x}{:08x}",
        std::process::id(),
        nanos as u32,
        N.fetch_add(1, Ordering::Relaxed) as u32
    )
}

/// [`url`] with the store in `schema`.
pub fn url_with_schema(schema: &str) -> String {
    let url = url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}schema={schema}")
}
