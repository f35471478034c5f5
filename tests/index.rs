//! The index that lists and recovery read: it agrees with a rebuild from the log (also after a
//! SIGKILL in the middle of writing it), every list read from it equals the full scan it
//! replaced, opening reads no event of a finished run, and a store written before the index
//! existed is indexed once and answers as before.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use chronicle_api::runs::page;
use chronicle_engine::index::{self, RunScope};
use chronicle_engine::store::{IndexOp, Options, Store};
use chronicle_engine::{Engine, Error as EngineError, Principal, SessionReader, Settings};
use chronicle_projections::RunState;
use chronicle_schemas::{ApprovalStatus, Memory, RunId, RunStatus, SessionId, Timestamp};
use chronicle_wire::{InboxQuery, MemoriesQuery, Order, RunsQuery, SessionsQuery};

use crate::index_workload::{OWNERS, USERS, Workload};

/// A store with `runs` runs of the random workload, not yet indexed.
async fn written(store: &Store, seed: u64, runs: usize) -> Workload {
    let mut w = Workload::new(seed);
    while w.runs < runs {
        w.step(store).await;
    }
    w
}

fn assert_index_agrees_with_a_rebuild(store: &Store) {
    let upto = index::catch_up(store).unwrap();
    assert_eq!(upto, store.durable_next_offset());
    let rebuilt = index::rebuild(store, upto).unwrap();
    let kept = index::entries(store).unwrap();
    assert_eq!(kept.len(), rebuilt.len(), "as many entries as a rebuild");
    assert!(kept == rebuilt, "the index differs from a rebuild");
}

/// Every run's durable state, by id (what the old lists replayed).
fn states(store: &Store) -> BTreeMap<RunId, RunState> {
    store
        .runs()
        .map(|h| {
            let h = h.unwrap();
            (h.run_id, store.state_at(h.run_id, h.last_seq).unwrap())
        })
        .collect()
}

fn principals() -> Vec<Principal> {
    let mut out: Vec<Principal> = OWNERS.iter().map(|o| Principal::user(*o)).collect();
    out.push(Principal::admin("root"));
    out
}

/// The runs page as the full scan made it: every head the principal may see (of the owner asked
/// for), by creation time either way.
fn runs_by_scan(
    store: &Store,
    states: &BTreeMap<RunId, RunState>,
    who: &Principal,
    q: &RunsQuery,
) -> (Vec<RunId>, Option<RunId>) {
    let mut heads: Vec<_> = store
        .runs()
        .map(Result::unwrap)
        .filter(|h| {
            let s = &states[&h.run_id].supervisor;
            !s.session_deleted && who.may_access(&s.owner)
        })
        .filter(|h| q.session_id.as_ref().is_none_or(|s| h.session_id.0 == *s))
        .filter(|h| {
            q.owner
                .as_ref()
                .is_none_or(|o| states[&h.run_id].supervisor.owner == *o)
        })
        .collect();
    heads.sort_by_key(|h| (h.created_at, h.run_id));
    if q.order == Some(Order::Desc) {
        heads.reverse();
    }
    let start = q
        .after
        .map_or(0, |a| heads.iter().position(|h| h.run_id == a).unwrap() + 1);
    let end = (start + q.limit.unwrap()).min(heads.len());
    let listed = heads[start..end]
        .iter()
        .filter(|h| {
            q.status
                .is_none_or(|s| s == states[&h.run_id].supervisor.run_status)
        })
        .map(|h| h.run_id)
        .collect();
    let next = (end < heads.len()).then(|| heads[end - 1].run_id);
    (listed, next)
}

/// The counts of runs by status the index keeps, of every scope, equal the states' counted.
fn check_counts(store: &Store, states: &BTreeMap<RunId, RunState>) {
    let count = |keep: &dyn Fn(&RunState) -> bool| -> Vec<(RunStatus, u64)> {
        RunStatus::ALL
            .iter()
            .map(|&st| {
                let n = states
                    .values()
                    .filter(|s| keep(s) && s.supervisor.run_status == st)
                    .count();
                (st, n as u64)
            })
            .collect()
    };
    let counted = index::status_counts(store, RunScope::All).unwrap();
    assert_eq!(counted, count(&|_| true), "every run");
    assert!(
        counted.iter().filter(|(_, n)| *n > 0).count() >= 3,
        "{counted:?}"
    );
    assert_eq!(
        index::status_counts(store, RunScope::Visible).unwrap(),
        count(&|s| !s.supervisor.session_deleted),
        "the runs anyone may see"
    );
    for owner in OWNERS {
        assert_eq!(
            index::status_counts(store, RunScope::Owner(owner)).unwrap(),
            count(&|s| !s.supervisor.session_deleted && s.supervisor.owner == owner),
            "{owner}'s runs"
        );
    }
}

