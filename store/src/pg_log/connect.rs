//! Reaching the database: the store URL (a PostgreSQL connection URL, plus `schema=` naming the
//! schema the store lives in), the settings every connection of the store runs with, TLS through
//! rustls, the pool, and the schema itself (created or upgraded under an advisory lock).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::{Error, Options, Result};

/// The schema a store lives in when its URL names none.
pub const DEFAULT_SCHEMA: &str = "chronicle";

/// The schema version this build reads and writes.
pub const PG_SCHEMA_VERSION: u64 = 2;

/// Where a PostgreSQL store lives: the server and database of its URL, and its schema.
#[derive(Clone)]
pub struct Target {
    pub(crate) config: tokio_postgres::Config,
    pub schema: String,
    /// The URL without its password, for messages.
    pub shown: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Target {
    /// Parses a store URL: `postgres://user:password@host:port/database?schema=name&sslmode=…`
    /// (`postgresql://` too). Every parameter but `schema` goes to the client as libpq would
    /// read it; `schema` is Chronicle's (lowercase letters, digits and `_`, not starting with a
    /// digit, at most 49 bytes; `chronicle` when absent).
    pub fn parse(url: &str) -> Result<Target> {
        let bad = |why: String| Error::Postgres(format!("bad URL: {why}"));
        let mut parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(parsed.scheme(), "postgres" | "postgresql") {
            return Err(bad(format!(
                "the scheme must be postgres:// or postgresql://, not {}://",
                parsed.scheme()
            )));
        }
        let mut schema = None;
        let kept: Vec<(String, String)> = parsed
            .query_pairs()
            .filter_map(|(k, v)| {
                if k == "schema" {
                    schema = Some(v.into_owned());
                    None
                } else {
                    Some((k.into_owned(), v.into_owned()))
                }
            })
            .collect();
        let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned());
        check_schema(&schema).map_err(bad)?;
        if kept.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(kept);
        }
        let config =
            tokio_postgres::Config::from_str(parsed.as_str()).map_err(|e| bad(e.to_string()))?;
        if parsed.password().is_some() {
            let _ = parsed.set_password(Some("***"));
        }
        parsed.set_query(Some(&format!("schema={schema}")));
        Ok(Target {
            config,
            schema,
            shown: parsed.to_string(),
        })
    }

    /// The same server and database, another schema (tests make one per store).
    pub fn with_schema(&self, schema: &str) -> Result<Target> {
        check_schema(schema).map_err(|why| Error::Postgres(format!("bad schema: {why}")))?;
        let mut t = self.clone();
        t.shown = t.shown.replace(
            &format!("schema={}", self.schema),
            &format!("schema={schema}"),
        );
        t.schema = schema.to_owned();
        Ok(t)
    }

    /// The channel the store's commits are announced on (one per schema).
    pub(crate) fn channel(&self) -> String {
        format!("chronicle_log_{}", self.schema)
    }

    /// The client settings of every connection of the store: its schema first on the search
    /// path, commits acknowledged only once flushed (and replicated, where the server is set up
    /// for it), bounded waits for the log head's lock, no transaction left open by a frozen
    /// process, and keepalives on both sides, so that either one notices a dead peer in seconds
    /// (the server ends the session of a client gone, and frees its locks).
    pub(crate) fn session_config(&self, opts: &Options) -> tokio_postgres::Config {
        let mut c = self.config.clone();
        let mut options = c.get_options().unwrap_or_default().to_owned();
        options.push_str(&format!(
            " -c search_path={} -c synchronous_commit=on -c lock_timeout={} \
             -c idle_in_transaction_session_timeout={} -c tcp_keepalives_idle=5 \
             -c tcp_keepalives_interval=1 -c tcp_keepalives_count=3",
            self.schema, opts.pg_lock_timeout_ms, opts.pg_idle_in_transaction_ms
        ));
        c.options(options.trim());
        if c.get_application_name().is_none() {
            // What `pg_stat_activity` shows: which store a connection is of.
            let name = format!("chronicle/{}", self.schema);
            c.application_name(&name);
        }
        if c.get_connect_timeout().is_none() {
            c.connect_timeout(Duration::from_millis(opts.pg_connect_timeout_ms));
        }
        c.keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3);
        c
    }
}

/// The longest schema name: the store's notification channel is `chronicle_log_` and the
/// schema, and PostgreSQL refuses a channel name of 64 bytes or more.
const SCHEMA_BYTES_MAX: usize = 49;

fn check_schema(schema: &str) -> std::result::Result<(), String> {
    let ok = !schema.is_empty()
        && schema.len() <= SCHEMA_BYTES_MAX
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "schema {schema:?} must be 1..={SCHEMA_BYTES_MAX} lowercase letters, digits or _, not starting with a digit"
        ))
    }
}

/// TLS for connections whose URL asks for it (`sslmode=prefer`, the default, uses it when the
/// server offers it): rustls with the system's roots, else the web's.
pub(crate) fn tls() -> MakeRustlsConnect {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    MakeRustlsConnect::new(config)
}

