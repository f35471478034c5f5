//! The data directory is private: it holds every principal's queries, answers, comments and
//! documents, so other local users may read none of it. The store creates its directories 0700
//! and its files 0600 (not the umask's usual 0755 and 0644), and tightens sled's files after sled opens
//! (sled creates them with the umask's default modes and offers no say; it writes its snapshot
//! file only while it opens, so tightening after the open covers every file it made). An
//! existing data directory that is looser is left as the operator made it, with a warning:
//! the store's own directories inside it are 0700 either way.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Mode of every directory the store creates.
pub(crate) const DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents with [`DIR_MODE`].
pub(crate) fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Makes the data directory `dir` ready for the store: created private if new (warned about if
/// it exists and lets others in), with private `blobs/` and `sled/` directories in it.
pub(crate) fn prepare(dir: &Path) -> io::Result<()> {
    if dir.exists() {
        warn_if_open(dir);
    }
    for sub in ["blobs", "sled"] {
        create_dir(&dir.join(sub))?;
        // A store made before the store kept its files private.
        restrict(&dir.join(sub), DIR_MODE)?;
    }
    Ok(())
}

/// Takes from `path`'s permissions every bit `mode` lacks (never adds one).
pub(crate) fn restrict(path: &Path, mode: u32) -> io::Result<()> {
    let now = fs::symlink_metadata(path)?.permissions().mode() & 0o7777;
    if now & !mode != 0 {
        fs::set_permissions(path, Permissions::from_mode(now & mode))?;
    }
    Ok(())
}

/// Makes sled's directory and what sled wrote in it private: its files (`db`, `conf`, the
/// snapshot) and its `blobs/` directory with the files in it.
pub(crate) fn restrict_sled(sled_dir: &Path) -> io::Result<()> {
    restrict_tree(sled_dir, 2)
}

/// `dir` [`DIR_MODE`], its files [`FILE_MODE`], and so on `depth` levels down.
fn restrict_tree(dir: &Path, depth: u32) -> io::Result<()> {
    restrict(dir, DIR_MODE)?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() && depth > 0 {
            restrict_tree(&entry.path(), depth - 1)?;
        } else if kind.is_file() {
            restrict(&entry.path(), FILE_MODE)?;
        }
    }
    Ok(())
}

/// Warns, in one line, when the existing data directory `dir` lets other users in.
fn warn_if_open(dir: &Path) {
    let Ok(meta) = fs::metadata(dir) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        tracing::warn!(
            "the data directory {} is mode {mode:04o}: other local users may read what it holds (queries, answers, documents); restrict it with `chmod 700 {}`",
            dir.display(),
            dir.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn restrict_takes_bits_away_and_never_adds_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        for (before, after) in [
            (0o644, 0o600),
            (0o400, 0o400),
            (0o666, 0o600),
            (0o600, 0o600),
        ] {
            fs::set_permissions(&file, Permissions::from_mode(before)).unwrap();
            restrict(&file, FILE_MODE).unwrap();
            assert_eq!(mode(&file), after, "{before:o}");
        }
    }

    #[test]
    fn new_directories_and_their_new_parents_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b");
        create_dir(&deep).unwrap();
        assert_eq!(mode(&dir.path().join("a")), DIR_MODE);
        assert_eq!(mode(&deep), DIR_MODE);
    }
}