/// The sessions as the full scan listed them: (id, last activity), most recent first.
fn sessions_by_scan(
    store: &Store,
    states: &BTreeMap<RunId, RunState>,
    who: &Principal,
    user: Option<&str>,
) -> Vec<(String, Timestamp)> {
    let mut by_session: HashMap<SessionId, Vec<_>> = HashMap::new();
    for h in store.runs().map(Result::unwrap) {
        by_session.entry(h.session_id.clone()).or_default().push(h);
    }
    let mut out = Vec::new();
    for (session, mut heads) in by_session {
        heads.sort_by_key(|h| (h.created_at, h.run_id));
        let first = &states[&heads[0].run_id].supervisor;
        let shown =
            first.parent.is_none() && !first.session_deleted && who.may_access(&first.owner);
        if !shown || user.is_some_and(|u| first.user_id.as_deref() != Some(u)) {
            continue;
        }
        let last = heads.iter().map(|h| h.updated_at).max().unwrap();
        out.push((session.0, last));
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// The approvals of `status` as the full scan of every run found them (the inbox's old
/// `inbox_items`): (requested at, run, seq), oldest first.
fn approvals_by_scan(
    states: &BTreeMap<RunId, RunState>,
    who: &Principal,
    status: ApprovalStatus,
) -> Vec<(Timestamp, RunId, u64)> {
    let mut out: Vec<_> = states
        .iter()
        .filter(|(_, s)| !s.supervisor.session_deleted && who.may_access(&s.supervisor.owner))
        .flat_map(|(run, s)| {
            s.approvals
                .list
                .iter()
                .filter(|a| a.status == status)
                .map(|a| (a.created_at, *run, a.requested_seq))
        })
        .collect();
    out.sort();
    out
}

/// Every page of the runs `q` asks for as `who`, each equal to the scan's.
fn check_runs_pages(
    store: &Store,
    states: &BTreeMap<RunId, RunState>,
    who: &Principal,
    mut q: RunsQuery,
) {
    let scope = match who.list_owner(q.owner.as_deref()) {
        Ok(None) => RunScope::Visible,
        Ok(Some(owner)) => RunScope::Owner(owner),
        Err(e) => {
            assert!(
                matches!(e, EngineError::NotYourOwner { .. }) && !who.admin,
                "{e}"
            );
            return;
        }
    };
    // As the server answers it: `owner` (an ordinary principal's own) or the principal's own.
    let as_scanned = match scope {
        RunScope::Owner(o) => Principal::user(o),
        _ => who.clone(),
    };
    let mut pages = 0;
    loop {
        let got = page(store, &q, scope, &mut || {}).unwrap();
        let (want, next) = runs_by_scan(store, states, &as_scanned, &q);
        let ids: Vec<RunId> = got.runs.iter().map(|r| r.run_id).collect();
        assert_eq!(ids, want, "{} page {pages} of {q:?}", who.name);
        assert_eq!(got.next, next, "{} page {pages} of {q:?}", who.name);
        pages += 1;
        match next {
            Some(n) => q.after = Some(n),
            None => break,
        }
    }
}

/// Every page of the approvals of each status as `who` (of its runs; an admin: all), each equal
/// to the scan's, and those older than a moment.
fn check_approvals(store: &Store, states: &BTreeMap<RunId, RunState>, who: &Principal) {
    let owner = (!who.admin).then_some(who.name.as_str());
    for status in ApprovalStatus::ALL {
        let want = approvals_by_scan(states, who, status);
        let (all, more) = index::approvals(store, status, owner, None, 10_000).unwrap();
        assert_eq!(
            (all, more),
            (want.clone(), false),
            "{} {status:?}",
            who.name
        );
        let (first, more) = index::approvals(store, status, owner, None, 5).unwrap();
        assert_eq!(first[..], want[..want.len().min(5)]);
        assert_eq!(more, want.len() > 5);
        if let Some(mid) = want.get(want.len() / 2) {
            let (older, _) = index::approvals(store, status, owner, Some(mid.0), 10_000).unwrap();
            let expected: Vec<_> = want.iter().filter(|p| p.0 < mid.0).cloned().collect();
            assert_eq!(
                older, expected,
                "{} {status:?} before {:?}",
                who.name, mid.0
            );
        }
    }
}

/// Every memory item saved and not deleted (nor of a deleted session), by who saved it.
fn memories_by_scan(store: &Store) -> Vec<(String, Memory)> {
    let mut saved: BTreeMap<u64, (String, Memory)> = BTreeMap::new();
    let mut owners = HashMap::new();
    for env in store.read_range(0, store.durable_next_offset()) {
        let env = env.unwrap();
        match env.event {
            chronicle_schemas::Event::RunStarted { owner, .. } => {
                owners.insert(env.run_id, owner.unwrap());
            }
            chronicle_schemas::Event::MemorySaved { memory } => {
                saved.insert(env.offset, (owners[&env.run_id].clone(), memory));
            }
            chronicle_schemas::Event::MemoryDeleted { memory_id, .. } => {
                saved.retain(|_, (_, m)| m.memory_id != memory_id);
            }
            chronicle_schemas::Event::SessionDeleted { .. } => {
                saved.retain(|_, (_, m)| m.run_id != env.run_id);
            }
            _ => {}
        }
    }
    saved.into_values().rev().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_from_the_index_equals_the_full_scan_it_replaced() {
    let store = Store::memory();
    written(&store, 7, 2_500).await;
    assert_index_agrees_with_a_rebuild(&store);
    let states = states(&store);
    let statuses = [
        None,
        Some(RunStatus::Running),
        Some(RunStatus::WaitingForApproval),
        Some(RunStatus::Failed),
    ];
    let some_session = states
        .values()
        .nth(40)
        .unwrap()
        .supervisor
        .session_id
        .0
        .clone();
    for who in principals() {
        // Runs: every page boundary of a few page sizes, both ways, with and without filters,
        // of every owner (an ordinary principal: its own, another refused).
        for (limit, status, session, order, owner) in [
            (1_000, None, None, Order::Asc, None),
            (1_000, None, None, Order::Desc, None),
            (97, statuses[1], None, Order::Asc, None),
            (250, statuses[2], None, Order::Desc, None),
            (13, statuses[3], None, Order::Asc, None),
            (3, statuses[0], Some(some_session.clone()), Order::Asc, None),
            (
                3,
                statuses[0],
                Some(some_session.clone()),
                Order::Desc,
                None,
            ),
            (41, None, None, Order::Desc, Some(OWNERS[1])),
            (300, statuses[3], None, Order::Asc, Some(OWNERS[2])),
        ] {
            let q = RunsQuery {
                limit: Some(limit),
                status,
                session_id: session,
                order: Some(order),
                owner: owner.map(str::to_owned),
                ..RunsQuery::default()
            };
            check_runs_pages(&store, &states, &who, q);
        }
        // Sessions: every page, for each user and owner filter.
        let reader = SessionReader::new(store.clone());
        for (user, owner) in [
            (None, None),
            (Some(USERS[0]), None),
            (Some(USERS[2]), None),
            (None, Some(OWNERS[0])),
            (Some(USERS[1]), Some(OWNERS[2])),
        ] {
            let mut q = SessionsQuery {
                limit: Some(7),
                user: user.map(str::to_owned),
                owner: owner.map(str::to_owned),
                ..SessionsQuery::default()
            };
            let as_scanned = match who.list_owner(owner) {
                Ok(Some(o)) => Principal::user(o),
                Ok(None) => who.clone(),
                Err(e) => {
                    assert!(matches!(e, EngineError::NotYourOwner { .. }), "{e}");
                    let refused = reader.list(&who, &q).unwrap_err();
                    assert!(matches!(refused, EngineError::NotYourOwner { .. }));
                    continue;
                }
            };
            let want = sessions_by_scan(&store, &states, &as_scanned, user);
            let mut got = Vec::new();
            loop {
                let page = reader.list(&who, &q).unwrap();
                got.extend(
                    page.sessions
                        .iter()
                        .map(|s| (s.session_id.0.clone(), s.last_activity)),
                );
                // A listed summary (from the index's facts) is the one the session itself
                // gives (from its turns' states), as an admin reads it: a list counts every
                // run of the session, whoever's.
                for s in &page.sessions {
                    let whole = reader.get(&Principal::admin("root"), &s.session_id);
                    assert_eq!(
                        s,
                        &whole.unwrap().session,
                        "{}'s {}",
                        who.name,
                        s.session_id.0
                    );
                }
                match page.next_cursor {
                    Some(c) => q.cursor = Some(c),
                    None => break,
                }
            }
            assert_eq!(got, want, "{}'s sessions of {user:?} {owner:?}", who.name);
        }
        // The approvals of every status, in pages, and older than a moment.
        check_approvals(&store, &states, &who);
        for status in ApprovalStatus::ALL.iter().filter(|_| who.admin) {
            assert!(
                !approvals_by_scan(&states, &who, *status).is_empty(),
                "some {status:?}"
            );
        }
    }
    // Counts by status, of every scope: those of the states, counted one by one.
    check_counts(&store, &states);
    // Memory: what each owner's runs saved for each user, newest first.
    let all = memories_by_scan(&store);
    assert!(!all.is_empty());
    for user in USERS {
        for owner in OWNERS.iter().map(|o| Some(*o)).chain([None]) {
            let got: Vec<String> = index::memory_items(&store, owner, user, usize::MAX)
                .unwrap()
                .into_iter()
                .map(|s| s.memory.memory_id)
                .collect();
            let want: Vec<String> = all
                .iter()
                .filter(|(o, m)| m.user_id == user && owner.is_none_or(|x| x == o))
                .map(|(_, m)| m.memory_id.clone())
                .collect();
            assert_eq!(got, want, "{owner:?}'s items for {user}");
            // And a page at a time: each page continues where the last ended.
            let mut paged = Vec::new();
            let mut before = None;
            loop {
                let (page, more) = index::memory_page(&store, owner, user, before, 3).unwrap();
                assert!(page.len() <= 3);
                before = page.last().map(|(at, _)| *at);
                paged.extend(page.into_iter().map(|(_, s)| s.memory.memory_id));
                if !more {
                    break;
                }
            }
            assert_eq!(paged, want, "{owner:?}'s items for {user}, in pages");
        }
    }
}

/// Opening an engine reads the index, not the log: on a store of finished runs the events it
/// reads do not grow with their number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_reads_no_event_of_a_finished_run() {
    let mut read_at_open = Vec::new();
    for runs in [300, 3_000] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let mut w = written(&store, 11, runs).await;
        // Every run ends, as after a quiet night.
        w.end_all(&store).await;
        index::catch_up(&store).unwrap();
        drop(store);
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let engine = Engine::open(store.clone(), Settings::default())
            .await
            .unwrap();
        read_at_open.push((store.reads().events(), store.reads().heads()));
        engine.shutdown().await;
        drop((engine, store));
    }
    assert_eq!(read_at_open[0], (0, 0), "{read_at_open:?}");
    assert_eq!(read_at_open[1], (0, 0), "{read_at_open:?}");
}

/// A store written before the index existed (or whose index was lost) is indexed at its first
/// open, and its lists answer as the scan did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_an_index_is_indexed_once_and_answers_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut w = written(&store, 5, 400).await;
    w.end_all(&store).await;
    assert_eq!(
        store.index_watermark().unwrap(),
        0,
        "nothing indexed it yet"
    );
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let states = states(&store);
    let engine = Engine::open(store.clone(), Settings::default())
        .await
        .unwrap();
    assert_eq!(
        store.index_watermark().unwrap(),
        store.durable_next_offset()
    );
    let admin = Principal::admin("root");
    let q = RunsQuery {
        limit: Some(1_000),
        ..RunsQuery::default()
    };
    let listed = page(&store, &q, RunScope::Visible, &mut || {}).unwrap();
    let ids: Vec<RunId> = listed.runs.iter().map(|r| r.run_id).collect();
    assert_eq!(ids, runs_by_scan(&store, &states, &admin, &q).0);
    let sessions = engine.sessions(&admin, &SessionsQuery::default()).unwrap();
    let want = sessions_by_scan(&store, &states, &admin, None);
    let got: Vec<_> = sessions
        .sessions
        .iter()
        .map(|s| (s.session_id.0.clone(), s.last_activity))
        .collect();
    assert_eq!(got[..], want[..got.len()]);
    engine.shutdown().await;
    drop((engine, store));
    // Opening again takes in nothing: the index is there.
    let store = Store::open(dir.path(), Options::default()).unwrap();
    index::catch_up(&store).unwrap();
    assert_eq!(store.reads().events(), 0);
}

