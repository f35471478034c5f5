//! The workspace file tools (deepagents' names and arguments): `ls`, `read_file`, `write_file`,
//! `edit_file`, `glob`, `grep`.
//!
//! Paths are virtual (`/workspace/...`) in arguments and outputs. Every access goes through the
//! workspace's `cap_std::fs::Dir` (see [`Workspace`]), so nothing outside it is read or
//! changed, whatever symlinks the workspace holds. Blocking file work runs on tokio's blocking
//! pool. Error strings are what the agent and the log see, so they name the argument or path.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, FileType};
use globset::{GlobBuilder, GlobMatcher};
use serde_json::{Map, Value, json};

use super::workspace::write_durably;
use super::{Tool, ToolContext, Workspace, WorkspaceError};
use crate::plugin::agents::json_type;

const READ_LIMIT_DEFAULT: u64 = 2000;
/// Larger `limit`s are lowered to this (the output's `limit` says so).
const READ_LIMIT_MAX: u64 = 10_000;
/// Lines of new content a human sees before approving a `write_file`.
const PREVIEW_LINES: usize = 20;
/// ... and at most this many characters of them (the preview is recorded with the request).
const PREVIEW_CHARS_MAX: usize = 2000;
/// Most paths `glob` and matches `grep` return; more sets `"truncated": true`.
const MATCHES_MAX: usize = 1000;
/// `grep` skips larger files: they are rarely text an agent wants line by line.
const GREP_FILE_BYTES_MAX: u64 = 1 << 20;
/// `grep` shortens longer matching lines (minified files), so one line cannot flood the output.
const GREP_LINE_CHARS_MAX: usize = 1000;

/// `ls {path?}`: the entries of a directory.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ls;

/// `read_file {file_path, offset?, limit?}`: a page of lines of a text file.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadFile;

/// `write_file {file_path, content}`: creates or overwrites a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteFile;

/// `edit_file {file_path, old_string, new_string, replace_all?}`: exact-string replacement.
#[derive(Clone, Copy, Debug, Default)]
pub struct EditFile;

/// `glob {pattern, path?}`: paths matching a glob pattern.
#[derive(Clone, Copy, Debug, Default)]
pub struct Glob;

/// `grep {pattern, path?, glob?}`: lines containing a fixed string.
#[derive(Clone, Copy, Debug, Default)]
pub struct Grep;

#[async_trait::async_trait]
impl Tool for Ls {
    fn name(&self) -> &str {
        "ls"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "a directory under /workspace (default /workspace)"},
        }})
    }
    fn description(&self) -> &str {
        "List a directory of /workspace (default /workspace): name, path, type and size of each entry."
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let args = Args::of("ls", &args)?;
        let rel = resolve(&ctx.workspace, args.opt_str("path")?)?;
        let ws = ctx.workspace.clone();
        blocking(move || ls(&ws, &rel)).await
    }
}

fn ls(ws: &Workspace, rel: &Path) -> Result<Value, String> {
    let mut entries = Vec::new();
    if let Some(dir) = open_existing(ws, rel)? {
        for entry in dir.read_dir(here(rel)).map_err(io_err(&dir, rel))? {
            let entry = entry.map_err(io_err(&dir, rel))?;
            // Without following symlinks: a link is listed as one, wherever it points.
            let Ok(meta) = entry.metadata() else {
                continue; // removed meanwhile
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            entries.push(json!({
                "path": Workspace::display(&rel.join(&name)),
                "name": name,
                "type": type_name(meta.file_type()),
                "size": meta.len(),
            }));
        }
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({ "path": Workspace::display(rel), "entries": entries }))
}

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["file_path"], "properties": {
            "file_path": {"type": "string", "description": "a file under /workspace"},
            "offset": {"type": "integer", "minimum": 0, "description": "first line, 0-based (default 0)"},
            "limit": {"type": "integer", "minimum": 1, "description": "lines to read (default 2000)"},
        }})
    }
    fn description(&self) -> &str {
        "Read lines of a text file in /workspace: offset (0-based line, default 0), limit (default 2000, max 10000)."
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let args = Args::of("read_file", &args)?;
        let rel = resolve(&ctx.workspace, Some(args.file_path()?))?;
        let offset = args.opt_u64("offset")?.unwrap_or(0);
        let limit = match args.opt_u64("limit")? {
            Some(0) => return Err("read_file: `limit` must be at least 1".to_owned()),
            Some(n) => n.min(READ_LIMIT_MAX),
            None => READ_LIMIT_DEFAULT,
        };
        let ws = ctx.workspace.clone();
        blocking(move || read_page(&ws, &rel, offset, limit)).await
    }
}

fn read_page(ws: &Workspace, rel: &Path, offset: u64, limit: u64) -> Result<Value, String> {
    let Some(dir) = open_existing(ws, rel)? else {
        return Err(not_found(rel));
    };
    let text = read_text(&dir, rel)?;
    let lines = lines(&text);
    let total = lines.len() as u64;
    if offset > 0 && offset >= total {
        return Err(format!(
            "offset {offset} is past the end of {} ({total} lines)",
            Workspace::display(rel)
        ));
    }
    let end = total.min(offset.saturating_add(limit));
    let page = &lines[to_usize(offset)..to_usize(end)];
    Ok(json!({
        "file_path": Workspace::display(rel),
        "offset": offset,
        "limit": limit,
        "total_lines": total,
        "content": page.join("\n"),
        "next_offset": (end < total).then_some(end),
    }))
}

