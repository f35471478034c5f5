//! Memory files: what an LLM agent should always know, kept as Markdown an operator or the agent
//! itself edits. The server-wide one lives in the memory directory (`--memory-dir`), the
//! session's at the root of its `/workspace/`; each is `AGENTS.md` or, failing that, `agent.md`.
//! Both are read at the start of every model turn (so an edit shows at the next turn), the
//! session's after the server's (it is the more specific), and go into the system prompt.
//!
//! Not a user's long-term memory (`MemorySaved`, kept by the runtime's memory index): a turn's
//! loaded items are put in as one more memory file ([`of_user`]).

use std::path::Path;

use cap_std::fs::Dir;
use chronicle_schemas::Hash;

use crate::plugin::tools::{Workspace, WorkspaceError};

/// The names a memory file goes by, in order of preference.
pub const MEMORY_FILES: [&str; 2] = ["AGENTS.md", "agent.md"];
/// A memory file is read up to this many bytes; the rest is left out, with a note saying so.
pub const MEMORY_FILE_BYTES_MAX: usize = 64 * 1024;

/// One memory file as it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryFile {
    /// Where it came from: `server:AGENTS.md` or `/workspace/AGENTS.md`.
    pub source: String,
    pub text: String,
    /// Of the bytes read, so that a replay knows what the model saw.
    pub hash: Hash,
}

/// The server's memory file (if `server_dir` has one), then the session's.
pub fn load(
    server_dir: Option<&Path>,
    workspace: &Workspace,
) -> Result<Vec<MemoryFile>, WorkspaceError> {
    let mut found = Vec::new();
    let server =
        server_dir.and_then(|d| Dir::open_ambient_dir(d, cap_std::ambient_authority()).ok());
    if let Some((name, text)) = server.as_ref().and_then(read) {
        found.push(memory_file(format!("server:{name}"), text));
    }
    if let Some((name, text)) = workspace.existing_dir()?.as_ref().and_then(read) {
        found.push(memory_file(Workspace::display(Path::new(name)), text));
    }
    Ok(found)
}

/// Where the user's long-term memory shows in the system prompt and in `LlmCalled.loaded`.
pub const USER_MEMORY_SOURCE: &str = "user-memory";

/// The user's long-term memory (as the turn loaded it) as one more memory text: "What you
/// remember about the user:" and an item a line. `None` when the turn loaded none.
pub fn of_user(memories: &[chronicle_schemas::Memory]) -> Option<MemoryFile> {
    if memories.is_empty() {
        return None;
    }
    let mut text = String::from("What you remember about the user:\n");
    for m in memories {
        let said = if m.text.is_empty() { &m.key } else { &m.text };
        text.push_str(&format!("- {said}\n"));
    }
    Some(memory_file(
        USER_MEMORY_SOURCE.to_owned(),
        text.into_bytes(),
    ))
}

/// The system prompt's part about memory: each file's text under its source. Empty without
/// memory files.
pub fn prompt(memories: &[MemoryFile]) -> String {
    let mut out = String::new();
    for m in memories {
        if out.is_empty() {
            out.push_str("## Memory\n\n");
        }
        out.push_str(&format!("### {}\n\n{}\n\n", m.source, m.text.trim_end()));
    }
    out
}

fn memory_file(source: String, bytes: Vec<u8>) -> MemoryFile {
    let hash = Hash::of_content(&bytes);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if bytes.len() == MEMORY_FILE_BYTES_MAX {
        text.push_str(&format!(
            "\n[the rest of this file is left out: memory files are read up to {MEMORY_FILE_BYTES_MAX} bytes]"
        ));
    }
    MemoryFile { source, text, hash }
}

/// The first memory file of `dir` that is a readable file: its name and up to
/// [`MEMORY_FILE_BYTES_MAX`] bytes.
fn read(dir: &Dir) -> Option<(&'static str, Vec<u8>)> {
    use std::io::Read;
    MEMORY_FILES.iter().find_map(|name| {
        let file = dir.open(name).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        file.take(MEMORY_FILE_BYTES_MAX as u64)
            .read_to_end(&mut bytes)
            .ok()?;
        Some((*name, bytes))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_then_the_sessions_each_agents_md_before_agent_md() {
        let server = tempfile::tempdir().unwrap();
        let ws_root = tempfile::tempdir().unwrap();
        std::fs::write(server.path().join("agent.md"), "Answer in English.").unwrap();
        std::fs::write(ws_root.path().join("agent.md"), "ignored: AGENTS.md wins").unwrap();
        std::fs::write(ws_root.path().join("AGENTS.md"), "Reports go to reports/.").unwrap();

        let found = load(Some(server.path()), &Workspace::at(ws_root.path())).unwrap();
        let sources: Vec<(&str, &str)> = found
            .iter()
            .map(|m| (m.source.as_str(), m.text.as_str()))
            .collect();
        assert_eq!(
            sources,
            [
                ("server:agent.md", "Answer in English."),
                ("/workspace/AGENTS.md", "Reports go to reports/."),
            ]
        );
        assert_eq!(found[1].hash, Hash::of_content(b"Reports go to reports/."));
        let text = prompt(&found);
        assert!(
            text.find("Answer in English.") < text.find("Reports go to reports/."),
            "{text}"
        );
    }

    #[test]
    fn the_users_memory_is_one_more_text_with_its_hash() {
        assert_eq!(of_user(&[]), None);
        let item = chronicle_schemas::Memory {
            key: "deal_type".into(),
            text: "only jeonse deals (전세)".into(),
            ..Default::default()
        };
        let m = of_user(&[item]).unwrap();
        assert_eq!(m.source, USER_MEMORY_SOURCE);
        assert_eq!(
            m.text,
            "What you remember about the user:\n- only jeonse deals (전세)\n"
        );
        assert_eq!(m.hash, Hash::of_content(m.text.as_bytes()));
        assert!(prompt(&[m]).contains("- only jeonse deals"));
    }

    #[test]
    fn a_large_file_is_cut_with_a_note_and_none_is_nothing() {
        let ws_root = tempfile::tempdir().unwrap();
        let ws = Workspace::at(ws_root.path());
        assert_eq!(load(None, &ws).unwrap(), []);
        assert_eq!(prompt(&[]), "");
        std::fs::write(
            ws_root.path().join("AGENTS.md"),
            "x".repeat(MEMORY_FILE_BYTES_MAX + 10),
        )
        .unwrap();
        let found = load(None, &ws).unwrap();
        assert!(
            found[0]
                .text
                .starts_with(&"x".repeat(MEMORY_FILE_BYTES_MAX))
        );
        assert!(
            found[0].text.ends_with("bytes]"),
            "{}",
            &found[0].text[MEMORY_FILE_BYTES_MAX..]
        );
    }
}
