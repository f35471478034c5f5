//! The pages, one file each, and what every page shares: the frame around it ([`Chrome`]).

mod approvals;
mod home;
mod run;
mod runs;
mod sessions;
mod timeline;

pub use approvals::ApprovalsPage;
pub use home::{ErrorPage, Health, HomePage, LoginPage};
pub use run::{Board, BoardFragment, Checkpoints, CheckpointsFragment, RunPage};
pub use runs::{RunFilters, RunsFragment, RunsPage, RunsTable};
pub use sessions::{SessionPage, SessionsPage};
pub use timeline::{TIMELINE_PAGE_EVENTS, Timeline, TimelineFragment, TimelineRequest};

pub use crate::diff::DiffPage;
pub use runs::encode;

/// The console's sections, for the navigation bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    Home,
    Runs,
    Approvals,
    Sessions,
    Login,
}

/// What every page shows around its content: who is looking, how they are signed in, and the
/// token a signed-in page sends with its changes.
#[derive(Clone, Debug)]
pub struct Chrome {
    pub title: String,
    pub nav: Nav,
    /// The principal's name.
    pub who: String,
    /// `open` (a server without tokens: everyone is `local`), `cookie` (signed in on the
    /// login page) or `bearer` (a request with its own `Authorization`).
    pub auth: &'static str,
    /// The session's CSRF token (a signed-in page's changes carry it); empty otherwise.
    pub csrf: String,
    pub script: String,
    pub style: String,
    /// Every SSE event name, space-separated: what the script listens for.
    pub events: String,
}

impl Chrome {
    pub fn new(
        title: impl Into<String>,
        nav: Nav,
        who: &str,
        auth: &'static str,
        csrf: &str,
    ) -> Self {
        Self {
            title: title.into(),
            nav,
            who: who.to_owned(),
            auth,
            csrf: csrf.to_owned(),
            script: crate::SCRIPT.path(),
            style: crate::STYLE.path(),
            events: chronicle_wire::names::EVENT_NAMES.join(" "),
        }
    }

    /// The navigation's class for `tab`: `on` for the page's own.
    pub fn tab(&self, tab: &str) -> &'static str {
        let on = matches!(
            (self.nav, tab),
            (Nav::Home, "home")
                | (Nav::Runs, "runs")
                | (Nav::Approvals, "approvals")
                | (Nav::Sessions, "sessions")
        );
        if on { "on" } else { "" }
    }
}

/// A status as its CSS class and text: `waiting_approval`.
pub(crate) fn snake<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
