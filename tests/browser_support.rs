//! A real headless Chromium (Debian's `chromium`, which `make test` installs), driven over the
//! DevTools protocol: enough of it to open pages, run script in them, wait for what they show,
//! and take screenshots. One browser at a time: each is a process with its own profile, killed
//! when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The longest any wait of a browser test lasts: a guard against a hang, never a measurement.
pub const GUARD: Duration = Duration::from_secs(60);

/// One headless Chromium and its one page.
pub struct Browser {
    child: tokio::process::Child,
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium on a blank page.
    pub async fn launch() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let child = tokio::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting chromium (make test installs it)");
        // Chromium writes the port it chose into the profile.
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + GUARD;
        let port: u16 = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Some(Ok(p)) = text.lines().next().map(str::parse)
            {
                break p;
            }
            assert!(
                Instant::now() < deadline,
                "chromium never opened its debugging port"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let targets: Value = loop {
            let got = reqwest::get(format!("http://127.0.0.1:{port}/json/list")).await;
            if let Ok(res) = got
                && let Ok(v) = res.json::<Value>().await
                && v.as_array()
                    .is_some_and(|a| a.iter().any(|t| t["type"] == "page"))
            {
                break v;
            }
            assert!(Instant::now() < deadline, "chromium never listed its page");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let url = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .unwrap()
            .to_owned();
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut b = Browser {
            child,
            ws,
            next_id: 0,
            _profile: profile,
        };
        b.call("Page.enable", json!({})).await;
        b.call("Runtime.enable", json!({})).await;
        b
    }

    /// One DevTools command and its result (events that arrive meanwhile are skipped).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::Text(msg.into())).await.unwrap();
        let deadline = Instant::now() + GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = tokio::time::timeout(left, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let Some(Ok(Message::Text(text))) = next else {
                continue;
            };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {}", v["error"]);
                return v["result"].clone();
            }
        }
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait("document.readyState === 'complete' && !!document.body")
            .await;
    }

    /// The value of a script expression run in the page (a promise is awaited).
    pub async fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Waits until `condition` (a script expression) is true in the page.
    pub async fn wait(&mut self, condition: &str) {
        let deadline = Instant::now() + GUARD;
        loop {
            let r = self
                .call(
                    "Runtime.evaluate",
                    json!({"expression": format!("!!({condition})"), "returnByValue": true}),
                )
                .await;
            if r["result"]["value"] == true {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed: {condition}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Saves a PNG of the page as `target/console-screenshots/<name>.png`.
    pub async fn screenshot(&mut self, name: &str) {
        let r = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        let dir = screenshots();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Where the screenshots go: `target/console-screenshots/` of the workspace.
pub fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("console-screenshots")
}
