//! [`Membership`] on PostgreSQL: the `nodes` and `session_owners` tables, a liveness lock per
//! node, and the fence every append of a joined node checks (see [`super::writer`]).
//!
//! Every change that takes sessions away from a node (declaring it dead, its own release, its
//! graceful leave) takes the `log_head` row lock first: it waits for an append in flight to end,
//! and no append of that node can commit after it. A claim moves a session from no owner, which
//! nobody can append under.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;

use super::{Inner, PgLog, db, exclusive_key};
use crate::membership::{Claim, Lease, Membership, Node, Release};
use crate::{Error, Result};

/// Who this process is, once joined, and the sessions it owns with their epochs.
#[derive(Default)]
pub(crate) struct Joined {
    pub me: Mutex<Option<(String, u64)>>,
    pub owned: Mutex<HashMap<String, u64>>,
    /// Claims and releases one at a time: a release and a claim of one session must not cross.
    pub changes: tokio::sync::Mutex<()>,
}

impl Joined {
    pub fn me(&self) -> Option<(String, u64)> {
        self.me
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn epoch(&self, session: &str) -> Option<u64> {
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .copied()
    }

    fn own(&self, session: &str, epoch: u64) {
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.to_owned(), epoch);
    }

    fn disown(&self, session: &str) -> Option<u64> {
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session)
    }
}

/// The advisory lock a node holds while its process lives: a class of its own, and the schema
/// and the node's name hashed.
fn liveness_key(schema: &str, node: &str) -> (i32, i32) {
    let mut bytes = schema.as_bytes().to_vec();
    bytes.push(0);
    bytes.extend_from_slice(node.as_bytes());
    let h = chronicle_schemas::Hash::of_content(&bytes).0;
    (0x4348_4e44, i32::from_be_bytes([h[0], h[1], h[2], h[3]]))
}

/// How long a joining node waits for its name's liveness lock: another node checking whether it
/// died holds it for a moment.
const JOIN_LOCK_WAIT: Duration = Duration::from_secs(3);

/// This node alive, its row share-locked until the transaction ends: declaring it dead (which
/// updates the row) waits for a claim in flight, and then frees what the claim took.
const ALIVE: &str =
    "SELECT 1 FROM nodes WHERE node_id = $1 AND incarnation = $2 AND state = 'alive' FOR SHARE";

impl PgLog {
    fn me_or_refuse(&self) -> Result<(String, u64)> {
        self.inner
            .joined
            .me()
            .ok_or_else(|| Error::Fenced("this process has not joined as a node".into()))
    }
}

/// This node is alive under its incarnation (its row share-locked in `tx`, see [`ALIVE`]);
/// fenced, and the store stopped, when it is not.
async fn check_alive(inner: &Inner, tx: &impl GenericClient, me: &str, inc: u64) -> Result<()> {
    match tx
        .query_opt(ALIVE, &[&me, &(inc as i64)])
        .await
        .map_err(db)?
    {
        Some(_) => Ok(()),
        None => Err(inner.fenced(&format!(
            "node {me:?} (incarnation {inc}) is no longer alive on the store"
        ))),
    }
}

impl Inner {
    /// The node was declared dead (or left): it stops, as a zombie must.
    fn fenced(&self, why: &str) -> Error {
        self.fail_stop(why);
        Error::Fenced(why.to_owned())
    }
}

/// Takes a node's liveness lock (and the store's server lock, shared with the other nodes, so a
/// single server and nodes never run on one store at once) on a connection of its own.
async fn take_liveness(
    config: &tokio_postgres::Config,
    node: (i32, i32),
    server: (i32, i32),
) -> Result<Option<super::Held>> {
    let (client, conn) = config.connect(super::connect::tls()).await.map_err(db)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let row = client
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2) AND pg_try_advisory_lock_shared($3, $4)",
            &[&node.0, &node.1, &server.0, &server.1],
        )
        .await
        .map_err(db)?;
    Ok(row.get::<_, bool>(0).then_some((client, driver)))
}

