//! Keeping a conversation within the model's context budget. When the messages would exceed
//! the budget (estimated), the older turns are summarised by a model call of their own and
//! replaced by the summary; the system message and the most recent turns stay as they are.
//!
//! The estimate is deliberately simple — about four bytes of text a token, plus a few tokens a
//! message — because the engine cannot know every model's tokenizer; the budget is the
//! operator's to set with that margin in mind.

use serde_json::Value;

use super::{ChatRequest, Message};

/// Bytes of text counted as one token.
const BYTES_PER_TOKEN: usize = 4;
/// Tokens counted for each message's framing (role, separators).
const TOKENS_PER_MESSAGE: usize = 4;

/// The estimated tokens of a conversation (and of the tools offered with it).
pub fn estimate_tokens(request: &ChatRequest) -> usize {
    let messages: usize = request.messages.iter().map(message_tokens).sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| {
            text_tokens(&t.name)
                + text_tokens(&t.description)
                + text_tokens(&Value::to_string(&t.parameters))
        })
        .sum();
    messages + tools
}

fn message_tokens(m: &Message) -> usize {
    TOKENS_PER_MESSAGE
        + match m {
            Message::System { content } | Message::User { content } => text_tokens(content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.as_deref().map_or(0, text_tokens)
                    + tool_calls
                        .iter()
                        .map(|c| {
                            text_tokens(&c.id) + text_tokens(&c.name) + text_tokens(&c.arguments)
                        })
                        .sum::<usize>()
            }
            Message::Tool {
                tool_call_id,
                content,
            } => text_tokens(tool_call_id) + text_tokens(content),
        }
}

fn text_tokens(text: &str) -> usize {
    text.len().div_ceil(BYTES_PER_TOKEN)
}

/// Which messages a compaction summarises: `messages[start..end]`. `start` is after the
/// leading system message; `end` is where the kept recent turns begin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    pub start: usize,
    pub end: usize,
}

/// Whether `request` needs compacting to fit `budget_tokens`, and what to summarise if so: the
/// oldest turns. Kept as they are: at least the last `keep_recent` messages, and before them as
/// many more as fit in half the budget. The kept part never begins with a tool result (it would
/// answer a call the model no longer sees), so the cut moves back to the assistant message that
/// made the calls. `None` when it fits, or when nothing older than the kept turns is left.
pub fn plan(request: &ChatRequest, budget_tokens: usize, keep_recent: usize) -> Option<Compaction> {
    if estimate_tokens(request) <= budget_tokens {
        return None;
    }
    let messages = &request.messages;
    let start = usize::from(matches!(messages.first(), Some(Message::System { .. })));
    let mut end = messages.len().saturating_sub(keep_recent).max(start);
    let mut kept: usize = messages[end..].iter().map(message_tokens).sum();
    while end > start && kept + message_tokens(&messages[end - 1]) <= budget_tokens / 2 {
        end -= 1;
        kept += message_tokens(&messages[end]);
    }
    while end > start && matches!(messages[end], Message::Tool { .. }) {
        end -= 1;
    }
    // A single message is summarised too (a long tool result can be the whole problem), but a
    // summary of nothing is no compaction.
    (end > start).then_some(Compaction { start, end })
}

/// The model call that writes the summary of `messages[c.start..c.end]`.
pub fn summary_request(request: &ChatRequest, c: Compaction) -> ChatRequest {
    let mut transcript = String::new();
    for m in &request.messages[c.start..c.end] {
        let line = match m {
            Message::System { content } => format!("system: {content}"),
            Message::User { content } => format!("user: {content}"),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut line = format!("assistant: {}", content.as_deref().unwrap_or(""));
                for call in tool_calls {
                    line.push_str(&format!(
                        "\n  called {} ({}) with {}",
                        call.name, call.id, call.arguments
                    ));
                }
                line
            }
            Message::Tool {
                tool_call_id,
                content,
            } => format!("result of {tool_call_id}: {content}"),
        };
        transcript.push_str(&line);
        transcript.push('\n');
    }
    ChatRequest {
        model: request.model.clone(),
        messages: vec![
            Message::System {
                content: "You summarise the earlier part of an agent's conversation so that the \
                          agent can go on without it. Keep every fact, decision, file path, \
                          result and open question the agent will need; drop pleasantries and \
                          repetition. Answer with the summary only."
                    .into(),
            },
            Message::User {
                content: transcript,
            },
        ],
        tools: Vec::new(),
    }
}

