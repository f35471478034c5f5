//! Record groups: several consecutive records of one append in one sled value.
//!
//! Each sled insert costs about the same whatever its size (a page lookup, a log fragment and,
//! now and then, a page rewrite), and a run's appends carry a few events each. So the writer stores an append's records as one `events` value under the offset of the
//! first, with one `streams` entry under the run and seq of the first; a group never grows past
//! [`SLED_VALUE_BYTES_MAX`], so an append too large for one value takes several groups (a record
//! over it that compresses below it is a group of its own). The value stored is the group,
//! compressed when that makes it smaller (see `compress`).
//!
//! Layout: a group of one record is the record itself (as every store before groups wrote it);
//! a group of several is `[GROUP_FORMAT][count: u16][length: u32 × count][records]` (big-endian).
//! The `streams` value is the first offset (8 bytes), followed by the count (4 bytes) when the
//! group holds more than one record. Offset `o` lives in the group with the greatest key `≤ o`,
//! and seq `s` of a run in the `streams` entry with the greatest key `≤ run ‖ s`: the same rule
//! reads stores with one record per value.

use std::borrow::Cow;

use chronicle_schemas::{Envelope, RECORD_FORMAT_EXTERNAL, RECORD_FORMAT_V1, RunId};

use super::bodies::SLED_VALUE_BYTES_MAX;
use super::compress::{self, COMPRESSED_FORMAT};
use super::{Trees, decode_stored, keys, unreadable};
use crate::{Error, Result};

/// First byte of a group of several records; distinct from every record format byte.
pub(crate) const GROUP_FORMAT: u8 = 0x80;

const COUNT_BYTES: usize = 2;
const LENGTH_BYTES: usize = 4;

const _: () = assert!(
    GROUP_FORMAT != RECORD_FORMAT_V1
        && GROUP_FORMAT != RECORD_FORMAT_EXTERNAL
        && COMPRESSED_FORMAT != RECORD_FORMAT_V1
        && COMPRESSED_FORMAT != RECORD_FORMAT_EXTERNAL
        && COMPRESSED_FORMAT != GROUP_FORMAT
);

/// Splits `records` into runs of consecutive records whose group stays within the sled value
/// limit; returns the number of records in each group, in order.
pub(crate) fn split(records: &[Vec<u8>]) -> Vec<usize> {
    let mut sizes = Vec::new();
    let (mut count, mut bytes) = (0usize, 1 + COUNT_BYTES);
    for r in records {
        let add = LENGTH_BYTES + r.len();
        if count > 0 && (bytes + add > SLED_VALUE_BYTES_MAX || count == u16::MAX as usize) {
            sizes.push(count);
            (count, bytes) = (0, 1 + COUNT_BYTES);
        }
        count += 1;
        bytes += add;
    }
    if count > 0 {
        sizes.push(count);
    }
    sizes
}

/// The `events` value of `records` (at least one).
pub(crate) fn encode<R: AsRef<[u8]>>(records: &[R]) -> Cow<'_, [u8]> {
    if let [one] = records {
        return Cow::Borrowed(one.as_ref());
    }
    let body: usize = records.iter().map(|r| r.as_ref().len()).sum();
    let mut v = Vec::with_capacity(1 + COUNT_BYTES + LENGTH_BYTES * records.len() + body);
    v.push(GROUP_FORMAT);
    v.extend_from_slice(&(records.len() as u16).to_be_bytes());
    for r in records {
        v.extend_from_slice(&(r.as_ref().len() as u32).to_be_bytes());
    }
    for r in records {
        v.extend_from_slice(r.as_ref());
    }
    Cow::Owned(v)
}

/// The records of an `events` value, in offset order; `None` if a group's framing is damaged.
pub(crate) fn records(value: &[u8]) -> Option<Vec<&[u8]>> {
    if value.first() != Some(&GROUP_FORMAT) {
        return Some(vec![value]);
    }
    let count = u16::from_be_bytes(value.get(1..1 + COUNT_BYTES)?.try_into().ok()?) as usize;
    let lengths_end = 1 + COUNT_BYTES + LENGTH_BYTES * count;
    let lengths = value.get(1 + COUNT_BYTES..lengths_end)?;
    let mut out = Vec::with_capacity(count);
    let mut at = lengths_end;
    for l in lengths.chunks_exact(LENGTH_BYTES) {
        let len = u32::from_be_bytes(l.try_into().ok()?) as usize;
        out.push(value.get(at..at.checked_add(len)?)?);
        at += len;
    }
    (count > 1 && at == value.len()).then_some(out)
}