/// Takes the log head's row lock in `tx`: it waits for an append in flight to end, and no
/// append commits until `tx` ends. Every change that takes sessions from a node takes it first.
async fn lock_log_head(tx: &impl GenericClient) -> Result<()> {
    tx.query_one("SELECT next_offset FROM log_head FOR UPDATE", &[])
        .await
        .map_err(db)?;
    Ok(())
}

/// Declares `node` (of `incarnation`) dead and frees its sessions, due now, in `tx`, which holds
/// the log head's lock. Whether it was still alive.
async fn declare_dead(tx: &impl GenericClient, node: &str, incarnation: i64) -> Result<bool> {
    lock_log_head(tx).await?;
    let n = tx
        .execute(
            "UPDATE nodes SET state = 'dead' \
             WHERE node_id = $1 AND incarnation = $2 AND state = 'alive'",
            &[&node, &incarnation],
        )
        .await
        .map_err(db)?;
    if n == 0 {
        return Ok(false);
    }
    let freed = tx
        .execute(
            "UPDATE session_owners SET owner_node = NULL, owner_epoch = owner_epoch + 1, \
               wake_at = now() WHERE owner_node = $1",
            &[&node],
        )
        .await
        .map_err(db)?;
    tracing::warn!(node, incarnation, sessions = freed, "declared a node dead");
    Ok(true)
}

/// Frees the sessions still named as owned by `node`, which is not alive, due now (the caller
/// holds the log head's lock).
async fn free_sessions_of(tx: &impl GenericClient, node: &str) -> Result<u64> {
    tx.execute(
        "UPDATE session_owners SET owner_node = NULL, owner_epoch = owner_epoch + 1, \
           wake_at = now() WHERE owner_node = $1 \
           AND NOT EXISTS (SELECT 1 FROM nodes WHERE node_id = $1 AND state = 'alive')",
        &[&node],
    )
    .await
    .map_err(db)
}

fn node_of(row: &tokio_postgres::Row) -> Node {
    Node {
        name: row.get("node_id"),
        incarnation: row.get::<_, i64>("incarnation") as u64,
        url: row.get("advertise_url"),
        state: row.get("state"),
        quiet_ms: row.get::<_, f64>("quiet_ms").max(0.0) as u64,
    }
}

const NODE_COLUMNS: &str = "node_id, incarnation, advertise_url, state, \
     (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS quiet_ms";

/// Whether `node` is dead by `lease`: silent past the ttl, or silent past the crash grace with
/// its liveness lock free (its process is gone). Asked in `tx`, which keeps the lock it tries.
async fn is_dead(tx: &impl GenericClient, schema: &str, node: &Node, lease: Lease) -> Result<bool> {
    if node.state != "alive" || node.quiet_ms >= lease.ttl.as_millis() as u64 {
        return Ok(true);
    }
    if node.quiet_ms < lease.crash_grace.as_millis() as u64 {
        return Ok(false);
    }
    let (class, key) = liveness_key(schema, &node.name);
    let row = tx
        .query_one("SELECT pg_try_advisory_xact_lock($1, $2)", &[&class, &key])
        .await
        .map_err(db)?;
    Ok(row.get(0))
}

