//! The semantic difference between two projected states of a run: what a reader of the workflow
//! cares about (TODO statuses, approvals, phase, run status, results, the answer, restores,
//! checkpoints), not a dump of every field. The CLI's `replay --diff` and the console both show
//! this one diff.

use std::collections::{BTreeMap, HashMap};

use chronicle_schemas::{
    ApprovalId, ApprovalStatus, CheckpointId, Phase, RunStatus, TodoId, TodoStatus, ToolCallId,
    ToolCallStatus,
};
use serde::Serialize;
use serde_json::Value;

use crate::RunState;

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
