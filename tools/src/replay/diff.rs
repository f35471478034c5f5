//! The semantic difference between two projected states of a run: what a reader of the workflow
//! cares about (TODO statuses, approvals, phase, run status, results, the answer, restores,
//! checkpoints), not a dump of every field.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use chronicle_projections::RunState;
use chronicle_schemas::{
    ApprovalId, ApprovalStatus, CheckpointId, Phase, RunStatus, TodoId, TodoStatus, ToolCallId,
    ToolCallStatus,
};
use serde::Serialize;
use serde_json::Value;

use crate::view::{self, CYAN, DIM, GREEN, RED, paint};

/// A field that changed: `from → to`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change<T> {
    pub from: T,
    pub to: T,
}

fn change<T: PartialEq + Clone>(a: &T, b: &T) -> Option<Change<T>> {
    (a != b).then(|| Change {
        from: a.clone(),
        to: b.clone(),
    })
}

#[derive(Clone, Debug, Serialize)]
pub struct TodoAdded {
    pub todo_id: TodoId,
    pub agent_name: String,
    pub status: TodoStatus,
}

#[derive(Clone, Debug, Serialize)]
pub struct TodoChanged {
    pub todo_id: TodoId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Change<TodoStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<Change<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Change<Option<String>>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ApprovalAdded {
    pub approval_id: ApprovalId,
    pub todo_id: Option<TodoId>,
    pub tool_name: String,
    pub status: ApprovalStatus,
}

#[derive(Clone, Debug, Serialize)]
pub struct ApprovalChanged {
    pub approval_id: ApprovalId,
    pub todo_id: Option<TodoId>,
    pub status: Change<ApprovalStatus>,
    pub decided_by: Option<String>,
    /// Why it ended without a decision (expiry, a restore).
    pub cancel_reason: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckpointAdded {
    pub checkpoint_id: CheckpointId,
    pub seq: u64,
    pub node: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ToolCallChanged {
    pub tool_call_id: ToolCallId,
    pub tool: String,
    pub todo_id: TodoId,
    /// `None` when the call is new.
    pub from: Option<ToolCallStatus>,
    pub to: ToolCallStatus,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvaluationView {
    pub quality_score: f64,
    pub completeness: f64,
    pub needs_retry: bool,
}

/// What changed between two states (`from` → `to`). Empty lists and unchanged fields are left
/// out of the JSON.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StateDiff {
    /// `None` for the empty state before the first event.
    pub from_seq: Option<u64>,
    pub to_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<Change<Phase>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_status: Option<Change<RunStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Change<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub todos_added: Vec<TodoAdded>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub todos_removed: Vec<TodoId>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub todos_changed: Vec<TodoChanged>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_todo_id: Option<Change<Option<TodoId>>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals_added: Vec<ApprovalAdded>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals_changed: Vec<ApprovalChanged>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallChanged>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub team_results_added: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub team_results_changed: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub team_results_removed: Vec<String>,
    /// Keys of the values a person set on the run (`ValuesUpdated`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values_added: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values_changed: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values_removed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<Change<Option<EvaluationView>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregated_results: Option<Change<Vec<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_response: Option<Change<Option<Value>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<Change<Option<CheckpointId>>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checkpoints_added: Vec<CheckpointAdded>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checkpoints_removed: Vec<CheckpointId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_head: Option<Change<Option<CheckpointId>>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors_added: Vec<String>,
}

/// The keys added, changed and removed from `a` to `b`, each sorted.
fn key_changes<'a>(
    a: impl IntoIterator<Item = (&'a String, &'a Value)>,
    b: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let a: BTreeMap<&String, &Value> = a.into_iter().collect();
    let b: BTreeMap<&String, &Value> = b.into_iter().collect();
    let (mut added, mut changed) = (Vec::new(), Vec::new());
    for (k, v) in &b {
        match a.get(k) {
            None => added.push((*k).clone()),
            Some(old) if old != v => changed.push((*k).clone()),
            Some(_) => {}
        }
    }
    let removed = a
        .keys()
        .filter(|k| !b.contains_key(*k))
        .map(|k| (*k).clone())
        .collect();
    (added, changed, removed)
}

fn evaluation_view(s: &RunState) -> Option<EvaluationView> {
    s.supervisor.evaluation.as_ref().map(|e| EvaluationView {
        quality_score: e.quality_score,
        completeness: e.completeness,
        needs_retry: e.needs_retry,
    })
}

/// Computes what changed from `a` to `b`. Either may be the later one: diffing backwards (or
/// across a restore) reports removals.
pub fn diff(a: &RunState, b: &RunState) -> StateDiff {
    let (sa, sb) = (&a.supervisor, &b.supervisor);
    let empty = Default::default();
    let pa = sa.planning_state.as_ref().unwrap_or(&empty);
    let pb = sb.planning_state.as_ref().unwrap_or(&empty);
    let mut d = StateDiff {
        from_seq: a.last_seq,
        to_seq: b.last_seq,
        phase: change(&sa.current_phase, &sb.current_phase),
        run_status: change(&sa.run_status, &sb.run_status),
        status: change(&sa.status, &sb.status),
        current_todo_id: change(&pa.current_todo_id, &pb.current_todo_id),
        evaluation: change(&evaluation_view(a), &evaluation_view(b)),
        aggregated_results: change(
            &sa.aggregated_results.keys().cloned().collect(),
            &sb.aggregated_results.keys().cloned().collect(),
        ),
        final_response: change(&sa.final_response, &sb.final_response),
        restored_from: change(&sa.restored_from, &sb.restored_from),
        checkpoint_head: change(&a.checkpoints.head, &b.checkpoints.head),
        ..StateDiff::default()
    };

    let todos_a: HashMap<&TodoId, _> = pa.todos.iter().map(|t| (&t.id, t)).collect();
    for t in &pb.todos {
        match todos_a.get(&t.id) {
            None => d.todos_added.push(TodoAdded {
                todo_id: t.id.clone(),
                agent_name: t.agent_name.clone(),
                status: t.status,
            }),
            Some(old) => {
                let c = TodoChanged {
                    todo_id: t.id.clone(),
                    status: change(&old.status, &t.status),
                    retry_count: change(&old.retry_count, &t.retry_count),
                    error: change(&old.error, &t.error),
                };
                if c.status.is_some() || c.retry_count.is_some() || c.error.is_some() {
                    d.todos_changed.push(c);
                }
            }
        }
    }
    let ids_b: std::collections::HashSet<&TodoId> = pb.todos.iter().map(|t| &t.id).collect();
    d.todos_removed = pa
        .todos
        .iter()
        .filter(|t| !ids_b.contains(&t.id))
        .map(|t| t.id.clone())
        .collect();

    for ap in &b.approvals.list {
        let todo_id = ap.subject.as_ref().map(|s| s.todo_id().clone());
        match a.approvals.get(&ap.approval_id) {
            None => d.approvals_added.push(ApprovalAdded {
                approval_id: ap.approval_id.clone(),
                todo_id,
                tool_name: ap.tool_name.clone(),
                status: ap.status,
            }),
            Some(old) if old.status != ap.status => d.approvals_changed.push(ApprovalChanged {
                approval_id: ap.approval_id.clone(),
                todo_id,
                status: Change {
                    from: old.status,
                    to: ap.status,
                },
                decided_by: ap.decided_by.clone(),
                cancel_reason: ap.cancel_reason.clone(),
            }),
            Some(_) => {}
        }
    }

    let calls_a: HashMap<&ToolCallId, ToolCallStatus> = sa
        .tool_calls
        .iter()
        .map(|c| (&c.tool_call_id, c.status))
        .collect();
    for c in &sb.tool_calls {
        let from = calls_a.get(&c.tool_call_id).copied();
        if from != Some(c.status) {
            d.tool_calls.push(ToolCallChanged {
                tool_call_id: c.tool_call_id.clone(),
                tool: c.tool.clone(),
                todo_id: c.todo_id.clone(),
                from,
                to: c.status,
            });
        }
    }

    (
        d.team_results_added,
        d.team_results_changed,
        d.team_results_removed,
    ) = key_changes(&sa.team_results, &sb.team_results);
    (d.values_added, d.values_changed, d.values_removed) = key_changes(&sa.values, &sb.values);

    let cps_a: std::collections::HashSet<&CheckpointId> = a
        .checkpoints
        .checkpoints
        .iter()
        .map(|c| &c.checkpoint_id)
        .collect();
    let cps_b: std::collections::HashSet<&CheckpointId> = b
        .checkpoints
        .checkpoints
        .iter()
        .map(|c| &c.checkpoint_id)
        .collect();
    d.checkpoints_added = b
        .checkpoints
        .checkpoints
        .iter()
        .filter(|c| !cps_a.contains(&c.checkpoint_id))
        .map(|c| CheckpointAdded {
            checkpoint_id: c.checkpoint_id.clone(),
            seq: c.seq,
            node: c.node.clone(),
        })
        .collect();
    d.checkpoints_removed = a
        .checkpoints
        .checkpoints
        .iter()
        .filter(|c| !cps_b.contains(&c.checkpoint_id))
        .map(|c| c.checkpoint_id.clone())
        .collect();

    // The error log only grows along one history; report what `b` has beyond the common prefix.
    let common = sa
        .error_log
        .iter()
        .zip(&sb.error_log)
        .take_while(|(x, y)| x == y)
        .count();
    d.errors_added = sb.error_log[common..].to_vec();
    d
}

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
