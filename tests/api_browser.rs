//! Browser safety, with raw requests and with a real headless Chromium (Debian's `chromium`,
//! which `make test` installs): a page of another origin cannot open the WebSocket, cancel or
//! restore a run, or read a stream of a server that needs no token; a page of an origin given
//! with `--cors-origin` can, with a token and one-time stream tickets. Also the Host check
//! (DNS rebinding), 415 for state changes that are not JSON, CORS preflights and 405.

use std::process::Stdio;
use std::time::Duration;

use axum::extract::State;
use axum::response::Html;
use chronicle_api::{ApiConfig, Tokens};
use chronicle_schemas::{RunId, RunStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api_support::{Server, server, server_settings};

const QUERY: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(60);
const TOKEN: &str = "tok-browser-ui-0123456789";

/// A run waiting for its first approval, and the checkpoint it is at.
async fn waiting_run(srv: &Server, token: Option<&str>) -> (RunId, String) {
    let mut req = srv
        .http
        .post(srv.url("/api/v1/agent/run"))
        .json(&json!({"query": QUERY, "hitl": "every_todo"}));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let started: Value = req.send().await.unwrap().json().await.unwrap();
    let run: RunId = serde_json::from_value(started["run_id"].clone()).unwrap();
    let s = srv.engine.wait_settled(run, GUARD).await.unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::WaitingForApproval);
    (run, s.checkpoints.head.unwrap().0)
}

fn port(srv: &Server) -> u16 {
    srv.base.rsplit(':').next().unwrap().parse().unwrap()
}

