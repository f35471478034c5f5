//! The PostgreSQL store's writer: one task per process that commits every queued append in one
//! transaction per batch, under the `log_head` row lock (see the module above for the rules).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chronicle_schemas::{Envelope, Event, RunId, Timestamp};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::reads::head_of;
use super::{Inner, db};
use crate::append::{Clock, Staged, stage};
use crate::{Error, Result, RunHead};

/// One append waiting for the writer.
pub(crate) struct Request {
    pub run_id: RunId,
    pub expected_seq: u64,
    pub events: Vec<Event>,
    pub reply: oneshot::Sender<Result<Vec<Envelope>>>,
}

pub(crate) async fn run(inner: Arc<Inner>, mut rx: mpsc::Receiver<Request>) {
    let mut clock = Clock::default();
    let max = inner.opts.append_batch_events_max.max(1);
    while let Some(first) = rx.recv().await {
        let mut events = first.events.len();
        let mut batch = vec![first];
        while events < max {
            match rx.try_recv() {
                Ok(r) => {
                    events += r.events.len();
                    batch.push(r);
                }
                Err(_) => break,
            }
        }
        commit(&inner, batch, &mut clock).await;
    }
}

/// The appends of a batch that passed their checks, with their callers.
struct Ready {
    staged: Vec<(Staged, oneshot::Sender<Result<Vec<Envelope>>>)>,
    next_offset: u64,
    last_at: i64,
}

fn refuse_all(batch: Vec<Request>, e: &Error) {
    for r in batch {
        let _ = r.reply.send(Err(e.same_again()));
    }
}

async fn commit(inner: &Inner, batch: Vec<Request>, clock: &mut Clock) {
    if let Err(e) = inner.refuse_if_stopped() {
        return refuse_all(batch, &e);
    }
    let client = match inner.client().await {
        Ok(c) => c,
        Err(e) => return refuse_all(batch, &e),
    };
    // Prepared once per connection: a statement sent by text would first be parsed in a round
    // trip of its own, and the pipelined statements would no longer arrive in order.
    let sql = match Statements::prepare(&client).await {
        Ok(s) => s,
        Err(e) => {
            discard(client);
            return refuse_all(batch, &e);
        }
    };
    // Round trip 1: begin, take the log head's lock, read the batch's heads under it.
    let runs: Vec<uuid::Uuid> = batch
        .iter()
        .map(|r| r.run_id.0)
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let heads_params: [&(dyn ToSql + Sync); 1] = [&runs];
    let (begin, head, heads) = tokio::join!(
        client.batch_execute("BEGIN"),
        client.query_one(&sql.lock, &[]),
        client.query(&sql.heads, &heads_params),
    );
    let first_round = begin.and(head).and_then(|h| heads.map(|rows| (h, rows)));
    let (head, rows) = match first_round {
        Ok(ok) => ok,
        Err(e) => {
            let e = db(e);
            discard(client);
            return refuse_all(batch, &e);
        }
    };
    let mut heads: HashMap<RunId, RunHead> = HashMap::new();
    for row in &rows {
        match head_of(row) {
            Ok(h) => {
                heads.insert(h.run_id, h);
            }
            Err(e) => {
                discard(client);
                return refuse_all(batch, &e);
            }
        }
    }
    let locked = Instant::now();
    let backend: i32 = head.get(2);
    let mut fence = inner.joined.me().map(|me| Fence::new(me, &inner.joined));
    let batch = match &mut fence {
        Some(fence) => fence.admit(batch, &heads),
        None => batch,
    };
    let ready = stage_batch(
        batch,
        head.get::<_, i64>(0) as u64,
        head.get(1),
        &mut heads,
        clock,
    );
    if ready.staged.is_empty() {
        // Every append was refused: nothing to commit, no offset used.
        if client.batch_execute("ROLLBACK").await.is_err() {
            discard(client);
        }
        return;
    }
    if inner.opts.pg_drill_hold_lock_ms > 0 {
        tokio::time::sleep(Duration::from_millis(inner.opts.pg_drill_hold_lock_ms)).await;
    }
    // Round trip 2: the events, the heads, the log head, the announcement, the commit.
    let first = &ready.staged[0].0.envelopes[0];
    let (first_offset, first_record) = (first.offset, ready.staged[0].0.records[0].clone());
    let staged: Vec<&Staged> = ready.staged.iter().map(|(s, _)| s).collect();
    let fenced = fence.as_ref().map(|f| f.check(&staged));
    let outcome = write(
        &client,
        &sql,
        &staged,
        (ready.next_offset, ready.last_at),
        &inner.channel,
        fenced.as_ref(),
    )
    .await;
    let every = inner.opts.pg_drill_lose_commit_answer_every;
    let lose = every > 0 && inner.barriers.load(Ordering::Relaxed) % every == every - 1;
    let outcome = match outcome {
        // The drill: a commit that succeeded, answered as if the connection broke.
        Ok(true) if lose => {
            discard(client);
            return finish(
                inner,
                ready,
                reconcile(inner, backend, first_offset, first_record).await,
            );
        }
        other => other,
    };
    let committed = match outcome {
        Ok(true) => Ok(()),
        // Nothing was written: another node owns one of the sessions now, or this node was
        // declared dead. A zombie stops.
        Ok(false) => {
            let (me, inc) = inner.joined.me().unwrap_or_default();
            let why = format!(
                "node {me:?} (incarnation {inc}) no longer owns a session it wrote to: another \
                 node took it over"
            );
            inner.fail_stop(&why);
            Err(Error::Fenced(why))
        }
        // The server answered: the transaction did not commit.
        Err(e) if e.as_db_error().is_some() => Err(db(e)),
        // No answer: it may have committed. Ask once the lost transaction has ended.
        Err(e) => {
            tracing::warn!(error = %e, "commit outcome unknown; reconciling");
            discard(client);
            return finish(
                inner,
                ready,
                reconcile(inner, backend, first_offset, first_record).await,
            );
        }
    };
    if committed.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    } else {
        inner.hold.record(locked.elapsed());
    }
    finish(inner, ready, committed);
}

