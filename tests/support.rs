//! Helpers shared by the integration tests.

use chronicle_engine::store::{Options, Store};
use chronicle_schemas::{Event, RunId, SessionId};

pub fn run_started(session: &str) -> Event {
    Event::RunStarted {
        session_id: SessionId::from(session),
        user_id: None,
        request_id: "req".into(),
        query: "강남구 아파트 시세 조회".into(),
        config: Default::default(),
        parent: None,
    }
}

pub fn note(i: u64) -> Event {
    Event::Reasoning {
        message: format!("step {i}"),
    }
}

pub fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, Options::default()).expect("store opens")
}

pub fn run(i: u128) -> RunId {
    RunId::from_u128(0x5EED_0000 + i)
}

/// A tmpfs of `size` (e.g. "96m") mounted on a new directory under `parent`, unmounted on drop.
/// Mounting needs root (tests run as root here and in CI); a failed mount fails the test.
pub struct Tmpfs(pub std::path::PathBuf);

impl Tmpfs {
    pub fn mount(parent: &std::path::Path, size: &str) -> Tmpfs {
        let dir = parent.join("tmpfs");
        std::fs::create_dir(&dir).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mounting a tmpfs (needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir)
    }

    /// Fills the file system with one file until a write fails for lack of space; returns it.
    pub fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        for chunk in [1 << 20, 4096] {
            let bytes = vec![0u8; chunk];
            while f.write_all(&bytes).is_ok() {}
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
