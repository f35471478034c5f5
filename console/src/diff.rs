//! The diff page: what changed in a run between two seqs, as the CLI's `replay --diff` computes
//! it (one implementation, [`chronicle_projections::diff`]), written for a page.

use askama::Template;
use chronicle_projections::diff::{Change, StateDiff};
use chronicle_schemas::RunId;

use crate::pages::Chrome;
use crate::text;

/// One line of the diff. `todo`, `from` and `to` are set on a TODO's status change, so a reader
/// (or a test) can take the transitions from the page.
#[derive(Clone, Debug)]
pub struct DiffLine {
    /// `add`, `remove` or `change`.
    pub tone: &'static str,
    pub text: String,
    pub todo: String,
    pub from: String,
    pub to: String,
}

fn line(tone: &'static str, text: String) -> DiffLine {
    DiffLine {
        tone,
        text,
        todo: String::new(),
        from: String::new(),
        to: String::new(),
    }
}

fn arrow<T: std::fmt::Debug>(c: &Change<T>, show: impl Fn(&T) -> String) -> String {
    format!("{} → {}", show(&c.from), show(&c.to))
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// The lines of `d`, in the order the CLI prints them.
fn lines(d: &StateDiff) -> Vec<DiffLine> {
    let mut out = Vec::new();
    if let Some(c) = &d.run_status {
        out.push(line(
            "change",
            format!("run status: {}", arrow(c, |s| s.as_str().to_owned())),
        ));
    }
    if let Some(c) = &d.phase {
        out.push(line(
            "change",
            format!("phase: {}", arrow(c, crate::pages::snake)),
        ));
    }
    for t in &d.todos_added {
        out.push(line(
            "add",
            format!("+ {} {} ({})", t.todo_id, t.agent_name, t.status.as_str()),
        ));
    }
    for t in &d.todos_removed {
        out.push(line("remove", format!("- {t}")));
    }
    for t in &d.todos_changed {
        if let Some(s) = &t.status {
            out.push(DiffLine {
                tone: "change",
                text: format!("{}: {} → {}", t.todo_id, s.from.as_str(), s.to.as_str()),
                todo: t.todo_id.to_string(),
                from: s.from.as_str().to_owned(),
                to: s.to.as_str().to_owned(),
            });
        }
        if let Some(r) = &t.retry_count {
            out.push(line(
                "change",
                format!("{} retries: {} → {}", t.todo_id, r.from, r.to),
            ));
        }
        if let Some(e) = &t.error {
            out.push(line(
                "change",
                format!(
                    "{} error: {}",
                    t.todo_id,
                    arrow(e, |v| text::cut(&opt(v), 200))
                ),
            ));
        }
    }
    if let Some(c) = &d.current_todo_id {
        out.push(line("change", format!("current TODO: {}", arrow(c, opt))));
    }
    for a in &d.approvals_added {
        out.push(line(
            "add",
            format!(
                "+ approval {} {} for {} ({})",
                a.approval_id,
                a.tool_name,
                opt(&a.todo_id),
                a.status.as_str()
            ),
        ));
    }
    for a in &d.approvals_changed {
        let by = a
            .decided_by
            .as_ref()
            .map(|b| format!(" by {b}"))
            .or_else(|| a.cancel_reason.as_ref().map(|r| format!(" ({r})")))
            .unwrap_or_default();
        out.push(line(
            "change",
            format!(
                "approval {}: {}{by}",
                a.approval_id,
                arrow(&a.status, |s| s.as_str().to_owned())
            ),
        ));
    }
    for c in &d.tool_calls {
        out.push(line(
            "change",
            format!(
                "tool call {} {} of {}: {}",
                c.tool_call_id,
                c.tool,
                c.todo_id,
                match c.from {
                    Some(from) => format!(
                        "{} → {}",
                        crate::pages::snake(&from),
                        crate::pages::snake(&c.to)
                    ),
                    None => crate::pages::snake(&c.to),
                }
            ),
        ));
    }
    for (tone, sign, keys, what) in [
        ("add", "+", &d.team_results_added, "result"),
        ("change", "~", &d.team_results_changed, "result"),
        ("remove", "-", &d.team_results_removed, "result"),
        ("add", "+", &d.values_added, "value"),
        ("change", "~", &d.values_changed, "value"),
        ("remove", "-", &d.values_removed, "value"),
    ] {
        for k in keys {
            out.push(line(tone, format!("{sign} {what}: {k}")));
        }
    }
    if let Some(c) = &d.final_response {
        let show = |v: &Option<serde_json::Value>| match v {
            None => "-".to_owned(),
            Some(v) => format!("\"{}\"", text::cut(&chronicle_wire::answer_text(v), 200)),
        };
        out.push(line("add", format!("final response: {}", arrow(c, show))));
    }
    if let Some(c) = &d.restored_from {
        out.push(line("change", format!("restored from: {}", arrow(c, opt))));
    }
    for c in &d.checkpoints_added {
        out.push(line(
            "add",
            format!(
                "+ checkpoint {} at seq {} ({})",
                c.checkpoint_id, c.seq, c.node
            ),
        ));
    }
    for c in &d.checkpoints_removed {
        out.push(line("remove", format!("- checkpoint {c}")));
    }
    if let Some(c) = &d.checkpoint_head {
        out.push(line(
            "change",
            format!("checkpoint head: {}", arrow(c, opt)),
        ));
    }
    for e in &d.errors_added {
        out.push(line("remove", format!("+ error: {}", text::cut(e, 200))));
    }
    out
}

/// `/console/runs/{id}/diff?from=A&to=B`.
#[derive(Clone, Debug, Template)]
#[template(path = "diff.html")]
pub struct DiffPage {
    pub chrome: Chrome,
    pub run_id: String,
    pub from: u64,
    pub to: u64,
    pub last_seq: u64,
    pub lines: Vec<DiffLine>,
    pub cli: String,
}

impl DiffPage {
    pub fn new(
        chrome: Chrome,
        run: RunId,
        from: u64,
        to: u64,
        last_seq: u64,
        d: &StateDiff,
    ) -> Self {
        Self {
            chrome,
            run_id: run.to_string(),
            from,
            to,
            last_seq,
            lines: lines(d),
            cli: format!("chronicle replay {run} --diff {from} {to}"),
        }
    }
}