/// `request` with `messages[c.start..c.end]` replaced by one message holding `summary`.
pub fn apply(request: &ChatRequest, c: Compaction, summary: &str) -> ChatRequest {
    let mut messages = Vec::with_capacity(request.messages.len() - (c.end - c.start) + 1);
    messages.extend_from_slice(&request.messages[..c.start]);
    messages.push(Message::User {
        content: format!("[Summary of the conversation so far]\n{summary}"),
    });
    messages.extend_from_slice(&request.messages[c.end..]);
    ChatRequest {
        messages,
        ..request.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ToolCall;
    use super::*;

    fn conversation() -> ChatRequest {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{\"path\": \"a.csv\"}".into(),
        };
        ChatRequest {
            model: None,
            messages: vec![
                Message::System {
                    content: "You analyse data.".into(),
                },
                Message::User {
                    content: "Summarise a.csv".into(),
                },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call("c1")],
                },
                Message::Tool {
                    tool_call_id: "c1".into(),
                    content: "x".repeat(4000),
                },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call("c2")],
                },
                Message::Tool {
                    tool_call_id: "c2".into(),
                    content: "y".repeat(400),
                },
            ],
            tools: Vec::new(),
        }
    }

    #[test]
    fn the_estimate_counts_every_part() {
        let r = conversation();
        let total = estimate_tokens(&r);
        // 4000 bytes of the first result alone are 1000 tokens.
        assert!((1100..1300).contains(&total), "{total}");
        let mut more = r.clone();
        more.tools.push(super::super::ToolSpec {
            name: "ls".into(),
            description: "lists".into(),
            parameters: serde_json::json!({"type": "object"}),
        });
        assert!(estimate_tokens(&more) > total);
    }

    #[test]
    fn within_the_budget_nothing_is_compacted() {
        let r = conversation();
        assert_eq!(plan(&r, estimate_tokens(&r), 2), None);
    }

    #[test]
    fn over_the_budget_the_older_turns_are_summarised_never_splitting_a_call_from_its_result() {
        let r = conversation();
        // Keeping the last 1 message would start the kept part at a tool result: the cut moves
        // back to the assistant message that called it.
        let c = plan(&r, 100, 1).unwrap();
        assert_eq!(c, Compaction { start: 1, end: 4 });

        let summary = summary_request(&r, c);
        let Message::User { content } = &summary.messages[1] else {
            panic!("{summary:?}");
        };
        assert!(content.starts_with("user: Summarise a.csv"), "{content}");
        assert!(content.contains("called read_file (c1)"), "{content}");
        assert!(!content.contains("c2"), "{content}");

        let compacted = apply(&r, c, "a.csv has 4000 x.");
        assert_eq!(compacted.messages.len(), 4);
        assert_eq!(compacted.messages[0], r.messages[0]);
        assert_eq!(
            compacted.messages[1],
            Message::User {
                content: "[Summary of the conversation so far]\na.csv has 4000 x.".into()
            }
        );
        assert_eq!(compacted.messages[2..], r.messages[4..]);
        assert!(estimate_tokens(&compacted) < estimate_tokens(&r));
    }

    #[test]
    fn the_kept_turns_fill_half_the_budget() {
        let r = conversation();
        // The last result (~100 tokens) and its call fit in half of 400; the one before (~1000
        // tokens) does not: the cut is before the second call.
        assert_eq!(plan(&r, 400, 1), Some(Compaction { start: 1, end: 4 }));
    }

    #[test]
    fn nothing_older_than_the_kept_turns_is_no_compaction() {
        let r = conversation();
        assert_eq!(plan(&r, 10, 10), None);
    }
}
