//! The web console over plain HTTP, against a real server: every page's status and security
//! headers; the board at `?at=N` checked TODO by TODO against the engine's state at that seq; the
//! diff page against the shared semantic diff; text a model or a user shaped shown as text; and
//! the sign-in: no cookie → the login page, the cookie `HttpOnly` and `SameSite=Strict`, another
//! principal's run 404, a cookie change without the CSRF token or from another origin refused
//! with nothing written.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry};
use chronicle_schemas::{HitlMode, RunConfig, RunId};
use reqwest::header::{CONTENT_SECURITY_POLICY, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::api_support::{ALICE, BOB, ROOT, Server, principals, server, server_with};
use crate::support::{approve, asking_about, completed, first_pending, start};

/// The policy every console answer carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const WAIT: Duration = Duration::from_secs(20);

/// A client that does not follow redirects (a redirect is what some tests check).
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// GET `path` with these headers: status, headers and body.
async fn fetch(
    srv: &Server,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let mut req = browser().get(srv.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let h = res.headers().clone();
    (status, h, res.text().await.unwrap())
}

/// Every `data-todo="…" data-status="…"` pair of a board.
fn board_statuses(html: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for part in html.split("<tr data-todo=\"").skip(1) {
        let id = part.split('"').next().unwrap().to_owned();
        let status = part
            .split("data-status=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap()
            .to_owned();
        out.insert(id, status);
    }
    out
}

/// The TODO statuses the engine gives for `run` right after `seq` (the newest when `None`).
pub(crate) fn engine_statuses(
    srv: &Server,
    run: RunId,
    seq: Option<u64>,
) -> BTreeMap<String, String> {
    let s = srv.engine.state(run, seq).unwrap();
    s.supervisor
        .planning_state
        .map(|p| {
            p.todos
                .iter()
                .map(|t| (t.id.to_string(), t.status.as_str().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The TODO transitions (`todo from to`) of the shared diff of `run` from seq `a` to seq `b`.
pub(crate) fn transitions(srv: &Server, run: RunId, a: u64, b: u64) -> Vec<String> {
    let d = chronicle_projections::diff::diff(
        &srv.engine.state(run, Some(a)).unwrap(),
        &srv.engine.state(run, Some(b)).unwrap(),
    );
    d.todos_changed
        .iter()
        .filter_map(|t| {
            let s = t.status.as_ref()?;
            Some(format!(
                "{} {} {}",
                t.todo_id,
                s.from.as_str(),
                s.to.as_str()
            ))
        })
        .collect()
}

/// A run with approval on every TODO, approved one by one to the end.
async fn approved_run(srv: &Server, query: &str) -> RunId {
    let config = RunConfig {
        hitl: HitlMode::EveryTodo,
        ..RunConfig::default()
    };
    let run = start(&srv.engine, config.clone()).await;
    let _ = query;
    loop {
        let s = srv.engine.state(run, None).unwrap();
        if s.supervisor.run_status.is_terminal() {
            break;
        }
        if s.approvals.pending().next().is_some() {
            approve(&srv.engine, run, first_pending(&s), "local").await;
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    completed(&srv.engine, run).await;
    run
}

#[tokio::test]
async fn every_page_answers_with_a_strict_policy() {
    let srv = server(Tokens::none(), None).await;
    let run = approved_run(&srv, "").await;
    let (status, h, _) = fetch(&srv, "/", &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(h[LOCATION], "/console/");
    for path in [
        "/console/".to_owned(),
        "/console/runs".into(),
        "/console/runs?status=completed".into(),
        "/console/runs/table".into(),
        format!("/console/runs/{run}"),
        format!("/console/runs/{run}?at=3"),
        format!("/console/runs/{run}/board?at=3"),
        format!("/console/runs/{run}/timeline?kind=todo"),
        format!("/console/runs/{run}/diff?from=2&to=9"),
        "/console/approvals".into(),
        "/console/approvals?status=approved".into(),
        "/console/sessions".into(),
    ] {
        let (status, h, body) = fetch(&srv, &path, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(h[CONTENT_SECURITY_POLICY], CSP, "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["cache-control"], "no-store", "{path}");
        assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
        // No inline script anywhere: the policy would block it, and nothing needs it.
        assert!(
            !body.contains("<script>") && !body.contains("onclick="),
            "{path}"
        );
    }
    // The script and style the pages name are served, cached for good.
    let (_, _, home) = fetch(&srv, "/console/", &[]).await;
    let script = home
        .split("<script src=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap();
    let (status, h, body) = fetch(&srv, script, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(h["cache-control"].to_str().unwrap().contains("immutable"));
    assert!(body.contains("X-CSRF-Token"));
    let (status, _, _) = fetch(&srv, "/console/assets/console.js", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    srv.stop().await;
}

#[tokio::test]
async fn the_board_at_a_seq_is_the_state_at_that_seq() {
    let srv = server(Tokens::none(), None).await;
    let run = approved_run(&srv, "").await;
    let head = srv.engine.state(run, None).unwrap();
    let last = head.last_seq.unwrap();
    let newest = engine_statuses(&srv, run, None);
    let mut differs = 0;
    for seq in 0..=last {
        for path in [
            format!("/console/runs/{run}?at={seq}"),
            format!("/console/runs/{run}/board?at={seq}"),
        ] {
            let (status, _, body) = fetch(&srv, &path, &[]).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            let want = engine_statuses(&srv, run, Some(seq));
            assert_eq!(board_statuses(&body), want, "{path}");
            assert!(body.contains(&format!("data-seq=\"{seq}\"")), "{path}");
            if want != newest {
                differs += 1;
            }
        }
    }
    assert!(
        differs > 0,
        "some seq must show another board than the newest"
    );
    // Beyond the last seq: a clear refusal, as the JSON route gives.
    let (status, _, body) = fetch(&srv, &format!("/console/runs/{run}?at={}", last + 1), &[]).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body.contains("beyond the run&#x27;s last seq") || body.contains("beyond the run"),
        "{body}"
    );
    for (tooth, path) in [
        (
            "past the end",
            format!("/console/runs/{run}/timeline?from={}", last + 1),
        ),
        ("backwards", format!("/console/runs/{run}/diff?from=5&to=2")),
        (
            "past the end",
            format!("/console/runs/{run}/diff?from=0&to={}", last + 1),
        ),
    ] {
        let (status, _, _) = fetch(&srv, &path, &[]).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{tooth}: {path}");
    }
    for bad in [
        "/console/runs/not-a-run".to_owned(),
        format!("/console/runs/{run}?at=x"),
        format!("/console/runs/{run}?kind=nope"),
        format!("/console/runs/{run}?unknown=1"),
        "/console/approvals?status=maybe".into(),
        "/console/approvals?kind=both".into(),
    ] {
        let (status, _, _) = fetch(&srv, &bad, &[]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let missing = RunId::from_u128(7);
    let (status, _, _) = fetch(&srv, &format!("/console/runs/{missing}"), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    srv.stop().await;
}

#[tokio::test]
async fn the_timeline_and_the_diff_agree_with_the_log_and_the_shared_diff() {
    let srv = server(Tokens::none(), None).await;
    let run = approved_run(&srv, "").await;
    let last = srv.engine.state(run, None).unwrap().last_seq.unwrap();
    let (_, _, body) = fetch(&srv, &format!("/console/runs/{run}"), &[]).await;
    let timeline = body.split("id=\"timeline\"").nth(1).unwrap();
    let seqs: Vec<u64> = timeline
        .split("<tr data-seq=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(seqs, (0..=last).collect::<Vec<_>>());
    // The kind filter keeps only that kind.
    let (_, _, body) = fetch(
        &srv,
        &format!("/console/runs/{run}/timeline?kind=approval"),
        &[],
    )
    .await;
    let kinds: Vec<&str> = body
        .split("data-kind=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| *k == "approval"),
        "{kinds:?}"
    );
    // The diff page lists the TODO transitions the shared diff computes.
    // From the first approval request on, every TODO changes.
    let from = srv.engine.state(run, None).unwrap().approvals.list[0].requested_seq;
    let (_, _, body) = fetch(
        &srv,
        &format!("/console/runs/{run}/diff?from={from}&to={last}"),
        &[],
    )
    .await;
    let want = transitions(&srv, run, from, last);
    let got: Vec<String> = body
        .split("<li class=\"d-change\" data-todo=\"")
        .skip(1)
        .map(|s| {
            let f = |k: &str| {
                s.split(k)
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_owned()
            };
            format!(
                "{} {} {}",
                s.split('"').next().unwrap(),
                f("data-from=\""),
                f("data-to=\"")
            )
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    srv.stop().await;
}

/// An agent whose reply is attacker-shaped: it fails with markup for an error.
struct Hostile(AgentInfo);

const ATTACK: &str = "<img src=x onerror=alert(1)> and <script>alert(2)</script>";

#[async_trait::async_trait]
impl Agent for Hostile {
    fn info(&self) -> &AgentInfo {
        &self.0
    }
    async fn run(&self, _: &AgentContext, _: Value) -> Result<AgentOutput, AgentError> {
        Err(AgentError::fatal(ATTACK))
    }
}

#[tokio::test]
async fn text_from_users_and_agents_is_shown_as_text() {
    let mut registry = Registry::empty();
    registry.register(Arc::new(Hostile(AgentInfo::new(
        "hostile",
        "test",
        "replies with markup",
    ))));
    let srv = server(Tokens::none(), Some(registry)).await;
    let plan = json!([{"agent_name": "hostile", "team": "test", "timeout": 30}]);
    let body = json!({"query": ATTACK, "hitl": "none", "plan": plan});
    let (status, started) = crate::api_support::post(&srv, "", "/api/v1/agent/run", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run: RunId = serde_json::from_value(started["run_id"].clone()).unwrap();
    let s = srv.engine.wait_settled(run, WAIT).await.unwrap();
    assert!(s.supervisor.run_status.is_terminal());
    let todo = &s.supervisor.planning_state.as_ref().unwrap().todos[0];
    assert_eq!(
        todo.error.as_deref(),
        Some(ATTACK),
        "the agent's reply is in the state"
    );
    for path in [
        format!("/console/runs/{run}"),
        format!("/console/runs/{run}/board"),
        format!("/console/runs/{run}/timeline"),
        format!("/console/runs/{run}/diff?from=0"),
        "/console/runs".into(),
        "/console/".into(),
        format!("/console/sessions/{}", s.supervisor.session_id.0),
    ] {
        let (status, _, html) = fetch(&srv, &path, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let at = html.find("<img").or_else(|| html.find("<script>alert"));
        assert!(
            at.is_none(),
            "{path}: {}",
            &html[at.unwrap_or(0).saturating_sub(200)..]
        );
        // Shown as text: escaped (askama writes `<` as `&#60;`).
        let text = html.replace("&#60;", "&lt;").replace("&#62;", "&gt;");
        assert!(
            text.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{path}"
        );
    }
    srv.stop().await;
}

/// Signs `token` in with the server's own origin: the cookie pair and the CSRF token the pages
/// carry.
async fn sign_in(srv: &Server, token: &str) -> (String, String) {
    let res = browser()
        .post(srv.url("/console/session"))
        .header("origin", &srv.base)
        .json(&json!({"token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let set = res.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let (_, _, page) = fetch(srv, "/console/", &[("cookie", &cookie)]).await;
    let csrf = page
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned();
    assert_eq!(csrf.len(), 64);
    (cookie, csrf)
}

/// A JSON POST with the cookie (and whatever else is given): its status.
async fn cookie_post(
    srv: &Server,
    path: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> StatusCode {
    let mut req = browser().request(Method::POST, srv.url(path)).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap().status()
}

#[tokio::test]
async fn a_signed_in_browser_acts_as_its_principal_and_nobody_else() {
    let config = ApiConfig {
        cors_origins: vec!["http://ui.example.test".into()],
        ..ApiConfig::default()
    };
    let srv = server_with(principals(), None, config).await;
    // No cookie: the login page, remembering where to go.
    let (status, h, _) = fetch(&srv, "/console/runs?status=failed", &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        h[LOCATION],
        "/console/login?next=%2Fconsole%2Fruns%3Fstatus%3Dfailed"
    );
    let (status, _, login) = fetch(&srv, "/console/login?next=/console/runs", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(login.contains("type=\"password\""));
    // A wrong token signs nobody in.
    let res = browser()
        .post(srv.url("/console/session"))
        .json(&json!({"token": "tok-nobody-1234567"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(res.headers().get(SET_COOKIE).is_none());

    // Only the console's own page signs a browser in.
    for origin in ["http://ui.example.test", "http://evil.example"] {
        let res = browser()
            .post(srv.url("/console/session"))
            .header("origin", origin)
            .json(&json!({"token": ALICE}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{origin}");
        assert!(res.headers().get(SET_COOKIE).is_none());
    }

    let (alice, alice_csrf) = sign_in(&srv, ALICE).await;
    let (bob, _) = sign_in(&srv, BOB).await;
    let (_, _, home) = fetch(&srv, "/console/", &[("cookie", &alice)]).await;
    assert!(
        home.contains("id=\"principal\">alice<"),
        "the header names alice"
    );
    // How busy the whole server is, is an admin's to see.
    assert!(!home.contains("events in the log"));
    let (_, _, home) = fetch(
        &srv,
        "/console/",
        &[("authorization", &format!("Bearer {ROOT}"))],
    )
    .await;
    assert!(home.contains("events in the log"));
    // A console session opens no WebSocket: its messages would carry changes without the
    // CSRF token.
    let ws = browser()
        .get(srv.url("/ws"))
        .header("cookie", &alice)
        .header("origin", &srv.base)
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(ws.status(), StatusCode::UNAUTHORIZED);

    // Alice starts a run through the JSON API with her cookie: it is hers.
    let own = [
        ("cookie", alice.as_str()),
        ("origin", srv.base.as_str()),
        ("x-csrf-token", alice_csrf.as_str()),
    ];
    let res = browser()
        .post(srv.url("/api/v1/agent/run"))
        .header("cookie", &alice)
        .header("origin", &srv.base)
        .header("x-csrf-token", &alice_csrf)
        .json(&json!({"query": "전세 계약 갱신 방법", "hitl": "every_todo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let run: RunId =
        serde_json::from_value(res.json::<Value>().await.unwrap()["run_id"].clone()).unwrap();
    let s = asking_about(&srv.engine, run, "todo_001").await;
    assert_eq!(s.supervisor.owner, "alice");

    // Bob's console does not show it.
    let (status, _, _) = fetch(&srv, &format!("/console/runs/{run}"), &[("cookie", &bob)]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, runs) = fetch(&srv, "/console/runs", &[("cookie", &bob)]).await;
    assert!(!runs.contains(&run.to_string()));
    // The counts by status are of each one's own runs.
    for (cookie, waiting) in [(&alice, 1), (&bob, 0)] {
        for page in ["/console/", "/console/runs"] {
            let (_, _, html) = fetch(&srv, page, &[("cookie", cookie)]).await;
            let want = format!(">waiting_for_approval {waiting}<");
            assert!(html.contains(&want), "{page}: {want}");
        }
    }
    let (_, _, inbox) = fetch(&srv, "/console/approvals", &[("cookie", &bob)]).await;
    assert!(!inbox.contains(&run.to_string()));
    let (_, _, inbox) = fetch(&srv, "/console/approvals", &[("cookie", &alice)]).await;
    assert!(inbox.contains(&run.to_string()));

    // Changes with the cookie alone are refused unless they carry the CSRF token and come
    // from the server's own origin; nothing is written.
    let approval = first_pending(&s);
    let decision = format!("/api/v1/agent/{run}/approvals/{approval}/decision");
    let before = srv.offsets();
    let body = json!({"decision": "approve"});
    let forged = "0".repeat(64);
    let refusals = [
        (
            vec![("cookie", alice.as_str()), ("origin", srv.base.as_str())],
            StatusCode::FORBIDDEN,
        ),
        (
            vec![
                ("cookie", alice.as_str()),
                ("x-csrf-token", alice_csrf.as_str()),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            vec![
                ("cookie", alice.as_str()),
                ("origin", srv.base.as_str()),
                ("x-csrf-token", forged.as_str()),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            vec![
                ("cookie", alice.as_str()),
                ("origin", "http://evil.example"),
                ("x-csrf-token", alice_csrf.as_str()),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            vec![
                ("cookie", alice.as_str()),
                ("origin", srv.base.as_str()),
                ("x-csrf-token", alice_csrf.as_str()),
                ("sec-fetch-site", "cross-site"),
            ],
            StatusCode::FORBIDDEN,
        ),
        // A --cors-origin page may call the API with a token, never with the cookie.
        (
            vec![
                ("cookie", alice.as_str()),
                ("origin", "http://ui.example.test"),
                ("x-csrf-token", alice_csrf.as_str()),
            ],
            StatusCode::UNAUTHORIZED,
        ),
        (
            vec![
                ("cookie", bob.as_str()),
                ("origin", srv.base.as_str()),
                ("x-csrf-token", alice_csrf.as_str()),
            ],
            StatusCode::FORBIDDEN,
        ),
    ];
    for (headers, want) in refusals {
        assert_eq!(
            cookie_post(&srv, &decision, body.clone(), &headers).await,
            want,
            "{headers:?}"
        );
    }
    assert_eq!(srv.offsets(), before, "a refused change wrote nothing");

    // With everything in place the decision is alice's.
    assert_eq!(
        cookie_post(&srv, &decision, body, &own).await,
        StatusCode::OK
    );
    let a = srv.engine.state(run, None).unwrap();
    assert_eq!(
        a.approvals.get(&approval).unwrap().decided_by.as_deref(),
        Some("alice")
    );

    // Signing out ends the session: the cookie opens nothing.
    assert_eq!(
        cookie_post(&srv, "/console/logout", json!({}), &own).await,
        StatusCode::NO_CONTENT
    );
    let (status, _, _) = fetch(&srv, "/console/", &[("cookie", &alice)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _, _) = fetch(&srv, "/api/v1/runs", &[("cookie", &alice)]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let _ = tokio::time::timeout(WAIT, completed(&srv.engine, run)).await;
    srv.stop().await;
}
