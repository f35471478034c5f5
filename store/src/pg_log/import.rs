//! Writing events that were stored elsewhere (`chronicle store copy`): the same transaction as an
//! append, but each event keeps its offset, `at` and hash. Each is checked and encoded again as
//! an append would be (`append::stage` with its own offset and `at`), and refused unless that
//! gives the hash it had, so the copy's chains verify as the original's did.

use std::collections::HashMap;
use std::sync::Arc;

use chronicle_schemas::{Envelope, RunId};
use tokio_postgres::types::ToSql;

use super::reads::head_of;
use super::writer::{Statements, discard, write};
use super::{Inner, db};
use crate::append::{Staged, stage};
use crate::{Error, Result, RunHead};

pub(crate) async fn batch(inner: Arc<Inner>, events: Vec<Envelope>) -> Result<u64> {
    let Some(first) = events.first().map(|e| e.offset) else {
        return Ok(0);
    };
    let client = inner.client().await?;
    let sql = Statements::prepare(&client).await?;
    client.batch_execute("BEGIN").await.map_err(db)?;
    let done = stage_all(&client, &sql, first, events).await;
    let (staged, next, last_at) = match done {
        Ok(ok) => ok,
        Err(e) => {
            discard(client);
            return Err(e);
        }
    };
    let refs: Vec<&Staged> = staged.iter().collect();
    let written = write(&client, &sql, &refs, (next, last_at), &inner.channel, None).await;
    match written {
        Ok(true) => {}
        Ok(false) => unreachable!("an unfenced write is always admitted"),
        Err(e) => {
            discard(client);
            return Err(db(e));
        }
    }
    inner.advance(next);
    Ok(next)
}

async fn stage_all(
    client: &tokio_postgres::Client,
    sql: &Statements,
    first: u64,
    events: Vec<Envelope>,
) -> Result<(Vec<Staged>, u64, i64)> {
    let head = client.query_one(&sql.lock, &[]).await.map_err(db)?;
    let next = head.get::<_, i64>(0) as u64;
    let mut last_at: i64 = head.get(1);
    if next != first {
        return Err(Error::Postgres(format!(
            "the log here continues at offset {next}, not at {first}"
        )));
    }
    let runs: Vec<uuid::Uuid> = events.iter().map(|e| e.run_id.0).collect();
    let params: [&(dyn ToSql + Sync); 1] = [&runs];
    let rows = client.query(&sql.heads, &params).await.map_err(db)?;
    let mut heads: HashMap<RunId, RunHead> = HashMap::new();
    for row in &rows {
        let h = head_of(row)?;
        heads.insert(h.run_id, h);
    }
    let mut staged = Vec::with_capacity(events.len());
    let mut next = first;
    for env in events {
        if env.offset != next {
            return Err(Error::Corrupt {
                offset: next,
                reason: "missing from the source".into(),
            });
        }
        let (run_id, seq, hash, at) = (env.run_id, env.seq, env.hash, env.at);
        let s = stage(run_id, seq, vec![env.event], heads.get(&run_id), next, at)?;
        if s.envelopes[0].hash != hash {
            return Err(Error::Corrupt {
                offset: next,
                reason: "encoded again, the event does not give the hash it had".into(),
            });
        }
        heads.insert(run_id, s.head.clone());
        last_at = last_at.max(at.0);
        next += 1;
        staged.push(s);
    }
    Ok((staged, next, last_at))
}
