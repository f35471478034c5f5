//! Named records on sled: the tree `records` (key → head) and `record_chunks` (pieces of values
//! too large for one sled value).
//!
//! No sled value may grow a page past the size sled writes to an unsynced file of its own (see
//! `bodies`), so a head holds the value itself when key and value fit in
//! [`SLED_VALUE_BYTES_MAX`], and otherwise only the value's length, its bytes being split into
//! pieces under `key length ‖ key ‖ piece index`. One sled transaction over both trees replaces
//! a head with its pieces, so a reader never sees a value half replaced.

use sled::Transactional;
use sled::transaction::{
    ConflictableTransactionError, TransactionError, TransactionalTree, UnabortableTransactionError,
};

use super::{SLED_VALUE_BYTES_MAX, Trees, keys};
use crate::records::{RECORD_KEY_BYTES_MAX, RecordOp, RecordRange};
use crate::{Error, Result};

/// Most value bytes in one sled value, leaving room for the longest key and a piece's framing.
const PIECE_BYTES: usize = SLED_VALUE_BYTES_MAX - RECORD_KEY_BYTES_MAX - 8;

/// Head tags: the value follows, or its length (8 bytes) and the value is in pieces.
const INLINE: u8 = 0;
const IN_PIECES: u8 = 1;

/// Replaces the value under `key` (`None` deletes it), with its pieces, in one transaction. With
/// `if_absent`, a key that has a record keeps it, and its value is answered instead (`None`
/// when the value was written).
pub(crate) fn write(
    t: &Trees,
    key: &str,
    new: Option<&[u8]>,
    if_absent: bool,
) -> Result<Option<Vec<u8>>> {
    let there = (&t.records, &t.record_chunks)
        .transaction(|(heads, pieces)| {
            if if_absent && let Some(old) = heads.get(key)? {
                return Ok(Some(old));
            }
            replace(heads, pieces, key, new)?;
            Ok::<_, ConflictableTransactionError<()>>(None)
        })
        .map_err(|e: TransactionError<()>| Error::from(e))?;
    // The head found in the transaction; its pieces (if any) are read after it.
    there.map(|head| value(t, key, &head)).transpose()
}

/// Applies `ops` in one transaction: every expectation holds and every put and delete is made,
/// or nothing is written ([`Error::RecordConflict`] naming the first key that did not hold).
pub(crate) fn apply(t: &Trees, ops: &[RecordOp]) -> Result<()> {
    (&t.records, &t.record_chunks)
        .transaction(|(heads, pieces)| {
            for op in ops {
                if let RecordOp::Expect(key, want) = op
                    && tx_value(heads, pieces, key)?.as_deref() != want.as_deref()
                {
                    return Err(ConflictableTransactionError::Abort(key.clone()));
                }
            }
            for op in ops {
                match op {
                    RecordOp::Put(key, v) => replace(heads, pieces, key, Some(v))?,
                    RecordOp::Delete(key) => replace(heads, pieces, key, None)?,
                    RecordOp::Expect(..) => {}
                }
            }
            Ok(())
        })
        .map_err(|e: TransactionError<String>| match e {
            TransactionError::Abort(key) => Error::RecordConflict { key },
            TransactionError::Storage(e) => e.into(),
        })
}

/// Replaces the value under `key` (`None` deletes it) with its pieces, in a transaction.
fn replace(
    heads: &TransactionalTree,
    pieces: &TransactionalTree,
    key: &str,
    new: Option<&[u8]>,
) -> std::result::Result<(), UnabortableTransactionError> {
    if let Some(old) = heads.get(key)? {
        remove_pieces(pieces, key, &old)?;
    }
    match new {
        Some(v) if v.len() <= PIECE_BYTES => {
            heads.insert(key, [&[INLINE], v].concat())?;
        }
        Some(v) => {
            for (i, piece) in (0u32..).zip(v.chunks(PIECE_BYTES)) {
                pieces.insert(piece_key(key, i), piece)?;
            }
            let len = (v.len() as u64).to_be_bytes();
            heads.insert(key, [&[IN_PIECES], &len[..]].concat())?;
        }
        None => {
            heads.remove(key)?;
        }
    }
    Ok(())
}

/// The value under `key` as the transaction sees it (a damaged one reads as no value: an
/// expectation of it fails, and nothing is written).
fn tx_value(
    heads: &TransactionalTree,
    pieces: &TransactionalTree,
    key: &str,
) -> std::result::Result<Option<Vec<u8>>, UnabortableTransactionError> {
    let Some(head) = heads.get(key)? else {
        return Ok(None);
    };
    match (head.first(), pieces_len(&head)) {
        (Some(&INLINE), _) => Ok(Some(head[1..].to_vec())),
        (Some(&IN_PIECES), Some(len)) => {
            let mut v = Vec::with_capacity(len as usize);
            for i in 0..piece_count(len) {
                match pieces.get(piece_key(key, i))? {
                    Some(piece) => v.extend_from_slice(&piece),
                    None => return Ok(None),
                }
            }
            Ok(Some(v))
        }
        _ => Ok(None),
    }
}

/// A page of records (see [`RecordRange`]).
pub(crate) fn range(t: &Trees, r: &RecordRange) -> Result<Vec<(String, Vec<u8>)>> {
    if r.is_empty() {
        return Ok(Vec::new());
    }
    let heads = t.records.range::<Vec<u8>, _>(r.bounds());
    let heads: Box<dyn Iterator<Item = _>> = if r.reverse {
        Box::new(heads.rev())
    } else {
        Box::new(heads)
    };
    heads.take(r.limit).map(|kv| entry(t, kv?)).collect()
}

