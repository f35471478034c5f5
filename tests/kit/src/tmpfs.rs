//! A small tmpfs, for tests of a full disk: mounted on a new directory, unmounted on drop.
//! Mounting needs root (the tests run as root here and in CI); a failed mount fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of some size mounted at `.0`.
#[derive(Debug)]
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. "96m") on `parent/tmpfs`.
    pub fn mount(parent: &Path, size: &str) -> Tmpfs {
        let dir = parent.join("tmpfs");
        std::fs::create_dir(&dir).expect("a directory for the tmpfs");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "mounting a tmpfs (needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir)
    }

    /// Fills the file system with one file until a write fails for lack of space; returns it.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).expect("the filler is created");
        for chunk in [1 << 20, 4096] {
            let bytes = vec![0u8; chunk];
            while f.write_all(&bytes).is_ok() {}
        }
        let _ = f.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
