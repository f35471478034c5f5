//! Moving a sled store onto PostgreSQL (`chronicle store copy`): the blobs, every event with its
//! offset, `at` and hash, the named records and the index, then a check that the copy verifies
//! to the same heads as the original. Snapshots are a cache and are not copied.

use std::path::Path;

use chronicle_schemas::Hash;

use crate::index::IndexRange;
use crate::records::RecordRange;
use crate::{
    Error, IndexOp, PgLog, RECORD_BATCH_BYTES_MAX, RECORD_BATCH_OPS_MAX, RecordOp, Result, Store,
    VerifyReport,
};

/// Events written to the target in one transaction.
const COPY_BATCH_EVENTS: u64 = 2048;

/// What a copy moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Copied {
    pub events: u64,
    pub runs: usize,
    pub blobs: u64,
    pub records: u64,
    pub index_entries: u64,
    /// The index's watermark, as in the original.
    pub index_watermark: u64,
}

/// Copies the sled store `from` into the empty PostgreSQL store `to`, then verifies both and
/// compares them. `progress(done, total)` hears of the events as they go.
pub fn copy(from: &Store, to: &PgLog, progress: &mut dyn FnMut(u64, u64)) -> Result<Copied> {
    use crate::EventLog;
    let dir = from.dir().ok_or_else(|| {
        Error::Postgres("only a sled store (a data directory) can be copied".into())
    })?;
    let empty = to.durable_next_offset() == 0
        && to.records_range(&RecordRange::prefix("", 1))?.is_empty()
        && to.index_watermark()? == 0
        && to.index_range(&everything(None, 1))?.is_empty();
    if !empty {
        return Err(Error::Postgres(format!(
            "the target {} is not empty; copy into a new schema (`?schema=NAME`)",
            to.target().shown
        )));
    }
    let mut copied = Copied {
        blobs: copy_blobs(dir, from, to)?,
        ..Copied::default()
    };
    let total = from.durable_next_offset();
    let mut next = 0;
    while next < total {
        let end = total.min(next + COPY_BATCH_EVENTS);
        let events: Vec<_> = from.read_range(next, end).collect::<Result<_>>()?;
        if events.len() as u64 != end - next {
            return Err(Error::Corrupt {
                offset: next + events.len() as u64,
                reason: "missing from the source".into(),
            });
        }
        next = to.import(events)?;
        progress(next, total);
    }
    copied.events = next;
    copied.records = copy_records(from, to)?;
    (copied.index_entries, copied.index_watermark) = copy_index(from, to)?;
    let (a, b) = (from.verify()?, to.verify()?);
    compare(&a, &b)?;
    copied.runs = b.heads.len();
    Ok(copied)
}

fn compare(from: &VerifyReport, to: &VerifyReport) -> Result<()> {
    let why = if let Some(p) = &from.problem {
        format!(
            "the original does not verify at offset {}: {}",
            p.offset, p.reason
        )
    } else if let Some(p) = &to.problem {
        format!(
            "the copy does not verify at offset {}: {}",
            p.offset, p.reason
        )
    } else if from.next_offset != to.next_offset || from.heads != to.heads {
        format!(
            "the copy ends at offset {} with {} runs, the original at {} with {}",
            to.next_offset,
            to.heads.len(),
            from.next_offset,
            from.heads.len()
        )
    } else {
        return Ok(());
    };
    Err(Error::Postgres(why))
}

/// Every blob file of the sled store's `blobs` directory.
fn copy_blobs(dir: &Path, from: &Store, to: &PgLog) -> Result<u64> {
    use crate::EventLog;
    let blobs = dir.join("blobs");
    let Ok(entries) = std::fs::read_dir(&blobs) else {
        return Ok(0);
    };
    let mut n = 0;
    for entry in entries {
        let name = entry?.file_name();
        let Some(hash) = name.to_str().and_then(Hash::from_hex) else {
            continue; // a temporary file of an unfinished put
        };
        let bytes = from.read_blob(&chronicle_schemas::BlobRef { hash, bytes: 0 })?;
        to.put_blob(&bytes)?;
        n += 1;
    }
    Ok(n)
}

fn copy_records(from: &Store, to: &PgLog) -> Result<u64> {
    use crate::EventLog;
    let mut after = None;
    let mut n = 0;
    loop {
        let page = from.records_range(&RecordRange {
            prefix: String::new(),
            after: after.clone(),
            reverse: false,
            limit: RECORD_BATCH_OPS_MAX,
        })?;
        let Some((last, _)) = page.last() else {
            return Ok(n);
        };
        after = Some(last.clone());
        let mut ops = Vec::new();
        let mut bytes = 0;
        for (k, v) in page {
            if bytes + k.len() + v.len() > RECORD_BATCH_BYTES_MAX && !ops.is_empty() {
                to.records_apply(&std::mem::take(&mut ops))?;
                bytes = 0;
            }
            bytes += k.len() + v.len();
            ops.push(RecordOp::Put(k, v));
            n += 1;
        }
        to.records_apply(&ops)?;
    }
}

fn everything(after: Option<Vec<u8>>, limit: usize) -> IndexRange {
    IndexRange {
        start: after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
        end: std::ops::Bound::Unbounded,
        reverse: false,
        limit,
    }
}

/// The index's entries, at watermark 0 while they go in, then its watermark.
fn copy_index(from: &Store, to: &PgLog) -> Result<(u64, u64)> {
    use crate::EventLog;
    let watermark = from.index_watermark()?;
    let mut after = None;
    let mut n = 0;
    loop {
        let page = from.index_range(&everything(after.take(), 1024))?;
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        n += page.len() as u64;
        let ops: Vec<IndexOp> = page.into_iter().map(|(k, v)| IndexOp::Put(k, v)).collect();
        to.index_apply(&ops, 0, 0)?;
    }
    to.index_apply(&[], 0, watermark)?;
    Ok((n, watermark))
}
