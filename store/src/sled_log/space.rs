//! Free disk space: the reserve the store keeps, the one rule by which a write is refused for
//! lack of space and health says full, and what the store does when the file system cannot tell.
//!
//! sled keeps an I/O error for good (every later write fails until a restart), so a write must
//! not reach it without room: a write that would leave less than the reserve free is refused with
//! [`Error::StorageFull`] before anything is written. Health says full as soon as one event of the
//! largest size would be refused, so that a client that trusts `/healthz` is never refused a
//! write health called fine.
//!
//! Some file systems (some FUSE and network ones) report no size at all (`statfs`: 0 blocks).
//! Their free space is unknown, not zero: writes go on, a full disk then shows as a failed write
//! (ENOSPC), and the store says so once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use chronicle_schemas::{EVENT_BYTES_MAX, RECORD_HEADER_BYTES};

use crate::{Error, Result};

/// Disk bytes a write of `bytes` of records is counted as: sled logs each value and rewrites its
/// page now and then.
pub(crate) fn counted(bytes: u64) -> u64 {
    bytes.saturating_mul(2)
}

/// What one event of the largest size is counted as ([`counted`] of its whole record): the room
/// above the reserve that health requires before it says the store takes writes.
pub(crate) const LARGEST_EVENT_BYTES: u64 = 2 * (RECORD_HEADER_BYTES + EVENT_BYTES_MAX) as u64;

/// The free space of the file system holding a data directory, against the reserve.
#[derive(Debug)]
pub(crate) struct Space {
    dir: PathBuf,
    reserve: u64,
    /// Whether the file system was already found to report no size (said once).
    unknown_said: AtomicBool,
}

/// Why health says full: what is free, the reserve, and what one event of the largest size needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Short {
    pub available: u64,
    pub reserve: u64,
    pub needed: u64,
}

impl Space {
    pub(crate) fn new(dir: &Path, reserve: u64) -> Space {
        Space {
            dir: dir.to_path_buf(),
            reserve,
            unknown_said: AtomicBool::new(false),
        }
    }

    pub(crate) fn reserve(&self) -> u64 {
        self.reserve
    }

    /// [`Error::StorageFull`] if writing `needed` bytes would leave less than the reserve free;
    /// fine when the free space cannot be known.
    pub(crate) fn check(&self, needed: u64) -> Result<()> {
        match self.available()? {
            Some(available) if available < needed.saturating_add(self.reserve) => {
                Err(Error::StorageFull {
                    needed,
                    available,
                    reserve: self.reserve,
                })
            }
            _ => Ok(()),
        }
    }

    /// `Some` when one event of the largest size would be refused now (what health reports as
    /// full); `None` when it would be taken, or when the free space cannot be known or read.
    pub(crate) fn short(&self) -> Option<Short> {
        let available = self.available().ok().flatten()?;
        (available < LARGEST_EVENT_BYTES.saturating_add(self.reserve)).then_some(Short {
            available,
            reserve: self.reserve,
            needed: LARGEST_EVENT_BYTES,
        })
    }

    /// Bytes available to this process, or `None` when the file system reports no size.
    fn available(&self) -> Result<Option<u64>> {
        let st = rustix::fs::statvfs(&self.dir).map_err(std::io::Error::from)?;
        if st.f_blocks == 0 || st.f_frsize == 0 {
            if !self.unknown_said.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    dir = %self.dir.display(),
                    "the file system of the data directory reports no size: its free space cannot be known, so the disk reserve is not kept and a full disk shows only as a failed write"
                );
            }
            return Ok(None);
        }
        Ok(Some(st.f_bavail.saturating_mul(st.f_frsize)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_larger_than_any_disk_refuses_every_write_and_health_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::new(dir.path(), u64::MAX / 4);
        assert!(matches!(
            space.check(1),
            Err(Error::StorageFull { needed: 1, .. })
        ));
        let short = space.short().expect("short of space");
        assert_eq!(
            (short.reserve, short.needed),
            (u64::MAX / 4, LARGEST_EVENT_BYTES)
        );
    }

    #[test]
    fn with_no_reserve_a_disk_with_room_takes_writes_and_is_not_short() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::new(dir.path(), 0);
        space.check(1).unwrap();
        assert_eq!(space.short(), None);
    }
}