#[async_trait::async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["file_path", "content"], "properties": {
            "file_path": {"type": "string", "description": "a file under /workspace"},
            "content": {"type": "string"},
        }})
    }
    fn description(&self) -> &str {
        "Create or overwrite a file in /workspace with `content` (parent directories are created)."
    }
    fn gated(&self) -> bool {
        true
    }
    fn preview(&self, ctx: &ToolContext, args: &Value) -> Value {
        write_preview(&ctx.workspace, args).unwrap_or_else(|e| preview_error(args, &e))
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let (rel, content) = write_request(&ctx.workspace, &args)?;
        let ws = ctx.workspace.clone();
        blocking(move || write(&ws, &rel, &content)).await
    }
}

fn write_request(ws: &Workspace, args: &Value) -> Result<(PathBuf, String), String> {
    let args = Args::of("write_file", args)?;
    let rel = resolve(ws, Some(args.file_path()?))?;
    let content = args.str("content")?.to_owned();
    if rel.as_os_str().is_empty() {
        return Err(is_a_directory(&rel));
    }
    Ok((rel, content))
}

fn write_preview(ws: &Workspace, args: &Value) -> Result<Value, String> {
    let (rel, content) = write_request(ws, args)?;
    let exists = match ws.existing_dir().map_err(|e| e.to_string())? {
        Some(dir) => file_exists(&dir, &rel)?,
        None => false,
    };
    let lines = lines(&content);
    Ok(json!({
        "file_path": Workspace::display(&rel),
        "line_count": lines.len(),
        "bytes": content.len(),
        "exists": exists,
        "content_preview": preview_text(&lines[..lines.len().min(PREVIEW_LINES)].join("\n")),
    }))
}

fn preview_text(text: &str) -> String {
    match text.char_indices().nth(PREVIEW_CHARS_MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Overwrites rather than failing on an existing file: the engine may run a call again after
/// a crash, and the result must be the same.
fn write(ws: &Workspace, rel: &Path, content: &str) -> Result<Value, String> {
    let dir = ws.dir().map_err(|e| e.to_string())?;
    let created = !file_exists(&dir, rel)?;
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        dir.create_dir_all(parent).map_err(io_err(&dir, parent))?;
    }
    write_durably(&dir, rel, content).map_err(io_err(&dir, rel))?;
    Ok(json!({
        "file_path": Workspace::display(rel),
        "bytes": content.len(),
        "lines": lines(content).len(),
        "created": created,
    }))
}

/// Whether `rel` is an existing file; an error when it is a directory or cannot be reached.
fn file_exists(dir: &Dir, rel: &Path) -> Result<bool, String> {
    match dir.metadata(rel) {
        Ok(meta) if meta.is_dir() => Err(is_a_directory(rel)),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(dir, rel)(e)),
    }
}

#[async_trait::async_trait]
impl Tool for EditFile {
    fn name(&self) -> &str {
        "edit_file"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["file_path", "old_string", "new_string"], "properties": {
            "file_path": {"type": "string", "description": "a file under /workspace"},
            "old_string": {"type": "string", "description": "the exact text to replace"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean", "description": "replace every occurrence (default false)"},
        }})
    }
    fn description(&self) -> &str {
        "Replace the exact text `old_string` with `new_string` in a file of /workspace (it must occur once unless replace_all)."
    }
    fn gated(&self) -> bool {
        true
    }
    fn preview(&self, ctx: &ToolContext, args: &Value) -> Value {
        edit_preview(&ctx.workspace, args).unwrap_or_else(|e| preview_error(args, &e))
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let request = EditRequest::parse(&ctx.workspace, &args)?;
        let ws = ctx.workspace.clone();
        blocking(move || {
            let dir = ws.dir().map_err(|e| e.to_string())?;
            let edit = request.plan(&dir)?;
            write_durably(&dir, &request.rel, &edit.after).map_err(io_err(&dir, &request.rel))?;
            Ok(json!({
                "file_path": Workspace::display(&request.rel),
                "replacements": edit.replacements,
            }))
        })
        .await
    }
}

fn edit_preview(ws: &Workspace, args: &Value) -> Result<Value, String> {
    let request = EditRequest::parse(ws, args)?;
    let Some(dir) = open_existing(ws, &request.rel)? else {
        return Err(not_found(&request.rel));
    };
    let edit = request.plan(&dir)?;
    // Git-style headers (`a/workspace/x`), not `a//workspace/x`.
    let path = Workspace::display(&request.rel);
    let diff = similar::TextDiff::from_lines(&edit.before, &edit.after)
        .unified_diff()
        .header(&format!("a{path}"), &format!("b{path}"))
        .to_string();
    Ok(json!({
        "file_path": path,
        "line_count": lines(&edit.after).len(),
        "replacements": edit.replacements,
        "diff": diff,
    }))
}

struct EditRequest {
    rel: PathBuf,
    old: String,
    new: String,
    all: bool,
}

struct Edit {
    before: String,
    after: String,
    replacements: usize,
}

