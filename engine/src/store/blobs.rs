//! Content-addressed blob files `<data>/blobs/<blake3 hex>` for payloads too large for an event.
//! Written to a temporary file, fsynced, renamed, and the directory fsynced, before the event
//! that references the blob is appended.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use chronicle_schemas::{BlobRef, Hash};

use super::{Error, Result};

pub(crate) fn put(dir: &Path, bytes: &[u8]) -> Result<BlobRef> {
    let hash = Hash::of_content(bytes);
    let path = dir.join(hash.to_hex());
    let blob = BlobRef {
        hash,
        bytes: bytes.len() as u64,
    };
    if path.exists() && read(dir, &hash).is_ok() {
        return Ok(blob);
    }
    let tmp = tempfile_in(dir, &hash)?;
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    Ok(blob)
}

fn tempfile_in(dir: &Path, hash: &Hash) -> Result<std::path::PathBuf> {
    Ok(dir.join(format!(".{}.{}.tmp", hash.to_hex(), std::process::id())))
}

pub(crate) fn read(dir: &Path, hash: &Hash) -> Result<Vec<u8>> {
    let bytes = match fs::read(dir.join(hash.to_hex())) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::BlobMissing(*hash));
        }
        Err(e) => return Err(e.into()),
    };
    let actual = Hash::of_content(&bytes);
    if &actual != hash {
        return Err(Error::BlobCorrupt {
            hash: *hash,
            actual,
        });
    }
    Ok(bytes)
}
