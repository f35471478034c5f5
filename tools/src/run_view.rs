//! How `run` and `chat` show things to a person: one readable line per event (`seq dotted.name
//! summary`), the plan as a TODO list, the approval prompt (seed 000's message) and the answer.
//! Colour only when the stream is a terminal and `NO_COLOR` is unset (anstream decides).

use std::io::Write;

use anstyle::{AnsiColor, Style};
use chronicle_projections::RunState;
use chronicle_schemas::Approval;
use serde_json::Value;

use crate::run::backend::WireEvent;

/// Longest summary of one event line, in characters (the event itself is in `--json`).
const SUMMARY_CHARS_MAX: usize = 160;

/// Styles text when colour is on.
#[derive(Clone, Copy, Debug)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Colour for stdout, as anstream would choose it (terminal, `NO_COLOR`, `CLICOLOR_FORCE`).
    pub fn stdout() -> Self {
        Self::from_choice(anstream::AutoStream::choice(&std::io::stdout()))
    }

    /// Colour for stderr.
    pub fn stderr() -> Self {
        Self::from_choice(anstream::AutoStream::choice(&std::io::stderr()))
    }

    fn from_choice(c: anstream::ColorChoice) -> Self {
        Self {
            on: !matches!(c, anstream::ColorChoice::Never),
        }
    }

    pub fn paint(self, style: Style, text: &str) -> String {
        if self.on {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }
}

pub const DIM: Style = Style::new().dimmed();
pub const BOLD: Style = Style::new().bold();
pub const GREEN: Style = AnsiColor::Green.on_default().bold();
pub const RED: Style = AnsiColor::Red.on_default().bold();
pub const YELLOW: Style = AnsiColor::Yellow.on_default().bold();
pub const CYAN: Style = AnsiColor::Cyan.on_default();

/// `seq dotted.name summary` for one event.
pub fn event_line(e: &WireEvent, paint: Paint) -> String {
    let style = match (e.data["type"].as_str(), e.data["subtype"].as_str()) {
        (_, Some("error")) => RED,
        (Some("message"), _) => GREEN,
        (Some("run"), _) => BOLD,
        (Some("tool"), _) => CYAN,
        _ => Style::new(),
    };
    let name = if e.name.is_empty() {
        e.data["kind"].as_str().unwrap_or("?")
    } else {
        &e.name
    };
    format!(
        "{} {} {}",
        paint.paint(DIM, &format!("{:>4}", e.seq)),
        paint.paint(style, &format!("{name:<19}")),
        summary(&e.data)
    )
    .trim_end()
    .to_owned()
}

