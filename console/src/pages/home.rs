//! The home page (runs by status, what waits on people, open streams, storage; start a run;
//! the audit export) and the login page.

use askama::Template;
use chronicle_schemas::{RunStatus, Timestamp};
use chronicle_wire::{Inbox, RunSummary};

use super::runs::{RunRow, StatusCount, counts};
use super::{Chrome, Nav};
use crate::text;

/// What the server knows of itself, for the home page.
#[derive(Clone, Debug, Default)]
pub struct Health {
    /// `ok`, `full` or `failed`.
    pub storage: String,
    pub open_streams: u64,
    /// The log's next offset: how many events the store holds.
    pub events: u64,
}

/// `/console/`.
#[derive(Clone, Debug, Template)]
#[template(path = "home.html")]
pub struct HomePage {
    pub chrome: Chrome,
    /// How many of the runs the caller may see are in each status.
    pub counts: Vec<StatusCount>,
    pub recent: Vec<RunRow>,
    pub pending: usize,
    pub pending_truncated: bool,
    pub oldest_wait: String,
    /// The server's own figures, for an admin.
    pub health: Option<Health>,
}

/// The newest runs the home page lists.
const RECENT_RUNS_SHOWN: usize = 10;

impl HomePage {
    /// `recent` are the newest runs the caller may see, `by_status` how many of them are in each
    /// status; `inbox` its pending approvals; `health` the server's figures when the caller may
    /// see them.
    pub fn new(
        chrome: Chrome,
        recent: &[RunSummary],
        by_status: &[(RunStatus, u64)],
        inbox: &Inbox,
        health: Option<Health>,
        now: Timestamp,
    ) -> Self {
        let oldest = inbox
            .approvals
            .iter()
            .map(|i| i.approval.approval.created_at)
            .min();
        Self {
            chrome,
            counts: counts(by_status),
            recent: recent
                .iter()
                .take(RECENT_RUNS_SHOWN)
                .map(RunRow::new)
                .collect(),
            pending: inbox.count,
            pending_truncated: inbox.truncated,
            oldest_wait: oldest.map(|t| text::wait(t, now)).unwrap_or_default(),
            health,
        }
    }
}

/// `/console/login`: a token, exchanged once for a session cookie.
#[derive(Clone, Debug, Template)]
#[template(path = "login.html")]
pub struct LoginPage {
    pub chrome: Chrome,
    /// Where to go once signed in (a console path).
    pub next: String,
}

impl LoginPage {
    pub fn new(next: &str) -> Self {
        let next = if next.starts_with("/console/") && !next.starts_with("//") {
            next.to_owned()
        } else {
            "/console/".to_owned()
        };
        Self {
            chrome: Chrome::new("Sign in", Nav::Login, "", "none", ""),
            next,
        }
    }
}

/// A page the console could not show: the status and why.
#[derive(Clone, Debug, Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub chrome: Chrome,
    pub status: u16,
    pub message: String,
}

impl ErrorPage {
    pub fn new(chrome: Chrome, status: u16, message: &str) -> Self {
        Self {
            chrome,
            status,
            message: message.to_owned(),
        }
    }
}
