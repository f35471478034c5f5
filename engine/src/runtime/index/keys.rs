//! The index's keys. Each kind of entry has a one-byte prefix; numbers are big-endian so that
//! byte order is their order; a string inside a key is length-prefixed (or, past
//! [`PART_BYTES_MAX`], its BLAKE3 digest) so that no string can run into the next part.
//!
//! | prefix | key | value | what for |
//! | --- | --- | --- | --- |
//! | `r` | run | [`RunFacts`](chronicle_projections::RunFacts) | a run's facts |
//! | `l` | run | – | the runs not ended: what the engine recovers at open |
//! | `t` | created, run | – | every run by creation time (a data directory's listing) |
//! | `v` | created, run | – | the runs anyone may see (not deleted) by creation time |
//! | `o` | owner, created, run | – | those of one owner |
//! | `n` | session | [`SessionFacts`](super::SessionFacts) | a session's facts |
//! | `a` | newest first, session | – | the sessions listed (first run a root run, not deleted) |
//! | `b` | owner, newest first, session | – | those of one owner |
//! | `c` | user, newest first, session | – | those of one user |
//! | `d` | owner, user, newest first, session | – | those of one owner and user |
//! | `q` | requested, run, seq | – | pending approvals by age |
//! | `w` | owner, requested, run, seq | – | those of one owner |
//! | `s` | status, requested, run, seq | – | settled approvals (not a deleted session's) by status and age |
//! | `p` | owner, status, requested, run, seq | – | those of one owner |
//! | `m` | owner, user, offset | [`Memory`](chronicle_schemas::Memory) | memory items, by age |
//! | `u` | user, offset | the `m` key | a user's items of every owner |
//! | `i` | memory id | the `m` key | one item |
//! | `k` | run, memory id | – | the items a run saved |
//! | `x` | status | count, 8 bytes | how many runs are in each status |
//! | `y` | status | count, 8 bytes | those anyone may see (not deleted) |
//! | `z` | owner, status | count, 8 bytes | those of one owner |
//! | `e` | – | count, 8 bytes | how many approvals are pending |
//! | `#` | – | [`INDEX_VERSION`], 4 bytes | the format of the entries: an index of another is rebuilt |

use chronicle_schemas::{RunId, Timestamp};

/// Strings longer than this go into keys as their digest.
pub(crate) const PART_BYTES_MAX: usize = 256;

pub(crate) const RUN: u8 = b'r';
pub(crate) const LIVE: u8 = b'l';
pub(crate) const ALL_RUNS: u8 = b't';
pub(crate) const VISIBLE_RUNS: u8 = b'v';
pub(crate) const OWNER_RUNS: u8 = b'o';
pub(crate) const SESSION: u8 = b'n';
pub(crate) const SESSIONS: u8 = b'a';
pub(crate) const OWNER_SESSIONS: u8 = b'b';
pub(crate) const USER_SESSIONS: u8 = b'c';
pub(crate) const OWNER_USER_SESSIONS: u8 = b'd';
pub(crate) const PENDING: u8 = b'q';
pub(crate) const OWNER_PENDING: u8 = b'w';
pub(crate) const MEMORY: u8 = b'm';
pub(crate) const USER_MEMORY: u8 = b'u';
pub(crate) const MEMORY_ID: u8 = b'i';
pub(crate) const RUN_MEMORY: u8 = b'k';
pub(crate) const SETTLED: u8 = b's';
pub(crate) const OWNER_SETTLED: u8 = b'p';
pub(crate) const COUNT_ALL: u8 = b'x';
pub(crate) const COUNT_VISIBLE: u8 = b'y';
pub(crate) const COUNT_OWNER: u8 = b'z';
pub(crate) const COUNT_PENDING: u8 = b'e';
pub(crate) const VERSION: u8 = b'#';

/// The format of the index's entries, kept under [`VERSION`]. An index without the entry (one
/// written before it existed: format 1) or of another format is cleared and rebuilt from the
/// log once. Raise it whenever what [`super::derive`] writes changes.
///
/// 1: runs, sessions, pending approvals, memory items. 2: settled approvals (`s`, `p`). 3: runs
/// counted by status (`x`, `y`, `z`). 4: pending approvals counted (`e`).
pub const INDEX_VERSION: u32 = 4;

/// A key being built.
#[derive(Clone, Debug, Default)]
pub(crate) struct Key(pub Vec<u8>);

impl Key {
    pub fn new(prefix: u8) -> Self {
        Key(vec![prefix])
    }

    pub fn run(mut self, run: RunId) -> Self {
        self.0.extend_from_slice(run.0.as_bytes());
        self
    }

    pub fn u64(mut self, n: u64) -> Self {
        self.0.extend_from_slice(&n.to_be_bytes());
        self
    }

    /// A time, oldest first.
    pub fn time(self, t: Timestamp) -> Self {
        self.u64(time_bits(t))
    }

    /// A time, newest first.
    pub fn time_desc(self, t: Timestamp) -> Self {
        self.u64(!time_bits(t))
    }

    /// A string that other parts follow.
    pub fn part(mut self, s: &str) -> Self {
        let bytes = s.as_bytes();
        if bytes.len() <= PART_BYTES_MAX {
            self.0
                .extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            self.0.extend_from_slice(bytes);
        } else {
            self.0.extend_from_slice(&u16::MAX.to_be_bytes());
            self.0.extend_from_slice(blake3::hash(bytes).as_bytes());
        }
        self
    }

    /// A string that ends the key (its order is the string's byte order).
    pub fn tail(mut self, s: &str) -> Self {
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    pub fn done(self) -> Vec<u8> {
        self.0
    }
}

/// A timestamp's bits in an order bytes keep (the sign bit flipped).
fn time_bits(t: Timestamp) -> u64 {
    (t.as_micros() as u64) ^ (1 << 63)
}

/// The run id at `at..at + 16` of `key`.
pub(crate) fn run_at(key: &[u8], at: usize) -> Option<RunId> {
    let bytes: [u8; 16] = key.get(at..at + 16)?.try_into().ok()?;
    Some(RunId(uuid::Uuid::from_bytes(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_as_their_parts() {
        let t = |m| Key::new(b'x').time(Timestamp(m)).done();
        assert!(t(-5) < t(0) && t(0) < t(3) && t(3) < t(i64::MAX));
        let d = |m| Key::new(b'x').time_desc(Timestamp(m)).done();
        assert!(d(3) < d(0) && d(0) < d(-5));
        // A short string cannot run into what follows it.
        let p = |s: &str, n| Key::new(b'x').part(s).u64(n).done();
        assert_ne!(p("ab", 1), p("a", 1));
        let long = "z".repeat(PART_BYTES_MAX + 1);
        assert_eq!(Key::new(b'x').part(&long).done().len(), 1 + 2 + 32);
    }
}