/// A short description of an event from its SSE `data` (`kind` + `content`).
pub fn summary(data: &Value) -> String {
    let c = &data["content"];
    let s = |k: &str| text(&c[k]);
    let line = match data["kind"].as_str().unwrap_or("") {
        "RunStarted" => format!(
            "{:?} (hitl {}, session {})",
            s("query"),
            text(&c["config"]["hitl"]),
            s("session_id")
        ),
        "PhaseChanged" => s("phase"),
        "IntentAnalyzed" => format!(
            "{} (confidence {}, {})",
            s("intent_type"),
            s("confidence"),
            s("source")
        ),
        "PlanCreated" => {
            let agents: Vec<String> = c["steps"]
                .as_array()
                .map(|a| a.iter().map(|st| text(&st["agent_name"])).collect())
                .unwrap_or_default();
            format!("{} [{}]", s("strategy"), agents.join(" → "))
        }
        "TodoAdded" => format!(
            "{} {} ({}, by {})",
            text(&c["todo"]["id"]),
            text(&c["todo"]["name"]),
            text(&c["todo"]["agent_name"]),
            s("added_by")
        ),
        "TodoStatusChanged" => {
            let reason = opt(&c["reason"]).map_or(String::new(), |r| format!(" ({r})"));
            format!("{} {} → {}{reason}", s("todo_id"), s("from"), s("to"))
        }
        "ApprovalRequested" => format!(
            "{} for {} {} ({})",
            s("approval_id"),
            subject(&c["subject"]),
            s("tool_name"),
            s("policy")
        ),
        "ApprovalDecided" => {
            let comment = opt(&c["comment"]).map_or(String::new(), |r| format!(": {r}"));
            format!(
                "{} {} by {}{comment}",
                s("approval_id"),
                s("decision"),
                s("decided_by")
            )
        }
        "ApprovalExpired" => format!("{} expired → {}", s("approval_id"), s("on_expiry")),
        "AgentStarted" => format!("{} {} (attempt {})", s("todo_id"), s("agent"), s("attempt")),
        "AgentCompleted" => format!("{} {} in {} ms", s("todo_id"), s("agent"), s("duration_ms")),
        "AgentFailed" => format!(
            "{} {}: {}{}",
            s("todo_id"),
            s("agent"),
            s("error"),
            if c["retryable"] == true {
                " (retryable)"
            } else {
                ""
            }
        ),
        "ToolCallRequested" => format!("{} {} ({})", s("tool_call_id"), s("tool"), s("todo_id")),
        "ToolCallCompleted" => match opt(&c["error"]) {
            Some(e) => format!("{} failed: {e}", s("tool_call_id")),
            None => format!("{} ok in {} ms", s("tool_call_id"), s("duration_ms")),
        },
        "LlmCalled" => format!("{} ({}, {} ms)", s("purpose"), s("model"), s("duration_ms")),
        "EvaluationRecorded" => format!(
            "quality {}, completeness {}{}",
            s("quality_score"),
            s("completeness"),
            if c["needs_retry"] == true {
                format!(", retry {}", text(&c["retry_agents"]))
            } else {
                String::new()
            }
        ),
        "ResultsAggregated" => match c["aggregated"].as_object() {
            Some(m) => m.keys().cloned().collect::<Vec<_>>().join(", "),
            None => String::new(),
        },
        "ResponseGenerated" => {
            let r = &c["final_response"];
            match r.get("answer") {
                Some(a) => text(a),
                None => r.to_string(),
            }
        }
        "CheckpointSaved" => format!(
            "{} at {} ({} done)",
            s("checkpoint_id"),
            s("node"),
            s("todos_completed")
        ),
        "CommandReceived" => format!(
            "{} by {}{}",
            s("command"),
            s("by"),
            if c["accepted"] == false {
                " (refused)"
            } else {
                ""
            }
        ),
        "RunInterrupted" => match opt(&c["approval_id"]) {
            Some(a) => format!("{} ({a})", s("reason")),
            None => s("reason"),
        },
        "RunResumed" => format!("by {}", s("by")),
        "RunRestored" => format!(
            "to {} (seq {}) by {}",
            s("checkpoint_id"),
            s("to_seq"),
            s("by")
        ),
        "Reasoning" => s("message"),
        "RunCompleted" => format!("completed in {} ms", s("total_execution_time_ms")),
        "RunFailed" => format!("failed: {}", s("error")),
        "RunCancelled" => match opt(&c["reason"]) {
            Some(r) => format!("cancelled by {}: {r}", s("by")),
            None => format!("cancelled by {}", s("by")),
        },
        _ => c.to_string(),
    };
    shorten(&line.replace('\n', " "), SUMMARY_CHARS_MAX)
}

fn subject(v: &Value) -> String {
    if let Some(t) = v.get("todo") {
        return text(&t["todo_id"]);
    }
    if let Some(t) = v.get("tool_call") {
        return format!("{} of {}", text(&t["tool_call_id"]), text(&t["todo_id"]));
    }
    if let Some(id) = v.get("todo_id") {
        return text(id);
    }
    v.to_string()
}

