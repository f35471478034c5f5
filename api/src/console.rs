//! The web console's routes: `GET /` redirects to `/console/`, whose pages (rendered by
//! `chronicle_console`) only read, with the caller's rights, what the JSON routes read; every
//! change a page makes is a request of the JSON API from the browser. Besides the pages: the
//! login page, `POST /console/session` (a token exchanged once for an `HttpOnly` session
//! cookie), `POST /console/logout`, and the script and style sheet.
//!
//! Every answer here carries a strict Content-Security-Policy (the page's own script only, no
//! frames around it), `nosniff` and no referrer; pages with data are not cached.

use std::collections::HashMap;

use askama::Template;
use axum::Router;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chronicle_console as console;
use chronicle_engine::index::{self, RunScope};
use chronicle_engine::{Engine, Principal as Who};
use chronicle_projections::{Branches, RunState, restore_of};
use chronicle_schemas::{ApprovalStatus, Envelope, RunId, RunStatus, SessionId};
use chronicle_wire::{CheckpointEntry, Inbox, Order, RunsQuery, SessionsQuery};
use serde::Deserialize;

use crate::auth::{SESSION_COOKIE, SESSION_LIFETIME_MS, X_API_KEY, session_cookie};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Query, RunPath, SessionPath};
use crate::lists::{INBOX_ITEMS_MAX, inbox_items, page, parse_status};
use crate::state::{AppState, now};

/// The most events one timeline page steps over to find those of its kind.
const TIMELINE_SCAN_EVENTS_MAX: u64 = 5_000;
/// The newest runs the home page lists.
const HOME_RUNS: usize = 10;
/// Runs on one runs page.
const RUNS_PAGE_RUNS: usize = 50;
/// Runs a runs page with a text filter looks at to find those whose query matches.
const RUNS_TEXT_SCAN_RUNS: usize = 200;
/// Sessions on one sessions page.
const SESSIONS_PAGE_SESSIONS: usize = 50;

/// The console's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console/") }))
        .route("/console", get(|| async { Redirect::to("/console/") }))
        .route("/console/", get(home))
        .route("/console/login", get(login))
        .route("/console/session", post(sign_in))
        .route("/console/logout", post(sign_out))
        .route("/console/runs", get(runs))
        .route("/console/runs/table", get(runs_table))
        .route("/console/runs/{run_id}", get(run))
        .route("/console/runs/{run_id}/board", get(board))
        .route("/console/runs/{run_id}/timeline", get(timeline))
        .route("/console/runs/{run_id}/diff", get(diff))
        .route("/console/approvals", get(approvals))
        .route("/console/sessions", get(sessions))
        .route("/console/sessions/{session_id}", get(session))
        .route("/console/assets/{name}", get(asset))
        .layer(middleware::from_fn(page_headers))
}

/// The headers of every console answer.
async fn page_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(console::CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    res
}

// ------------------------------------------------------------------ who is looking

/// The person a page is for: a server without tokens shows everything to `local`; with tokens,
/// a request's own `Authorization` or its console session, else the login page.
struct Viewer {
    who: Who,
    auth: &'static str,
    csrf: String,
}