impl EditRequest {
    fn parse(ws: &Workspace, args: &Value) -> Result<Self, String> {
        let args = Args::of("edit_file", args)?;
        let rel = resolve(ws, Some(args.file_path()?))?;
        let old = args.str("old_string")?.to_owned();
        let new = args.str("new_string")?.to_owned();
        let all = args.opt_bool("replace_all")?.unwrap_or(false);
        if old.is_empty() {
            return Err("edit_file: `old_string` is empty, give the exact text to replace".into());
        }
        Ok(Self { rel, old, new, all })
    }

    /// The file before and after the edit, without writing it.
    fn plan(&self, dir: &Dir) -> Result<Edit, String> {
        let before = read_text(dir, &self.rel)?;
        let path = Workspace::display(&self.rel);
        let (after, replacements) = match before.matches(&self.old).count() {
            0 => return Err(format!("`old_string` was not found in {path}")),
            1 => (before.replacen(&self.old, &self.new, 1), 1),
            n if self.all => (before.replace(&self.old, &self.new), n),
            n => {
                return Err(format!(
                    "`old_string` occurs {n} times in {path}; include more surrounding text to make it unique, or set `replace_all`"
                ));
            }
        };
        Ok(Edit {
            before,
            after,
            replacements,
        })
    }
}

#[async_trait::async_trait]
impl Tool for Glob {
    fn name(&self) -> &str {
        "glob"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["pattern"], "properties": {
            "pattern": {"type": "string", "description": "a glob such as **/*.md"},
            "path": {"type": "string", "description": "a directory under /workspace (default /workspace)"},
        }})
    }
    fn description(&self) -> &str {
        "Find files in /workspace whose path (relative to `path`, default /workspace) matches a glob such as `**/*.md`."
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let args = Args::of("glob", &args)?;
        let pattern = args.str("pattern")?.to_owned();
        let matcher = glob_matcher("glob", "pattern", &pattern)?;
        let rel = resolve(&ctx.workspace, args.opt_str("path")?)?;
        let ws = ctx.workspace.clone();
        blocking(move || {
            let Some(dir) = open_existing(&ws, &rel)? else {
                return Ok(json!({ "pattern": pattern, "matches": [], "truncated": false }));
            };
            let mut found: Vec<PathBuf> = files_under(&dir, &rel)?
                .into_iter()
                .filter(|(sub, _)| matcher.is_match(sub))
                .map(|(sub, _)| rel.join(sub))
                .collect();
            found.sort();
            let truncated = found.len() > MATCHES_MAX;
            let matches: Vec<String> = found
                .iter()
                .take(MATCHES_MAX)
                .map(|p| Workspace::display(p))
                .collect();
            Ok(json!({ "pattern": pattern, "matches": matches, "truncated": truncated }))
        })
        .await
    }
}

#[async_trait::async_trait]
impl Tool for Grep {
    fn name(&self) -> &str {
        "grep"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "required": ["pattern"], "properties": {
            "pattern": {"type": "string", "description": "a fixed string"},
            "path": {"type": "string", "description": "a file or directory under /workspace (default /workspace)"},
            "glob": {"type": "string", "description": "only files matching this glob"},
        }})
    }
    fn description(&self) -> &str {
        "Find lines containing a fixed string in the text files under `path` (a file or directory, default /workspace), optionally only files matching `glob`."
    }
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, String> {
        let args = Args::of("grep", &args)?;
        let pattern = args.str("pattern")?.to_owned();
        if pattern.is_empty() {
            return Err("grep: `pattern` is empty".into());
        }
        let filter = match args.opt_str("glob")? {
            Some(g) => Some((glob_matcher("grep", "glob", g)?, g.contains('/'))),
            None => None,
        };
        let rel = resolve(&ctx.workspace, args.opt_str("path")?)?;
        let ws = ctx.workspace.clone();
        blocking(move || {
            let Some(dir) = open_existing(&ws, &rel)? else {
                return Ok(json!({ "pattern": pattern, "matches": [], "truncated": false }));
            };
            // (file, its path under `path`); a file `path` stands for itself.
            let mut files = if dir
                .metadata(here(&rel))
                .map_err(io_err(&dir, &rel))?
                .is_dir()
            {
                files_under(&dir, &rel)?
                    .into_iter()
                    .filter(|(_, kind)| kind.is_file())
                    .map(|(sub, _)| (rel.join(&sub), sub))
                    .collect()
            } else {
                let name = rel.file_name().map(PathBuf::from).unwrap_or_default();
                vec![(rel.clone(), name)]
            };
            // A glob with a `/` is matched against the path under `path`, else against the
            // file name (like ripgrep's `--glob`), so `*.rs` finds files at any depth.
            if let Some((matcher, whole_path)) = &filter {
                files.retain(|(_, sub)| {
                    if *whole_path {
                        matcher.is_match(sub)
                    } else {
                        sub.file_name().is_some_and(|name| matcher.is_match(name))
                    }
                });
            }
            files.sort();
            Ok(grep_files(&dir, &pattern, &files))
        })
        .await
    }
}

fn grep_files(dir: &Dir, pattern: &str, files: &[(PathBuf, PathBuf)]) -> Value {
    let mut matches = Vec::new();
    let mut truncated = false;
    'files: for (rel, _) in files {
        let Some(text) = small_text(dir, rel) else {
            continue;
        };
        for (i, line) in lines(&text).into_iter().enumerate() {
            if !line.contains(pattern) {
                continue;
            }
            if matches.len() == MATCHES_MAX {
                truncated = true;
                break 'files;
            }
            matches.push(json!({
                "path": Workspace::display(rel),
                "line": i + 1,
                "text": shorten(line, GREP_LINE_CHARS_MAX),
            }));
        }
    }
    json!({ "pattern": pattern, "matches": matches, "truncated": truncated })
}

