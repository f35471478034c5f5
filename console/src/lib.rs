//! The web console `chronicle serve` shows under `/console/`: HTML pages of runs, a run's TODO
//! board at any seq, its timeline, checkpoints and diffs, the approvals inbox and the sessions;
//! the one script and one style sheet they load.
//!
//! The pages are askama templates, compiled with the crate and escaped by default: model
//! answers, agent replies and tool arguments are text a stranger may have shaped, so nothing
//! here marks a value as safe HTML. The script only reads pages and sends the JSON API's own
//! requests; the console changes nothing by itself.
//!
//! Architecture Invariant: no I/O, no engine, no HTTP here. The API reads what a page shows
//! (with the caller's rights) and hands it to a page's constructor; a page is a pure function
//! of what it is given and the time it is told.

mod assets;
mod diff;
mod pages;
mod text;

pub use assets::{Asset, SCRIPT, STYLE, asset};
pub use pages::encode as encode_query;
pub use pages::{
    ApprovalsPage, Board, BoardFragment, Checkpoints, CheckpointsFragment, Chrome, DiffPage,
    ErrorPage, Health, HomePage, LoginPage, Nav, RunFilters, RunPage, RunsFragment, RunsPage,
    RunsTable, SessionPage, SessionsPage, TIMELINE_PAGE_EVENTS, Timeline, TimelineFragment,
    TimelineRequest,
};

/// The Content-Security-Policy of every console answer: the page's own script and style only,
/// no inline script, no frames around it (an Approve button cannot be clicked through another
/// site's page), requests only to this server.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