/// A record's key and value, from its key and head in the records tree.
fn entry(t: &Trees, (k, head): (sled::IVec, sled::IVec)) -> Result<(String, Vec<u8>)> {
    let key = String::from_utf8(k.to_vec())
        .map_err(|_| Error::Decode("a record key is not UTF-8".into()))?;
    let v = value(t, &key, &head)?;
    Ok((key, v))
}

/// Removes the pieces a head points at (none for an inline value).
fn remove_pieces(
    pieces: &TransactionalTree,
    key: &str,
    head: &[u8],
) -> std::result::Result<(), UnabortableTransactionError> {
    if let Some(len) = pieces_len(head) {
        for i in 0..piece_count(len) {
            pieces.remove(piece_key(key, i))?;
        }
    }
    Ok(())
}

/// The value under `key`, reassembled from its pieces when it has them.
pub(crate) fn read(t: &Trees, key: &str) -> Result<Option<Vec<u8>>> {
    t.records
        .get(key)?
        .map(|head| value(t, key, &head))
        .transpose()
}

/// Every record whose key starts with `prefix`, in key order.
pub(crate) fn list(t: &Trees, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
    t.records
        .scan_prefix(prefix)
        .map(|kv| entry(t, kv?))
        .collect()
}

fn value(t: &Trees, key: &str, head: &[u8]) -> Result<Vec<u8>> {
    let damaged = |why: &str| Error::Decode(format!("record {key:?}: {why}"));
    match (head.first(), pieces_len(head)) {
        (Some(&INLINE), _) => Ok(head[1..].to_vec()),
        (Some(&IN_PIECES), Some(len)) => {
            let mut v = Vec::with_capacity(len as usize);
            for i in 0..piece_count(len) {
                let piece = t
                    .record_chunks
                    .get(piece_key(key, i))?
                    .ok_or_else(|| damaged(&format!("piece {i} is missing")))?;
                v.extend_from_slice(&piece);
            }
            if v.len() as u64 != len {
                return Err(damaged(&format!("{} bytes, not {len}", v.len())));
            }
            Ok(v)
        }
        _ => Err(damaged("unknown head")),
    }
}

/// The value's length, for a head whose value is in pieces.
fn pieces_len(head: &[u8]) -> Option<u64> {
    match head.split_first() {
        Some((&IN_PIECES, len)) => keys::parse_u64(len),
        _ => None,
    }
}

fn piece_count(len: u64) -> u32 {
    len.div_ceil(PIECE_BYTES as u64) as u32
}

/// `key length (u16) ‖ key ‖ index (u32)`: the length makes every key's pieces their own range.
fn piece_key(key: &str, index: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + key.len() + 4);
    k.extend_from_slice(&(key.len() as u16).to_be_bytes());
    k.extend_from_slice(key.as_bytes());
    k.extend_from_slice(&index.to_be_bytes());
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RECORD_VALUE_BYTES_MAX;
    use crate::{EventLog, Options, SledLog};

    fn open(dir: &std::path::Path, opts: Options) -> SledLog {
        SledLog::open(dir, opts).expect("the sled store opens")
    }

    /// Every entry of both trees, key and value together, fits the sled value limit.
    fn assert_small(log: &SledLog) {
        for tree in [&log.trees.records, &log.trees.record_chunks] {
            for kv in tree.iter() {
                let (k, v) = kv.unwrap();
                assert!(
                    k.len() + v.len() <= SLED_VALUE_BYTES_MAX,
                    "{} bytes",
                    k.len() + v.len()
                );
            }
        }
    }

    #[test]
    fn large_values_go_in_small_pieces_that_go_when_replaced_or_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), Options::default());
        let key = "k".repeat(RECORD_KEY_BYTES_MAX);
        let big = vec![7u8; RECORD_VALUE_BYTES_MAX];
        log.put_record(&key, &big).unwrap();
        log.put_record("small", &[1u8; PIECE_BYTES]).unwrap();
        assert_small(&log);
        let pieces = log.trees.record_chunks.len();
        assert_eq!(pieces, RECORD_VALUE_BYTES_MAX.div_ceil(PIECE_BYTES));
        log.put_record(&key, &big[..PIECE_BYTES + 1]).unwrap();
        assert_eq!(log.trees.record_chunks.len(), 2, "the surplus pieces went");
        log.put_record(&key, b"inline").unwrap();
        assert!(log.trees.record_chunks.is_empty());
        log.put_record(&key, &big).unwrap();
        log.delete_record(&key).unwrap();
        assert!(log.trees.record_chunks.is_empty());
        assert_eq!(log.records("").unwrap().len(), 1);
    }

    #[test]
    fn a_put_that_would_eat_the_disk_reserve_is_refused_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), Options::default());
        log.put_record("kept", b"before").unwrap();
        drop(log);
        // A reserve larger than any disk: every put finds the disk full.
        let opts = Options {
            disk_reserve_bytes: u64::MAX / 4,
            ..Options::default()
        };
        let log = open(dir.path(), opts);
        for key in ["kept", "new"] {
            let err = log.put_record(key, b"after").unwrap_err();
            assert!(
                matches!(err, Error::StorageFull { needed: 10, .. }),
                "{err}"
            );
        }
        assert_eq!(
            log.records("").unwrap(),
            [("kept".into(), b"before".to_vec())]
        );
        // A delete frees what it can: the reserve is kept for such small writes.
        log.delete_record("kept").unwrap();
        assert_eq!(log.record("kept").unwrap(), None);
        assert_eq!(log.failure(), None);
    }
}