/// Checks and encodes each append against the heads read under the lock, in order: a refused
/// append is answered now and uses no offset.
fn stage_batch(
    batch: Vec<Request>,
    mut next_offset: u64,
    mut last_at: i64,
    heads: &mut HashMap<RunId, RunHead>,
    clock: &mut Clock,
) -> Ready {
    let mut staged = Vec::with_capacity(batch.len());
    for r in batch {
        // `at` never goes back across processes: the log head keeps the newest one.
        let at = Timestamp(clock.now().0.max(last_at));
        match stage(
            r.run_id,
            r.expected_seq,
            r.events,
            heads.get(&r.run_id),
            next_offset,
            at,
        ) {
            Ok(s) => {
                next_offset = s.next_offset();
                last_at = at.0;
                heads.insert(r.run_id, s.head.clone());
                staged.push((s, r.reply));
            }
            Err(e) => {
                let _ = r.reply.send(Err(e));
            }
        }
    }
    Ready {
        staged,
        next_offset,
        last_at,
    }
}

/// The statements of an append, prepared on its connection.
pub(crate) struct Statements {
    pub lock: Statement,
    pub heads: Statement,
    /// The events, the heads, the log head and the announcement, in one statement: a statement
    /// the client cannot send (an encoding error) then leaves nothing of the batch for the
    /// pipelined `COMMIT` to commit, where separate ones could commit the heads without the
    /// events.
    write: Statement,
}

impl Statements {
    pub async fn prepare(client: &deadpool_postgres::Object) -> Result<Statements> {
        let p = |sql: &'static str| client.prepare_cached(sql);
        Ok(Statements {
            lock: p("SELECT next_offset, last_at, pg_backend_pid() FROM log_head FOR UPDATE")
                .await
                .map_err(db)?,
            heads: p(
                "SELECT run_id, session_id, last_seq, last_hash, last_offset, created_at, \
                      updated_at, terminal FROM runs WHERE run_id = ANY($1)",
            )
            .await
            .map_err(db)?,
            write: p("WITH fence AS ( \
                        SELECT $17::text IS NULL OR ( \
                          EXISTS (SELECT 1 FROM nodes WHERE node_id = $17 \
                            AND incarnation = $18 AND state = 'alive') \
                          AND (SELECT count(*) FROM session_owners o \
                            JOIN unnest($19::text[], $20::int8[]) AS f(id, epoch) \
                            ON o.session_id = f.id AND o.owner_node = $17 \
                              AND o.owner_epoch = f.epoch) = cardinality($19::text[])) AS ok), \
                      events_written AS ( \
                        INSERT INTO events (log_offset, run_id, seq, record) \
                        SELECT * FROM unnest($1::int8[], $2::uuid[], $3::int8[], $4::bytea[]) \
                        WHERE (SELECT ok FROM fence) \
                        RETURNING 1), \
                      heads_written AS ( \
                        INSERT INTO runs (run_id, session_id, last_seq, last_hash, last_offset, \
                          created_at, updated_at, terminal) \
                        SELECT * FROM unnest($5::uuid[], $6::text[], $7::int8[], $8::bytea[], \
                          $9::int8[], $10::int8[], $11::int8[], $12::bool[]) \
                        WHERE (SELECT ok FROM fence) \
                        ON CONFLICT (run_id) DO UPDATE SET last_seq = EXCLUDED.last_seq, \
                          last_hash = EXCLUDED.last_hash, last_offset = EXCLUDED.last_offset, \
                          updated_at = EXCLUDED.updated_at, terminal = EXCLUDED.terminal \
                        RETURNING 1), \
                      head_moved AS ( \
                        UPDATE log_head SET next_offset = $13, last_at = $14 \
                        WHERE (SELECT ok FROM fence) RETURNING 1), \
                      announced AS ( \
                        SELECT pg_notify($15, $16) FROM fence WHERE ok) \
                      SELECT (SELECT ok FROM fence), (SELECT count(*) FROM announced), \
                        (SELECT count(*) FROM events_written), \
                        (SELECT count(*) FROM heads_written), (SELECT count(*) FROM head_moved)")
            .await
            .map_err(db)?,
        })
    }
}

