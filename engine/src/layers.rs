//! The engine's layering, checked on its sources: the plug-in side (`plugin/`) and the modules
//! beneath both sides (the errors, the principal, the command grammar) import nothing from the
//! runtime (`runtime/`), and the command grammar imports nothing from the crate at all. The
//! compiler does not hold this inside one crate, so a test reads the code (comments aside).

use std::path::{Path, PathBuf};

/// What the plug-in side may name at the crate's root: itself and the modules beneath both sides.
const PLUGIN_MAY_USE: [&str; 9] = [
    "plugin",
    "commands",
    "error",
    "principal",
    "store",
    "Error",
    "Result",
    "PlanError",
    "Principal",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `.rs` files under `dir`, or `dir` itself when it is a file.
fn files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_owned()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The code of a file, comments left out (from `//` to the line's end: a string holding `//`
/// loses its end, which only hides paths, never adds one).
fn code(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("a readable source file");
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or("").to_owned()))
        .collect()
}

/// The first segment of every path a line names from the crate's root: `crate::a::b` gives `a`,
/// `crate::{a::b, C}` gives `a` and `C`.
fn roots(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut level = 0;
            let mut start = 0;
            for (i, c) in group[..end].char_indices().chain([(end, ',')]) {
                match c {
                    '{' => level += 1,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        out.push(first_segment(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(first_segment(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn first_segment(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Where `files` name something of the crate that is not in `allowed`, or reach the runtime
/// through `super`: `path:line: what`.
fn outside(files: &[PathBuf], allowed: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for path in files {
        let shown = path
            .strip_prefix(src())
            .unwrap_or(path)
            .display()
            .to_string();
        for (n, line) in code(path) {
            for root in roots(&line) {
                if !allowed.contains(&root.as_str()) {
                    found.push(format!("{shown}:{n}: crate::{root}"));
                }
            }
            if line.contains("runtime::") || line.contains("super::super::super") {
                found.push(format!("{shown}:{n}: {}", line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_plugin_side_imports_nothing_from_the_runtime() {
    let mut plugin = files(&src().join("plugin"));
    assert!(plugin.len() > 20, "the plug-in side is {plugin:?}");
    for beneath in ["error.rs", "principal.rs"] {
        plugin.extend(files(&src().join(beneath)));
    }
    let found = outside(&plugin, &PLUGIN_MAY_USE);
    assert!(
        found.is_empty(),
        "the plug-in side reaches past itself:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_command_grammar_is_a_leaf() {
    let found = outside(&files(&src().join("commands.rs")), &[]);
    assert!(
        found.is_empty(),
        "the grammar imports:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_path_into_the_runtime_is_found() {
    assert_eq!(roots("use crate::plugin::tools::Tool;"), ["plugin"]);
    assert_eq!(
        roots("use crate::{Error, runtime::{a, b}, plugin::x};"),
        ["Error", "runtime", "plugin"]
    );
    assert!(roots("use super::ToolError;").is_empty());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("x.rs");
    let text = "use crate::plugin::llm::ToolSpec; // not crate::runtime: a comment\n\
                use crate::{Error, runtime::{a, b}};\n\
                let engine: crate::Engine;\n\
                use super::super::runtime::shared;\n";
    std::fs::write(&file, text).expect("a file written");
    let lines: Vec<String> = outside(&[file], &PLUGIN_MAY_USE)
        .iter()
        .map(|f| f.split(':').nth(1).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(lines, ["2", "2", "3", "4"]);
}