/// The `streams` value of a group starting at `offset` with `count` records.
pub(crate) fn stream_value(offset: u64, count: usize) -> Vec<u8> {
    let mut v = offset.to_be_bytes().to_vec();
    if count > 1 {
        v.extend_from_slice(&(count as u32).to_be_bytes());
    }
    v
}

/// `(first offset, count)` of a `streams` value; `None` if it is malformed.
pub(crate) fn parse_stream_value(v: &[u8]) -> Option<(u64, u64)> {
    let offset = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    match v.len() {
        8 => Some((offset, 1)),
        12 => Some((offset, u32::from_be_bytes(v[8..].try_into().ok()?) as u64))
            .filter(|(_, count)| *count > 0),
        _ => None,
    }
}

/// One stored `events` value: the records from offset `first` on.
pub(crate) struct Group {
    pub first: u64,
    value: Plain,
}

/// A stored value's plain bytes: the value itself, or what it decompressed to.
enum Plain {
    Stored(sled::IVec),
    Inflated(Vec<u8>),
}

impl std::ops::Deref for Plain {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Plain::Stored(v) => v,
            Plain::Inflated(v) => v,
        }
    }
}

/// The `events` value that stores `records` (at least one): their group, compressed when
/// `compress` is on and that makes it smaller.
pub(crate) fn value<R: AsRef<[u8]>>(records: &[R], compress: bool) -> Cow<'_, [u8]> {
    let plain = encode(records);
    match compress.then(|| compress::compress(&plain)).flatten() {
        Some(packed) => Cow::Owned(packed),
        None => plain,
    }
}

impl Group {
    /// The group with the greatest first offset `≤ offset`, if any.
    pub fn holding(t: &Trees, offset: u64) -> Result<Option<Group>> {
        let floor = t.events.range(..=keys::offset_key(offset)).next_back();
        floor
            .transpose()
            .map_err(|e| unreadable(offset, &e))?
            .map(|(k, v)| Group::new(&k, v))
            .transpose()
    }

    /// The group stored under key `k`.
    pub fn new(k: &[u8], value: sled::IVec) -> Result<Group> {
        let first = keys::parse_u64(k).ok_or_else(|| Error::Corrupt {
            offset: 0,
            reason: format!("malformed events key of {} bytes", k.len()),
        })?;
        Group::at(first, value)
    }

    /// The group stored at offset `first`; a compressed value is inflated here.
    pub fn at(first: u64, value: sled::IVec) -> Result<Group> {
        let value = match compress::unpack(&value) {
            Ok(Cow::Borrowed(_)) => Plain::Stored(value),
            Ok(Cow::Owned(plain)) => Plain::Inflated(plain),
            Err(why) => {
                return Err(Error::Corrupt {
                    offset: first,
                    reason: format!("the compressed value of records stored here {why}"),
                });
            }
        };
        Ok(Group { first, value })
    }

    /// Its records, the first at offset `first`.
    pub fn records(&self) -> Result<Vec<&[u8]>> {
        records(&self.value).ok_or_else(|| Error::Corrupt {
            offset: self.first,
            reason: "the framing of the group of records stored here is damaged".into(),
        })
    }

    /// The record at `offset`, if the group holds it.
    pub fn record(&self, offset: u64) -> Result<Option<&[u8]>> {
        let records = self.records()?;
        Ok(offset
            .checked_sub(self.first)
            .and_then(|i| records.get(usize::try_from(i).ok()?).copied()))
    }

    /// Its events with offsets in `from..to`, decoded (a body stored out of line is read).
    pub fn envelopes(&self, t: &Trees, from: u64, to: u64) -> Vec<Result<Envelope>> {
        let records = match self.records() {
            Ok(r) => r,
            Err(e) => return vec![Err(e)],
        };
        (self.first..)
            .zip(records)
            .filter(|(o, _)| (from..to).contains(o))
            .map(|(o, r)| decode_stored(t, o, r))
            .collect()
    }
}