/// Round trip 2 of an append transaction: the events and heads of `staged`, the log head moved
/// to `next_offset` and `last_at`, the announcement, and the commit.
pub(crate) async fn write(
    client: &tokio_postgres::Client,
    sql: &Statements,
    staged: &[&Staged],
    (next_offset, last_at): (u64, i64),
    channel: &str,
    fence: Option<&Checked>,
) -> std::result::Result<bool, tokio_postgres::Error> {
    let (mut offsets, mut runs, mut seqs, mut records) = (vec![], vec![], vec![], vec![]);
    let mut heads: HashMap<RunId, &RunHead> = HashMap::new();
    for s in staged {
        for (env, record) in s.envelopes.iter().zip(&s.records) {
            offsets.push(env.offset as i64);
            runs.push(env.run_id.0);
            seqs.push(env.seq as i64);
            records.push(record.as_slice());
        }
        heads.insert(s.head.run_id, &s.head);
    }
    let heads: Vec<&RunHead> = heads.into_values().collect();
    let h_run: Vec<uuid::Uuid> = heads.iter().map(|h| h.run_id.0).collect();
    let h_session: Vec<&str> = heads.iter().map(|h| h.session_id.as_str()).collect();
    let h_seq: Vec<i64> = heads.iter().map(|h| h.last_seq as i64).collect();
    let h_hash: Vec<&[u8]> = heads.iter().map(|h| h.last_hash.0.as_slice()).collect();
    let h_offset: Vec<i64> = heads.iter().map(|h| h.last_offset as i64).collect();
    let h_created: Vec<i64> = heads.iter().map(|h| h.created_at.0).collect();
    let h_updated: Vec<i64> = heads.iter().map(|h| h.updated_at.0).collect();
    let h_terminal: Vec<bool> = heads.iter().map(|h| h.terminal).collect();
    let next = next_offset as i64;
    let payload = next_offset.to_string();
    let no_sessions = (Vec::new(), Vec::new());
    let (node, incarnation, (sessions, epochs)) = match fence {
        Some(f) => (
            Some(f.node.as_str()),
            f.incarnation,
            (&f.sessions, &f.epochs),
        ),
        None => (None, 0, (&no_sessions.0, &no_sessions.1)),
    };
    let params: [&(dyn ToSql + Sync); 20] = [
        &offsets,
        &runs,
        &seqs,
        &records,
        &h_run,
        &h_session,
        &h_seq,
        &h_hash,
        &h_offset,
        &h_created,
        &h_updated,
        &h_terminal,
        &next,
        &last_at,
        &channel,
        &payload,
        &node,
        &incarnation,
        sessions,
        epochs,
    ];
    let (written, commit) = tokio::join!(
        client.query_one(&sql.write, &params),
        client.batch_execute("COMMIT"),
    );
    // A failed statement aborted the transaction, and PostgreSQL then answers the COMMIT with a
    // rollback, not an error: both answers must be successes for the batch to count. A fenced
    // batch wrote nothing, and its commit commits nothing.
    let admitted: bool = written?.get(0);
    commit?;
    Ok(admitted)
}

/// The fence of a joined node's appends: its name and incarnation, and the epoch of each session
/// it owns.
struct Fence<'j> {
    node: String,
    incarnation: i64,
    joined: &'j super::nodes::Joined,
    /// The epoch of each session the batch writes to, as admitted.
    epochs: HashMap<String, u64>,
}

/// The sessions of a batch with the epochs this node owns them under, checked again inside the
/// append's transaction.
pub(crate) struct Checked {
    node: String,
    incarnation: i64,
    sessions: Vec<String>,
    epochs: Vec<i64>,
}

