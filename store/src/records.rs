//! Named records: small mutable values kept beside the log (a thread's metadata before any run
//! exists, which run an outside protocol's run maps to). They are not events: a record is
//! replaced or deleted in place, is not chained, and `verify` does not read it. The limits here
//! are the same for every implementation.

use std::ops::Bound;

use chronicle_schemas::EVENT_BYTES_MAX;

use crate::{Error, Result};

/// The longest record key in bytes: keys go into index keys, so they stay bounded.
pub const RECORD_KEY_BYTES_MAX: usize = 512;

/// The largest record value in bytes: the same limit as one event.
pub const RECORD_VALUE_BYTES_MAX: usize = EVENT_BYTES_MAX;

/// Refuses a key or value outside the limits (before anything is written).
pub(crate) fn check(key: &str, value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() || key.len() > RECORD_KEY_BYTES_MAX {
        return Err(Error::BadRecordKey {
            bytes: key.len(),
            max: RECORD_KEY_BYTES_MAX,
        });
    }
    match value {
        Some(v) if v.len() > RECORD_VALUE_BYTES_MAX => Err(Error::RecordTooLarge {
            bytes: v.len(),
            max: RECORD_VALUE_BYTES_MAX,
        }),
        _ => Ok(()),
    }
}

/// Most operations in one [`records_apply`](crate::EventLog::records_apply) write.
pub const RECORD_BATCH_OPS_MAX: usize = 1024;

/// Most bytes of keys and values in one [`records_apply`](crate::EventLog::records_apply) write:
/// it is applied in one sled transaction, which holds all of it in memory.
pub const RECORD_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// One part of an atomic write of named records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordOp {
    /// Stores the value under the key, replacing what was there.
    Put(String, Vec<u8>),
    /// Removes the record under the key (nothing when absent).
    Delete(String),
    /// Writes nothing: the whole write happens only if the key holds exactly this value (`None`:
    /// no record), else it is [`Error::RecordConflict`] and nothing is written. What a
    /// read-modify-write checks, so two writers cannot both act on one value they read.
    Expect(String, Option<Vec<u8>>),
}

impl RecordOp {
    pub fn key(&self) -> &str {
        match self {
            RecordOp::Put(k, _) | RecordOp::Delete(k) | RecordOp::Expect(k, _) => k,
        }
    }

    /// The value it writes (`None` for a delete or an expectation).
    pub(crate) fn written(&self) -> Option<&[u8]> {
        match self {
            RecordOp::Put(_, v) => Some(v),
            _ => None,
        }
    }
}

/// A page of named records: the keys starting with `prefix` that come after `after` (a whole
/// key, the last of the previous page) in the page's direction, in key order or (`reverse`)
/// against it, at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRange {
    pub prefix: String,
    pub after: Option<String>,
    pub reverse: bool,
    pub limit: usize,
}

impl RecordRange {
    /// The first `limit` keys starting with `prefix`, in key order.
    pub fn prefix(prefix: impl Into<String>, limit: usize) -> Self {
        RecordRange {
            prefix: prefix.into(),
            after: None,
            reverse: false,
            limit,
        }
    }

    /// The key bounds of the page, for a `BTreeMap` or sled range.
    pub(crate) fn bounds(&self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let start = Bound::Included(self.prefix.as_bytes().to_vec());
        let end = crate::index::prefix_end(self.prefix.as_bytes())
            .map_or(Bound::Unbounded, Bound::Excluded);
        match &self.after {
            None => (start, end),
            Some(after) if self.reverse => (start, Bound::Excluded(after.as_bytes().to_vec())),
            Some(after) => (Bound::Excluded(after.as_bytes().to_vec()), end),
        }
    }

    /// Whether no key can lie in the page (or the limit is 0).
    pub(crate) fn is_empty(&self) -> bool {
        let below = |a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>| match (a, b) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a >= b
            }
            _ => false,
        };
        let (start, end) = self.bounds();
        self.limit == 0 || below(&start, &end)
    }
}

/// Refuses a batch over [`RECORD_BATCH_OPS_MAX`] or [`RECORD_BATCH_BYTES_MAX`], or with a bad key
/// or value anywhere in it (before anything is written).
pub(crate) fn check_batch(ops: &[RecordOp]) -> Result<()> {
    let bytes: usize = ops
        .iter()
        .map(|op| {
            op.key().len()
                + match op {
                    RecordOp::Put(_, v) | RecordOp::Expect(_, Some(v)) => v.len(),
                    _ => 0,
                }
        })
        .sum();
    if ops.len() > RECORD_BATCH_OPS_MAX || bytes > RECORD_BATCH_BYTES_MAX {
        return Err(Error::RecordBatchTooLarge {
            ops: ops.len(),
            bytes,
            max_ops: RECORD_BATCH_OPS_MAX,
            max_bytes: RECORD_BATCH_BYTES_MAX,
        });
    }
    for op in ops {
        check(op.key(), op.written())?;
    }
    Ok(())
}
