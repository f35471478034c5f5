//! The body file `<data>/bodies`: the bodies of records too large to keep in sled.
//!
//! sled 0.34 writes any tree page larger than a quarter of its 512 KiB segment to a file of its
//! own under `sled/blobs/` and never fsyncs it; after a power loss such a file can be empty and
//! sled refuses to open at all. So no sled value may grow a page that far: a record over
//! [`SLED_VALUE_BYTES_MAX`] that does not compress below it keeps only a fixed-size stub in sled,
//! and its body is appended here as it is.
//!
//! The writer appends the bodies of a batch and `fdatasync`s this file *before* it writes the
//! stubs that reference them to sled, so a stub that survives a crash always points at durable
//! bytes, whatever the kernel wrote back on its own. The file only grows; bytes past the last
//! referenced body (a batch that crashed before it was written whole) are never read.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use super::private;

/// The largest value the store puts into sled. A sled leaf splits past 16 entries (and takes at
/// most a few more from a merge), so with values this small a leaf stays under ~90 KB, below the
/// ~128 KB at which sled writes the page to an unsynced blob file.
pub const SLED_VALUE_BYTES_MAX: usize = 4096;

#[derive(Debug)]
pub(crate) struct BodyFile {
    file: File,
}

impl BodyFile {
    /// Opens (or creates, with its directory entry made durable) `<dir>/bodies`; returns the
    /// file and its length, where the next body goes.
    pub(crate) fn open(dir: &Path) -> io::Result<(BodyFile, u64)> {
        let path = dir.join("bodies");
        let created = !path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(private::FILE_MODE)
            .open(&path)?;
        // A body file of a store made before the store kept its files private.
        private::restrict(&path, private::FILE_MODE)?;
        if created {
            file.sync_all()?;
            File::open(dir)?.sync_all()?;
        }
        let end = file.metadata()?.len();
        Ok((BodyFile { file }, end))
    }

    /// Writes `bodies` one after the other from `end`; returns each one's position. A failed
    /// write cuts the file back to `end` (best effort) so nothing half-written stays behind.
    pub(crate) fn write(&self, end: u64, bodies: &[&[u8]]) -> io::Result<Vec<u64>> {
        let mut at = end;
        let mut positions = Vec::with_capacity(bodies.len());
        for body in bodies {
            if let Err(e) = self.file.write_all_at(body, at) {
                let _ = self.file.set_len(end);
                return Err(e);
            }
            positions.push(at);
            at += body.len() as u64;
        }
        Ok(positions)
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// The `len` bytes at `position`.
    pub(crate) fn read(&self, position: u64, len: u32) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }
}
