//! `vendor/sled` is sled 0.34.7 as published plus exactly `vendor/sled.patch`: the patch taken
//! back off a copy of the vendored tree (with git, which the repository needs anyway) must apply
//! cleanly and leave, file for file, the published crate's files (their digest is pinned below,
//! computed from the crate as crates.io serves it). A change to the vendored code that the patch
//! does not show fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// BLAKE3 over every file of sled 0.34.7 that `vendor/sled` keeps (path, length, bytes; in path
/// order), as published on crates.io.
const UPSTREAM_TREE_BLAKE3: &str =
    "7e1252648623695e43135c0a9006118e4fd36a7a84bd95afca128b2c4a48b649";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for rel in files(from) {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), dest).unwrap();
    }
}

fn tree_digest(dir: &Path) -> String {
    let mut h = blake3::Hasher::new();
    for rel in files(dir) {
        let bytes = std::fs::read(dir.join(&rel)).unwrap();
        h.update(rel.to_string_lossy().as_bytes());
        h.update(&(bytes.len() as u64).to_be_bytes());
        h.update(&bytes);
    }
    h.finalize().to_hex().to_string()
}

#[test]
fn the_vendored_sled_is_the_published_crate_plus_its_patch() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("vendor/sled"), tmp.path());
    let patch = repo().join("vendor/sled.patch");
    let out = Command::new("git")
        .args(["apply", "--reverse", "-p1", "--whitespace=nowarn"])
        .arg(&patch)
        .current_dir(tmp.path())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "vendor/sled.patch does not come off the vendored tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        tree_digest(tmp.path()),
        UPSTREAM_TREE_BLAKE3,
        "vendor/sled minus vendor/sled.patch is not sled 0.34.7 as published: every change to the \
         vendored code belongs in the patch"
    );
}