/// The file's text if it is a regular UTF-8 file of at most [`GREP_FILE_BYTES_MAX`]; `None` to
/// skip it.
fn small_text(dir: &Dir, rel: &Path) -> Option<String> {
    use std::io::Read;
    let meta = dir.metadata(rel).ok()?;
    // Not opened otherwise: opening a FIFO would block.
    if !meta.is_file() || meta.len() > GREP_FILE_BYTES_MAX {
        return None;
    }
    let file = dir.open(rel).ok()?;
    let mut text = String::new();
    file.take(GREP_FILE_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Every non-directory under `rel`, as (path relative to `rel`, type), walking directories
/// without following symlinks (a link is listed, not entered). An unreadable subdirectory is
/// skipped.
fn files_under(dir: &Dir, rel: &Path) -> Result<Vec<(PathBuf, FileType)>, String> {
    let base = dir.open_dir(here(rel)).map_err(io_err(dir, rel))?;
    let mut found = Vec::new();
    // Paths, not open `Dir`s, so a wide tree does not hold many file descriptors.
    let mut pending = vec![PathBuf::new()];
    while let Some(sub) = pending.pop() {
        let entries = match base.read_dir(here(&sub)) {
            Ok(entries) => entries,
            Err(e) if sub.as_os_str().is_empty() => return Err(io_err(dir, rel)(e)),
            Err(_) => continue, // an unreadable subdirectory
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = sub.join(entry.file_name());
            if kind.is_dir() {
                pending.push(path);
            } else {
                found.push((path, kind));
            }
        }
    }
    Ok(found)
}

fn glob_matcher(tool: &str, arg: &str, pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("{tool}: `{arg}` is not a valid glob: {e}"))
}

/// The arguments of one call; messages name the tool and the argument.
struct Args<'a> {
    tool: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn of(tool: &'static str, args: &'a Value) -> Result<Self, String> {
        match args {
            Value::Object(map) => Ok(Self { tool, map }),
            other => Err(format!(
                "{tool} takes a JSON object of arguments, got {}",
                json_type(other)
            )),
        }
    }

    /// `null` counts as absent: models often spell an unused optional argument that way.
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    fn str(&self, name: &str) -> Result<&'a str, String> {
        self.opt_str(name)?
            .ok_or_else(|| format!("{} needs `{name}` (a string)", self.tool))
    }

    fn opt_str(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.ill_typed(name, "a string", other)),
        }
    }

    fn opt_u64(&self, name: &str) -> Result<Option<u64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.ill_typed(name, "a non-negative integer", v)),
        }
    }

    fn opt_bool(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.ill_typed(name, "a boolean", v)),
        }
    }

    /// `file_path`, or its alias `path`.
    fn file_path(&self) -> Result<&'a str, String> {
        match self.opt_str("file_path")? {
            Some(p) => Ok(p),
            None => self
                .opt_str("path")?
                .ok_or_else(|| format!("{} needs `file_path` (a string)", self.tool)),
        }
    }

    fn ill_typed(&self, name: &str, wanted: &str, got: &Value) -> String {
        format!(
            "{} needs `{name}` to be {wanted}, got {}",
            self.tool,
            json_type(got)
        )
    }
}

/// A preview that could not be computed: the human still sees what was asked and why it
/// would fail (previews never fail).
fn preview_error(args: &Value, error: &str) -> Value {
    let file_path = args.get("file_path").or_else(|| args.get("path"));
    json!({ "file_path": file_path, "error": error })
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("file tool stopped unexpectedly: {e}"))?
}

/// A virtual path (default the root) relative to the workspace root.
fn resolve(ws: &Workspace, path: Option<&str>) -> Result<PathBuf, String> {
    ws.resolve(path.unwrap_or("")).map_err(|e| e.to_string())
}

/// The workspace's `Dir`, or `None` when it does not exist yet and `rel` is the root (an
/// empty workspace); reading never creates it.
fn open_existing(ws: &Workspace, rel: &Path) -> Result<Option<Dir>, String> {
    match ws.existing_dir().map_err(|e| e.to_string())? {
        None if !rel.as_os_str().is_empty() => Err(not_found(rel)),
        dir => Ok(dir),
    }
}

/// The text of a file, or a message saying why it is not readable text.
fn read_text(dir: &Dir, rel: &Path) -> Result<String, String> {
    let meta = dir.metadata(here(rel)).map_err(io_err(dir, rel))?;
    if meta.is_dir() {
        return Err(is_a_directory(rel));
    }
    if !meta.is_file() {
        // A FIFO or device: opening it could block or never end.
        return Err(format!("{} is not a regular file", Workspace::display(rel)));
    }
    let bytes = dir.read(rel).map_err(io_err(dir, rel))?;
    String::from_utf8(bytes).map_err(|_| {
        format!(
            "{} is not UTF-8 text, it cannot be read as lines",
            Workspace::display(rel)
        )
    })
}

/// The lines of `text`, without their `\n` (a `\r` is kept, so edits see the exact text);
/// a final `\n` does not start another line.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l))
        .collect()
}

fn shorten(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}

