//! The console in a real headless Chromium, walked as a person would, each step checked against
//! the engine and the API, never against what the page says about itself: sign in as alice (the
//! session cookie unreadable by script); start a run with approval on every TODO and see the
//! board fill without a reload; approve a TODO by editing its arguments in the inbox; see the run
//! finish live; the timeline's rows are the log's; scrub back to the first approval request and
//! see the board the state at that seq has; the diff page's transitions are the shared diff's;
//! restore that checkpoint and see the abandoned branch; and a page of another origin cannot
//! decide with alice's cookie. A screenshot of each proven state goes to
//! `target/console-screenshots/`.

use std::collections::BTreeMap;

use chronicle_schemas::{ApprovalStatus, Event, RunId, RunStatus};
use serde_json::json;

use crate::api_support::{ALICE, Server, post, principals, server};
use crate::browser_support::Browser;

const QUERY: &str = "강남구 아파트 매매 시세 알려줘";

/// The TODO statuses the engine gives for `run` right after `seq` (the newest when `None`).
fn engine_board(srv: &Server, run: RunId, seq: Option<u64>) -> BTreeMap<String, String> {
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

/// The TODO statuses the page's board shows.
async fn page_board(b: &mut Browser) -> BTreeMap<String, String> {
    let v = b
        .eval("Object.fromEntries([...document.querySelectorAll('#board tr[data-todo]')].map(r => [r.dataset.todo, r.dataset.status]))")
        .await;
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_walks_the_console_in_a_real_browser() {
    let srv = server(principals(), None).await;
    let mut b = Browser::launch().await;

    // Sign in: the token once, then a cookie the page cannot read.
    b.open(&srv.url("/console/runs")).await;
    b.wait("location.pathname === '/console/login'").await;
    b.eval(&format!(
        "document.getElementById('token').value = {ALICE:?}; document.getElementById('login').requestSubmit(); true"
    ))
    .await;
    b.wait("location.pathname === '/console/runs' && !!document.getElementById('runs-table')")
        .await;
    assert_eq!(b.eval("document.cookie").await, json!(""));
    assert_eq!(
        b.eval("document.getElementById('principal').textContent").await,
        json!("alice")
    );
    b.screenshot("01-runs").await;

    // Start a run from the home page; its board fills without a reload.
    b.open(&srv.url("/console/")).await;
    b.eval(&format!(
        "const f = document.getElementById('start'); f.elements.query.value = {QUERY:?}; f.elements.hitl.value = 'every_todo'; f.requestSubmit(); true"
    ))
    .await;
    b.wait("/^\\/console\\/runs\\/[0-9a-f-]{36}$/.test(location.pathname)").await;
    let run: RunId = b
        .eval("location.pathname.split('/')[3]")
        .await
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    b.eval("window.__marker = 1").await;
    b.wait("document.querySelector('#board tr[data-todo=\"todo_001\"]')?.dataset.status === 'waiting_approval'")
        .await;
    assert_eq!(b.eval("window.__marker").await, json!(1), "no reload");
    assert_eq!(page_board(&mut b).await, engine_board(&srv, run, None));
    assert_eq!(srv.engine.state(run, None).unwrap().supervisor.owner, "alice");
    b.screenshot("02-live-board").await;

    // The inbox: edit the arguments of todo_001's approval, and approve with them.
    b.open(&srv.url("/console/approvals")).await;
    let card = format!("article.approval[data-run=\"{run}\"]");
    b.wait(&format!("!!document.querySelector('{card}')")).await;
    b.eval(&format!(
        "document.querySelector('{card} [data-decision=\"edit-open\"]').click(); \
         const t = document.querySelector('{card} textarea'); \
         const a = JSON.parse(t.value); a.note = 'edited in the console'; \
         t.value = JSON.stringify(a, null, 2); true"
    ))
    .await;
    b.wait(&format!("!document.querySelector('{card} .editor').hidden")).await;
    b.screenshot("03-inbox-editor").await;
    let asked = srv.engine.state(run, None).unwrap();
    let first = asked.approvals.pending().next().unwrap().clone();
    b.eval(&format!("document.querySelector('{card} [data-decision=\"edit\"]').click(); true"))
        .await;
    b.wait(&format!("!document.querySelector('{card}[data-approval=\"{}\"]')", first.approval_id))
        .await;
    let decided = srv.engine.state(run, None).unwrap();
    let a = decided.approvals.get(&first.approval_id).unwrap();
    assert_eq!(a.status, ApprovalStatus::Edited);
    assert_eq!(a.decided_by.as_deref(), Some("alice"));
    assert_eq!(a.edited_args.as_ref().unwrap()["note"], "edited in the console");

    // The run page follows the run to its end while alice approves the rest over the API.
    b.open(&srv.url(&format!("/console/runs/{run}"))).await;
    b.eval("window.__marker = 2").await;
    loop {
        let s = srv.engine.wait_settled(run, crate::browser_support::GUARD).await.unwrap();
        if s.supervisor.run_status.is_terminal() {
            break;
        }
        if let Some(p) = s.approvals.pending().next() {
            let path = format!("/api/v1/agent/{run}/approvals/{}/decision", p.approval_id);
            post(&srv, ALICE, &path, json!({"decision": "approve"})).await;
        }
    }
    b.wait("document.getElementById('run-status')?.textContent === 'completed' && document.getElementById('timeline')?.dataset.tail === 'true'")
        .await;
    let head = srv.engine.state(run, None).unwrap();
    assert_eq!(head.supervisor.run_status, RunStatus::Completed);
    let last = head.last_seq.unwrap();
    b.wait(&format!("document.querySelector('#board')?.dataset.lastSeq === '{last}'")).await;
    assert_eq!(b.eval("window.__marker").await, json!(2), "no reload");
    assert_eq!(page_board(&mut b).await, engine_board(&srv, run, None));

    // The timeline's rows are the log's events.
    let (_, log) = crate::api_support::get(&srv, ALICE, &format!("/api/v1/agent/{run}/log")).await;
    let log_seqs: Vec<u64> = log.as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let rows: Vec<u64> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#timeline tr[data-seq]')].map(r => Number(r.dataset.seq))").await,
    )
    .unwrap();
    assert_eq!(rows, log_seqs);

    // Scrub back to the first approval request: the board is the state at that seq.
    let n = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"].get("ApprovalRequested").is_some())
        .and_then(|e| e["seq"].as_u64())
        .unwrap();
    b.eval(&format!(
        "const s = document.getElementById('scrub'); s.value = '{n}'; s.dispatchEvent(new Event('input', {{bubbles: true}})); true"
    ))
    .await;
    b.wait(&format!("document.getElementById('board')?.dataset.seq === '{n}'")).await;
    let at_n = engine_board(&srv, run, Some(n));
    assert_eq!(page_board(&mut b).await, at_n);
    assert_ne!(at_n, engine_board(&srv, run, None), "the past board differs from the newest");
    assert_eq!(b.eval("location.search").await, json!(format!("?at={n}")));
    // The key `n` steps one seq on, and `p` back.
    b.eval("document.body.dispatchEvent(new KeyboardEvent('keydown', {key: 'n', bubbles: true})); true").await;
    b.wait(&format!("document.getElementById('board')?.dataset.seq === '{}'", n + 1)).await;
    assert_eq!(page_board(&mut b).await, engine_board(&srv, run, Some(n + 1)));
    b.eval("document.body.dispatchEvent(new KeyboardEvent('keydown', {key: 'p', bubbles: true})); true").await;
    b.wait(&format!("document.getElementById('board')?.dataset.seq === '{n}'")).await;
    // The URL is shareable: opened anew, it shows the same board.
    let url = b.eval("location.href").await.as_str().unwrap().to_owned();
    b.open(&url).await;
    assert_eq!(page_board(&mut b).await, at_n);
    b.screenshot("04-scrubbed-board").await;

    // The diff page shows the shared diff's TODO transitions.
    b.open(&srv.url(&format!("/console/runs/{run}/diff?from={n}&to={last}"))).await;
    let shown: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#diff li[data-todo]')].map(l => `${l.dataset.todo} ${l.dataset.from} ${l.dataset.to}`)").await,
    )
    .unwrap();
    let d = chronicle_projections::diff::diff(
        &srv.engine.state(run, Some(n)).unwrap(),
        &srv.engine.state(run, Some(last)).unwrap(),
    );
    let want: Vec<String> = d
        .todos_changed
        .iter()
        .filter_map(|t| t.status.as_ref().map(|s| format!("{} {} {}", t.todo_id, s.from.as_str(), s.to.as_str())))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(shown, want);
    b.screenshot("05-diff").await;

    // Restore the checkpoint at or before that seq: the run waits again, the rest is an
    // abandoned branch.
    let cp = head
        .checkpoints
        .with_abandoned()
        .into_iter()
        .filter(|(c, abandoned)| !abandoned && c.seq <= n)
        .map(|(c, _)| c.checkpoint_id.clone())
        .next_back()
        .unwrap();
    b.open(&srv.url(&format!("/console/runs/{run}"))).await;
    b.eval("window.confirm = () => true; true").await;
    b.eval(&format!("document.querySelector('button[data-action=\"restore\"][data-checkpoint=\"{cp}\"]').click(); true"))
        .await;
    b.wait("document.querySelectorAll('#checkpoints tr[data-abandoned=\"true\"]').length > 0").await;
    let restored = srv.engine.wait_settled(run, crate::browser_support::GUARD).await.unwrap();
    assert!(restored.checkpoints.with_abandoned().iter().any(|(_, abandoned)| *abandoned));
    let events = crate::support::events(&srv.engine, run);
    assert!(events.iter().any(|e| matches!(e.event, Event::RunRestored { .. })));
    b.wait(&format!(
        "document.getElementById('run-status')?.textContent === '{}'",
        restored.supervisor.run_status.as_str()
    ))
    .await;
    b.screenshot("06-checkpoints-after-restore").await;

    // A page of another origin cannot decide with alice's cookie: nothing is written.
    let (other, _stop) = other_origin().await;
    let pending = restored.approvals.pending().next().map(|a| a.approval_id.clone());
    let before = srv.offsets();
    b.open(&other).await;
    let target = match &pending {
        Some(id) => srv.url(&format!("/api/v1/agent/{run}/approvals/{id}/decision")),
        None => srv.url(&format!("/api/v1/agent/{run}/cancel")),
    };
    let outcome = b
        .eval(&format!(
            "fetch({target:?}, {{method: 'POST', credentials: 'include', headers: {{'Content-Type': 'application/json'}}, body: JSON.stringify({{decision: 'approve'}})}}).then(r => 'status ' + r.status, e => 'blocked')"
        ))
        .await;
    assert!(
        outcome == json!("blocked") || outcome == json!("status 403"),
        "{outcome}"
    );
    assert_eq!(srv.offsets(), before, "the log did not move");
    drop(b);
    srv.stop().await;
}

/// A page on another loopback port: another origin than the server's.
async fn other_origin() -> (String, tokio::sync::oneshot::Sender<()>) {
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { axum::response::Html("<!doctype html><title>other</title><p>another site</p>") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (url, stop)
}