impl<'j> Fence<'j> {
    fn new((node, incarnation): (String, u64), joined: &'j super::nodes::Joined) -> Self {
        Fence {
            node,
            incarnation: incarnation as i64,
            joined,
            epochs: HashMap::new(),
        }
    }

    /// The appends to sessions this node owns; the others are refused now, before they take an
    /// offset. The epochs are read once, here: the transaction checks these.
    fn admit(&mut self, batch: Vec<Request>, heads: &HashMap<RunId, RunHead>) -> Vec<Request> {
        let mut admitted = Vec::with_capacity(batch.len());
        for r in batch {
            let session = match (heads.get(&r.run_id), r.events.first()) {
                (Some(h), _) => Some(h.session_id.as_str()),
                (None, Some(Event::RunStarted { session_id, .. })) => Some(session_id.as_str()),
                (None, _) => None,
            };
            match session.map(|s| (s, self.joined.epoch(s))) {
                Some((s, None)) => {
                    let _ = r.reply.send(Err(Error::Fenced(format!(
                        "node {:?} does not own session {s:?}",
                        self.node
                    ))));
                }
                Some((s, Some(epoch))) => {
                    self.epochs.insert(s.to_owned(), epoch);
                    admitted.push(r);
                }
                None => admitted.push(r),
            }
        }
        admitted
    }

    fn check(&self, staged: &[&Staged]) -> Checked {
        let mut seen = HashSet::new();
        let (mut sessions, mut epochs) = (Vec::new(), Vec::new());
        for s in staged {
            let session = s.head.session_id.as_str();
            if seen.insert(session) {
                sessions.push(session.to_owned());
                epochs.push(self.epochs.get(session).copied().unwrap_or(0) as i64);
            }
        }
        Checked {
            node: self.node.clone(),
            incarnation: self.incarnation,
            sessions,
            epochs,
        }
    }
}

/// Whether the batch whose first record is `record` at `offset` committed, asked once the lost
/// transaction (on backend `backend`) has ended: it held the log head's lock until then, so
/// taking that lock waits for it. Gives up after `pg_reconcile_ms` and stops the store.
async fn reconcile(inner: &Inner, backend: i32, offset: u64, record: Vec<u8>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_millis(inner.opts.pg_reconcile_ms);
    let mut wait = Duration::from_millis(50);
    loop {
        match committed(inner, backend, offset, &record).await {
            Ok(true) => return Ok(()),
            Ok(false) => {
                return Err(Error::Unavailable(
                    "the connection to PostgreSQL was lost before the append committed; \
                     nothing was stored"
                        .into(),
                ));
            }
            Err(e) if Instant::now() >= deadline => {
                let why = format!(
                    "could not learn whether an append committed (the connection was lost during \
                     its commit, and PostgreSQL could not be asked within {} ms): {e}",
                    inner.opts.pg_reconcile_ms
                );
                inner.fail_stop(&why);
                return Err(Error::Stopped(why));
            }
            Err(e) => {
                tracing::debug!(error = %e, "reconciling an append: asking again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(1000));
            }
        }
    }
}

async fn committed(inner: &Inner, backend: i32, offset: u64, record: &[u8]) -> Result<bool> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db)?;
    // The lost backend (`backend`) may still be committing: its transaction holds the head's
    // lock until it ends, and it ends by `idle_in_transaction_session_timeout` at the latest,
    // which is shorter than the `lock_timeout` this waits with.
    tracing::debug!(backend, "waiting for the lost transaction to end");
    tx.query_one("SELECT next_offset FROM log_head FOR UPDATE", &[])
        .await
        .map_err(db)?;
    let row = tx
        .query_opt(
            "SELECT record FROM events WHERE log_offset = $1",
            &[&(offset as i64)],
        )
        .await
        .map_err(db)?;
    Ok(row.is_some_and(|r| r.get::<_, &[u8]>(0) == record))
}

/// Answers a batch: the envelopes once committed, the error otherwise.
fn finish(inner: &Inner, ready: Ready, committed: Result<()>) {
    match committed {
        Ok(()) => {
            inner.barriers.fetch_add(1, Ordering::Relaxed);
            {
                let mut recent = inner.recent.lock().expect("not poisoned");
                for (s, _) in &ready.staged {
                    recent.extend(&s.envelopes);
                }
            }
            inner.advance(ready.next_offset);
            for (s, reply) in ready.staged {
                let _ = reply.send(Ok(s.envelopes));
            }
        }
        Err(e) => {
            for (_, reply) in ready.staged {
                let _ = reply.send(Err(e.same_again()));
            }
        }
    }
}

/// Drops a connection whose state is unknown instead of returning it to the pool.
pub(crate) fn discard(client: deadpool_postgres::Object) {
    drop(deadpool_postgres::Object::take(client));
}
