//! Human-in-the-loop policies: which TODOs and which tool calls need a human first.

use chronicle_schemas::{HitlMode, RunConfig};

/// Seed 004's sensitive categories, used when a `categories` run names none.
pub const DEFAULT_HITL_CATEGORIES: [&str; 3] = ["contract", "payment", "sensitive"];

/// Seed 003's gated tools, used when a `tools` run names none (`*` suffix = prefix match).
pub const DEFAULT_HITL_TOOLS: [&str; 4] = ["write_file", "edit_file", "task", "dbt_*"];

/// Whether starting a TODO of an agent in `category` needs a human first. Under `tools` the gate
/// is on tool calls, not TODOs.
pub fn todo_needs_approval(config: &RunConfig, category: &str) -> bool {
    match config.hitl {
        HitlMode::None | HitlMode::Tools => false,
        HitlMode::EveryTodo => true,
        HitlMode::Categories => {
            if config.hitl_categories.is_empty() {
                DEFAULT_HITL_CATEGORIES.contains(&category)
            } else {
                config.hitl_categories.iter().any(|c| c == category)
            }
        }
    }
}

/// Whether a tool call needs a human first (policy `tools`). A run's `hitl_tools` list decides
/// when it names one; otherwise seed 003's list, plus any tool that declares itself gated.
pub fn tool_needs_approval(config: &RunConfig, tool: &str, declared_gated: bool) -> bool {
    if config.hitl != HitlMode::Tools {
        return false;
    }
    let matches = |pattern: &str| match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => tool == pattern,
    };
    if config.hitl_tools.is_empty() {
        declared_gated || DEFAULT_HITL_TOOLS.iter().any(|p| matches(p))
    } else {
        config.hitl_tools.iter().any(|p| matches(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        let mut c = RunConfig {
            hitl: HitlMode::Categories,
            ..Default::default()
        };
        assert!(todo_needs_approval(&c, "contract") && !todo_needs_approval(&c, "general"));
        c.hitl_categories = vec!["general".into()];
        assert!(todo_needs_approval(&c, "general") && !todo_needs_approval(&c, "contract"));
        c.hitl = HitlMode::Tools;
        assert!(!todo_needs_approval(&c, "general"));
        c.hitl_tools = vec![];
        assert!(tool_needs_approval(&c, "dbt_run", false));
        assert!(tool_needs_approval(&c, "write_file", false));
        assert!(!tool_needs_approval(&c, "read_file", false));
        assert!(
            tool_needs_approval(&c, "deploy", true),
            "a tool may declare itself gated"
        );
        c.hitl_tools = vec!["read_*".into()];
        assert!(tool_needs_approval(&c, "read_file", false));
        assert!(
            !tool_needs_approval(&c, "write_file", true),
            "the run's list decides"
        );
        c.hitl = HitlMode::EveryTodo;
        assert!(todo_needs_approval(&c, "general") && !tool_needs_approval(&c, "write_file", true));
    }
}
