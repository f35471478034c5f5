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

/// Its OTLP/gRPC endpoint (the one `url` names is OTLP/HTTP).
pub fn grpc_url() -> String {
    url();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../phoenix/server.sh");
    let out = std::process::Command::new("bash")
        .args([script, "otlp-grpc"])
        .output()
        .expect("bash runs tests/phoenix/server.sh");
    String::from_utf8(out.stdout)
        .expect("a UTF-8 URL")
        .trim()
        .to_owned()
}
