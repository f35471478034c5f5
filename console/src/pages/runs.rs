//! The runs list: newest first, filtered by status, owner, session and query text, a sub-agent
//! run under its parent, and how many of the runs looked at are in each status.

use askama::Template;
use chronicle_schemas::{RunId, RunStatus, Timestamp};
use chronicle_wire::RunSummary;

use super::Chrome;
use crate::text;

/// The filters of a runs page, as its query string gives them.
#[derive(Clone, Debug, Default)]
pub struct RunFilters {
    pub status: Option<RunStatus>,
    pub owner: Option<String>,
    pub session: Option<String>,
    /// Text the query must contain (case-insensitive).
    pub text: Option<String>,
}

impl RunFilters {
    /// The query string of these filters, without `after` (`status=failed&q=...`).
    pub fn query(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.status {
            parts.push(format!("status={}", s.as_str()));
        }
        for (k, v) in [
            ("owner", &self.owner),
            ("session_id", &self.session),
            ("q", &self.text),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}={}", encode(v)));
            }
        }
        parts.join("&")
    }

    /// Whether `run` passes the text filter (the others are the list's own).
    pub fn matches(&self, run: &RunSummary) -> bool {
        self.text.as_ref().is_none_or(|t| {
            run.query.to_lowercase().contains(&t.to_lowercase())
                || run.run_id.to_string().starts_with(t.as_str())
        })
    }

    fn status_str(&self) -> &str {
        self.status.map_or("", |s| s.as_str())
    }
}

/// A query-string value, percent-encoded (everything but unreserved characters).
pub fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct RunRow {
    pub run_id: String,
    pub status: &'static str,
    pub owner: String,
    pub session_id: String,
    /// The session id as a query-string value.
    pub session_q: String,
    pub created: String,
    pub updated: String,
    pub query: String,
    /// The parent run, for a sub-agent run.
    pub parent: Option<String>,
    /// Shown under its parent (the parent is on the page).
    pub nested: bool,
}

impl RunRow {
    pub fn new(r: &RunSummary) -> Self {
        Self {
            run_id: r.run_id.to_string(),
            status: r.status.as_str(),
            owner: r.owner.clone(),
            session_id: r.session_id.0.clone(),
            session_q: encode(&r.session_id.0),
            created: text::date_time(r.created_at),
            updated: text::date_time(r.updated_at),
            query: text::cut(&chronicle_wire::one_line(&r.query, usize::MAX), 120),
            parent: r.parent.as_ref().map(|p| p.run_id.to_string()),
            nested: false,
        }
    }
}

/// Rows with each sub-agent run moved under its parent when the parent is among them (at any
/// depth: a sub-run's own sub-runs follow it).
pub(crate) fn nest(runs: &[RunSummary]) -> Vec<RunRow> {
    let listed = |id: RunId| runs.iter().any(|r| r.run_id == id);
    let mut rows: Vec<RunRow> = Vec::with_capacity(runs.len());
    // Depth first from each run whose parent is not listed; ids are unique, so each run is
    // reached once.
    let mut stack: Vec<(&RunSummary, bool)> = runs
        .iter()
        .filter(|r| r.parent.as_ref().is_none_or(|p| !listed(p.run_id)))
        .rev()
        .map(|r| (r, false))
        .collect();
    while let Some((run, nested)) = stack.pop() {
        let mut row = RunRow::new(run);
        row.nested = nested;
        rows.push(row);
        let children = runs
            .iter()
            .filter(|c| c.parent.as_ref().is_some_and(|p| p.run_id == run.run_id));
        let children: Vec<&RunSummary> = children.collect();
        stack.extend(children.into_iter().rev().map(|c| (c, true)));
    }
    rows
}

/// How many runs are in one status.
#[derive(Clone, Debug)]
pub struct StatusCount {
    pub status: &'static str,
    pub count: u64,
}

/// The counts as the page shows them, in the order given.
pub(crate) fn counts(counts: &[(RunStatus, u64)]) -> Vec<StatusCount> {
    counts
        .iter()
        .map(|&(s, count)| StatusCount {
            status: s.as_str(),
            count,
        })
        .collect()
}