/// The store's pool of connections, each with [`Target::session_config`].
pub(crate) fn pool(target: &Target, opts: &Options) -> Result<Pool> {
    let manager = Manager::from_config(
        target.session_config(opts),
        tls(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let wait = Duration::from_millis(opts.pg_connect_timeout_ms);
    Pool::builder(manager)
        .max_size(opts.pg_pool_connections.max(2))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(wait))
        .recycle_timeout(Some(wait))
        .build()
        .map_err(|e| Error::Unopenable(e.to_string()))
}

/// The tables of schema version 1. Offsets, seqs and times are `bigint` (times in µs since the
/// epoch); keys of records and of the index are `bytea`, whose order is byte order.
const SCHEMA_V1: &str = "
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE log_head (one boolean PRIMARY KEY DEFAULT true CHECK (one),
                       next_offset bigint NOT NULL, last_at bigint NOT NULL);
INSERT INTO log_head (one, next_offset, last_at) VALUES (true, 0, 0);
CREATE TABLE events (log_offset bigint PRIMARY KEY, run_id uuid NOT NULL, seq bigint NOT NULL,
                     record bytea NOT NULL, UNIQUE (run_id, seq));
CREATE TABLE runs (run_id uuid PRIMARY KEY, session_id text NOT NULL, last_seq bigint NOT NULL,
                   last_hash bytea NOT NULL, last_offset bigint NOT NULL,
                   created_at bigint NOT NULL, updated_at bigint NOT NULL,
                   terminal boolean NOT NULL);
CREATE INDEX runs_by_session ON runs (session_id, created_at, run_id);
CREATE TABLE records (key bytea PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE blobs (hash bytea PRIMARY KEY, bytes bytea NOT NULL);
CREATE UNLOGGED TABLE snapshots (run_id uuid NOT NULL, seq bigint NOT NULL, state bytea NOT NULL,
                                 PRIMARY KEY (run_id, seq));
CREATE TABLE index_entries (key bytea PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE index_head (one boolean PRIMARY KEY DEFAULT true CHECK (one),
                         watermark bigint NOT NULL);
INSERT INTO index_head (one, watermark) VALUES (true, 0);
";

/// What version 2 adds: the nodes serving the store, and which node owns each session (with the
/// epoch every change of owner bumps), for several processes on one store.
const SCHEMA_V2: &str = "
CREATE TABLE nodes (node_id text PRIMARY KEY, incarnation bigint NOT NULL,
                    advertise_url text NOT NULL, state text NOT NULL,
                    heartbeat_at timestamptz NOT NULL, started_at timestamptz NOT NULL);
CREATE TABLE session_owners (session_id text PRIMARY KEY, owner_node text,
                             owner_epoch bigint NOT NULL DEFAULT 0, wake_at timestamptz);
CREATE INDEX session_owners_due ON session_owners (wake_at) WHERE owner_node IS NULL;
CREATE INDEX session_owners_by_node ON session_owners (owner_node) WHERE owner_node IS NOT NULL;
CREATE INDEX runs_active ON runs (session_id) WHERE NOT terminal;
";

/// What [`migrate`] found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migrated {
    /// The schema version before (`None`: no store was there).
    pub from: Option<u64>,
    pub to: u64,
}

/// The version of the store in `schema`, `None` when there is none.
pub(crate) async fn schema_version(
    client: &tokio_postgres::Client,
    schema: &str,
) -> Result<Option<u64>> {
    let exists = client
        .query_opt(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'meta'",
            &[&schema],
        )
        .await
        .map_err(super::db)?;
    if exists.is_none() {
        return Ok(None);
    }
    let row = client
        .query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])
        .await
        .map_err(super::db)?;
    let Some(row) = row else { return Ok(None) };
    let v: String = row.get(0);
    v.parse()
        .map(Some)
        .map_err(|_| Error::Decode(format!("schema version {v:?} is not a number")))
}

/// Creates the store's schema, or upgrades it to [`PG_SCHEMA_VERSION`], in one transaction under
/// an advisory lock, so that processes migrating at once do it once. A store of a newer version
/// is refused.
pub(crate) async fn migrate(client: &tokio_postgres::Client, schema: &str) -> Result<Migrated> {
    client.batch_execute("BEGIN").await.map_err(super::db)?;
    let done = migrate_in(client, schema).await;
    let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
    client.batch_execute(end).await.map_err(super::db)?;
    done
}

async fn migrate_in(tx: &tokio_postgres::Client, schema: &str) -> Result<Migrated> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('chronicle.migrate.' || $1::text))",
        &[&schema],
    )
    .await
    .map_err(super::db)?;
    let from = schema_version(tx, schema).await?;
    match from {
        Some(v) if v == PG_SCHEMA_VERSION => {}
        Some(1) => {
            tx.batch_execute(SCHEMA_V2).await.map_err(super::db)?;
            tx.execute(
                "UPDATE meta SET value = $1 WHERE key = 'schema_version'",
                &[&PG_SCHEMA_VERSION.to_string()],
            )
            .await
            .map_err(super::db)?;
        }
        Some(v) => {
            return Err(Error::SchemaVersion {
                found: v,
                supported: PG_SCHEMA_VERSION,
            });
        }
        None => {
            tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await
                .map_err(super::db)?;
            tx.batch_execute(SCHEMA_V1).await.map_err(super::db)?;
            tx.batch_execute(SCHEMA_V2).await.map_err(super::db)?;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', $1)",
                &[&PG_SCHEMA_VERSION.to_string()],
            )
            .await
            .map_err(super::db)?;
        }
    }
    Ok(Migrated {
        from,
        to: PG_SCHEMA_VERSION,
    })
}

/// The server's settings that decide whether a commit survives a crash: `fsync` and
/// `synchronous_commit` (the store sets the latter on for its own sessions), and
/// `full_page_writes`. Each one that is off, as a warning.
pub(crate) async fn durability_warnings(client: &tokio_postgres::Client) -> Result<Vec<String>> {
    let rows = client
        .query(
            "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'full_page_writes')",
            &[],
        )
        .await
        .map_err(super::db)?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let (name, setting): (String, String) = (r.get(0), r.get(1));
            (setting == "off").then(|| {
                format!(
                    "PostgreSQL runs with {name}=off: a crash of its machine can lose commits \
                     Chronicle acknowledged; set {name}=on"
                )
            })
        })
        .collect())
}
