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
use crate::console::{engine_statuses, transitions};

const QUERY: &str = "강남구 아파트 매매 시세 알려줘";

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
        b.eval("document.getElementById('principal').textContent")
            .await,
        json!("alice")
    );
    b.screenshot("01-runs").await;

    // Start a run from the home page; its board fills without a reload.
    b.open(&srv.url("/console/")).await;
    b.eval(&format!(
        "const f = document.getElementById('start'); f.elements.query.value = {QUERY:?}; f.elements.hitl.value = 'every_todo'; f.requestSubmit(); true"
    ))
    .await;
    b.wait("/^\\/console\\/runs\\/[0-9a-f-]{36}$/.test(location.pathname)")
        .await;
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
    assert_eq!(page_board(&mut b).await, engine_statuses(&srv, run, None));
    assert_eq!(
        srv.engine.state(run, None).unwrap().supervisor.owner,
        "alice"
    );
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
    b.wait(&format!("!document.querySelector('{card} .editor').hidden"))
        .await;
    b.screenshot("03-inbox-editor").await;
    let asked = srv.engine.state(run, None).unwrap();
    let first = asked.approvals.pending().next().unwrap().clone();
    b.eval(&format!(
        "document.querySelector('{card} [data-decision=\"edit\"]').click(); true"
    ))
    .await;
    b.wait(&format!(
        "!document.querySelector('{card}[data-approval=\"{}\"]')",
        first.approval_id
    ))
    .await;
    let decided = srv.engine.state(run, None).unwrap();
    let a = decided.approvals.get(&first.approval_id).unwrap();
    assert_eq!(a.status, ApprovalStatus::Edited);
    assert_eq!(a.decided_by.as_deref(), Some("alice"));
    assert_eq!(
        a.edited_args.as_ref().unwrap()["note"],
        "edited in the console"
    );

    // The run page follows the run to its end while alice approves the rest over the API.
    b.open(&srv.url(&format!("/console/runs/{run}"))).await;
    b.eval("window.__marker = 2").await;
    loop {
        let s = srv
            .engine
            .wait_settled(run, crate::browser_support::GUARD)
            .await
            .unwrap();
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
    b.wait(&format!(
        "document.querySelector('#board')?.dataset.lastSeq === '{last}'"
    ))
    .await;
    assert_eq!(b.eval("window.__marker").await, json!(2), "no reload");
    assert_eq!(page_board(&mut b).await, engine_statuses(&srv, run, None));

    // The timeline's rows are the log's events.
    let (_, log) = crate::api_support::get(&srv, ALICE, &format!("/api/v1/agent/{run}/log")).await;
    let log_seqs: Vec<u64> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let rows: Vec<u64> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#timeline tr[data-seq]')].map(r => Number(r.dataset.seq))").await,
    )
    .unwrap();
    assert_eq!(rows, log_seqs);

    // The runs list shows it with the engine's status.
    b.open(&srv.url("/console/runs")).await;
    let row = format!("#runs-table tr[data-run=\"{run}\"]");
    assert_eq!(
        b.eval(&format!("document.querySelector('{row}')?.dataset.status"))
            .await,
        json!(head.supervisor.run_status.as_str())
    );
    b.screenshot("01-runs").await;
    b.open(&srv.url(&format!("/console/runs/{run}"))).await;

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
    b.wait(&format!(
        "document.getElementById('board')?.dataset.seq === '{n}'"
    ))
    .await;
    let at_n = engine_statuses(&srv, run, Some(n));
    assert_eq!(page_board(&mut b).await, at_n);
    assert_ne!(
        at_n,
        engine_statuses(&srv, run, None),
        "the past board differs from the newest"
    );
    assert_eq!(b.eval("location.search").await, json!(format!("?at={n}")));
    // The key `n` steps one seq on, and `p` back.
    b.eval("document.body.dispatchEvent(new KeyboardEvent('keydown', {key: 'n', bubbles: true})); true").await;
    b.wait(&format!(
        "document.getElementById('board')?.dataset.seq === '{}'",
        n + 1
    ))
    .await;
    assert_eq!(
        page_board(&mut b).await,
        engine_statuses(&srv, run, Some(n + 1))
    );
    b.eval("document.body.dispatchEvent(new KeyboardEvent('keydown', {key: 'p', bubbles: true})); true").await;
    b.wait(&format!(
        "document.getElementById('board')?.dataset.seq === '{n}'"
    ))
    .await;
    // The URL is shareable: opened anew, it shows the same board.
    let url = b.eval("location.href").await.as_str().unwrap().to_owned();
    b.open(&url).await;
    assert_eq!(page_board(&mut b).await, at_n);
    b.screenshot("04-scrubbed-board").await;

    // The diff page shows the shared diff's TODO transitions.
    b.open(&srv.url(&format!("/console/runs/{run}/diff?from={n}&to={last}")))
        .await;
    let shown: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#diff li[data-todo]')].map(l => `${l.dataset.todo} ${l.dataset.from} ${l.dataset.to}`)").await,
    )
    .unwrap();
    let want = transitions(&srv, run, n, last);
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
    b.wait("document.querySelectorAll('#checkpoints tr[data-abandoned=\"true\"]').length > 0")
        .await;
    let restored = srv
        .engine
        .wait_settled(run, crate::browser_support::GUARD)
        .await
        .unwrap();
    assert!(
        restored
            .checkpoints
            .with_abandoned()
            .iter()
            .any(|(_, abandoned)| *abandoned)
    );
    let events = crate::support::events(&srv.engine, run);
    assert!(
        events
            .iter()
            .any(|e| matches!(e.event, Event::RunRestored { .. }))
    );
    b.wait(&format!(
        "document.getElementById('run-status')?.textContent === '{}'",
        restored.supervisor.run_status.as_str()
    ))
    .await;
    b.screenshot("06-checkpoints-after-restore").await;

    // A page of another origin cannot decide with alice's cookie: nothing is written.
    let (other, _stop) = other_origin().await;
    let pending = restored
        .approvals
        .pending()
        .next()
        .map(|a| a.approval_id.clone());
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
        axum::routing::get(|| async {
            axum::response::Html("<!doctype html><title>other</title><p>another site</p>")
        }),
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

