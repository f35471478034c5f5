//! A handler file imports no other handler file: what handlers share lives in the modules made
//! for it (extractors, error sets, answers, events), so a route can be read, moved or removed
//! without reading the others. A handler file is one that declares a route (a
//! `#[utoipa::path(...)]`); this test reads the crate's sources and names every import of one
//! handler file by another.

use std::collections::BTreeMap;
use std::path::Path;

/// The crate's sources: module path (`rest`, `langgraph::runs`, `` for `lib.rs`) → text.
fn sources(dir: &Path, module: &[String], out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut inner = module.to_vec();
            inner.push(name);
            sources(&path, &inner, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut m = module.to_vec();
            if name != "mod" && name != "lib" {
                m.push(name);
            }
            out.insert(m.join("::"), std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// `text` without its tests (a test module may import anything).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

fn is_handler_file(text: &str) -> bool {
    without_tests(text)
        .lines()
        .any(|l| l.trim_start().starts_with("#[utoipa::path("))
}

/// The paths a `use` tree names: `a::{b, c::{d, self}}` → `a::b`, `a::c::d`, `a::c`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.trim_end_matches("::*").to_owned()];
    };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| match p.as_str() {
            "self" => prefix.to_owned(),
            _ => format!("{prefix}::{p}"),
        })
        .collect()
}

/// Every `crate::` or `super::` path `text` names (in `use` trees and in code), resolved to a
/// path from the crate root, as seen from `module`.
fn named_paths(module: &str, text: &str) -> Vec<String> {
    let text = without_tests(text);
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let stmt = &rest[at + 4..];
        let end = stmt.find(';').unwrap_or(stmt.len());
        paths.extend(expand(&stmt[..end]));
        rest = &stmt[end..];
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    for (at, _) in text
        .match_indices("crate::")
        .chain(text.match_indices("super::"))
    {
        if at > 0 && text[..at].ends_with(word) {
            continue;
        }
        let end = text[at..].find(|c| !word(c)).map_or(text.len(), |e| at + e);
        paths.push(text[at..end].trim_end_matches(':').to_owned());
    }
    let parent: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    paths
        .into_iter()
        .filter_map(|p| {
            if let Some(p) = p.strip_prefix("crate::") {
                return Some(p.to_owned());
            }
            if p != "super" && !p.starts_with("super::") {
                return None;
            }
            let mut base = parent.clone();
            let mut segments = p.split("::").peekable();
            while segments.next_if_eq(&"super").is_some() {
                base.pop();
            }
            base.extend(segments);
            Some(base.join("::"))
        })
        .collect()
}

/// The module a path names: its longest prefix that is a module of `modules`.
fn module_of<'m>(path: &str, modules: &'m BTreeMap<String, String>) -> Option<&'m str> {
    let segments: Vec<&str> = path.split("::").collect();
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find_map(|m| modules.get_key_value(&m).map(|(k, _)| k.as_str()))
}

/// Each import of a handler file by another: `importer -> imported`.
fn handler_imports(modules: &BTreeMap<String, String>) -> Vec<String> {
    let handlers: Vec<&str> = modules
        .iter()
        .filter(|(_, text)| is_handler_file(text))
        .map(|(m, _)| m.as_str())
        .collect();
    let mut found = Vec::new();
    for &h in &handlers {
        for path in named_paths(h, &modules[h]) {
            if let Some(m) = module_of(&path, modules)
                && m != h
                && handlers.contains(&m)
            {
                found.push(format!("{h} -> {m} ({path})"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn no_handler_file_imports_another() {
    let mut modules = BTreeMap::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut modules,
    );
    let handlers = modules.values().filter(|t| is_handler_file(t)).count();
    assert!(handlers >= 10, "only {handlers} handler files found");
    assert_eq!(handler_imports(&modules), Vec::<String>::new());
}

#[test]
fn an_import_of_a_handler_file_is_found() {
    let route = "#[utoipa::path(get, path = \"/x\")]\nasync fn x() {}\n";
    let modules: BTreeMap<String, String> = [
        ("rest", format!("use crate::extract::Json;\n{route}")),
        (
            "audit",
            format!("use crate::{{error, rest::owned_run}};\n{route}"),
        ),
        (
            "sse",
            format!("{route}fn f() {{ crate::rest::helper(); }}\n"),
        ),
        ("langgraph::threads", route.to_owned()),
        (
            "langgraph::runs",
            format!("use super::threads::{{self, load}};\n{route}"),
        ),
        ("langgraph::loaded", "pub fn load() {}\n".to_owned()),
        (
            "ws",
            format!("use super::sse;\n{route}#[cfg(test)]\nmod tests {{ use crate::rest; }}\n"),
        ),
        ("extract", "use crate::rest::x;\n".to_owned()),
        ("error", String::new()),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_owned(), t))
    .collect();
    assert_eq!(
        handler_imports(&modules),
        [
            "audit -> rest (rest::owned_run)",
            "langgraph::runs -> langgraph::threads (langgraph::threads)",
            "langgraph::runs -> langgraph::threads (langgraph::threads::load)",
            "sse -> rest (rest::helper)",
            "ws -> sse (sse)",
        ]
    );
}