/// Runs `f` on the record stored at `offset`; a record that is not stored is
/// [`Error::Corrupt`].
pub(crate) fn with_record<T>(
    t: &Trees,
    offset: u64,
    f: impl FnOnce(&[u8]) -> Result<T>,
) -> Result<T> {
    let missing = || Error::Corrupt {
        offset,
        reason: "missing".into(),
    };
    let group = Group::holding(t, offset)?.ok_or_else(missing)?;
    let record = group.record(offset)?.ok_or_else(missing)?;
    f(record)
}

/// The `streams` entry of `run` with the greatest seq `≤ seq`: its seq, first offset and count.
pub(crate) fn stream_floor(t: &Trees, run: RunId, seq: u64) -> Result<Option<(u64, u64, u64)>> {
    let range = keys::stream_key(run, 0)..=keys::stream_key(run, seq);
    let Some((k, v)) = t.streams.range(range).next_back().transpose()? else {
        return Ok(None);
    };
    stream_entry(run, &k, &v).map(Some)
}

/// A `streams` entry of `run`: its seq, first offset and count.
pub(crate) fn stream_entry(run: RunId, k: &[u8], v: &[u8]) -> Result<(u64, u64, u64)> {
    let seq = keys::stream_seq(k);
    let (first, count) = parse_stream_value(v).ok_or_else(|| malformed_stream(run, seq))?;
    Ok((seq, first, count))
}

/// Where a run's seq `seq` is stored: the offset of its record, if the run has that seq.
pub(crate) fn offset_of(t: &Trees, run: RunId, seq: u64) -> Result<Option<u64>> {
    Ok(
        stream_floor(t, run, seq)?.and_then(|(key_seq, first, count)| {
            seq.checked_sub(key_seq)
                .filter(|i| *i < count)
                .map(|i| first + i)
        }),
    )
}

pub(crate) fn malformed_stream(run: RunId, seq: u64) -> Error {
    Error::Decode(format!(
        "the streams entry of run {run} seq {seq} is malformed"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_gives_back_its_records() {
        let recs = vec![vec![1u8, 2, 3], vec![1u8], vec![2u8; 300]];
        let v = encode(&recs);
        let back: Vec<Vec<u8>> = records(&v)
            .unwrap()
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        assert_eq!(back, recs);
        // One record is stored as itself, as stores before groups wrote it.
        assert_eq!(encode(&recs[..1]), recs[0]);
        assert_eq!(records(&recs[0]).unwrap(), vec![&recs[0][..]]);
    }

    #[test]
    fn damaged_framing_is_refused() {
        let recs = [vec![1u8, 2], vec![1u8, 3]];
        let v = encode(&recs);
        assert!(records(&v[..v.len() - 1]).is_none(), "short");
        let mut long = v.to_vec();
        long.push(0);
        assert!(records(&long).is_none(), "trailing bytes");
        assert!(records(&[GROUP_FORMAT, 0]).is_none(), "no count");
    }

    #[test]
    fn groups_stay_within_the_value_limit() {
        let big = vec![0u8; SLED_VALUE_BYTES_MAX / 3];
        let recs = vec![big.clone(), big.clone(), big.clone(), vec![0u8; 10]];
        let sizes = split(&recs);
        assert_eq!(sizes.iter().sum::<usize>(), recs.len());
        let mut at = 0;
        for n in sizes {
            assert!(encode(&recs[at..at + n]).len() <= SLED_VALUE_BYTES_MAX);
            at += n;
        }
        // A record at the limit is a group of its own.
        assert_eq!(
            split(&[vec![0u8; SLED_VALUE_BYTES_MAX], vec![0u8; 1]]),
            [1, 1]
        );
    }

    #[test]
    fn stream_values_round_trip() {
        assert_eq!(parse_stream_value(&stream_value(7, 1)), Some((7, 1)));
        assert_eq!(parse_stream_value(&stream_value(7, 3)), Some((7, 3)));
        assert_eq!(stream_value(7, 1), 7u64.to_be_bytes());
        assert_eq!(parse_stream_value(&[0; 9]), None);
        assert_eq!(parse_stream_value(&[0; 12]), None, "a group of no records");
    }
}
