//! A real Chronicle server for black-box API tests: the production router served on an ephemeral
//! loopback port over a temp data dir, with the one client every surface uses (`chronicle-client`)
//! and a raw HTTP client for the requests a typed client cannot send (malformed bodies, odd
//! headers).

use std::time::Duration;

use chronicle_api::{ApiConfig, AppState, Tokens};
use chronicle_engine::agents::Registry;
use chronicle_engine::store::{Create, Options, PgLog, Store, Target};
use chronicle_engine::{Engine, Settings};
use reqwest::{Method, StatusCode};
use serde_json::Value;

pub struct Server {
    pub base: String,
    pub engine: Engine,
    /// The typed client (no token).
    pub client: chronicle_client::Client,
    /// Raw HTTP, only for what the typed client cannot send: malformed or unknown-field bodies,
    /// bad path or query values, odd headers.
    pub http: reqwest::Client,
    /// Kept so the data dir lives as long as the server.
    pub _dir: tempfile::TempDir,
    /// The server's schema on PostgreSQL, dropped with it.
    pub _schema: Option<DropSchema>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Starts a server; `registry: None` = the built-in agents.
pub async fn server(tokens: Tokens, registry: Option<Registry>) -> Server {
    server_with(tokens, registry, ApiConfig::default()).await
}

pub async fn server_with(tokens: Tokens, registry: Option<Registry>, config: ApiConfig) -> Server {
    let mut settings = chronicle_realestate::settings();
    if let Some(r) = registry {
        settings.registry = r;
    }
    server_settings(tokens, settings, config).await
}

/// A server over an engine with these settings, on the sled store in a temporary directory, or
/// on PostgreSQL inside [`on_postgres`].
pub async fn server_settings(tokens: Tokens, mut settings: Settings, config: ApiConfig) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let on_postgres = BACKEND
        .try_with(|opened| opened.set(opened.get() + 1))
        .is_ok();
    if !on_postgres {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        return server_on(dir, store, tokens, settings, config).await;
    }
    let url =
        chronicle_testkit::postgres::url_with_schema(&chronicle_testkit::postgres::fresh_schema());
    let store = Store::open_postgres(&url, Options::default(), Create::IfAbsent).unwrap();
    // As `chronicle serve` does: the workspaces stay in the data directory.
    settings.workspace_root = Some(dir.path().join("workspaces"));
    let schema = DropSchema(store.postgres().unwrap().clone());
    let mut srv = server_on(dir, store, tokens, settings, config).await;
    srv._schema = Some(schema);
    srv
}

tokio::task_local! {
    /// Set inside [`on_postgres`]: how many servers the test started there.
    static BACKEND: std::cell::Cell<u32>;
}

/// Runs `test` with every server it starts on PostgreSQL (each in a schema of its own on the
/// test server, dropped with it) instead of sled; fails a test that started none, which would
/// only have run on sled again.
pub async fn on_postgres(test: impl std::future::Future<Output = ()>) {
    BACKEND
        .scope(std::cell::Cell::new(0), async {
            test.await;
            let opened = BACKEND.with(std::cell::Cell::get);
            assert!(
                opened > 0,
                "the test started no server: nothing ran on PostgreSQL"
            );
        })
        .await;
}

/// Drops a test's PostgreSQL schema when the server goes.
pub struct DropSchema(Target);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let _ = PgLog::drop_schema(&self.0);
    }
}

/// A server over `store` (opened in `dir`, which lives as long as the server).
pub async fn server_on(
    dir: tempfile::TempDir,
    store: Store,
    tokens: Tokens,
    settings: Settings,
    config: ApiConfig,
) -> Server {
    let engine = Engine::open(store, settings).await.unwrap();
    let state = AppState::new(engine.clone(), tokens, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        chronicle_api::serve(listener, state, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let client = chronicle_client::Client::new(&base)
        .unwrap()
        .with_request_timeout(Duration::from_secs(30));
    Server {
        base,
        engine,
        client,
        http,
        _dir: dir,
        _schema: None,
        stop: Some(stop),
        task: Some(task),
    }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The typed client with a bearer token.
    pub fn client_as(&self, token: &str) -> chronicle_client::Client {
        self.client.clone().with_token(Some(token.to_owned()))
    }

    /// Graceful shutdown: streams end, the engine stops, the store is flushed.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("graceful shutdown")
                .unwrap();
        }
    }

    /// The number of events in the whole store (to check a bad request wrote nothing).
    pub fn offsets(&self) -> u64 {
        self.engine.store().durable_next_offset()
    }
}

/// The tokens of ownership tests: `alice` and `bob`, two ordinary principals, and `root`, an
/// admin ([`principals`]).
pub const ALICE: &str = "tok-alice-123456";
pub const BOB: &str = "tok-bob-1234567890";
pub const ROOT: &str = "tok-root-1234567890";

/// Tokens for `alice`, `bob` and `root` (admin).
pub fn principals() -> Tokens {
    Tokens::parse(&format!("alice {ALICE}\nbob {BOB}\nroot {ROOT} admin\n")).unwrap()
}

/// One raw request as `token`: its status and, unless it is a stream, its JSON body (`null`
/// when it has none).
pub async fn call(
    srv: &Server,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = srv.http.request(method, srv.url(path)).bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let json = res
        .headers()
        .get("content-type")
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    let body = if json {
        res.json().await.unwrap()
    } else {
        Value::Null
    };
    (status, body)
}

/// [`call`] with GET.
pub async fn get(srv: &Server, token: &str, path: &str) -> (StatusCode, Value) {
    call(srv, token, Method::GET, path, None).await
}

/// [`call`] with POST and a JSON body.
pub async fn post(srv: &Server, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    call(srv, token, Method::POST, path, Some(body)).await
}

/// [`call`] with DELETE and an empty JSON body (a state-changing request sends JSON).
pub async fn delete(srv: &Server, token: &str, path: &str) -> (StatusCode, Value) {
    call(
        srv,
        token,
        Method::DELETE,
        path,
        Some(serde_json::json!({})),
    )
    .await
}
