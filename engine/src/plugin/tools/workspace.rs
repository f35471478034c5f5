//! A session's `/workspace/`: the only part of the host file system agents can touch.
//!
//! Two layers keep tools inside it. [`Workspace::resolve`] refuses virtual paths that try to
//! leave it (`..`, `~`, absolute paths elsewhere) with a message the agent can act on. Then
//! every access goes through the `cap_std::fs::Dir` of [`Workspace::dir`], which refuses `..`,
//! absolute paths and symlinks leading out of the directory, also when the tree changes
//! between checks; that catches what string checks cannot see (symlinks).

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;
use chronicle_schemas::SessionId;

/// Longest virtual path accepted, in characters (Linux's `PATH_MAX`).
pub const PATH_CHARS_MAX: usize = 4096;

/// How paths are spelled to agents.
const VIRTUAL_ROOT: &str = "/workspace";

/// Where [`Workspace::offload`] puts large tool outputs.
const LARGE_RESULTS_DIR: &str = "large_tool_results";

/// Longest path shown in an error message, so one bad argument cannot flood the log.
const SHOWN_CHARS_MAX: usize = 80;

/// The host directory behind the virtual `/workspace/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

/// Why a path cannot be used. Each message is one line and names the path (shortened).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    #[error("path contains a NUL byte: {path}")]
    Nul { path: String },
    #[error("path is {chars} characters long, over the limit of {PATH_CHARS_MAX}: {path}")]
    TooLong { chars: usize, path: String },
    /// Refused rather than read as a plain character: an agent writing `a\b` means `a/b`, and
    /// `..\x` would be a traversal on Windows.
    #[error("path contains a backslash, use `/` to separate directories: {path}")]
    Backslash { path: String },
    #[error("`~` paths are not supported, use /workspace/...: {path}")]
    Home { path: String },
    #[error("`..` is not allowed in paths: {path}")]
    ParentDir { path: String },
    #[error("{path} is outside the workspace, absolute paths must start with /workspace/")]
    Outside { path: String },
    #[error("{path} leads outside the workspace (symlink)")]
    SymlinkEscape { path: String },
    #[error("no such file or directory: {path}")]
    NotFound { path: String },
    #[error("not a directory: {path}")]
    NotADirectory { path: String },
    #[error("is a directory: {path}")]
    IsADirectory { path: String },
    /// Any other I/O failure; `message` is the OS error.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl WorkspaceError {
    /// Maps an error of an access to `rel` (a path relative to `dir`, the workspace's root) to
    /// a variant naming the virtual path.
    pub fn from_io(dir: &Dir, rel: &Path, err: &io::Error) -> Self {
        let path = shown_path(rel);
        match err.kind() {
            // cap-std refuses to leave the directory with the same kind as a real permission
            // problem; `resolve` already refused `..` and absolute paths, so only a symlink can
            // lead out: look at the path's links themselves.
            io::ErrorKind::PermissionDenied if leads_outside(dir, rel) => {
                Self::SymlinkEscape { path }
            }
            io::ErrorKind::NotFound => Self::NotFound { path },
            io::ErrorKind::NotADirectory => Self::NotADirectory { path },
            io::ErrorKind::IsADirectory => Self::IsADirectory { path },
            _ => Self::Io {
                path,
                message: err.to_string(),
            },
        }
    }
}

/// The virtual path of `rel`, shortened for a message.
pub(crate) fn shown_path(rel: &Path) -> String {
    shown(&Workspace::display(rel))
}

/// Links one path may pass through before it counts as leading nowhere (as the kernel's limit).
const SYMLINK_HOPS_MAX: usize = 40;

/// Whether `rel` (relative to `dir`) passes through a symlink whose target is absolute or climbs
/// above `dir`: what cap-std refuses to follow. Judged from the links' own targets, read without
/// following them, so a dangling link that points out counts too.
fn leads_outside(dir: &Dir, rel: &Path) -> bool {
    let mut pending: Vec<std::ffi::OsString> = rel
        .components()
        .rev()
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut at = PathBuf::new();
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        match part.to_str() {
            Some(".") | Some("") => continue,
            Some("..") => {
                if !at.pop() {
                    return true;
                }
                continue;
            }
            _ => at.push(&part),
        }
        let is_link = dir
            .symlink_metadata(&at)
            .is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            continue;
        }
        // cap-std will not even read a link whose target is absolute.
        let Ok(target) = dir.read_link(&at) else {
            return true;
        };
        hops += 1;
        if target.is_absolute() || hops > SYMLINK_HOPS_MAX {
            return true;
        }
        at.pop();
        pending.extend(target.components().rev().map(|c| c.as_os_str().to_owned()));
    }
    false
}