impl Viewer {
    fn chrome(&self, title: impl Into<String>, nav: console::Nav) -> console::Chrome {
        console::Chrome::new(title, nav, &self.who.name, self.auth, &self.csrf)
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;
    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Response> {
        if st.tokens.is_empty() {
            return Ok(Viewer {
                who: Who::local(),
                auth: "open",
                csrf: String::new(),
            });
        }
        let to_login = || {
            let next = parts
                .uri
                .path_and_query()
                .map_or("/console/", |p| p.as_str());
            Redirect::to(&format!(
                "/console/login?next={}",
                console::encode_query(next)
            ))
            .into_response()
        };
        match session_cookie(&st.tokens, &parts.headers) {
            Some(cookie) => match st.sessions.check(cookie, parts, &st.site) {
                Ok(s) => Ok(Viewer {
                    who: s.principal,
                    auth: "cookie",
                    csrf: s.csrf_token,
                }),
                Err(_) => Err(to_login()),
            },
            None if parts.headers.contains_key(header::AUTHORIZATION)
                || parts.headers.contains_key(X_API_KEY) =>
            {
                match st.tokens.of_headers(&parts.headers) {
                    Ok(who) => Ok(Viewer {
                        who,
                        auth: "bearer",
                        csrf: String::new(),
                    }),
                    Err(e) => Err(e.into_response()),
                }
            }
            None => Err(to_login()),
        }
    }
}

// ------------------------------------------------------------------ answers

/// A rendered page.
fn html(page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

/// A refusal as a page: the status and the message, and the way back.
fn refused(viewer: &Viewer, e: ApiError) -> Response {
    let page = console::ErrorPage::new(
        viewer.chrome("Not shown", console::Nav::Home),
        e.status.as_u16(),
        &e.message,
    );
    let mut res = html(&page);
    *res.status_mut() = e.status;
    res
}

/// Runs `read` off the async workers (the store's reads are synchronous) and answers its page,
/// or its refusal as a page.
async fn read_page<P: Template + Send + 'static>(
    viewer: Viewer,
    read: impl FnOnce(&Viewer) -> ApiResult<P> + Send + 'static,
) -> Response {
    let done = tokio::task::spawn_blocking(move || {
        let page = read(&viewer);
        (viewer, page)
    })
    .await;
    match done {
        Ok((_, Ok(page))) => html(&page),
        Ok((viewer, Err(e))) => refused(&viewer, e),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

// ------------------------------------------------------------------ sign in and out

#[derive(Debug, Deserialize)]
struct LoginQuery {
    next: Option<String>,
}

async fn login(State(st): State<AppState>, Query(q): Query<LoginQuery>) -> Response {
    if st.tokens.is_empty() {
        return Redirect::to("/console/").into_response();
    }
    html(&console::LoginPage::new(
        q.next.as_deref().unwrap_or("/console/"),
    ))
}

/// `POST /console/session`: `{"token": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    token: String,
}

#[derive(Debug, serde::Serialize)]
struct SignedIn {
    principal: String,
}

async fn sign_in(
    State(st): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<SignIn>,
) -> Response {
    if st.tokens.is_empty() {
        return ApiError::bad_request("this server has no tokens: the console needs no sign-in")
            .into_response();
    }
    // Only the console's own page signs a browser in: another site (a `--cors-origin` one
    // included) cannot sign a visitor in as someone else.
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if origin.is_some_and(|o| !st.site.own_origin(o, host))
        || fetch_site.is_some_and(|s| s != "same-origin")
    {
        return ApiError::forbidden("the console signs in only from its own login page")
            .into_response();
    }
    let who = match st.tokens.of_token(body.token.trim()) {
        Ok(who) => who,
        Err(e) => return e.into_response(),
    };
    let (cookie, _) = match st.sessions.open(who.clone()) {
        Ok(opened) => opened,
        Err(e) => return e.into_response(),
    };
    // Behind TLS (a proxy that says so, or a page of an https origin) the cookie never travels
    // over plain HTTP.
    let tls = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"))
        || origin.is_some_and(|o| o.starts_with("https://"));
    let set = format!(
        "{SESSION_COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        SESSION_LIFETIME_MS / 1000,
        if tls { "; Secure" } else { "" }
    );
    let value = match HeaderValue::from_str(&set) {
        Ok(v) => v,
        Err(e) => return ApiError::internal(e).into_response(),
    };
    let mut res = axum::Json(SignedIn {
        principal: who.name,
    })
    .into_response();
    res.headers_mut().insert(header::SET_COOKIE, value);
    res
}

/// The cookie that ends a console session in the browser.
const SIGNED_OUT: &str = "chronicle_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0";

async fn sign_out(
    State(st): State<AppState>,
    headers: HeaderMap,
    _: crate::auth::Principal,
) -> Response {
    if let Some(cookie) = session_cookie(&st.tokens, &headers) {
        st.sessions.close(cookie);
    }
    let mut res = StatusCode::NO_CONTENT.into_response();
    res.headers_mut()
        .insert(header::SET_COOKIE, HeaderValue::from_static(SIGNED_OUT));
    res
}

async fn asset(Path(name): Path<String>) -> Response {
    match console::asset(&name) {
        Some(a) => (
            [
                (header::CONTENT_TYPE, a.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            a.bytes,
        )
            .into_response(),
        None => ApiError::not_found(format!("no console asset {name}")).into_response(),
    }
}

// ------------------------------------------------------------------ home and lists

/// The newest `n` runs `who` may see.
fn newest_runs(engine: &Engine, who: &Who, n: usize) -> ApiResult<Vec<chronicle_wire::RunSummary>> {
    let q = RunsQuery {
        limit: Some(n),
        order: Some(Order::Desc),
        ..RunsQuery::default()
    };
    Ok(page(engine.store(), &q, own_scope(who)?, &mut || {})?.runs)
}

/// How many runs of `scope` are in each status (from the index's counters).
fn counts_of(engine: &Engine, scope: RunScope<'_>) -> ApiResult<Vec<(RunStatus, u64)>> {
    index::catch_up(engine.store())?;
    Ok(index::status_counts(engine.store(), scope)?)
}

/// The scope of the runs `who` sees without naming an owner.
fn own_scope(who: &Who) -> ApiResult<RunScope<'_>> {
    Ok(match who.list_owner(None)? {
        None => RunScope::Visible,
        Some(owner) => RunScope::Owner(owner),
    })
}

fn pending_inbox(engine: &Engine, who: &Who) -> ApiResult<Inbox> {
    inbox(engine, who, ApprovalStatus::Pending)
}

fn inbox(engine: &Engine, who: &Who, status: ApprovalStatus) -> ApiResult<Inbox> {
    let now = now();
    let (items, truncated) = inbox_items(engine, who, status, None, now, INBOX_ITEMS_MAX)?;
    Ok(Inbox {
        status,
        now,
        count: items.len(),
        truncated,
        approvals: items,
    })
}

async fn home(State(st): State<AppState>, viewer: Viewer) -> Response {
    let open_streams = u64::try_from(st.metrics.open_streams.get()).unwrap_or(0);
    read_page(viewer, move |v| {
        let store = st.engine.store();
        // How busy the whole server is tells of everyone's work: an admin's to see.
        let health = v.who.admin.then(|| console::Health {
            storage: match store.health() {
                chronicle_engine::store::StorageHealth::Ok => "ok",
                chronicle_engine::store::StorageHealth::Full { .. } => "full",
                chronicle_engine::store::StorageHealth::Failed(_) => "failed",
            }
            .to_owned(),
            open_streams,
            events: store.durable_next_offset(),
        });
        Ok(console::HomePage::new(
            v.chrome("Home", console::Nav::Home),
            &newest_runs(&st.engine, &v.who, HOME_RUNS)?,
            &counts_of(&st.engine, own_scope(&v.who)?)?,
            &pending_inbox(&st.engine, &v.who)?,
            health,
            now(),
        ))
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsPageQuery {
    #[serde(default, deserialize_with = "empty_none_named")]
    status: Option<RunStatus>,
    #[serde(default, deserialize_with = "empty_none")]
    owner: Option<String>,
    #[serde(default, deserialize_with = "empty_none")]
    session_id: Option<String>,
    #[serde(default, deserialize_with = "empty_none")]
    q: Option<String>,
    #[serde(default, deserialize_with = "empty_none")]
    after: Option<RunId>,
}

/// A form's empty field is no filter.
fn empty_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let s: Option<String> = Option::deserialize(d)?;
    match s.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => v.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// [`empty_none`] for a value named by its JSON string (a status).
fn empty_none_named<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let s: Option<String> = Option::deserialize(d)?;
    match s.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => serde_json::from_value(serde_json::Value::String(v.to_owned()))
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// What a runs page shows: its filters, its page of runs, and how many runs of the scope it
/// lists are in each status.
struct RunsRead {
    filters: console::RunFilters,
    list: chronicle_wire::RunList,
    counts: Vec<(RunStatus, u64)>,
}

fn runs_of(engine: &Engine, who: &Who, q: RunsPageQuery, counted: bool) -> ApiResult<RunsRead> {
    let scope = match who.list_owner(q.owner.as_deref())? {
        None => RunScope::Visible,
        Some(owner) => RunScope::Owner(owner),
    };
    let filters = console::RunFilters {
        status: q.status,
        owner: q.owner.clone(),
        session: q.session_id.clone(),
        text: q.q.clone(),
    };
    // A text filter looks at more runs per page: it keeps only those that match.
    let limit = if q.q.is_some() {
        RUNS_TEXT_SCAN_RUNS
    } else {
        RUNS_PAGE_RUNS
    };
    let query = RunsQuery {
        session_id: q.session_id,
        status: q.status,
        after: q.after,
        limit: Some(limit),
        order: Some(Order::Desc),
        owner: None,
    };
    let list = page(engine.store(), &query, scope, &mut || {})?;
    let counts = if counted {
        counts_of(engine, scope)?
    } else {
        Vec::new()
    };
    Ok(RunsRead {
        filters,
        list,
        counts,
    })
}

async fn runs(
    State(st): State<AppState>,
    viewer: Viewer,
    Query(q): Query<RunsPageQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let read = runs_of(&st.engine, &v.who, q, true)?;
        Ok(console::RunsPage::new(
            v.chrome("Runs", console::Nav::Runs),
            read.filters,
            &read.list.runs,
            read.list.next,
            &read.counts,
            v.who.admin,
            now(),
        ))
    })
    .await
}

async fn runs_table(
    State(st): State<AppState>,
    viewer: Viewer,
    Query(q): Query<RunsPageQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let read = runs_of(&st.engine, &v.who, q, false)?;
        Ok(console::RunsFragment {
            table: console::RunsTable::new(&read.filters, &read.list.runs, read.list.next),
        })
    })
    .await
}

// ------------------------------------------------------------------ a run

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunPageQuery {
    #[serde(default, deserialize_with = "empty_none")]
    at: Option<u64>,
    #[serde(default, deserialize_with = "empty_none")]
    from: Option<u64>,
    #[serde(default, deserialize_with = "empty_none")]
    kind: Option<String>,
}

/// What a run's page reads: the newest state and the run's shape.
struct RunRead {
    run: RunId,
    head: RunState,
    last_seq: u64,
    branches: Branches,
    checkpoints: Vec<CheckpointEntry>,
}

impl RunRead {
    /// `run`, one `who` may see (another's is 404).
    fn of(engine: &Engine, who: &Who, run: RunId) -> ApiResult<Self> {
        engine.authorize(who, run)?;
        let head = engine.state(run, None)?;
        let last_seq = head.last_seq.unwrap_or(0);
        // Which seqs a restore abandoned: the restores are in the log, read only when the run
        // has been restored (the state counts them).
        let branches = if head.checkpoints.branch > 0 {
            let mut restores = HashMap::new();
            for env in engine.store().read_run(run, 0, last_seq) {
                let env = env?;
                if let Some(to) = restore_of(&env) {
                    restores.insert(env.seq, to);
                }
            }
            Branches::new(last_seq, &restores)
        } else {
            Branches::default()
        };
        let checkpoints = head
            .checkpoints
            .with_abandoned()
            .into_iter()
            .map(|(c, abandoned)| CheckpointEntry::new(c, abandoned))
            .collect();
        Ok(Self {
            run,
            head,
            last_seq,
            branches,
            checkpoints,
        })
    }

    /// The board right after `at` (the newest seq when `None`).
    fn board(&self, engine: &Engine, at: Option<u64>) -> ApiResult<console::BoardFragment> {
        let seq = match at {
            Some(at) if at > self.last_seq => {
                return Err(ApiError::unprocessable(format!(
                    "seq {at} is beyond the run's last seq {}",
                    self.last_seq
                )));
            }
            Some(at) => at,
            None => self.last_seq,
        };
        let past;
        let view = if seq == self.last_seq {
            &self.head
        } else {
            past = engine.state(self.run, Some(seq))?;
            &past
        };
        let event = engine
            .store()
            .read_run(self.run, seq, seq)
            .next()
            .transpose()?;
        Ok(console::BoardFragment {
            board: console::Board::new(
                self.run,
                view,
                self.last_seq,
                event.as_ref(),
                self.branches.is_abandoned(seq),
                &self.checkpoints,
            ),
        })
    }

    /// The timeline page `q` asks for.
    fn timeline(&self, engine: &Engine, q: &RunPageQuery) -> ApiResult<console::Timeline> {
        if let Some(k) = &q.kind
            && !console::TimelineRequest::kind_ok(k)
        {
            return Err(ApiError::bad_request(format!("unknown event kind {k:?}")));
        }
        let request = console::TimelineRequest {
            from: q.from,
            kind: q.kind.clone(),
        };
        let from = request.start(self.last_seq);
        if from > self.last_seq {
            return Err(ApiError::unprocessable(format!(
                "seq {from} is beyond the run's last seq {}",
                self.last_seq
            )));
        }
        let page = console::TIMELINE_PAGE_EVENTS as u64;
        let scan = if request.kind.is_some() {
            TIMELINE_SCAN_EVENTS_MAX
        } else {
            page
        };
        let until = from.saturating_add(scan - 1).min(self.last_seq);
        let mut events: Vec<Envelope> = Vec::new();
        let mut read_to = from;
        for env in engine.store().read_run(self.run, from, until) {
            let env = env?;
            read_to = env.seq;
            if request.wants(&env) {
                events.push(env);
                if events.len() as u64 >= page {
                    break;
                }
            }
        }
        let branches = &self.branches;
        Ok(console::Timeline::new(
            self.run,
            &request,
            &events,
            read_to,
            self.last_seq,
            &|seq| branches.is_abandoned(seq),
        ))
    }
}

async fn run(
    State(st): State<AppState>,
    viewer: Viewer,
    RunPath(run): RunPath,
    Query(q): Query<RunPageQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let read = RunRead::of(&st.engine, &v.who, run)?;
        let board = read.board(&st.engine, q.at)?;
        let timeline = read.timeline(&st.engine, &q)?;
        Ok(console::RunPage::new(
            v.chrome(format!("Run {run}"), console::Nav::Runs),
            run,
            &read.head,
            board,
            &read.checkpoints,
            timeline,
            now(),
        ))
    })
    .await
}