/// A JSON value as plain text (strings without quotes).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn opt(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        other => Some(text(other)),
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The plan as a TODO list: `todo_001  search_team 실행  [pending]  (after todo_000)`.
pub fn write_plan(out: &mut dyn Write, s: &RunState, paint: Paint) -> std::io::Result<()> {
    let Some(p) = s
        .supervisor
        .planning_state
        .as_ref()
        .filter(|p| !p.todos.is_empty())
    else {
        return writeln!(out, "(no plan)");
    };
    let strategy = if p.execution_strategy.is_empty() {
        String::new()
    } else {
        format!(", {}", p.execution_strategy)
    };
    writeln!(
        out,
        "{}",
        paint.paint(BOLD, &format!("📝 TODO {}개{strategy}", p.todos.len()))
    )?;
    for t in &p.todos {
        let deps = if t.dependencies.is_empty() {
            String::new()
        } else {
            let d: Vec<&str> = t.dependencies.iter().map(|d| d.as_str()).collect();
            format!("  (after {})", d.join(", "))
        };
        writeln!(out, "  {}  {}  [{}]{deps}", t.id, t.name, t.status.as_str())?;
    }
    Ok(())
}

/// What happened to the TODOs between two states of a run: `todo_001  search_team 실행
/// [waiting_approval → completed]`, one line per TODO that is new or changed status.
pub fn write_changes(
    out: &mut dyn Write,
    before: &RunState,
    after: &RunState,
) -> std::io::Result<()> {
    let todos = |s: &RunState| {
        s.supervisor
            .planning_state
            .as_ref()
            .map(|p| p.todos.clone())
            .unwrap_or_default()
    };
    let old = todos(before);
    for t in todos(after) {
        let was = old.iter().find(|o| o.id == t.id).map(|o| o.status);
        if was == Some(t.status) {
            continue;
        }
        let change = match was {
            Some(w) => format!("{} → {}", w.as_str(), t.status.as_str()),
            None => format!("new, {}", t.status.as_str()),
        };
        writeln!(out, "  {}  {}  [{change}]", t.id, t.name)?;
    }
    Ok(())
}

/// Seed 000's approval message, framed with the approval id.
pub fn write_approval(out: &mut dyn Write, a: &Approval, paint: Paint) -> std::io::Result<()> {
    writeln!(
        out,
        "{}",
        paint.paint(YELLOW, &format!("[INTERRUPT] approval {}", a.approval_id))
    )?;
    writeln!(out, "{}", a.message)
}

/// The end of a run: the answer, or why there is none.
pub fn write_outcome(out: &mut dyn Write, s: &RunState, paint: Paint) -> std::io::Result<()> {
    use chronicle_schemas::RunStatus;
    match s.supervisor.run_status {
        RunStatus::Completed => {
            writeln!(out, "{}", paint.paint(GREEN, "✅ completed"))?;
            writeln!(
                out,
                "{}",
                crate::run::backend::answer(s).unwrap_or_else(|| "(no answer)".into())
            )
        }
        _ => writeln!(
            out,
            "{}",
            paint.paint(
                RED,
                &format!(
                    "❌ {}: {}",
                    s.supervisor.run_status.as_str(),
                    crate::run::backend::failure(s)
                )
            )
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(seq: u64, name: &str, kind: &str, ty: &str, content: Value) -> WireEvent {
        WireEvent {
            seq,
            name: name.into(),
            data: json!({"kind": kind, "type": ty, "subtype": "chunk", "content": content}),
        }
    }

    #[test]
    fn lines_name_the_event_and_its_gist() {
        let off = Paint { on: false };
        let line = event_line(
            &ev(
                7,
                "todo.updated",
                "TodoStatusChanged",
                "reasoning",
                json!({"todo_id": "todo_001", "from": "pending", "to": "waiting_approval", "reason": "HITL policy every_todo"}),
            ),
            off,
        );
        assert_eq!(
            line,
            "   7 todo.updated        todo_001 pending → waiting_approval (HITL policy every_todo)"
        );
        let line = event_line(
            &ev(
                30,
                "message.final",
                "ResponseGenerated",
                "message",
                json!({"final_response": {"answer": "강남구 시세는\n13억"}}),
            ),
            off,
        );
        assert_eq!(line, "  30 message.final       강남구 시세는 13억");
        let on = Paint { on: true };
        assert!(
            event_line(&ev(1, "run.end", "RunCompleted", "run", json!({})), on).contains("\u{1b}[")
        );
        assert_eq!(shorten("abcdef", 4), "abc…");
    }
}
