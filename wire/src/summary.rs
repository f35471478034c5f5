//! What an event says, in a few words of plain text: one line per event, the same in the CLI
//! (`log`, `replay`, `run`) and in the console's timeline.

use chronicle_schemas::{Event, Payload};
use serde_json::Value;

use crate::{answer_text as response_text, one_line};

/// Longest free text (a query, a reasoning note, an answer, an error) a readable line shows
/// before it is cut with `…`. Ids are never cut, so a filter or a copy-paste always gets them whole.
pub const TEXT_CHARS_MAX: usize = 100;

fn payload_brief(p: &Payload) -> String {
    match p {
        Payload::Inline(Value::Object(m)) => {
            let mut keys: Vec<&str> = m.keys().map(String::as_str).take(6).collect();
            if m.len() > keys.len() {
                keys.push("…");
            }
            format!("{{{}}}", keys.join(", "))
        }
        Payload::Inline(Value::Null) => "-".into(),
        Payload::Inline(v) => v.to_string(),
        Payload::Blob(b) => format!("blob {} ({} bytes)", &b.hash.to_hex()[..12], b.bytes),
    }
}

fn text(s: &str) -> String {
    one_line(s, TEXT_CHARS_MAX)
}

/// What a model's turn answered: the tools it called, or the start of its answer.
fn turn_brief(response: &Payload) -> String {
    let Some(v) = response.inline() else {
        return payload_brief(response);
    };
    let names: Vec<&str> = v["tool_calls"]
        .as_array()
        .map(|calls| calls.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        format!(
            "answer: {}",
            text(v["content"].as_str().unwrap_or_default())
        )
    } else {
        format!("calls {}", names.join(", "))
    }
}

