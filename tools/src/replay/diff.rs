//! How the CLI prints the semantic difference between two states of a run (the difference
//! itself is [`chronicle_projections::diff`], which the console shows too).

use std::io::{self, Write};

use chronicle_projections::diff::{EvaluationView, StateDiff};
#[cfg(test)]
use chronicle_projections::{RunState, diff::diff};
use chronicle_schemas::{ApprovalStatus, ToolCallStatus};
use serde_json::Value;

use crate::view::{self, CYAN, DIM, GREEN, RED, paint};

fn call_status(s: ToolCallStatus) -> &'static str {
    match s {
        ToolCallStatus::Requested => "requested",
        ToolCallStatus::Completed => "completed",
        ToolCallStatus::Failed => "failed",
    }
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn arrow<T: std::fmt::Display>(from: T, to: T) -> String {
    format!("{from} → {to}")
}

/// Renders a diff as readable lines, each prefixed with `indent`.
pub fn render(out: &mut dyn Write, d: &StateDiff, indent: &str) -> io::Result<()> {
    let mut lines: Vec<String> = Vec::new();
    if let Some(c) = &d.restored_from {
        lines.push(paint(
            CYAN,
            format!("restored from: {}", arrow(opt(&c.from), opt(&c.to))),
        ));
    }
    if let Some(c) = &d.phase {
        lines.push(format!("phase: {}", arrow(c.from.as_str(), c.to.as_str())));
    }
    if let Some(c) = &d.run_status {
        lines.push(format!(
            "run status: {} → {}",
            paint(view::run_status_style(c.from), c.from.as_str()),
            paint(view::run_status_style(c.to), c.to.as_str())
        ));
    }
    if let Some(c) = &d.status {
        let s = |v: &String| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.clone()
            }
        };
        lines.push(format!("status: {}", arrow(s(&c.from), s(&c.to))));
    }
    for t in &d.todos_added {
        lines.push(paint(
            GREEN,
            format!("+ {} {} ({})", t.todo_id, t.agent_name, t.status),
        ));
    }
    for t in &d.todos_removed {
        lines.push(paint(RED, format!("- {t} (not in the plan here)")));
    }
    for t in &d.todos_changed {
        if let Some(c) = &t.status {
            lines.push(format!(
                "{}: {} → {}",
                t.todo_id,
                paint(view::status_style(c.from), c.from),
                paint(view::status_style(c.to), c.to)
            ));
        }
        if let Some(c) = &t.retry_count {
            lines.push(format!("{} retries: {}", t.todo_id, arrow(c.from, c.to)));
        }
        if let Some(c) = &t.error {
            lines.push(format!(
                "{} error: {}",
                t.todo_id,
                view::one_line(&arrow(opt(&c.from), opt(&c.to)), view::TEXT_CHARS_MAX)
            ));
        }
    }
    if let Some(c) = &d.current_todo_id {
        lines.push(format!("current todo: {}", arrow(opt(&c.from), opt(&c.to))));
    }
    for ap in &d.approvals_added {
        lines.push(paint(
            GREEN,
            format!(
                "+ approval {} for {} ({}): {}",
                ap.approval_id,
                opt(&ap.todo_id),
                ap.tool_name,
                ap.status.as_str()
            ),
        ));
    }
    for ap in &d.approvals_changed {
        let mut line = format!(
            "approval {} ({}): {}",
            ap.approval_id,
            opt(&ap.todo_id),
            arrow(ap.status.from.as_str(), ap.status.to.as_str())
        );
        match (&ap.decided_by, &ap.cancel_reason) {
            (Some(by), _) if ap.status.to != ApprovalStatus::Pending => {
                line.push_str(&format!(" by {by}"));
            }
            (_, Some(why)) => line.push_str(&format!(" ({why})")),
            _ => {}
        }
        lines.push(line);
    }
    for c in &d.tool_calls {
        lines.push(match c.from {
            None => format!(
                "+ tool call {} {} for {}: {}",
                c.tool_call_id,
                c.tool,
                c.todo_id,
                call_status(c.to)
            ),
            Some(from) => format!(
                "tool call {} {}: {}",
                c.tool_call_id,
                c.tool,
                arrow(call_status(from), call_status(c.to))
            ),
        });
    }
    for k in &d.team_results_added {
        lines.push(paint(GREEN, format!("+ team result: {k}")));
    }
    for k in &d.team_results_changed {
        lines.push(format!("team result changed: {k}"));
    }
    for k in &d.team_results_removed {
        lines.push(paint(RED, format!("- team result: {k}")));
    }
    for k in &d.values_added {
        lines.push(paint(GREEN, format!("+ value: {k}")));
    }
    for k in &d.values_changed {
        lines.push(format!("value changed: {k}"));
    }
    for k in &d.values_removed {
        lines.push(paint(RED, format!("- value: {k}")));
    }
    if let Some(c) = &d.evaluation {
        let e = |v: &Option<EvaluationView>| match v {
            None => "-".to_owned(),
            Some(e) => format!(
                "quality {:.2}, completeness {:.2}{}",
                e.quality_score,
                e.completeness,
                if e.needs_retry { ", retry" } else { "" }
            ),
        };
        lines.push(format!("evaluation: {}", arrow(e(&c.from), e(&c.to))));
    }
    if let Some(c) = &d.aggregated_results {
        let k = |v: &Vec<String>| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(", ")
            }
        };
        lines.push(format!(
            "aggregated results: {}",
            arrow(k(&c.from), k(&c.to))
        ));
    }
    if let Some(c) = &d.final_response {
        let r = |v: &Option<Value>| match v {
            None => "-".to_owned(),
            Some(v) => format!("\"{}\"", view::one_line(&view::response_text(v), 80)),
        };
        lines.push(paint(
            GREEN,
            format!("final response: {}", arrow(r(&c.from), r(&c.to))),
        ));
    }
    for c in &d.checkpoints_added {
        lines.push(format!(
            "+ checkpoint {} at seq {} ({})",
            c.checkpoint_id, c.seq, c.node
        ));
    }
    for c in &d.checkpoints_removed {
        lines.push(paint(RED, format!("- checkpoint {c}")));
    }
    if let Some(c) = &d.checkpoint_head {
        lines.push(format!(
            "checkpoint head: {}",
            arrow(opt(&c.from), opt(&c.to))
        ));
    }
    for e in &d.errors_added {
        lines.push(paint(
            RED,
            format!("+ error: {}", view::one_line(e, view::TEXT_CHARS_MAX)),
        ));
    }
    if lines.is_empty() {
        lines.push(paint(DIM, "(no state change)"));
    }
    for l in lines {
        writeln!(out, "{indent}{l}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_values(v: Value) -> RunState {
        let mut s = RunState::default();
        s.supervisor.values = v.as_object().cloned().unwrap_or_default();
        s
    }

    #[test]
    fn values_a_person_set_show_by_key() {
        let a = with_values(json!({"note": "x", "budget": 5, "old": true}));
        let b = with_values(json!({"note": "x", "budget": 7, "tags": ["a"]}));
        let d = diff(&a, &b);
        assert_eq!(
            (
                d.values_added.clone(),
                d.values_changed.clone(),
                d.values_removed.clone()
            ),
            (
                vec!["tags".into()],
                vec!["budget".into()],
                vec!["old".into()]
            )
        );
        let mut out = Vec::new();
        render(&mut out, &d, "").unwrap();
        let text = anstream::adapter::strip_str(&String::from_utf8(out).unwrap()).to_string();
        assert_eq!(text, "+ value: tags\nvalue changed: budget\n- value: old\n");
        assert!(diff(&a, &a).values_added.is_empty());
    }
}
