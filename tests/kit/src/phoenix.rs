//! The Arize Phoenix the OpenTelemetry tests send traces to: the URL in `CHRONICLE_TEST_PHOENIX`
//! (what `make test` sets after starting its throwaway server), else the throwaway server
//! itself, started on first use by `tests/phoenix/server.sh` (which reuses one already running).

use std::sync::OnceLock;

/// The server's HTTP base (its OTLP/HTTP endpoint, its REST API and its UI).
pub fn url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| crate::throwaway("CHRONICLE_TEST_PHOENIX", "phoenix", "Phoenix"))
        .clone()
}