#[async_trait]
impl Membership for PgLog {
    async fn join(&self, name: &str, url: &str) -> Result<u64> {
        let inner = self.inner.clone();
        let config = self.target.session_config(&self.opts);
        let schema = self.target.schema.clone();
        let (name, url) = (name.to_owned(), url.to_owned());
        let shown = self.target.shown.clone();
        self.spawn(async move {
            let keys = (liveness_key(&schema, &name), exclusive_key(&schema));
            let deadline = tokio::time::Instant::now() + JOIN_LOCK_WAIT;
            let held = loop {
                if let Some(held) = take_liveness(&config, keys.0, keys.1).await? {
                    break held;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(Error::Locked(format!(
                        "a node named {name:?} already runs on the store at {shown}, or a \
                         single server holds it"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            let mut client = inner.client().await?;
            let tx = client.transaction().await.map_err(db)?;
            lock_log_head(&tx).await?;
            let row = tx
                .query_one(
                    "INSERT INTO nodes (node_id, incarnation, advertise_url, state, \
                       heartbeat_at, started_at) VALUES ($1, 1, $2, 'alive', now(), now()) \
                     ON CONFLICT (node_id) DO UPDATE SET incarnation = nodes.incarnation + 1, \
                       advertise_url = $2, state = 'alive', heartbeat_at = now(), \
                       started_at = now() \
                     RETURNING incarnation",
                    &[&name, &url],
                )
                .await
                .map_err(db)?;
            let incarnation: i64 = row.get(0);
            // What an earlier incarnation owned is due now, for any node (this one too).
            tx.execute(
                "UPDATE session_owners SET owner_node = NULL, owner_epoch = owner_epoch + 1, \
                   wake_at = now() WHERE owner_node = $1",
                &[&name],
            )
            .await
            .map_err(db)?;
            // Unfinished runs written before nodes existed (a single server's, a copied store):
            // their sessions are due now.
            tx.execute(
                "INSERT INTO session_owners (session_id, wake_at) \
                 SELECT DISTINCT session_id, now() FROM runs WHERE NOT terminal \
                 ON CONFLICT (session_id) DO NOTHING",
                &[],
            )
            .await
            .map_err(db)?;
            tx.commit().await.map_err(db)?;
            *inner
                .joined
                .me
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((name.clone(), incarnation as u64));
            tokio::spawn(keep_liveness(inner.clone(), config, keys, held));
            tracing::info!(node = name, incarnation, "joined the store as a node");
            Ok(incarnation as u64)
        })
        .await
    }

    async fn heartbeat(&self) -> Result<()> {
        let (me, inc) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        self.spawn(async move {
            let client = inner.client().await?;
            let n = client
                .execute(
                    "UPDATE nodes SET heartbeat_at = now() \
                     WHERE node_id = $1 AND incarnation = $2 AND state = 'alive'",
                    &[&me, &(inc as i64)],
                )
                .await
                .map_err(db)?;
            if n == 0 {
                return Err(inner.fenced(&format!(
                    "node {me:?} (incarnation {inc}) was declared dead by another node: its \
                     sessions are theirs now"
                )));
            }
            Ok(())
        })
        .await
    }

    async fn sweep(&self, lease: Lease) -> Result<Vec<String>> {
        let (me, _) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        let schema = self.target.schema.clone();
        self.spawn(async move {
            let client = inner.client().await?;
            let rows = client
                .query(
                    &format!(
                        "SELECT {NODE_COLUMNS} FROM nodes WHERE state = 'alive' AND node_id <> $1"
                    ),
                    &[&me],
                )
                .await
                .map_err(db)?;
            drop(client);
            let mut dead = Vec::new();
            for node in rows.iter().map(node_of) {
                if node.quiet_ms < lease.crash_grace.as_millis() as u64 {
                    continue;
                }
                let mut client = inner.client().await?;
                let tx = client.transaction().await.map_err(db)?;
                if is_dead(&tx, &schema, &node, lease).await?
                    && declare_dead(&tx, &node.name, node.incarnation as i64).await?
                {
                    dead.push(node.name.clone());
                }
                tx.commit().await.map_err(db)?;
            }
            Ok(dead)
        })
        .await
    }

    async fn claim(&self, session: &str, lease: Lease) -> Result<Claim> {
        if let Some(epoch) = self.inner.joined.epoch(session) {
            return Ok(Claim::Mine(epoch));
        }
        let (me, inc) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        let schema = self.target.schema.clone();
        let session = session.to_owned();
        self.spawn(async move {
            let _one_at_a_time = inner.joined.changes.lock().await;
            if let Some(epoch) = inner.joined.epoch(&session) {
                return Ok(Claim::Mine(epoch));
            }
            for _ in 0..3 {
                let mut client = inner.client().await?;
                let tx = client.transaction().await.map_err(db)?;
                check_alive(&inner, &tx, &me, inc).await?;
                let row = tx
                    .query_opt(
                        "INSERT INTO session_owners (session_id, owner_node, owner_epoch) \
                         VALUES ($1, $2, 1) ON CONFLICT (session_id) DO UPDATE \
                           SET owner_node = $2, owner_epoch = session_owners.owner_epoch + 1, \
                               wake_at = NULL \
                           WHERE session_owners.owner_node IS NULL \
                         RETURNING owner_epoch",
                        &[&session, &me],
                    )
                    .await
                    .map_err(db)?;
                if let Some(row) = row {
                    tx.commit().await.map_err(db)?;
                    let epoch = row.get::<_, i64>(0) as u64;
                    inner.joined.own(&session, epoch);
                    return Ok(Claim::Mine(epoch));
                }
                let owner = tx
                    .query_one(
                        &format!(
                            "SELECT s.owner_epoch, {NODE_COLUMNS} FROM session_owners s \
                             JOIN nodes n ON n.node_id = s.owner_node WHERE s.session_id = $1"
                        ),
                        &[&session],
                    )
                    .await
                    .map_err(db)?;
                let node = node_of(&owner);
                if node.name == me {
                    // Owned by this node in the database (a release whose answer was lost):
                    // still ours.
                    tx.commit().await.map_err(db)?;
                    let epoch = owner.get::<_, i64>(0) as u64;
                    inner.joined.own(&session, epoch);
                    return Ok(Claim::Mine(epoch));
                }
                // The row lock the insert took is let go before the log head's is taken: every
                // change of owners takes the log head first.
                tx.rollback().await.map_err(db)?;
                let tx = client.transaction().await.map_err(db)?;
                lock_log_head(&tx).await?;
                if node.state == "alive" && !is_dead(&tx, &schema, &node, lease).await? {
                    tx.commit().await.map_err(db)?;
                    return Ok(Claim::Elsewhere(node));
                }
                if !declare_dead(&tx, &node.name, node.incarnation as i64).await? {
                    // Not alive already (dead or left), yet still named as the owner: free what
                    // it is named on.
                    free_sessions_of(&tx, &node.name).await?;
                }
                tx.commit().await.map_err(db)?;
            }
            Err(Error::Unavailable(format!(
                "session {session:?} changed owners while it was being claimed; try again"
            )))
        })
        .await
    }

    async fn claim_due(&self, limit: u32) -> Result<Vec<String>> {
        let (me, inc) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        self.spawn(async move {
            let _one_at_a_time = inner.joined.changes.lock().await;
            let mut client = inner.client().await?;
            let tx = client.transaction().await.map_err(db)?;
            check_alive(&inner, &tx, &me, inc).await?;
            let rows = tx
                .query(
                    "UPDATE session_owners SET owner_node = $1, \
                       owner_epoch = owner_epoch + 1, wake_at = NULL \
                     WHERE session_id IN (SELECT session_id FROM session_owners \
                         WHERE owner_node IS NULL AND wake_at <= now() \
                         ORDER BY wake_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
                     RETURNING session_id, owner_epoch",
                    &[&me, &i64::from(limit)],
                )
                .await
                .map_err(db)?;
            tx.commit().await.map_err(db)?;
            Ok(rows
                .iter()
                .map(|r| {
                    let session: String = r.get(0);
                    inner.joined.own(&session, r.get::<_, i64>(1) as u64);
                    session
                })
                .collect())
        })
        .await
    }

    async fn adopt(&self) -> Result<Vec<String>> {
        let (me, _) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        self.spawn(async move {
            let _one_at_a_time = inner.joined.changes.lock().await;
            let client = inner.client().await?;
            let rows = client
                .query(
                    "SELECT session_id, owner_epoch FROM session_owners WHERE owner_node = $1",
                    &[&me],
                )
                .await
                .map_err(db)?;
            let mut adopted = Vec::new();
            for r in &rows {
                let session: String = r.get(0);
                if inner.joined.epoch(&session).is_none() {
                    inner.joined.own(&session, r.get::<_, i64>(1) as u64);
                    adopted.push(session);
                }
            }
            Ok(adopted)
        })
        .await
    }

    fn owns(&self, session: &str) -> bool {
        self.inner.joined.epoch(session).is_some()
    }

    async fn release(&self, release: Release) -> Result<()> {
        let (me, _) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        self.spawn(async move {
            let _one_at_a_time = inner.joined.changes.lock().await;
            let Some(epoch) = inner.joined.disown(&release.session) else {
                return Ok(());
            };
            let done = async {
                let mut client = inner.client().await?;
                let tx = client.transaction().await.map_err(db)?;
                lock_log_head(&tx).await?;
                tx.execute(
                    "UPDATE session_owners SET owner_node = NULL, owner_epoch = owner_epoch + 1, \
                       wake_at = to_timestamp($4::float8 / 1000000) \
                     WHERE session_id = $1 AND owner_node = $2 AND owner_epoch = $3",
                    &[
                        &release.session,
                        &me,
                        &(epoch as i64),
                        &release.wake_at_us.map(|us| us as f64),
                    ],
                )
                .await
                .map_err(db)?;
                tx.commit().await.map_err(db)
            }
            .await;
            if done.is_err() {
                // The commit's answer may be lost: still this node's only if the database says
                // so (then it is released again later).
                let still = async {
                    let client = inner.client().await?;
                    let row = client
                        .query_opt(
                            "SELECT 1 FROM session_owners WHERE session_id = $1 \
                               AND owner_node = $2 AND owner_epoch = $3",
                            &[&release.session, &me, &(epoch as i64)],
                        )
                        .await
                        .map_err(db)?;
                    Ok::<_, Error>(row.is_some())
                }
                .await;
                if still.unwrap_or(true) {
                    inner.joined.own(&release.session, epoch);
                }
            }
            done
        })
        .await
    }

    async fn leave(&self) -> Result<()> {
        let (me, inc) = self.me_or_refuse()?;
        let inner = self.inner.clone();
        self.spawn(async move {
            let _one_at_a_time = inner.joined.changes.lock().await;
            inner
                .joined
                .owned
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            let mut client = inner.client().await?;
            let tx = client.transaction().await.map_err(db)?;
            lock_log_head(&tx).await?;
            let freed = tx
                .execute(
                    "UPDATE session_owners SET owner_node = NULL, \
                       owner_epoch = owner_epoch + 1, wake_at = now() WHERE owner_node = $1",
                    &[&me],
                )
                .await
                .map_err(db)?;
            tx.execute(
                "UPDATE nodes SET state = 'left' WHERE node_id = $1 AND incarnation = $2",
                &[&me, &(inc as i64)],
            )
            .await
            .map_err(db)?;
            tx.commit().await.map_err(db)?;
            tracing::info!(
                node = me,
                sessions = freed,
                "left the store; sessions released"
            );
            Ok(())
        })
        .await
    }

    async fn owner(&self, session: &str) -> Result<Option<Node>> {
        let inner = self.inner.clone();
        let session = session.to_owned();
        self.spawn(async move {
            let client = inner.client().await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT {NODE_COLUMNS} FROM session_owners s \
                         JOIN nodes n ON n.node_id = s.owner_node WHERE s.session_id = $1"
                    ),
                    &[&session],
                )
                .await
                .map_err(db)?;
            Ok(row.as_ref().map(node_of))
        })
        .await
    }
}

/// Holds the liveness lock while the process lives; takes it again when its connection is lost
/// (the database restarted). A node that cannot is declared dead by the others in time, and its
/// next heartbeat stops it.
async fn keep_liveness(
    inner: Arc<Inner>,
    config: tokio_postgres::Config,
    keys: ((i32, i32), (i32, i32)),
    mut held: super::Held,
) {
    loop {
        let _ = (&mut held.1).await;
        drop(held.0);
        let mut wait = Duration::from_millis(100);
        held = loop {
            if inner.failure().is_some() {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
            match take_liveness(&config, keys.0, keys.1).await {
                Ok(Some(again)) => break again,
                Ok(None) => tracing::debug!("the node's liveness lock is held; trying again"),
                Err(e) => tracing::debug!(error = %e, "retaking the node's liveness lock"),
            }
        };
    }
}