/// cap-std's name for the directory itself (an empty path is not one).
fn here(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    }
}

fn type_name(kind: FileType) -> &'static str {
    if kind.is_symlink() {
        "symlink"
    } else if kind.is_dir() {
        "dir"
    } else {
        "file"
    }
}

fn io_err<'a>(dir: &'a Dir, rel: &'a Path) -> impl Fn(io::Error) -> String + 'a {
    move |e| WorkspaceError::from_io(dir, rel, &e).to_string()
}

fn not_found(rel: &Path) -> String {
    let path = crate::plugin::tools::workspace::shown_path(rel);
    WorkspaceError::NotFound { path }.to_string()
}

fn is_a_directory(rel: &Path) -> String {
    let path = crate::plugin::tools::workspace::shown_path(rel);
    WorkspaceError::IsADirectory { path }.to_string()
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// `tmp/ws` (the workspace) next to `tmp/outside/secret.txt`, with symlinks in the
    /// workspace leading out: `link_dir` and `rel_link` (relative) to `outside`, `link_file` to
    /// the secret, `link_new` to a file that does not exist yet.
    struct Fixture {
        tmp: tempfile::TempDir,
        ctx: ToolContext,
    }

    const SECRET: &str = "secret\n";

    impl Fixture {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            let ws = tmp.path().join("ws");
            let outside = tmp.path().join("outside");
            std::fs::create_dir_all(&ws).unwrap();
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
            symlink(&outside, ws.join("link_dir")).unwrap();
            symlink("../outside", ws.join("rel_link")).unwrap();
            symlink(outside.join("secret.txt"), ws.join("link_file")).unwrap();
            symlink(outside.join("new.txt"), ws.join("link_new")).unwrap();
            let ctx = ToolContext::detached(Workspace::at(&ws));
            Self { tmp, ctx }
        }

        /// A fixture without the symlinks and without the workspace directory.
        fn empty() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            let ctx = ToolContext::detached(Workspace::at(tmp.path().join("ws")));
            Self { tmp, ctx }
        }

        async fn call(&self, tool: &dyn Tool, args: Value) -> Result<Value, String> {
            tool.call(&self.ctx, args).await
        }

        async fn ok(&self, tool: &dyn Tool, args: Value) -> Value {
            let name = tool.name().to_owned();
            self.call(tool, args)
                .await
                .unwrap_or_else(|e| panic!("{name} failed: {e}"))
        }

        async fn err(&self, tool: &dyn Tool, args: Value) -> String {
            match self.call(tool, args.clone()).await {
                Ok(out) => panic!("{} {args} should fail, got {out}", tool.name()),
                Err(e) => e,
            }
        }

        fn host(&self, rel: &str) -> PathBuf {
            self.tmp.path().join(rel)
        }
    }

    const OUTSIDE_MSG: &str =
        "is outside the workspace, absolute paths must start with /workspace/";

    #[tokio::test]
    async fn traversal_is_refused_and_nothing_outside_changes() {
        let f = Fixture::new();
        let long = format!("/workspace/{}", "a".repeat(9_989));
        assert_eq!(long.chars().count(), 10_000);
        let long_msg = format!(
            "path is 10000 characters long, over the limit of 4096: /workspace/{}...",
            "a".repeat(69)
        );
        let escape = |p: &str| format!("/workspace/{p} leads outside the workspace (symlink)");
        // (path, expected error) for every tool that takes a file path.
        let file_cases: Vec<(String, String)> = vec![
            ("../x".into(), "`..` is not allowed in paths: ../x".into()),
            ("/etc/passwd".into(), format!("/etc/passwd {OUTSIDE_MSG}")),
            (
                "/workspace/../../x".into(),
                "`..` is not allowed in paths: /workspace/../../x".into(),
            ),
            ("link_dir/secret.txt".into(), escape("link_dir/secret.txt")),
            ("rel_link/secret.txt".into(), escape("rel_link/secret.txt")),
            ("/workspace/link_file".into(), escape("link_file")),
            ("a\0b".into(), "path contains a NUL byte: a\\0b".into()),
            (long.clone(), long_msg.clone()),
        ];
        for (path, expected) in &file_cases {
            let read = json!({ "file_path": path });
            assert_eq!(
                &f.err(&ReadFile, read).await,
                expected,
                "read_file {path:?}"
            );
            let write = json!({ "file_path": path, "content": "pwned\n" });
            assert_eq!(
                &f.err(&WriteFile, write).await,
                expected,
                "write_file {path:?}"
            );
            let edit = json!({ "file_path": path, "old_string": "secret", "new_string": "pwned" });
            assert_eq!(
                &f.err(&EditFile, edit).await,
                expected,
                "edit_file {path:?}"
            );
        }
        // Writing through links to places that do not exist yet.
        for path in [
            "link_new",
            "link_dir/new.txt",
            "rel_link/new.txt",
            "link_dir/sub/new.txt",
        ] {
            let write = json!({ "file_path": path, "content": "pwned\n" });
            let err = f.err(&WriteFile, write).await;
            assert_eq!(err, escape(path), "write_file {path:?}");
        }
        // Tools that take a directory (or, for grep, a file).
        let dir_cases: Vec<(String, String)> = vec![
            ("../x".into(), "`..` is not allowed in paths: ../x".into()),
            ("/etc".into(), format!("/etc {OUTSIDE_MSG}")),
            ("/workspacex".into(), format!("/workspacex {OUTSIDE_MSG}")),
            (
                "/workspace/../../x".into(),
                "`..` is not allowed in paths: /workspace/../../x".into(),
            ),
            ("link_dir".into(), escape("link_dir")),
            ("rel_link".into(), escape("rel_link")),
            ("a\0b".into(), "path contains a NUL byte: a\\0b".into()),
            (long.clone(), long_msg.clone()),
        ];
        for (path, expected) in &dir_cases {
            let err = f.err(&Ls, json!({ "path": path })).await;
            assert_eq!(&err, expected, "ls {path:?}");
            let err = f.err(&Glob, json!({ "pattern": "*", "path": path })).await;
            assert_eq!(&err, expected, "glob {path:?}");
            let err = f
                .err(&Grep, json!({ "pattern": "secret", "path": path }))
                .await;
            assert_eq!(&err, expected, "grep {path:?}");
        }
        let err = f
            .err(&Grep, json!({ "pattern": "s", "path": "link_file" }))
            .await;
        assert_eq!(err, escape("link_file"));
        // Previews refuse too, without failing.
        let preview = EditFile.preview(
            &f.ctx,
            &json!({ "file_path": "link_file", "old_string": "secret", "new_string": "x" }),
        );
        assert_eq!(preview["error"], escape("link_file"));
        let preview = WriteFile.preview(&f.ctx, &json!({ "file_path": "../x", "content": "" }));
        assert_eq!(preview["error"], "`..` is not allowed in paths: ../x");
        // Walking the workspace lists links but never enters them.
        let out = f.ok(&Grep, json!({ "pattern": "secret" })).await;
        assert_eq!(out["matches"], json!([]));
        let out = f.ok(&Glob, json!({ "pattern": "**" })).await;
        let links = ["link_dir", "link_file", "link_new", "rel_link"];
        let expected: Vec<String> = links.iter().map(|l| format!("/workspace/{l}")).collect();
        assert_eq!(out["matches"], json!(expected));

        // Nothing outside changed.
        let names: Vec<String> = std::fs::read_dir(f.host("outside"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["secret.txt"]);
        let secret = std::fs::read_to_string(f.host("outside/secret.txt")).unwrap();
        assert_eq!(secret, SECRET);
        let mut top: Vec<String> = std::fs::read_dir(f.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(top, ["outside", "ws"]);
    }

    #[tokio::test]
    async fn write_then_read_pages() {
        let f = Fixture::empty();
        let content: String = (1..=5).map(|i| format!("line {i}\n")).collect();
        let args = json!({ "file_path": "/workspace/notes/a.txt", "content": content });
        let out = f.ok(&WriteFile, args.clone()).await;
        assert_eq!(
            out,
            json!({ "file_path": "/workspace/notes/a.txt", "bytes": 35, "lines": 5, "created": true })
        );
        assert_eq!(
            std::fs::read_to_string(f.host("ws/notes/a.txt")).unwrap(),
            content
        );
        // Again (the engine may repeat a call after a crash): same file, created=false.
        let out = f.ok(&WriteFile, args).await;
        assert_eq!(out["created"], false);

        let read = |offset: u64, limit: u64| json!({ "path": "notes/a.txt", "offset": offset, "limit": limit });
        let out = f.ok(&ReadFile, read(0, 2)).await;
        assert_eq!(
            out,
            json!({
                "file_path": "/workspace/notes/a.txt", "offset": 0, "limit": 2,
                "total_lines": 5, "content": "line 1\nline 2", "next_offset": 2,
            })
        );
        let out = f.ok(&ReadFile, read(4, 2)).await;
        assert_eq!(out["content"], "line 5");
        assert_eq!(out["next_offset"], Value::Null);
        let out = f
            .ok(&ReadFile, json!({ "file_path": "./notes/a.txt" }))
            .await;
        assert_eq!(out["content"], content.trim_end());
        assert_eq!(out["limit"], 2000);
        assert_eq!(f.ok(&ReadFile, read(0, 50_000)).await["limit"], 10_000);

        let err = f.err(&ReadFile, read(5, 1)).await;
        assert_eq!(
            err,
            "offset 5 is past the end of /workspace/notes/a.txt (5 lines)"
        );
        let err = f.err(&ReadFile, json!({ "file_path": "nope.txt" })).await;
        assert_eq!(err, "no such file or directory: /workspace/nope.txt");
        let err = f.err(&ReadFile, json!({ "file_path": "notes" })).await;
        assert_eq!(err, "is a directory: /workspace/notes");
        std::fs::write(f.host("ws/bin"), [0xff, 0xfe, 0]).unwrap();
        let err = f.err(&ReadFile, json!({ "file_path": "bin" })).await;
        assert_eq!(
            err,
            "/workspace/bin is not UTF-8 text, it cannot be read as lines"
        );
        let err = f
            .err(&WriteFile, json!({ "file_path": "notes", "content": "" }))
            .await;
        assert_eq!(err, "is a directory: /workspace/notes");
    }

    #[tokio::test]
    async fn arguments_are_checked_with_clear_messages() {
        let f = Fixture::empty();
        let err = f.err(&ReadFile, json!({})).await;
        assert_eq!(err, "read_file needs `file_path` (a string)");
        let err = f.err(&ReadFile, json!({ "file_path": 3 })).await;
        assert_eq!(
            err,
            "read_file needs `file_path` to be a string, got a number"
        );
        let err = f.err(&ReadFile, json!("a.txt")).await;
        assert_eq!(
            err,
            "read_file takes a JSON object of arguments, got a string"
        );
        let err = f
            .err(&ReadFile, json!({ "file_path": "a", "offset": -1 }))
            .await;
        assert_eq!(
            err,
            "read_file needs `offset` to be a non-negative integer, got a number"
        );
        let err = f.err(&WriteFile, json!({ "file_path": "a" })).await;
        assert_eq!(err, "write_file needs `content` (a string)");
        let args =
            json!({ "file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes" });
        let err = f.err(&EditFile, args).await;
        assert_eq!(
            err,
            "edit_file needs `replace_all` to be a boolean, got a string"
        );
        let err = f.err(&Glob, json!({ "pattern": "a[" })).await;
        assert!(
            err.starts_with("glob: `pattern` is not a valid glob: "),
            "{err}"
        );
        // `null` is an absent optional argument.
        let out = f.ok(&Ls, json!({ "path": null })).await;
        assert_eq!(out, json!({ "path": "/workspace", "entries": [] }));
    }

    #[tokio::test]
    async fn edit_file_replaces_exact_text() {
        let f = Fixture::empty();
        let write = json!({ "file_path": "a.txt", "content": "one\ntwo\ntwo\nthree\n" });
        f.ok(&WriteFile, write).await;
        let edit = |old: &str, new: &str, all: bool| json!({ "file_path": "/workspace/a.txt", "old_string": old, "new_string": new, "replace_all": all });
        let text = || std::fs::read_to_string(f.host("ws/a.txt")).unwrap();

        let preview = EditFile.preview(&f.ctx, &edit("one", "uno", false));
        assert_eq!(preview["file_path"], "/workspace/a.txt");
        assert_eq!(preview["replacements"], 1);
        assert_eq!(preview["line_count"], 4);
        let diff = preview["diff"].as_str().unwrap();
        assert!(
            diff.starts_with("--- a/workspace/a.txt\n+++ b/workspace/a.txt\n"),
            "{diff}"
        );
        assert!(diff.contains("\n-one\n+uno\n"), "{diff}");
        assert_eq!(
            text(),
            "one\ntwo\ntwo\nthree\n",
            "a preview changes nothing"
        );

        let out = f.ok(&EditFile, edit("one", "uno", false)).await;
        assert_eq!(
            out,
            json!({ "file_path": "/workspace/a.txt", "replacements": 1 })
        );
        assert_eq!(text(), "uno\ntwo\ntwo\nthree\n");

        let err = f.err(&EditFile, edit("four", "x", false)).await;
        assert_eq!(err, "`old_string` was not found in /workspace/a.txt");
        let err = f.err(&EditFile, edit("two", "2", false)).await;
        assert_eq!(
            err,
            "`old_string` occurs 2 times in /workspace/a.txt; include more surrounding text to make it unique, or set `replace_all`"
        );
        let err = f.err(&EditFile, edit("", "x", false)).await;
        assert_eq!(
            err,
            "edit_file: `old_string` is empty, give the exact text to replace"
        );
        let preview = EditFile.preview(&f.ctx, &edit("two", "2", false));
        assert!(
            preview["error"]
                .as_str()
                .unwrap()
                .contains("occurs 2 times")
        );
        assert!(preview.get("diff").is_none());

        let out = f.ok(&EditFile, edit("two", "2", true)).await;
        assert_eq!(out["replacements"], 2);
        assert_eq!(text(), "uno\n2\n2\nthree\n");

        let err = f
            .err(
                &EditFile,
                json!({ "file_path": "b.txt", "old_string": "a", "new_string": "b" }),
            )
            .await;
        assert_eq!(err, "no such file or directory: /workspace/b.txt");
    }

    #[tokio::test]
    async fn write_preview_shows_the_new_content() {
        let f = Fixture::empty();
        let content: String = (1..=30).map(|i| format!("{i}\n")).collect();
        let args = json!({ "file_path": "big.txt", "content": content });
        let preview = WriteFile.preview(&f.ctx, &args);
        let first: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        assert_eq!(
            preview,
            json!({
                "file_path": "/workspace/big.txt", "line_count": 30, "bytes": 81,
                "exists": false, "content_preview": first.join("\n"),
            })
        );
        assert!(!f.host("ws").exists(), "a preview creates nothing");
        f.ok(&WriteFile, args.clone()).await;
        assert_eq!(WriteFile.preview(&f.ctx, &args)["exists"], true);
        let preview = WriteFile.preview(&f.ctx, &json!({ "content": "x" }));
        assert_eq!(
            preview,
            json!({ "file_path": null, "error": "write_file needs `file_path` (a string)" })
        );
    }

    #[tokio::test]
    async fn ls_lists_sorted_entries() {
        let f = Fixture::new();
        f.ok(
            &WriteFile,
            json!({ "file_path": "b.txt", "content": "hello" }),
        )
        .await;
        f.ok(&WriteFile, json!({ "file_path": "a/c.txt", "content": "" }))
            .await;
        let out = f.ok(&Ls, json!({})).await;
        let entries = out["entries"].as_array().unwrap();
        let names: Vec<&str> = entries
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "a",
                "b.txt",
                "link_dir",
                "link_file",
                "link_new",
                "rel_link"
            ]
        );
        assert_eq!(entries[0]["type"], "dir");
        assert_eq!(
            entries[1],
            json!({ "name": "b.txt", "path": "/workspace/b.txt", "type": "file", "size": 5 })
        );
        assert_eq!(entries[2]["type"], "symlink");
        let out = f.ok(&Ls, json!({ "path": "/workspace/a" })).await;
        assert_eq!(out["path"], "/workspace/a");
        assert_eq!(out["entries"][0]["path"], "/workspace/a/c.txt");
        let err = f.err(&Ls, json!({ "path": "b.txt" })).await;
        assert_eq!(err, "not a directory: /workspace/b.txt");
        let err = f.err(&Ls, json!({ "path": "nope" })).await;
        assert_eq!(err, "no such file or directory: /workspace/nope");
        // A workspace that does not exist yet is empty.
        let out = Fixture::empty()
            .ok(&Ls, json!({ "path": "/workspace/" }))
            .await;
        assert_eq!(out["entries"], json!([]));
    }

    #[tokio::test]
    async fn glob_matches_relative_paths() {
        let f = Fixture::empty();
        for path in ["README.md", "docs/a.md", "docs/deep/b.md", "docs/c.txt"] {
            f.ok(&WriteFile, json!({ "file_path": path, "content": "x" }))
                .await;
        }
        let out = f.ok(&Glob, json!({ "pattern": "**/*.md" })).await;
        assert_eq!(
            out,
            json!({
                "pattern": "**/*.md",
                "matches": ["/workspace/README.md", "/workspace/docs/a.md", "/workspace/docs/deep/b.md"],
                "truncated": false,
            })
        );
        // `*` does not cross `/`; the pattern is relative to `path`.
        let out = f
            .ok(
                &Glob,
                json!({ "pattern": "*.md", "path": "/workspace/docs" }),
            )
            .await;
        assert_eq!(out["matches"], json!(["/workspace/docs/a.md"]));
        let out = Fixture::empty().ok(&Glob, json!({ "pattern": "*" })).await;
        assert_eq!(out["matches"], json!([]));
    }

    #[tokio::test]
    async fn glob_and_grep_cap_their_matches() {
        let f = Fixture::empty();
        std::fs::create_dir_all(f.host("ws")).unwrap();
        for i in 0..1001 {
            std::fs::write(f.host(&format!("ws/f{i:04}.txt")), "x\n").unwrap();
        }
        let out = f.ok(&Glob, json!({ "pattern": "*.txt" })).await;
        assert_eq!(out["matches"].as_array().unwrap().len(), 1000);
        assert_eq!(out["truncated"], true);
        let out = f.ok(&Grep, json!({ "pattern": "x" })).await;
        assert_eq!(out["matches"].as_array().unwrap().len(), 1000);
        assert_eq!(out["truncated"], true);
        assert_eq!(out["matches"][0]["path"], "/workspace/f0000.txt");
    }

    #[tokio::test]
    async fn grep_finds_lines() {
        let f = Fixture::empty();
        let files = [
            ("src/main.rs", "fn main() {\n    todo!()\n}\n"),
            ("src/lib.rs", "// todo: docs\n"),
            ("notes.md", "nothing\nTODO later\ntodo now\n"),
        ];
        for (path, content) in files {
            f.ok(&WriteFile, json!({ "file_path": path, "content": content }))
                .await;
        }
        std::fs::write(f.host("ws/bin.dat"), b"todo\xff\n").unwrap();
        std::fs::write(f.host("ws/huge.txt"), "todo\n".repeat(300_000)).unwrap();
        let out = f.ok(&Grep, json!({ "pattern": "todo" })).await;
        assert_eq!(
            out,
            json!({
                "pattern": "todo",
                "matches": [
                    { "path": "/workspace/notes.md", "line": 3, "text": "todo now" },
                    { "path": "/workspace/src/lib.rs", "line": 1, "text": "// todo: docs" },
                    { "path": "/workspace/src/main.rs", "line": 2, "text": "    todo!()" },
                ],
                "truncated": false,
            })
        );
        let out = f
            .ok(&Grep, json!({ "pattern": "todo", "glob": "*.rs" }))
            .await;
        assert_eq!(out["matches"].as_array().unwrap().len(), 2);
        let out = f
            .ok(&Grep, json!({ "pattern": "todo", "path": "notes.md" }))
            .await;
        assert_eq!(
            out["matches"],
            json!([{ "path": "/workspace/notes.md", "line": 3, "text": "todo now" }])
        );
        let out = f
            .ok(&Grep, json!({ "pattern": "(", "path": "/workspace/src" }))
            .await;
        assert_eq!(
            out["matches"][0]["text"], "fn main() {",
            "fixed string, not a regex"
        );
    }

    #[test]
    fn names_and_gating() {
        let tools: [&dyn Tool; 6] = [&Ls, &ReadFile, &WriteFile, &EditFile, &Glob, &Grep];
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            ["ls", "read_file", "write_file", "edit_file", "glob", "grep"]
        );
        let gated: Vec<&str> = tools
            .iter()
            .filter(|t| t.gated())
            .map(|t| t.name())
            .collect();
        assert_eq!(gated, ["write_file", "edit_file"]);
        assert!(tools.iter().all(|t| !t.description().contains('\n')));
    }
}