async fn board(
    State(st): State<AppState>,
    viewer: Viewer,
    RunPath(run): RunPath,
    Query(q): Query<RunPageQuery>,
) -> Response {
    read_page(viewer, move |v| {
        RunRead::of(&st.engine, &v.who, run)?.board(&st.engine, q.at)
    })
    .await
}

async fn timeline(
    State(st): State<AppState>,
    viewer: Viewer,
    RunPath(run): RunPath,
    Query(q): Query<RunPageQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let read = RunRead::of(&st.engine, &v.who, run)?;
        Ok(console::TimelineFragment {
            timeline: read.timeline(&st.engine, &q)?,
        })
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffQuery {
    #[serde(default, deserialize_with = "empty_none")]
    from: Option<u64>,
    #[serde(default, deserialize_with = "empty_none")]
    to: Option<u64>,
}

async fn diff(
    State(st): State<AppState>,
    viewer: Viewer,
    RunPath(run): RunPath,
    Query(q): Query<DiffQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let read = RunRead::of(&st.engine, &v.who, run)?;
        let from = q.from.unwrap_or(0);
        let to = q.to.unwrap_or(read.last_seq);
        for seq in [from, to] {
            if seq > read.last_seq {
                return Err(ApiError::unprocessable(format!(
                    "seq {seq} is beyond the run's last seq {}",
                    read.last_seq
                )));
            }
        }
        if from > to {
            return Err(ApiError::unprocessable(format!(
                "from ({from}) must not be after to ({to})"
            )));
        }
        let a = st.engine.state(run, Some(from))?;
        let b = st.engine.state(run, Some(to))?;
        Ok(console::DiffPage::new(
            v.chrome(format!("Diff of run {run}"), console::Nav::Runs),
            run,
            from,
            to,
            read.last_seq,
            &chronicle_projections::diff::diff(&a, &b),
        ))
    })
    .await
}

