//! No file of ours cites a document the repository does not contain. The project was specified
//! from design notes that are not part of it, and a reader cannot open a numbered source document
//! or a section of a design document they were never given: a comment, a doc or a message says
//! what the thing is instead.

use std::path::{Path, PathBuf};

/// What a citation of an outside document looks like, lowercase (matched case-insensitively).
pub const CITATIONS: [&str; 5] = [
    concat!("seed", " 0"),
    concat!("design", " §"),
    "design.md",
    "the original system",
    "style.md",
];

/// Folders that hold nothing we wrote: vendored crates, build output (the Python venvs too),
/// installed packages, caches. Other folders starting with `.` are skipped too, but for these.
const SKIPPED_DIRS: [&str; 4] = ["vendor", "target", "node_modules", "__pycache__"];
const SCANNED_HIDDEN_DIRS: [&str; 2] = [".ci", ".github"];

/// Files whose text a reader sees: sources, scripts, docs, configs, snapshots.
const SCANNED_EXTENSIONS: [&str; 13] = [
    "rs", "py", "toml", "md", "sh", "yml", "yaml", "js", "ts", "txt", "sql", "snap", "json",
];

/// This file names the citations it looks for.
const THIS_FILE: &str = "tests/citations.rs";

/// The first citation in `text`, if any.
pub fn cited(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    CITATIONS.into_iter().find(|c| lower.contains(c))
}

fn scanned(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "Makefile" {
        return true;
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => SCANNED_EXTENSIONS.contains(&ext),
        // An extensionless script (`.ci/run`) starts with a shebang.
        None => std::fs::read(path).is_ok_and(|b| b.starts_with(b"#!")),
    }
}

fn skipped_dir(name: &str) -> bool {
    SKIPPED_DIRS.contains(&name) || (name.starts_with('.') && !SCANNED_HIDDEN_DIRS.contains(&name))
}

/// Every scanned file under `dir`, recursively; symlinks are not followed.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {dir:?}: {e}"));
    for entry in entries {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let path = entry.path();
        let name = entry.file_name();
        if kind.is_dir() && !skipped_dir(&name.to_string_lossy()) {
            files(&path, out);
        } else if kind.is_file() && scanned(&path) {
            out.push(path);
        }
    }
}

#[test]
fn no_file_cites_a_document_the_repository_lacks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut paths = Vec::new();
    files(root, &mut paths);
    paths.sort();
    let mut found = Vec::new();
    for path in &paths {
        let rel = path.strip_prefix(root).unwrap();
        if rel == Path::new(THIS_FILE) {
            continue;
        }
        let bytes = std::fs::read(path).unwrap();
        for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            if let Some(c) = cited(line) {
                found.push(format!(
                    "{}:{}: {c:?} in {}",
                    rel.display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    // The walk found the sources at all (a wrong root would pass vacuously).
    assert!(
        paths.iter().any(|p| p.ends_with("tests/main.rs")),
        "{root:?}"
    );
    assert!(
        found.is_empty(),
        "{} line(s) cite a document the repository does not contain; say what the thing is \
         instead:\n{}",
        found.len(),
        found.join("\n")
    );
}
