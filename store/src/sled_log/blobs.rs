//! Content-addressed blob files `<data>/blobs/<blake3 hex>` for payloads too large for an event.
//! Written (mode 0600) to a temporary file, fsynced, renamed, and the directory fsynced, before
//! the event that references the blob is appended.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use chronicle_schemas::{BlobRef, Hash};

use super::{Error, Result};

/// Where storing a blob failed: writing its bytes (ENOSPC there is a full disk, and nothing
/// was left behind), or making them durable (fail-stop: never retry an fsync).
#[derive(Debug)]
pub(crate) enum PutError {
    Write(std::io::Error),
    Durability(std::io::Error),
}

pub(crate) fn put(dir: &Path, bytes: &[u8]) -> Result<BlobRef, PutError> {
    let hash = Hash::of_content(bytes);
    let path = dir.join(hash.to_hex());
    let blob = BlobRef {
        hash,
        bytes: bytes.len() as u64,
    };
    if path.exists() && read(dir, &hash).is_ok() {
        // Present, but perhaps from a put that failed before its directory was synced.
        sync(&path, dir).map_err(PutError::Durability)?;
        return Ok(blob);
    }
    let tmp = tempfile_in(dir, &hash);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(super::private::FILE_MODE)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).map(|()| f));
    let file = match written {
        Ok(f) => f,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(PutError::Write(e));
        }
    };
    drop(file);
    sync(&tmp, dir)
        .and_then(|()| fs::rename(&tmp, &path))
        .and_then(|()| sync(&path, dir))
        .map_err(PutError::Durability)?;
    Ok(blob)
}

/// fsyncs `file` and the directory that holds its entry.
fn sync(file: &Path, dir: &Path) -> std::io::Result<()> {
    File::open(file)?.sync_all()?;
    File::open(dir)?.sync_all()
}

fn tempfile_in(dir: &Path, hash: &Hash) -> std::path::PathBuf {
    dir.join(format!(".{}.{}.tmp", hash.to_hex(), std::process::id()))
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
