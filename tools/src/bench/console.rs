//! The console: what a person waits for on the run page of a 200-TODO run, served by the real
//! router over loopback: the page's weight (HTML, script, style), the server's time to the whole
//! page (newest and at a past seq), and one scrub step (the board at a seq, what the slider
//! fetches).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::Engine;
use chronicle_schemas::RunId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

use super::engine::{close_engine, full_run, long_config, open_engine, start_req};
use super::report::Row;
use super::{Plan, ms, percentile, progress};

/// Requests of each timed page.
const REQUESTS: usize = 50;
const REQUESTS_QUICK: usize = 5;
/// The longest answer read, in bytes.
const ANSWER_BYTES_MAX: u64 = 16 * 1024 * 1024;

pub fn section(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let todos = plan.long_todos;
    let dir = root.join("console");
    let engine = open_engine(rt, &dir)?;
    let config = long_config(todos);
    progress(&format!("console: one {todos}-TODO run, and its run page"));
    let (run, _) = rt.block_on(full_run(&engine, &start_req(&config)))?;
    let rows = rt.block_on(measure(&engine, run, todos, plan));
    close_engine(rt, engine);
    plan.discard(&dir);
    rows
}

async fn measure(engine: &Engine, run: RunId, todos: usize, plan: &Plan) -> Result<Vec<Row>> {
    let state = AppState::new(engine.clone(), Tokens::none(), ApiConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(chronicle_api::serve(
        listener,
        state.bound_to(([127, 0, 0, 1], port).into()),
        async move {
            let _ = stopped.await;
        },
    ));
    let last = engine.state(run, None)?.last_seq.unwrap_or(0);
    let past = last / 2;
    let reps = if plan.quick { REQUESTS_QUICK } else { REQUESTS };

    let (page, page_bytes) = get(port, &format!("/console/runs/{run}")).await?;
    let asset = |kind: &str| -> Result<String> {
        let start = format!("{kind}=\"/console/assets/");
        let at = page
            .find(&start)
            .with_context(|| format!("the run page names no {kind} asset"))?;
        let rest = &page[at + start.len() - "/console/assets/".len()..];
        Ok(rest.split('"').next().unwrap_or_default().to_owned())
    };
    let (_, script_bytes) = get(port, &asset("src")?).await?;
    let (_, style_bytes) = get(port, &asset("href")?).await?;
    let shown = page.matches("<tr data-todo=").count();
    if shown != todos {
        bail!("the run page shows {shown} TODOs of {todos}");
    }
    let mut rows = vec![
        Row::new(
            "console_run_page_kb",
            format!("console: run page of a {todos}-TODO run, HTML / script / style"),
            (page_bytes + script_bytes + style_bytes) as f64 / 1000.0,
            "KB",
        )
        .note(format!(
            "HTML {:.1} KB (the board, the checkpoints, 200 timeline rows), script {:.1} KB, style {:.1} KB; script and style cached for good after the first page",
            page_bytes as f64 / 1000.0,
            script_bytes as f64 / 1000.0,
            style_bytes as f64 / 1000.0
        )),
    ];
    for (id, what, path) in [
        (
            "console_run_page_ms",
            "the whole run page, newest seq",
            format!("/console/runs/{run}"),
        ),
        (
            "console_run_page_past_ms",
            "the whole run page at a past seq",
            format!("/console/runs/{run}?at={past}"),
        ),
        (
            "console_scrub_step_ms",
            "one scrub step (the board at a seq)",
            format!("/console/runs/{run}/board?at={past}"),
        ),
    ] {
        progress(&format!("console: {what} × {reps}"));
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            get(port, &path).await?;
            times.push(ms(t.elapsed()));
        }
        let p50 = percentile(&mut times, 0.5);
        let p99 = percentile(&mut times, 0.99);
        rows.push(
            Row::new(id, format!("console: {what}, server time p50"), p50, "ms").note(format!(
                "p99 {p99:.2} ms over {reps} requests, each the whole answer over a new loopback connection; {todos} TODOs, {} events, seq {past}",
                last + 1
            )),
        );
    }
    let _ = stop.send(());
    server.await.context("the console bench's server")??;
    Ok(rows)
}

/// One GET over a new loopback connection, read to the end: the body and its size in bytes.
async fn get(port: u16, path: &str) -> Result<(String, usize)> {
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    (&mut conn)
        .take(ANSWER_BYTES_MAX)
        .read_to_end(&mut answer)
        .await?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("GET {path}: not an HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    Ok((body.to_owned(), body.len()))
}