async fn status_of(req: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_origin_and_content_type_are_checked_before_anything() {
    let srv = server(Tokens::none(), None).await;
    let (run, cp) = waiting_run(&srv, None).await;
    let p = port(&srv);
    let cancel = srv.url(&format!("/api/v1/agent/{run}/cancel"));
    let restore = srv.url(&format!("/api/v1/agent/{run}/checkpoints/{cp}/restore"));
    let before = srv.offsets();

    // DNS rebinding: a name that is not this server's, even on its port.
    let (status, body) = status_of(
        srv.http
            .get(srv.url("/api/v1/runs"))
            .header("host", format!("evil.example:{p}")),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_host"))
    );
    for host in [
        format!("localhost:{p}"),
        format!("127.0.0.1:{p}"),
        format!("[::1]:{p}"),
    ] {
        let res = srv
            .http
            .get(srv.url("/api/v1/runs"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{host}");
    }
    let (status, _) = status_of(
        srv.http
            .get(srv.url("/api/v1/runs"))
            .header("host", format!("localhost:{}", p.wrapping_add(1))),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Another origin: 403, whatever the request.
    for origin in ["http://127.0.0.1:1", "http://evil.example", "null"] {
        let (status, body) = status_of(
            srv.http
                .post(&cancel)
                .header("origin", origin)
                .json(&json!({})),
        )
        .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::FORBIDDEN, Some("forbidden_origin")),
            "{origin}"
        );
        let (status, _) = status_of(
            srv.http
                .get(srv.url("/api/v1/events"))
                .header("origin", origin),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
    }
    // Not JSON: 415, also for a request without fields.
    for req in [
        srv.http
            .post(&cancel)
            .header("content-type", "text/plain")
            .body("{}"),
        srv.http.post(&cancel).body("{}"),
        srv.http.post(&restore),
        srv.http
            .post(&restore)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("a=1"),
    ] {
        let (status, body) = status_of(req).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Some("unsupported_media_type")
            )
        );
    }
    // JSON, but no body at all: 400 (send `{}`).
    let (status, _) = status_of(
        srv.http
            .post(&restore)
            .header("content-type", "application/json"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(srv.offsets(), before, "a refused request wrote something");
    assert_eq!(
        srv.engine.state(run, None).unwrap().supervisor.run_status,
        RunStatus::WaitingForApproval
    );

    // 405 speaks JSON and says what is allowed.
    let res = srv
        .http
        .delete(srv.url("/api/v1/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(res.headers()["allow"].to_str().unwrap().contains("GET"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");

    // The same origin (and `null` body for cancel) works.
    let own = format!("http://127.0.0.1:{p}");
    let (status, body) = status_of(
        srv.http
            .post(&restore)
            .header("origin", &own)
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = status_of(
        srv.http
            .post(&cancel)
            .header("origin", format!("http://localhost:{p}"))
            .json(&Value::Null),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    srv.engine.shutdown().await;
}

/// A server with tokens (`ui`'s is `TOKEN`) that lets pages of `origin` use it.
async fn with_cors_origin(origin: &str) -> Server {
    let config = ApiConfig {
        cors_origins: vec![origin.to_owned()],
        ..ApiConfig::default()
    };
    server_settings(
        Tokens::single("ui", TOKEN).unwrap(),
        chronicle_realestate::settings(),
        config,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflights_answer_only_the_listed_origins() {
    let ui = "http://ui.example.test:5173";
    let srv = with_cors_origin(ui).await;
    let preflight = |origin: &'static str| {
        srv.http
            .request(Method::OPTIONS, srv.url("/api/v1/agent/run"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .send()
    };
    let res = preflight(ui).await.unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let h = res.headers();
    assert_eq!(h["access-control-allow-origin"], ui);
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    let res = preflight("http://evil.example").await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(res.headers().get("access-control-allow-origin").is_none());
    // An answer to the listed origin says it may read it.
    let res = srv
        .http
        .get(srv.url("/api/v1/runs"))
        .header("origin", ui)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["access-control-allow-origin"], ui);
    srv.engine.shutdown().await;
}

// ------------------------------------------------------------------ headless Chromium

/// The page a browser loads from the other origin. It tries, against `target`, each thing a
/// hostile page would (or, with `token`, what a UI does), and posts what happened to `/report`.
const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><title>other origin</title><script>
const q = new URLSearchParams(location.search);
const target = q.get('target'), run = q.get('run'), cp = q.get('cp'), token = q.get('token');
const auth = token ? {'Authorization': 'Bearer ' + token} : {};
const json = {...auth, 'Content-Type': 'application/json'};
const settle = (p, ms) => Promise.race([p, new Promise(r => setTimeout(() => r('timeout'), ms))]);
async function ticket() {
  if (!token) return '';
  const r = await fetch(target + '/api/v1/stream-tickets', {method: 'POST', headers: json, body: '{}'});
  return '?ticket=' + (await r.json()).ticket;
}
function socket(suffix) {
  return settle(new Promise(res => {
    const s = new WebSocket(target.replace('http', 'ws') + '/ws' + suffix);
    s.onmessage = m => { res('message:' + JSON.parse(m.data).type); s.close(); };
    s.onerror = () => res('error');
  }), 10000);
}
function stream(suffix) {
  return settle(new Promise(res => {
    const es = new EventSource(target + '/api/v1/agent/' + run + '/events' + suffix);
    es.addEventListener('run.started', () => { res('event:run.started'); es.close(); });
    es.onerror = () => { res('error'); es.close(); };
  }), 10000);
}
async function call(path, init) {
  try {
    const r = await fetch(target + path, init);
    return r.type === 'opaque' ? 'opaque' : 'status:' + r.status;
  } catch (e) { return 'blocked'; }
}
(async () => {
  const out = {};
  try {
    out.ws = await socket(await ticket());
    out.stream = await stream(await ticket());
    out.read = await call('/api/v1/agent/' + run + '/status', {headers: auth});
    // What a hostile page can send without a preflight: text/plain, no-cors.
    out.cancel_simple = await call('/api/v1/agent/' + run + '/cancel', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: '{}'});
    out.restore_simple = await call('/api/v1/agent/' + run + '/checkpoints/' + cp + '/restore', {method: 'POST', mode: 'no-cors'});
    // What a UI sends: JSON (preflighted).
    out.restore = await call('/api/v1/agent/' + run + '/checkpoints/' + cp + '/restore', {method: 'POST', headers: json, body: '{}'});
    out.cancel = await call('/api/v1/agent/' + run + '/cancel', {method: 'POST', headers: json, body: '{"reason": "from the page"}'});
  } catch (e) { out.failure = String(e); }
  await fetch('/report', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(out)});
})();
</script>"#;

/// Serves [`PAGE`] on its own loopback port and hands over what it reports.
async fn page_server() -> (String, mpsc::Receiver<Value>) {
    let (tx, rx) = mpsc::channel(1);
    let app = axum::Router::new()
        .route("/page", axum::routing::get(|| async { Html(PAGE) }))
        .route(
            "/report",
            axum::routing::post(|State(tx): State<mpsc::Sender<Value>>, axum::Json(v): axum::Json<Value>| async move {
                let _ = tx.send(v).await;
            }),
        )
        .with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (origin, rx)
}

/// Loads `url` in headless Chromium and waits for the page's report.
async fn browse(url: &str, reports: &mut mpsc::Receiver<Value>) -> Value {
    let profile = tempfile::tempdir().unwrap();
    let mut chromium = tokio::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("Debian's `chromium` runs (`make test` installs it: apt-get install chromium)");
    let report = tokio::time::timeout(GUARD, reports.recv())
        .await
        .expect("the page reports within the guard")
        .unwrap();
    let _ = chromium.kill().await;
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_cannot_drive_a_server_without_tokens() {
    let srv = server(Tokens::none(), None).await;
    let (run, cp) = waiting_run(&srv, None).await;
    let (origin, mut reports) = page_server().await;
    let before = srv.offsets();
    let url = format!("{origin}/page?target={}&run={run}&cp={cp}", srv.base);
    let got = browse(&url, &mut reports).await;
    assert_eq!(
        got,
        json!({
            "ws": "error",
            "stream": "error",
            "read": "blocked",
            "cancel_simple": "opaque",
            "restore_simple": "opaque",
            "restore": "blocked",
            "cancel": "blocked",
        }),
    );
    // The opaque (fire-and-forget) requests were refused too: nothing was written.
    assert_eq!(srv.offsets(), before);
    assert_eq!(
        srv.engine.state(run, None).unwrap().supervisor.run_status,
        RunStatus::WaitingForApproval
    );
    srv.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_a_cors_origin_drives_the_server_with_a_token_and_tickets() {
    let (origin, mut reports) = page_server().await;
    let srv = with_cors_origin(&origin).await;
    let (run, cp) = waiting_run(&srv, Some(TOKEN)).await;
    let url = format!(
        "{origin}/page?target={}&run={run}&cp={cp}&token={TOKEN}",
        srv.base
    );
    let got = browse(&url, &mut reports).await;
    assert_eq!(
        got,
        json!({
            "ws": "message:connected",
            "stream": "event:run.started",
            "read": "status:200",
            // Without a token (no-cors cannot send one) and not JSON: refused all the same.
            "cancel_simple": "opaque",
            "restore_simple": "opaque",
            "restore": "status:200",
            "cancel": "status:200",
        }),
    );
    let s = srv.engine.state(run, None).unwrap().supervisor;
    assert_eq!(s.run_status, RunStatus::Cancelled);
    srv.engine.shutdown().await;
}
