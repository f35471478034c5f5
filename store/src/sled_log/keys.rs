//! Fixed-width big-endian keys: sled orders keys bytewise, so big-endian integers sort
//! numerically (little-endian ones would not).

use chronicle_schemas::{RunId, SessionId, Timestamp};

pub(crate) fn offset_key(offset: u64) -> [u8; 8] {
    offset.to_be_bytes()
}

pub(crate) fn parse_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// `meta`'s `batch`: `start ‖ end`, the offsets of the batch the writer is writing (or wrote last).
pub(crate) fn batch_value(start: u64, end: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&start.to_be_bytes());
    v[8..].copy_from_slice(&end.to_be_bytes());
    v
}

/// The `start..end` of a `batch` value.
pub(crate) fn parse_batch(v: &[u8]) -> Option<std::ops::Range<u64>> {
    Some(parse_u64(v.get(..8)?)?..parse_u64(v.get(8..)?)?)
}

/// `run_id ‖ seq`: a run's events are one contiguous key range.
pub(crate) fn stream_key(run: RunId, seq: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(run.as_bytes());
    k[16..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The seq of a `run_id ‖ seq` key (0 for a malformed one; verification names those).
pub(crate) fn stream_seq(k: &[u8]) -> u64 {
    k.get(16..).and_then(parse_u64).unwrap_or(0)
}

/// Timestamps may be negative in principle; flipping the sign bit keeps them ordered as u64.
fn time_bytes(t: Timestamp) -> [u8; 8] {
    ((t.as_micros() as u64) ^ (1 << 63)).to_be_bytes()
}

/// `session_id ‖ 0x00 ‖ created_at ‖ run_id`. Session ids never contain NUL (checked on append),
/// so `session_id ‖ 0x00` is an exact prefix for the session's runs, oldest first.
pub(crate) fn session_key(session: &SessionId, created_at: Timestamp, run: RunId) -> Vec<u8> {
    let mut k = session_prefix(session);
    k.extend_from_slice(&time_bytes(created_at));
    k.extend_from_slice(run.as_bytes());
    k
}

pub(crate) fn session_prefix(session: &SessionId) -> Vec<u8> {
    let mut k = Vec::with_capacity(session.as_str().len() + 25);
    k.extend_from_slice(session.as_str().as_bytes());
    k.push(0);
    k
}

pub(crate) fn run_from_session_key(k: &[u8]) -> Option<RunId> {
    let tail = k.len().checked_sub(16)?;
    Some(RunId(uuid::Uuid::from_bytes(k[tail..].try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_keys_sort_numerically() {
        let mut keys: Vec<[u8; 8]> = [256u64, 1, 0, u64::MAX, 255].map(offset_key).to_vec();
        keys.sort();
        let back: Vec<u64> = keys.iter().map(|k| parse_u64(k).unwrap()).collect();
        assert_eq!(back, [0, 1, 255, 256, u64::MAX]);
    }

    #[test]
    fn stream_keys_sort_by_run_then_seq() {
        let run = RunId::from_u128(0xABCD);
        assert!(stream_key(run, 2) < stream_key(run, 256));
        assert!(stream_key(run, u64::MAX) < stream_key(RunId::from_u128(0xABCE), 0));
    }

    #[test]
    fn session_keys_group_and_order_by_time() {
        let s = SessionId::from("thread-1");
        let (a, b) = (RunId::from_u128(2), RunId::from_u128(1));
        let k1 = session_key(&s, Timestamp(-5), a);
        let k2 = session_key(&s, Timestamp(10), b);
        assert!(k1 < k2, "older run first, even across the sign of the time");
        assert!(k1.starts_with(&session_prefix(&s)));
        assert!(
            !session_key(&SessionId::from("thread-10"), Timestamp(0), a)
                .starts_with(&session_prefix(&s))
        );
        assert_eq!(run_from_session_key(&k1), Some(a));
    }
}
