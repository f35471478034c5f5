//! The Arize Phoenix the OpenTelemetry tests send traces to: the URL in `CHRONICLE_TEST_PHOENIX`
//! (what `make test` sets after starting its throwaway server), else the throwaway server
//! itself, started on first use by `tests/phoenix/server.sh` (which reuses one already running).

use std::sync::OnceLock;

/// The server's HTTP base (its OTLP/HTTP endpoint, its REST API and its UI).
pub fn url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("CHRONICLE_TEST_PHOENIX")
            && !url.is_empty()
        {
            return url;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../phoenix/server.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .arg("start")
            .output()
            .expect("bash runs tests/phoenix/server.sh");
        assert!(
            out.status.success(),
            "the throwaway Phoenix did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("a UTF-8 URL")
            .trim()
            .to_owned()
    })
    .clone()
}