/// The answer the scripted model streams, in three parts with a gate after each of the first
/// two (each part longer than what the server holds back of a stream).
const PARTS: [&str; 3] = [
    "강남역 근처 30평대 아파트 매매 시세는 13억에서 15억 사이입니다. 역에서 가까울수록 비쌉니다. ",
    "최근 석 달 동안 거래가 조금 늘었고, 호가는 지난해보다 조금 올랐습니다. 전세가율은 오십 퍼센트 안팎입니다. ",
    "자세한 매물은 목록을 보세요. 이상입니다.",
];

/// The open SSE and WebSocket streams the server counts.
async fn open_streams(srv: &Server) -> u64 {
    let text = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("chronicle_open_streams "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_shows_its_answer_growing_as_the_model_writes_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chronicle_engine::llm::{LlmConfig, OpenAiCompat};
    use chronicle_testkit::model::{Gate, Piece, Reply, TestServer};

    let gates = [Gate::new(), Gate::new()];
    let answers = Arc::new(AtomicUsize::new(0));
    let (g, n) = (gates.clone(), answers.clone());
    let model = TestServer::start(None, move |body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if !system.contains("formatting real estate information") {
            return Reply::Status(500);
        }
        // The first turn's answer comes whole; the second one streams behind the gates.
        if n.fetch_add(1, Ordering::SeqCst) == 0 {
            return Reply::Content(json!({"answer": "첫 답입니다.", "insights": []}).to_string());
        }
        let mut pieces = vec![Piece::Content("{\"answer\": \"".into())];
        pieces.push(Piece::Content(PARTS[0].into()));
        pieces.push(Piece::Wait(g[0].clone()));
        pieces.push(Piece::Content(PARTS[1].into()));
        pieces.push(Piece::Wait(g[1].clone()));
        pieces.push(Piece::Content(PARTS[2].into()));
        pieces.push(Piece::Content("\", \"insights\": []}".into()));
        Reply::Stream(pieces)
    })
    .await;
    let llm = LlmConfig {
        base_url: model.base_url.clone(),
        model: "test-model".into(),
        api_key: None,
        timeout_ms: 30_000,
    };
    let settings = chronicle_engine::Settings {
        llm: Some(Arc::new(OpenAiCompat::new(llm).unwrap())),
        ..chronicle_realestate::settings()
    };
    let srv = crate::api_support::server_settings(
        chronicle_api::Tokens::none(),
        settings,
        chronicle_api::ApiConfig::default(),
    )
    .await;

    // A first turn, so the session exists.
    let (status, started) = post(
        &srv,
        "",
        "/api/v1/agent/run",
        json!({"query": QUERY, "session_id": "console-chat"}),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{started}");
    let first: RunId = serde_json::from_value(started["run_id"].clone()).unwrap();
    crate::support::completed(&srv.engine, first).await;

    let mut b = Browser::launch().await;
    b.open(&srv.url("/console/sessions/console-chat")).await;
    b.wait("document.querySelectorAll('#turns .turn').length === 1")
        .await;
    // Record every length the newest answer shows, as the page changes.
    b.eval(
        "window.__lengths = []; new MutationObserver(() => { \
           const a = [...document.querySelectorAll('#turns .turn .a')]; \
           if (a.length > 1) window.__lengths.push(a[a.length - 1].textContent.length); \
         }).observe(document.getElementById('turns'), {subtree: true, childList: true, characterData: true}); true",
    )
    .await;
    let before = open_streams(&srv).await;
    b.eval(&format!(
        "const f = document.getElementById('send'); f.elements.message.value = {:?}; f.requestSubmit(); true",
        "지난 석 달 거래는 어땠어?"
    ))
    .await;
    b.wait("document.querySelectorAll('#turns .turn').length === 2")
        .await;
    // The page follows the new run before the model says anything.
    let deadline = std::time::Instant::now() + crate::browser_support::GUARD;
    while open_streams(&srv).await <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "the page never opened the run's stream"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let shown = "(() => { const a = [...document.querySelectorAll('#turns .turn .a')]; return a[a.length - 1].textContent; })()";
    b.wait(&format!("{shown}.length > 0")).await;
    let step1 = b.eval(shown).await.as_str().unwrap().to_owned();
    assert!(
        PARTS[0].starts_with(&step1) || step1.starts_with(PARTS[0].trim_end()),
        "{step1}"
    );
    b.screenshot("07-session-mid-stream").await;
    gates[0].open();
    b.wait(&format!("{shown}.length > {}", step1.chars().count()))
        .await;
    gates[1].open();
    let whole: String = PARTS.concat();
    b.wait(&format!("{shown} === {:?}", whole.trim_end())).await;
    let run = srv
        .engine
        .latest_run_of(
            &chronicle_engine::Principal::local(),
            &chronicle_schemas::SessionId("console-chat".into()),
        )
        .unwrap()
        .unwrap();
    let done = crate::support::completed(&srv.engine, run).await;
    let answer = chronicle_wire::answer_text(done.supervisor.final_response.as_ref().unwrap());
    assert_eq!(answer.trim_end(), whole.trim_end());
    let lengths: Vec<usize> = serde_json::from_value(b.eval("window.__lengths").await).unwrap();
    let final_len = whole.trim_end().chars().count();
    let mut steps: Vec<usize> = lengths
        .iter()
        .copied()
        .filter(|l| *l > 0 && *l < final_len)
        .collect();
    steps.dedup();
    assert!(
        steps.len() >= 2,
        "the answer grew in visible steps before its end: {lengths:?}"
    );
    drop(b);
    srv.stop().await;
}