/// An index written at an older format (before the settled approvals and the version entry) is
/// cleared and made again from the log once, and then equals a rebuild and answers as one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_an_older_format_is_rebuilt_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    written(&store, 9, 400).await;
    let upto = index::catch_up(&store).unwrap();
    // Format 1: what derive wrote before settled approvals were indexed, and no version.
    let newer: Vec<IndexOp> = index::entries(&store)
        .unwrap()
        .into_keys()
        .filter(|k| matches!(k[0], b'#' | b's' | b'p' | b'x' | b'y' | b'z'))
        .map(IndexOp::Delete)
        .collect();
    assert!(newer.len() > 1, "settled approvals were indexed");
    store.index_apply(&newer, upto, upto).unwrap();
    let approved = |store: &Store| {
        index::approvals(store, ApprovalStatus::Approved, None, None, 10_000)
            .unwrap()
            .0
    };
    assert!(approved(&store).is_empty(), "the old index lacks them");
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let states = states(&store);
    let read_before = store.reads().events();
    assert_index_agrees_with_a_rebuild(&store);
    assert!(
        store.reads().events() > read_before,
        "the log was read again"
    );
    assert_eq!(
        index::entries(&store).unwrap().get(&b"#"[..]),
        Some(&index::INDEX_VERSION.to_be_bytes().to_vec())
    );
    for who in principals() {
        check_approvals(&store, &states, &who);
    }
    check_counts(&store, &states);
    drop(store);
    // Once: the next open takes in nothing.
    let store = Store::open(dir.path(), Options::default()).unwrap();
    index::catch_up(&store).unwrap();
    assert_eq!(store.reads().events(), 0);
}