/// The table and its paging: the part of the page that refreshes live.
#[derive(Clone, Debug)]
pub struct RunsTable {
    pub rows: Vec<RunRow>,
    /// The next page's URL, when there is one.
    pub next: Option<String>,
    /// How many runs were looked at to fill the page (a text filter skips some).
    pub looked_at: usize,
    pub filtered: bool,
}

impl RunsTable {
    /// `page` is what the list gave (in order), `next` where it goes on.
    pub fn new(filters: &RunFilters, page: &[RunSummary], next: Option<RunId>) -> Self {
        let shown: Vec<RunSummary> = page
            .iter()
            .filter(|r| filters.matches(r))
            .cloned()
            .collect();
        let next = next.map(|n| {
            let q = filters.query();
            let sep = if q.is_empty() { "" } else { "&" };
            format!("/console/runs?{q}{sep}after={n}")
        });
        Self {
            rows: nest(&shown),
            next,
            looked_at: page.len(),
            filtered: filters.text.is_some(),
        }
    }
}

/// The table alone, for a live refresh.
#[derive(Clone, Debug, Template)]
#[template(path = "runs_table.html")]
pub struct RunsFragment {
    pub table: RunsTable,
}

/// `/console/runs`.
#[derive(Clone, Debug, Template)]
#[template(path = "runs.html")]
pub struct RunsPage {
    pub chrome: Chrome,
    pub filters: RunFilters,
    pub status: String,
    pub owner: String,
    pub session: String,
    pub text: String,
    pub table: RunsTable,
    /// How many runs of the scope listed (the caller's, or the owner asked for) are in each
    /// status.
    pub counts: Vec<StatusCount>,
    /// The principal may list other owners' runs.
    pub admin: bool,
    pub now: String,
}

impl RunsPage {
    /// `page` is the filtered list's page; `by_status` how many runs of the scope listed are in
    /// each status.
    pub fn new(
        chrome: Chrome,
        filters: RunFilters,
        page: &[RunSummary],
        next: Option<RunId>,
        by_status: &[(RunStatus, u64)],
        admin: bool,
        now: Timestamp,
    ) -> Self {
        Self {
            chrome,
            status: filters.status_str().to_owned(),
            owner: filters.owner.clone().unwrap_or_default(),
            session: filters.session.clone().unwrap_or_default(),
            text: filters.text.clone().unwrap_or_default(),
            table: RunsTable::new(&filters, page, next),
            counts: counts(by_status),
            filters,
            admin,
            now: text::date_time(now),
        }
    }

    pub fn statuses(&self) -> [&'static str; 5] {
        RunStatus::ALL.map(RunStatus::as_str)
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{ParentLink, SessionId, ToolCallId};

    use super::*;

    fn run(n: u128, parent: Option<u128>) -> RunSummary {
        RunSummary {
            run_id: RunId::from_u128(n),
            session_id: SessionId("s".into()),
            status: RunStatus::Completed,
            created_at: Timestamp::from_micros(0),
            updated_at: Timestamp::from_micros(0),
            last_seq: 0,
            query: format!("query {n}"),
            parent: parent.map(|p| ParentLink {
                run_id: RunId::from_u128(p),
                tool_call_id: ToolCallId("call_1".into()),
            }),
            owner: "alice".into(),
        }
    }

    #[test]
    fn a_child_goes_under_its_parent_when_both_are_listed() {
        let runs = [
            run(1, None),
            run(2, None),
            run(3, Some(1)),
            run(4, Some(9)),
            run(5, Some(3)),
        ];
        let rows = nest(&runs);
        let ids: Vec<(String, bool)> = rows.iter().map(|r| (r.query.clone(), r.nested)).collect();
        assert_eq!(
            ids,
            [
                ("query 1".into(), false),
                ("query 3".into(), true),
                ("query 5".into(), true),
                ("query 2".into(), false),
                ("query 4".into(), false),
            ]
        );
    }

    #[test]
    fn filters_make_their_query_string() {
        let f = RunFilters {
            status: Some(RunStatus::Failed),
            text: Some("a b&c".into()),
            ..RunFilters::default()
        };
        assert_eq!(f.query(), "status=failed&q=a%20b%26c");
        assert!(f.matches(&RunSummary {
            query: "x A B&C y".into(),
            ..run(1, None)
        }));
        assert!(!f.matches(&run(1, None)));
    }
}