/// What an event says, in a few words.
pub fn summary(e: &Event) -> String {
    match e {
        Event::RunStarted {
            query,
            config,
            parent,
            ..
        } => {
            let mut s = format!("hitl {} \"{}\"", config.hitl.as_str(), text(query));
            if let Some(agent) = &config.agent {
                s.push_str(&format!(" (agent mode: {agent})"));
            }
            if let Some(p) = parent {
                s.push_str(&format!(" (sub-run of {})", p.run_id));
            }
            s
        }
        Event::PhaseChanged { phase } => format!("→ {}", phase.as_str()),
        Event::IntentAnalyzed {
            intent_type,
            confidence,
            source,
            ..
        } => format!("{intent_type} ({confidence:.2}, {})", source_str(*source)),
        Event::PlanCreated {
            strategy, steps, ..
        } => {
            let agents: Vec<&str> = steps.iter().map(|s| s.agent_name.as_str()).collect();
            format!(
                "{} · {} step(s): {}",
                strategy.as_str(),
                steps.len(),
                agents.join(", ")
            )
        }
        Event::TodoAdded { todo, added_by } => {
            let mut s = format!("{} {} ({})", todo.id, todo.agent_name, todo.status);
            if !todo.dependencies.is_empty() {
                let deps: Vec<&str> = todo.dependencies.iter().map(|d| d.as_str()).collect();
                s.push_str(&format!(" after {}", deps.join(",")));
            }
            s.push_str(&format!(" by {added_by}"));
            s
        }
        Event::TodoStatusChanged {
            todo_id,
            from,
            to,
            reason,
            ..
        } => {
            let mut s = format!("{todo_id} {from} → {to}");
            if let Some(r) = reason {
                s.push_str(&format!(" ({})", text(r)));
            }
            s
        }
        Event::ApprovalRequested {
            approval_id,
            subject,
            tool_name,
            policy,
            supersedes,
            ..
        } => {
            let mut s = format!(
                "{approval_id} for {} ({tool_name}, policy {policy})",
                subject.todo_id()
            );
            if let Some(old) = supersedes {
                s.push_str(&format!(" replacing {old}"));
            }
            s
        }
        Event::ApprovalDecided {
            approval_id,
            decision,
            decided_by,
            comment,
            ..
        } => {
            let mut s = format!("{approval_id} {} by {decided_by}", decision.as_str());
            if let Some(c) = comment {
                s.push_str(&format!(": {}", text(c)));
            }
            s
        }
        Event::ApprovalExpired {
            approval_id,
            on_expiry,
        } => format!("{approval_id} expired → {}", on_expiry.as_str()),
        Event::AgentStarted {
            todo_id,
            agent,
            attempt,
            ..
        } => format!("{todo_id} {agent} attempt {attempt}"),
        Event::AgentCompleted {
            todo_id,
            agent,
            attempt,
            result,
            duration_ms,
        } => format!(
            "{todo_id} {agent} attempt {attempt} in {duration_ms} ms → {}",
            payload_brief(result)
        ),
        Event::AgentFailed {
            todo_id,
            agent,
            attempt,
            error,
            retryable,
        } => format!(
            "{todo_id} {agent} attempt {attempt}{}: {}",
            if *retryable { " (retryable)" } else { "" },
            text(error)
        ),
        Event::ToolCallRequested {
            tool_call_id,
            todo_id,
            tool,
            ..
        } => format!("{tool_call_id} {tool} for {todo_id}"),
        Event::ToolCallCompleted {
            tool_call_id,
            error,
            duration_ms,
            ..
        } => match error {
            Some(e) => format!("{tool_call_id} failed in {duration_ms} ms: {}", text(e)),
            None => format!("{tool_call_id} ok in {duration_ms} ms"),
        },
        Event::LlmCalled {
            purpose,
            model,
            duration_ms,
            error,
            turn,
            response,
            notice,
            ..
        } => {
            let at = turn.as_ref().map_or_else(String::new, |t| {
                format!(" {}#{} (attempt {})", t.todo_id, t.index, t.attempt)
            });
            match error {
                Some(e) => format!(
                    "{purpose}{at} via {model} failed in {duration_ms} ms: {}",
                    text(e)
                ),
                None if turn.is_some() => {
                    let told = if notice.is_some() {
                        " (told of a person's changes)"
                    } else {
                        ""
                    };
                    format!(
                        "{purpose}{at} via {model} in {duration_ms} ms{told} → {}",
                        turn_brief(response)
                    )
                }
                None => format!("{purpose} via {model} in {duration_ms} ms"),
            }
        }
        Event::EvaluationRecorded {
            quality_score,
            completeness,
            needs_retry,
            retry_agents,
            ..
        } => {
            let mut s = format!("quality {quality_score:.2}, completeness {completeness:.2}");
            if *needs_retry {
                s.push_str(&format!(", retry {}", retry_agents.join(",")));
            }
            s
        }
        Event::ResultsAggregated { aggregated } => match aggregated {
            Value::Object(m) => {
                let keys: Vec<&str> = m.keys().map(String::as_str).collect();
                keys.join(", ")
            }
            other => one_line(&other.to_string(), 60),
        },
        Event::ResponseGenerated { final_response } => text(&response_text(final_response)),
        Event::CheckpointSaved {
            checkpoint_id,
            node,
            todos_completed,
        } => format!("{checkpoint_id} after {node} ({todos_completed} done)"),
        Event::CommandReceived {
            command,
            by,
            accepted,
            said,
        } => format!(
            "\"{}\" by {by}{}{}",
            text(command),
            said.as_ref()
                .map(|s| format!(" (interpreted from \"{}\")", text(s)))
                .unwrap_or_default(),
            if *accepted { "" } else { " (refused)" }
        ),
        Event::RunInterrupted {
            reason,
            approval_id,
        } => match approval_id {
            Some(a) => format!("{} (approval {a})", text(reason)),
            None => text(reason),
        },
        Event::RunResumed { by } => format!("by {by}"),
        Event::RunRestored {
            checkpoint_id,
            to_seq,
            by,
        } => format!("to {checkpoint_id} (seq {to_seq}) by {by}"),
        Event::Reasoning { message } => text(message),
        Event::RunCompleted {
            total_execution_time_ms,
        } => format!("completed in {total_execution_time_ms} ms"),
        Event::RunFailed { error } => format!("failed: {}", text(error)),
        Event::RunCancelled { by, reason } => match reason {
            Some(r) => format!("cancelled by {by}: {}", text(r)),
            None => format!("cancelled by {by}"),
        },
        Event::SessionContextLoaded { turns, omitted } => format!(
            "{} earlier turn(s){}",
            turns.len(),
            if *omitted > 0 {
                format!(", {omitted} older left out")
            } else {
                String::new()
            }
        ),
        Event::MemoryLoaded { user_id, memories } => {
            format!("{} memory item(s) of {user_id}", memories.len())
        }
        Event::MemorySaved { memory } => format!("{}: {}", memory.key, text(&memory.text)),
        Event::MemoryDeleted { memory_id, by } => format!("{memory_id} deleted by {by}"),
        Event::SessionDeleted { by } => format!("session deleted by {by}"),
        Event::ValuesUpdated {
            values,
            as_node,
            by,
        } => format!(
            "{} by {by}{}",
            text(&Value::Object(values.clone()).to_string()),
            as_node
                .as_ref()
                .map(|n| format!(" as {}", text(n)))
                .unwrap_or_default()
        ),
    }
}

fn source_str(s: chronicle_schemas::Source) -> &'static str {
    match s {
        chronicle_schemas::Source::Llm => "llm",
        chronicle_schemas::Source::Rules => "rules",
        chronicle_schemas::Source::Request => "request",
    }
}
