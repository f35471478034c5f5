//! `llm` agents of a TOML config (`kind = "llm"`): a prompt (inline, or a file beside the
//! config), the tools the model may call, and the loop's bounds. The loop itself is the engine's
//! [`LlmAgent`].
//!
//! ```toml
//! [[agent]]
//! name = "analyst"
//! kind = "llm"
//! purpose = "Analyses data in the workspace and writes reports"
//! system_prompt_file = "prompts/analyst.md"   # or system_prompt = "..."
//! tools = ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "write_todos", "task"]
//! max_turns = 20
//! # max_tool_calls = 100
//! # model = "..."                             # else CHRONICLE_LLM_MODEL
//! # context_budget_tokens = 100000            # older turns are summarised past it
//! ```

use std::path::{Component, Path};

use chronicle_engine::agents::{
    CONTEXT_BUDGET_TOKENS_DEFAULT, LlmAgent, LlmAgentConfig, MAX_TURNS_DEFAULT,
    TOOL_CALLS_PER_TURN_DEFAULT,
};

use crate::http::{AgentEntry, ConfigError, ConfigPlace, info};

/// The longest prompt a file may hold: it is sent with every model call.
pub const SYSTEM_PROMPT_BYTES_MAX: usize = 64 * 1024;
/// The tools an `llm` agent gets when its config names none: the workspace's file tools and its
/// TODO list (no `task`: delegating is a choice a config makes).
const DEFAULT_TOOLS: [&str; 7] = [
    "ls",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "write_todos",
];

/// One `llm` agent of a config.
pub(crate) fn llm_agent(
    name: String,
    mut entry: AgentEntry,
    place: ConfigPlace<'_>,
) -> Result<LlmAgent, ConfigError> {
    for (set, field) in [
        (entry.url.is_some(), "url"),
        (entry.timeout_ms.is_some(), "timeout_ms"),
    ] {
        if set {
            return Err(ConfigError::NotForKind {
                name,
                field,
                kind: "llm",
            });
        }
    }
    let system_prompt = match (entry.system_prompt.take(), entry.system_prompt_file.take()) {
        (Some(text), None) => text,
        (None, Some(file)) => prompt_file(&name, &file, place.dir)?,
        (None, None) => return Err(ConfigError::NoPrompt { name }),
        (Some(_), Some(_)) => return Err(ConfigError::TwoPrompts { name }),
    };
    let tools = entry
        .tools
        .take()
        .unwrap_or_else(|| DEFAULT_TOOLS.map(str::to_owned).to_vec());
    let max_turns = entry.max_turns.unwrap_or(MAX_TURNS_DEFAULT);
    let max_tool_calls = entry
        .max_tool_calls
        .unwrap_or_else(|| max_turns.saturating_mul(TOOL_CALLS_PER_TURN_DEFAULT));
    let model = entry.model.take();
    let info = info(&name, &mut entry, "llm", || {
        format!("an llm agent with the tools {}", tools.join(", "))
    })?;
    let config = LlmAgentConfig {
        info,
        system_prompt,
        tools,
        max_turns,
        max_tool_calls,
        model,
        context_budget_tokens: entry
            .context_budget_tokens
            .unwrap_or(CONTEXT_BUDGET_TOKENS_DEFAULT),
    };
    LlmAgent::new(config, place.tools).map_err(|source| ConfigError::Llm { name, source })
}

/// The prompt in `file`: a relative path inside the config's directory (no `..`, no absolute
/// path, no symlink leading out), at most [`SYSTEM_PROMPT_BYTES_MAX`] bytes of UTF-8.
fn prompt_file(name: &str, file: &str, dir: &Path) -> Result<String, ConfigError> {
    let fail = |reason: String| ConfigError::PromptFile {
        name: name.to_owned(),
        path: file.to_owned(),
        reason,
    };
    let rel = Path::new(file);
    let inside = !file.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Err(fail(
            "must be a relative path inside the config's directory (no `..`, not absolute)".into(),
        ));
    }
    let path = dir.join(rel);
    let real = path
        .canonicalize()
        .map_err(|e| fail(format!("cannot be read: {e}")))?;
    let root = dir
        .canonicalize()
        .map_err(|e| fail(format!("cannot be read: {e}")))?;
    if !real.starts_with(&root) {
        return Err(fail("leads out of the config's directory".into()));
    }
    let bytes = std::fs::read(&real).map_err(|e| fail(format!("cannot be read: {e}")))?;
    if bytes.len() > SYSTEM_PROMPT_BYTES_MAX {
        return Err(fail(format!(
            "holds {} bytes, over {SYSTEM_PROMPT_BYTES_MAX}",
            bytes.len()
        )));
    }
    String::from_utf8(bytes).map_err(|_| fail("is not UTF-8 text".into()))
}

#[cfg(test)]
mod tests {
    use chronicle_engine::agents::Agent;
    use chronicle_engine::tools::ToolRegistry;

    use crate::http::{Declared, parse_config_in};

    use super::*;