// ------------------------------------------------------------------ approvals and sessions

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalsQuery {
    #[serde(default, deserialize_with = "empty_none")]
    status: Option<String>,
    #[serde(default, deserialize_with = "empty_none")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "empty_none")]
    tool: Option<String>,
}

async fn approvals(
    State(st): State<AppState>,
    viewer: Viewer,
    Query(q): Query<ApprovalsQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let status = parse_status(q.status.as_deref().unwrap_or("pending"))?;
        if let Some(k) = q.kind.as_deref()
            && k != "todo"
            && k != "tool"
        {
            return Err(ApiError::bad_request(format!(
                "kind must be todo or tool, got {k:?}"
            )));
        }
        Ok(console::ApprovalsPage::new(
            v.chrome("Approvals", console::Nav::Approvals),
            &inbox(&st.engine, &v.who, status)?,
            q.kind.as_deref(),
            q.tool.as_deref(),
        ))
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionsPageQuery {
    #[serde(default, deserialize_with = "empty_none")]
    cursor: Option<String>,
}

async fn sessions(
    State(st): State<AppState>,
    viewer: Viewer,
    Query(q): Query<SessionsPageQuery>,
) -> Response {
    read_page(viewer, move |v| {
        let query = SessionsQuery {
            cursor: q.cursor,
            limit: Some(SESSIONS_PAGE_SESSIONS),
            ..SessionsQuery::default()
        };
        Ok(console::SessionsPage::new(
            v.chrome("Sessions", console::Nav::Sessions),
            &st.engine.sessions(&v.who, &query)?,
        ))
    })
    .await
}

async fn session(
    State(st): State<AppState>,
    viewer: Viewer,
    SessionPath(session): SessionPath,
) -> Response {
    read_page(viewer, move |v| {
        let detail = st.engine.session(&v.who, &session)?;
        let pending = match detail.turns.last() {
            Some(t) => st
                .engine
                .state(t.run_id, None)?
                .approvals
                .pending()
                .next()
                .map(|a| chronicle_wire::ApprovalView::new(t.run_id, a.clone())),
            None => None,
        };
        let title = format!("Session {}", SessionId::as_str(&session));
        Ok(console::SessionPage::new(
            v.chrome(title, console::Nav::Sessions),
            &detail,
            pending.as_ref(),
        ))
    })
    .await
}
