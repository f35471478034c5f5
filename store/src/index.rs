//! The index beside the log: ordered byte keys with values, written by one indexer that follows
//! the log, for the reads whose cost must not grow with the log (lists, the runs to recover).
//!
//! The store does not know what the keys mean: the indexer (the engine's) derives them from the
//! events. What the store promises:
//!
//! - [`EventLog::index_apply`](crate::EventLog::index_apply) applies a batch of puts and deletes
//!   and moves the **watermark** (the offset the index has taken the log in up to, exclusive) in
//!   one atomic write: after a crash the index is exactly what it was after some batch, and its
//!   watermark says which. An indexer that starts over from the watermark ends where a rebuild
//!   from offset 0 would.
//! - Index writes are made durable by the log's barriers (and by `flush`), not one by one: a
//!   crash may lose the newest of them, with their watermark, never a part of one batch.
//! - Reads are bounded by the caller: [`IndexRange`] says where a page starts and ends, which
//!   way it goes, and how many entries it holds at most.

use std::ops::Bound;

/// One change to the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// Longest index key, in bytes. A key is never empty and never starts with a 0 byte (the store's
/// own keys beside the index do).
pub const INDEX_KEY_BYTES_MAX: usize = 1024;

/// A page of index entries: the keys in `[start, end)` (`end: None`: every key from `start`
/// on), in key order or (`reverse`) against it, at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexRange {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
    pub reverse: bool,
    pub limit: usize,
}

impl IndexRange {
    /// Every key starting with `prefix`, in key order, at most `limit`.
    pub fn prefix(prefix: &[u8], limit: usize) -> Self {
        IndexRange {
            start: Bound::Included(prefix.to_vec()),
            end: prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded),
            reverse: false,
            limit,
        }
    }

    /// The keys starting with `prefix` that come after `after` in the page's direction (all of
    /// them when `after` is `None`).
    pub fn prefix_after(prefix: &[u8], after: Option<&[u8]>, reverse: bool, limit: usize) -> Self {
        let mut r = IndexRange::prefix(prefix, limit);
        r.reverse = reverse;
        if let Some(after) = after {
            let mut key = prefix.to_vec();
            key.extend_from_slice(after);
            if reverse {
                r.end = Bound::Excluded(key);
            } else {
                r.start = Bound::Excluded(key);
            }
        }
        r
    }

    /// Whether no key can lie in the range (or the limit is 0).
    pub fn is_empty(&self) -> bool {
        let (Some(start), Some(end)) = (bound_key(&self.start), bound_key(&self.end)) else {
            return self.limit == 0;
        };
        let both_included = matches!(
            (&self.start, &self.end),
            (Bound::Included(_), Bound::Included(_))
        );
        self.limit == 0 || start > end || (start == end && !both_included)
    }

    /// Whether `key` lies in the range (ignoring the limit).
    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    }
}

fn bound_key(b: &Bound<Vec<u8>>) -> Option<&[u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The first key after every key starting with `prefix` (`None` when there is none: a prefix of
/// only 0xff bytes, or empty).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// An index entry: its key and value.
pub type IndexEntry = (Vec<u8>, Vec<u8>);

/// Checks a batch before it is applied: every key 1..=[`INDEX_KEY_BYTES_MAX`] bytes, every value
/// at most `RECORD_VALUE_BYTES_MAX`.
pub(crate) fn check(ops: &[IndexOp]) -> crate::Result<()> {
    for op in ops {
        let (key, value) = match op {
            IndexOp::Put(k, v) => (k, Some(v)),
            IndexOp::Delete(k) => (k, None),
        };
        if key.first().is_none_or(|b| *b == 0) || key.len() > INDEX_KEY_BYTES_MAX {
            return Err(crate::Error::BadRecordKey {
                bytes: key.len(),
                max: INDEX_KEY_BYTES_MAX,
            });
        }
        if let Some(v) = value
            && v.len() > crate::RECORD_VALUE_BYTES_MAX
        {
            return Err(crate::Error::RecordTooLarge {
                bytes: v.len(),
                max: crate::RECORD_VALUE_BYTES_MAX,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_where_the_next_one_starts() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        let r = IndexRange::prefix_after(b"r/", Some(b"5"), false, 10);
        assert!(!r.contains(b"r/5") && r.contains(b"r/6") && !r.contains(b"s/"));
        let r = IndexRange::prefix_after(b"r/", Some(b"5"), true, 10);
        assert!(!r.contains(b"r/5") && r.contains(b"r/4") && !r.contains(b"q"));
    }
}
