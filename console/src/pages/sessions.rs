//! The sessions: a list by last activity, and one session as its conversation, each turn with its
//! run, the newest answer streaming in while it is written, a pending approval inline, and a box
//! for the next message.

use askama::Template;
use chronicle_wire::{ApprovalView, SessionDetail, SessionList, SessionSummary, SessionTurn};

use super::Chrome;
use super::runs::encode;
use crate::text;

/// One session in the list.
#[derive(Clone, Debug)]
pub struct SessionRow {
    pub id: String,
    pub title: String,
    pub turns: usize,
    pub status: &'static str,
    pub user: String,
    pub owner: String,
    pub last_activity: String,
}

impl SessionRow {
    fn new(s: &SessionSummary) -> Self {
        Self {
            id: s.session_id.0.clone(),
            title: s.title.clone(),
            turns: s.turns,
            status: s.status.as_str(),
            user: s.user_id.clone().unwrap_or_default(),
            owner: s.owner.clone(),
            last_activity: text::date_time(s.last_activity),
        }
    }

    /// The session id as a path segment.
    pub fn path(&self) -> String {
        encode(&self.id)
    }
}

/// `/console/sessions`.
#[derive(Clone, Debug, Template)]
#[template(path = "sessions.html")]
pub struct SessionsPage {
    pub chrome: Chrome,
    pub rows: Vec<SessionRow>,
    /// The next page's URL.
    pub next: Option<String>,
}

impl SessionsPage {
    pub fn new(chrome: Chrome, list: &SessionList) -> Self {
        Self {
            chrome,
            rows: list.sessions.iter().map(SessionRow::new).collect(),
            next: list
                .next_cursor
                .as_ref()
                .map(|c| format!("/console/sessions?cursor={}", encode(c))),
        }
    }
}

/// One turn of the conversation.
#[derive(Clone, Debug)]
pub struct TurnRow {
    pub run_id: String,
    pub query: String,
    pub status: &'static str,
    pub answer: String,
    pub started: String,
    /// The newest turn, still being worked on: its answer streams in.
    pub live: bool,
}

impl TurnRow {
    fn new(t: &SessionTurn, live: bool) -> Self {
        Self {
            run_id: t.run_id.to_string(),
            query: t.query.clone(),
            status: t.status.as_str(),
            answer: t.answer.clone().unwrap_or_default(),
            started: text::date_time(t.started_at),
            live,
        }
    }
}

/// The approval the newest turn waits for.
#[derive(Clone, Debug)]
pub struct PendingRow {
    pub id: String,
    pub run_id: String,
    pub tool: String,
    pub message: String,
    pub args: String,
}

/// `/console/sessions/{id}`.
#[derive(Clone, Debug, Template)]
#[template(path = "session.html")]
pub struct SessionPage {
    pub chrome: Chrome,
    pub id: String,
    pub title: String,
    pub owner: String,
    pub user: String,
    pub turns: Vec<TurnRow>,
    pub pending: Option<PendingRow>,
    /// The newest turn's run, which the page follows live while it works.
    pub live_run: String,
    /// The CLI command that shows the session.
    pub cli: String,
}

impl SessionPage {
    pub fn new(chrome: Chrome, detail: &SessionDetail, pending: Option<&ApprovalView>) -> Self {
        let last = detail.turns.len().saturating_sub(1);
        let turns: Vec<TurnRow> = detail
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| TurnRow::new(t, i == last && !t.status.is_terminal()))
            .collect();
        let live_run = detail
            .turns
            .last()
            .filter(|t| !t.status.is_terminal())
            .map(|t| t.run_id.to_string())
            .unwrap_or_default();
        Self {
            chrome,
            id: detail.session.session_id.0.clone(),
            title: detail.session.title.clone(),
            owner: detail.session.owner.clone(),
            user: detail.session.user_id.clone().unwrap_or_default(),
            turns,
            pending: pending.map(|a| PendingRow {
                id: a.id.to_string(),
                run_id: a.run_id.to_string(),
                tool: a.approval.tool_name.clone(),
                message: a.approval.message.clone(),
                args: text::pretty(&a.approval.request_args, 2_000),
            }),
            live_run,
            cli: format!(
                "chronicle sessions show {}",
                shell_word(&detail.session.session_id.0)
            ),
        }
    }
}

/// `s` as one shell word: as it is when it is plain, else in single quotes.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_session_id_is_one_shell_word() {
        assert_eq!(shell_word("chat-1"), "chat-1");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("$(rm)"), "'$(rm)'");
    }
}