    fn parse(dir: &Path, toml: &str) -> Result<Vec<Declared>, String> {
        let tools = ToolRegistry::builtin();
        parse_config_in(toml, ConfigPlace { dir, tools: &tools }).map_err(|e| e.to_string())
    }

    fn llm(d: &Declared) -> &LlmAgent {
        match d {
            Declared::Llm(a) => a,
            Declared::Http(a) => panic!("not an llm agent: {a:?}"),
        }
    }

    #[test]
    fn an_llm_agent_with_its_prompt_file_tools_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("prompts")).unwrap();
        std::fs::write(dir.path().join("prompts/analyst.md"), "You analyse data.").unwrap();
        let agents = parse(
            dir.path(),
            r#"
            [[agent]]
            name = "analyst"
            kind = "llm"
            purpose = "Analyses data in the workspace and writes reports"
            system_prompt_file = "prompts/analyst.md"
            tools = ["ls", "read_file", "write_todos", "task"]
            max_turns = 12
            model = "small-model"
            keywords = ["analyse"]

            [[agent]]
            name = "helper"
            kind = "llm"
            system_prompt = "You help."
            "#,
        )
        .unwrap();
        let a = llm(&agents[0]).config();
        assert_eq!(a.system_prompt, "You analyse data.");
        assert_eq!(a.tools, ["ls", "read_file", "write_todos", "task"]);
        assert_eq!((a.max_turns, a.max_tool_calls), (12, 60));
        assert_eq!(a.model.as_deref(), Some("small-model"));
        assert_eq!(a.info.hints.keywords, ["analyse"]);
        let h = llm(&agents[1]);
        assert_eq!(h.team(), "llm");
        assert_eq!(h.config().tools, DEFAULT_TOOLS);
        assert_eq!(h.config().max_turns, MAX_TURNS_DEFAULT);
    }

    #[test]
    fn the_guide_example_loads() {
        let guide = include_str!("../../../docs/agents.md");
        let start = guide
            .find("```toml\n[[agent]]\nname = \"analyst\"")
            .expect("docs/agents.md shows an llm agent");
        let block = &guide[start + "```toml\n".len()..];
        let block = &block[..block.find("```").unwrap()];
        let agents = parse(Path::new("."), block).unwrap();
        let a = llm(&agents[0]).config();
        assert_eq!((a.info.name.as_str(), a.max_turns), ("analyst", 20));
        assert!(a.tools.iter().any(|t| t == "write_todos"));
    }

    #[test]
    fn bad_llm_configs_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.md"), "prompt").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path().join("secret.md"), dir.path().join("link.md"))
            .unwrap();
        let err = |body: &str| {
            parse(
                dir.path(),
                &format!("[[agent]]\nname = \"a\"\nkind = \"llm\"\n{body}"),
            )
            .unwrap_err()
        };
        assert_eq!(
            err("system_prompt = \"p\"\ntools = [\"ls\", \"shell\"]"),
            format!(
                "agent `a`: `tools`: unknown tool \"shell\"; known: {}",
                ToolRegistry::builtin().names().join(", ")
            )
        );
        assert_eq!(
            err("system_prompt = \"p\"\nmax_turns = 0"),
            "agent `a`: `max_turns` 0 is outside 1..=200"
        );
        assert_eq!(
            err("system_prompt = \"p\"\nmax_tool_calls = 5000"),
            "agent `a`: `max_tool_calls` 5000 is outside 1..=2000"
        );
        assert_eq!(
            err(""),
            "agent `a` (llm) needs `system_prompt` or `system_prompt_file`"
        );
        assert_eq!(
            err("system_prompt = \"p\"\nsystem_prompt_file = \"p.md\""),
            "agent `a`: give `system_prompt` or `system_prompt_file`, not both"
        );
        assert!(
            err("system_prompt_file = \"missing.md\"")
                .starts_with("agent `a`: system_prompt_file \"missing.md\" cannot be read: "),
        );
        for traversal in ["../secret.md", "/etc/passwd", "prompts/../../x.md"] {
            assert_eq!(
                err(&format!("system_prompt_file = \"{traversal}\"")),
                format!(
                    "agent `a`: system_prompt_file \"{traversal}\" must be a relative path inside the config's directory (no `..`, not absolute)"
                )
            );
        }
        #[cfg(unix)]
        assert_eq!(
            err("system_prompt_file = \"link.md\""),
            "agent `a`: system_prompt_file \"link.md\" leads out of the config's directory"
        );
        assert_eq!(
            err("system_prompt = \"p\"\nurl = \"http://x\""),
            "agent `a`: `url` is not a field of llm agents"
        );
        assert_eq!(
            parse(dir.path(), "[[agent]]\nname = \"a\"\nkind = \"robot\"").unwrap_err(),
            "agent `a`: kind \"robot\" is not http or llm"
        );
        assert_eq!(
            parse(
                dir.path(),
                "[[agent]]\nname = \"a\"\nurl = \"http://x\"\ntools = [\"ls\"]"
            )
            .unwrap_err(),
            "agent `a`: `tools` is not a field of http agents"
        );
    }
}