impl Workspace {
    /// `<root>/<name>`, where `root` holds every session's workspace (by default
    /// `<data>/workspaces`). Session ids come from clients, so a name that could steer the path
    /// (or any name that is not plainly safe) is replaced by a hash. Ids that look like such a
    /// hash are hashed too, so two ids never share a workspace.
    pub fn for_session(root: &Path, session: &SessionId) -> Self {
        Self::at(root.join(safe_name(session.as_str())))
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Turns a virtual path (`/workspace/a/b`, `a/b`, `./a`, empty for the root) into a path
    /// relative to the root (empty for the root). Refuses anything that tries to leave it.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let chars = path.chars().count();
        let named = shown(path);
        if chars > PATH_CHARS_MAX {
            return Err(WorkspaceError::TooLong { chars, path: named });
        }
        if path.contains('\0') {
            return Err(WorkspaceError::Nul { path: named });
        }
        if path.contains('\\') {
            return Err(WorkspaceError::Backslash { path: named });
        }
        if path.starts_with('~') {
            return Err(WorkspaceError::Home { path: named });
        }
        let path = Path::new(path);
        // Anywhere, even where it would stay inside (`/workspace/a/../b`): simpler to explain.
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(WorkspaceError::ParentDir { path: named });
        }
        // Component-wise, so `/workspacex` is not under `/workspace`.
        let inside = if path.has_root() {
            path.strip_prefix(VIRTUAL_ROOT)
                .map_err(|_| WorkspaceError::Outside { path: named })?
        } else {
            path
        };
        // Drops `.` and empty components.
        Ok(inside
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect())
    }

    /// The virtual path of `rel` (a path relative to the root): `/workspace/<rel>`, or
    /// `/workspace` for the root.
    pub fn display(rel: &Path) -> String {
        if rel.as_os_str().is_empty() {
            VIRTUAL_ROOT.to_owned()
        } else {
            format!("{VIRTUAL_ROOT}/{}", rel.to_string_lossy())
        }
    }

    /// Creates the root if needed and opens it. All file access of the tools goes through the
    /// returned `Dir`, which cannot reach outside the root.
    pub fn dir(&self) -> Result<Dir, WorkspaceError> {
        if !self.root.is_dir() {
            std::fs::create_dir_all(&self.root)
                .and_then(|()| sync_new_dirs(&self.root))
                .map_err(|e| self.root_error(&e))?;
        }
        self.open()
    }

    /// Like [`Workspace::dir`] without creating anything: `None` when the root does not exist
    /// yet (for reads and previews, which must not change anything).
    pub fn existing_dir(&self) -> Result<Option<Dir>, WorkspaceError> {
        match self.open() {
            Ok(dir) => Ok(Some(dir)),
            Err(WorkspaceError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open(&self) -> Result<Dir, WorkspaceError> {
        Dir::open_ambient_dir(&self.root, cap_std::ambient_authority())
            .map_err(|e| self.root_error(&e))
    }

    fn root_error(&self, err: &io::Error) -> WorkspaceError {
        match err.kind() {
            io::ErrorKind::NotFound => WorkspaceError::NotFound {
                path: VIRTUAL_ROOT.to_owned(),
            },
            // The host path helps whoever runs the engine; agents never see this directory.
            _ => WorkspaceError::Io {
                path: VIRTUAL_ROOT.to_owned(),
                message: format!("cannot open {}: {err}", self.root.display()),
            },
        }
    }

    /// Writes a large tool output to `/workspace/large_tool_results/<name>` and returns that
    /// virtual path: a large output goes to a file, and the call returns its path, so it does not
    /// flood the model's context.
    /// Overwrites, so offloading the same call again after a crash gives the same result.
    pub fn offload(&self, name: &str, content: &[u8]) -> Result<String, WorkspaceError> {
        let rel = Path::new(LARGE_RESULTS_DIR).join(safe_name(name));
        let dir = self.dir()?;
        dir.create_dir_all(LARGE_RESULTS_DIR)
            .map_err(|e| WorkspaceError::from_io(&dir, Path::new(LARGE_RESULTS_DIR), &e))?;
        write_durably(&dir, &rel, content).map_err(|e| WorkspaceError::from_io(&dir, &rel, &e))?;
        Ok(Self::display(&rel))
    }
}

/// Writes `content` to `rel` under `dir` and makes it durable: the file, then each directory
/// from its parent up to `dir` (a tool call is recorded as done only after its file is durable,
/// so a power loss cannot leave a recorded write with an empty file).
pub(crate) fn write_durably(dir: &Dir, rel: &Path, content: impl AsRef<[u8]>) -> io::Result<()> {
    dir.write(rel, content)?;
    dir.open(rel)?.sync_all()?;
    // Directories are opened for reading (a `Dir` handle cannot be fsynced).
    let mut at = rel.parent();
    while let Some(p) = at {
        let p_or_root = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        dir.open(p_or_root)?.sync_all()?;
        at = p.parent();
    }
    Ok(())
}

/// fsyncs `root` and its two parents (`workspaces/` and the data directory), whose entries a new
/// workspace just created.
fn sync_new_dirs(root: &Path) -> io::Result<()> {
    for d in root.ancestors().take(3) {
        std::fs::File::open(d)?.sync_all()?;
    }
    Ok(())
}

/// `name` itself when it is a plain file name (`[A-Za-z0-9._-]{1,128}`, not `.`/`..`), else
/// `s-` + its blake3 hex. Names shaped like that hash are hashed too, so the map is one-to-one.
fn safe_name(name: &str) -> String {
    let plain = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && name != "."
        && name != "..";
    if plain && !looks_hashed(name) {
        name.to_owned()
    } else {
        format!("s-{}", blake3::hash(name.as_bytes()).to_hex())
    }
}

fn looks_hashed(name: &str) -> bool {
    name.strip_prefix("s-")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A path as shown in messages: control characters escaped (one line), at most
/// [`SHOWN_CHARS_MAX`] characters.
fn shown(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars().take(SHOWN_CHARS_MAX) {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    if path.chars().count() > SHOWN_CHARS_MAX {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> Workspace {
        Workspace::at("/nonexistent/ws")
    }

    #[test]
    fn resolve_accepts_workspace_paths() {
        let ok = |p: &str| ws().resolve(p).unwrap();
        assert_eq!(ok(""), PathBuf::new());
        assert_eq!(ok("/workspace"), PathBuf::new());
        assert_eq!(ok("/workspace/"), PathBuf::new());
        assert_eq!(ok("."), PathBuf::new());
        assert_eq!(ok("/workspace/a/b"), PathBuf::from("a/b"));
        assert_eq!(ok("/workspace/./a//b/"), PathBuf::from("a/b"));
        assert_eq!(ok("a/b"), PathBuf::from("a/b"));
        assert_eq!(ok("./a"), PathBuf::from("a"));
        assert_eq!(ok("a/~b"), PathBuf::from("a/~b"));
    }

    #[test]
    fn resolve_refuses_escapes_with_clear_messages() {
        let msg = |p: &str| ws().resolve(p).unwrap_err().to_string();
        assert_eq!(msg("../x"), "`..` is not allowed in paths: ../x");
        assert_eq!(
            msg("/workspace/a/../b"),
            "`..` is not allowed in paths: /workspace/a/../b"
        );
        assert_eq!(
            msg("/workspace/../../x"),
            "`..` is not allowed in paths: /workspace/../../x"
        );
        assert_eq!(msg("/etc/../x"), "`..` is not allowed in paths: /etc/../x");
        assert_eq!(
            msg("/etc/passwd"),
            "/etc/passwd is outside the workspace, absolute paths must start with /workspace/"
        );
        assert_eq!(
            msg("/workspacex"),
            "/workspacex is outside the workspace, absolute paths must start with /workspace/"
        );
        assert!(matches!(
            ws().resolve("/"),
            Err(WorkspaceError::Outside { .. })
        ));
        assert_eq!(
            msg("~/x"),
            "`~` paths are not supported, use /workspace/...: ~/x"
        );
        assert_eq!(msg("a\0b"), "path contains a NUL byte: a\\0b");
        assert_eq!(
            msg("a\\b"),
            "path contains a backslash, use `/` to separate directories: a\\b"
        );
        let long = "a".repeat(10_000);
        assert_eq!(
            msg(&long),
            format!(
                "path is 10000 characters long, over the limit of 4096: {}...",
                "a".repeat(80)
            )
        );
        assert!(ws().resolve(&"a".repeat(PATH_CHARS_MAX)).is_ok());
    }

    #[test]
    fn display_spells_virtual_paths() {
        assert_eq!(Workspace::display(Path::new("")), "/workspace");
        assert_eq!(
            Workspace::display(Path::new("a/b.txt")),
            "/workspace/a/b.txt"
        );
    }

    #[test]
    fn for_session_never_lets_the_id_steer_the_path() {
        let data = Path::new("/data");
        let at = |id: &str| Workspace::for_session(&data.join("workspaces"), &SessionId::from(id));
        assert_eq!(
            at("thread-1").root(),
            Path::new("/data/workspaces/thread-1")
        );
        let evil = at("../evil");
        let hashed = format!("s-{}", blake3::hash(b"../evil").to_hex());
        assert_eq!(evil.root(), data.join("workspaces").join(&hashed));
        for id in ["", ".", "..", "a/b", "/etc", "a\0b", &"x".repeat(129)] {
            let root = at(id).root().to_path_buf();
            assert_eq!(root.parent(), Some(Path::new("/data/workspaces")), "{id:?}");
            assert!(looks_hashed(&root.file_name().unwrap().to_string_lossy()));
        }
        // An id spelled like another id's hash gets a workspace of its own.
        assert_ne!(at(&hashed), evil);
    }

    #[test]
    fn offload_writes_under_large_tool_results() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::at(tmp.path().join("ws"));
        let path = ws.offload("call_1", b"big output").unwrap();
        assert_eq!(path, "/workspace/large_tool_results/call_1");
        let host = tmp.path().join("ws/large_tool_results/call_1");
        assert_eq!(std::fs::read(&host).unwrap(), b"big output");
        // Again (after a crash): same path, content replaced.
        assert_eq!(ws.offload("call_1", b"again").unwrap(), path);
        assert_eq!(std::fs::read(&host).unwrap(), b"again");
        // A hostile name stays a single file name inside the directory.
        let path = ws.offload("../../x", b"x").unwrap();
        let name = path.strip_prefix("/workspace/large_tool_results/").unwrap();
        assert!(looks_hashed(name), "{path}");
        assert!(!tmp.path().join("x").exists());
    }

    /// The `Dir` itself refuses symlinks leading out (not only the tools' checks), and its
    /// refusal is reported as such.
    #[test]
    fn dir_refuses_symlinks_leading_out() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let ws = Workspace::at(tmp.path().join("ws"));
        let dir = ws.dir().unwrap();
        std::os::unix::fs::symlink(&outside, ws.root().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), ws.root().join("f")).unwrap();
        // A relative link that climbs out, and one that stays inside.
        std::os::unix::fs::symlink("../outside", ws.root().join("up")).unwrap();
        dir.create_dir("inner").unwrap();
        std::os::unix::fs::symlink("inner", ws.root().join("same")).unwrap();
        let refused = |rel: &str, result: io::Result<()>| {
            let err = WorkspaceError::from_io(&dir, Path::new(rel), &result.unwrap_err());
            assert_eq!(
                err.to_string(),
                format!("/workspace/{rel} leads outside the workspace (symlink)")
            );
        };
        refused("f", dir.write("f", "x"));
        refused("out/g", dir.write("out/g", "x"));
        refused("out/d", dir.create_dir_all("out/d"));
        refused("out", dir.read_dir("out").map(drop));
        refused("up/h", dir.write("up/h", "x"));
        dir.write("same/ok.txt", "fine").unwrap();
        assert_eq!(dir.read_to_string("inner/ok.txt").unwrap(), "fine");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        let err =
            WorkspaceError::from_io(&dir, Path::new("a.txt"), &dir.read("a.txt").unwrap_err());
        assert_eq!(
            err.to_string(),
            "no such file or directory: /workspace/a.txt"
        );
    }

    #[test]
    fn existing_dir_creates_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::at(tmp.path().join("ws"));
        assert!(ws.existing_dir().unwrap().is_none());
        assert!(!ws.root().exists());
        ws.dir().unwrap();
        assert!(ws.existing_dir().unwrap().is_some());
    }
}