/// The lists over HTTP: runs newest first and by owner, sessions by owner, an ordinary
/// principal refused another's (403), memories a page at a time within a bounded limit, and the
/// inbox of a settled status from the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lists_over_http_page_by_order_owner_and_status() {
    use crate::api_support::{ALICE, ROOT, get, principals as tokens};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut w = written(&store, 13, 300).await;
    w.end_all(&store).await;
    let states = states(&store);
    let srv = crate::api_support::server_on(
        dir,
        store.clone(),
        tokens(),
        Settings::default(),
        chronicle_api::ApiConfig::default(),
    )
    .await;
    let root = Principal::admin("root");
    // Newest first, continued with `after`.
    let q = RunsQuery {
        limit: Some(7),
        order: Some(Order::Desc),
        owner: Some("bob".into()),
        ..RunsQuery::default()
    };
    let got = srv.client_as(ROOT).runs_page(&q).await.unwrap();
    let (want, next) = runs_by_scan(&store, &states, &root, &q);
    let ids: Vec<RunId> = got.runs.iter().map(|r| r.run_id).collect();
    assert_eq!((ids, got.next), (want, next));
    let (status, body) = get(&srv, ROOT, "/api/v1/runs?order=sideways").await;
    assert_eq!(status, 400, "{body}");
    // Another's runs and sessions: refused to an ordinary principal, its own answered.
    for path in ["/api/v1/runs?owner=bob", "/api/v1/sessions?owner=bob"] {
        let (status, body) = get(&srv, ALICE, path).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert_eq!(body["error"]["code"], "forbidden");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("\"bob\"")
        );
        let (status, _) = get(&srv, ALICE, &path.replace("bob", "alice")).await;
        assert_eq!(status, 200, "{path}");
    }
    // Memories: bounded pages that continue where the last ended.
    for bad in ["limit=0", "limit=1001", "before=x"] {
        let (status, body) = get(&srv, ROOT, &format!("/api/v1/users/u1/memories?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let all = srv
        .client_as(ROOT)
        .memories_page("u3", &MemoriesQuery::default())
        .await
        .unwrap();
    assert!(all.memories.len() > 2 && all.next_before.is_none());
    let mut paged = Vec::new();
    let mut q = MemoriesQuery {
        limit: Some(2),
        before: None,
    };
    loop {
        let page = srv.client_as(ROOT).memories_page("u3", &q).await.unwrap();
        paged.extend(page.memories);
        match page.next_before {
            Some(b) => q.before = Some(b),
            None => break,
        }
    }
    assert_eq!(paged, all.memories);
    // The inbox of a settled status, oldest request first, truncated at the limit.
    for status in [ApprovalStatus::Approved, ApprovalStatus::Cancelled] {
        let want = approvals_by_scan(&states, &root, status);
        let inbox = srv
            .client_as(ROOT)
            .inbox(&InboxQuery {
                status: Some(status.as_str().into()),
                limit: Some(1_000),
                ..InboxQuery::default()
            })
            .await
            .unwrap();
        let got: Vec<_> = inbox
            .approvals
            .iter()
            .map(|i| {
                let a = &i.approval.approval;
                assert!(i.waiting_ms.is_none());
                (a.created_at, i.approval.run_id, a.requested_seq)
            })
            .collect();
        assert_eq!((got, inbox.truncated), (want.clone(), false), "{status:?}");
        let short = srv
            .client_as(ROOT)
            .inbox(&InboxQuery {
                status: Some(status.as_str().into()),
                limit: Some(2),
                ..InboxQuery::default()
            })
            .await
            .unwrap();
        assert_eq!((short.count, short.truncated), (2, want.len() > 2));
    }
    srv.stop().await;
}

/// SIGKILL while runs, approvals, memory and session deletes are written and indexed: after every
/// kill the index, once caught up, equals a rebuild from the log.
#[test]
fn sigkill_while_indexing_leaves_an_index_a_rebuild_agrees_with() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..8u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_engine-child"))
            .args(["index", dir.path().to_str().unwrap(), &round.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "READY", "round {round}");
        std::thread::sleep(Duration::from_millis(50 + rand::random::<u64>() % 250));
        child.kill().unwrap();
        child.wait().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let before = store.index_watermark().unwrap();
        assert!(before <= store.durable_next_offset(), "round {round}");
        assert_index_agrees_with_a_rebuild(&store);
        assert!(store.verify().unwrap().ok(), "round {round}");
    }
}

/// The value of one sample of the metrics text (`name{labels}` as written), or 0 when absent.
fn sample(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

/// `/metrics` shows the caches (entries, hits and misses), what was read from the store and how
/// far the index is behind, on a server started over a store with history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_the_caches_the_reads_and_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut w = written(&store, 3, 150).await;
    w.end_all(&store).await;
    let srv = crate::api_support::server_on(
        dir,
        store,
        chronicle_api::Tokens::none(),
        Settings::default(),
        chronicle_api::ApiConfig::default(),
    )
    .await;
    let c = &srv.client;
    let q = RunsQuery {
        limit: Some(20),
        ..RunsQuery::default()
    };
    let page = c.runs_page(&q).await.unwrap();
    assert_eq!(page.runs.len() + page.damaged.len(), 20);
    let before = c.metrics().await.unwrap();
    let run = page.runs[0].run_id;
    c.status(run).await.unwrap();
    c.status(run).await.unwrap();
    let after = c.metrics().await.unwrap();
    let hits = r#"chronicle_cache_hits_total{cache="run_facts"}"#;
    let misses = r#"chronicle_cache_misses_total{cache="run_facts"}"#;
    assert!(sample(&after, hits) > sample(&before, hits), "{after}");
    assert!(sample(&after, misses) >= 1, "{after}");
    assert!(sample(&after, r#"chronicle_cache_entries{cache="run_facts"}"#) >= 1);
    assert!(sample(&after, "chronicle_store_events_read_total") > 0);
    assert!(
        after.contains("chronicle_index_behind_events 0\n"),
        "{after}"
    );
    assert!(after.contains(r#"chronicle_cache_events{cache="ended_runs"}"#));
    srv.stop().await;
}
