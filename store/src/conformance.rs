//! The conformance suite: one async fn per rule of [`EventLog`](crate::EventLog), each taking a
//! [`Factory`] of stores, and [`conformance_tests!`](crate::conformance_tests) to run every case
//! against one implementation. Every implementation runs all of it; a new one (PostgreSQL) is
//! done when it passes.
//!
//! Compiled for this crate's tests, and for other crates with the `conformance` feature.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use chronicle_projections::{fixtures, replay_from_zero, snapshot};
use chronicle_schemas::{
    Actor, EVENT_BYTES_MAX, Envelope, Event, Hash, RunId, SessionId, Timestamp, encode_record,
};
use proptest::prelude::*;
use tokio_stream::StreamExt;

use crate::{
    Error, IndexOp, IndexRange, Options, RECORD_BATCH_BYTES_MAX, RECORD_BATCH_OPS_MAX,
    RECORD_KEY_BYTES_MAX, RECORD_VALUE_BYTES_MAX, RecordOp, RecordRange, SESSION_ID_BYTES_MAX,
    Store,
};

/// Makes the stores a case runs against.
pub trait Factory {
    /// A new, empty store with these settings.
    fn create(&self, opts: Options) -> Store;

    /// The store closed and opened again: what a restart keeps. A store that keeps nothing
    /// beyond its handles (memory) comes back as it is.
    fn reopen(&self, store: Store) -> Store;

    /// A second handle on the same store, as another process would open it. A store that one
    /// process holds alone (sled locks its directory; memory is one process's) gives the same
    /// handle, and the cases that use this hold for it trivially.
    fn another_handle(&self, store: &Store) -> Store {
        store.clone()
    }

    /// Cuts every connection of the store to its database, as a failing network or a restarted
    /// server would, at whatever point each one is (in the middle of a commit, say). Nothing for
    /// a store without connections.
    fn cut_connections(&self, store: &Store) {
        let _ = store;
    }
}

/// Stores in memory.
#[derive(Debug, Default)]
pub struct Memory;

impl Factory for Memory {
    fn create(&self, opts: Options) -> Store {
        Store::memory_with(opts)
    }

    fn reopen(&self, store: Store) -> Store {
        store
    }
}

/// sled stores, each in a real temporary directory (sled's `temporary(true)` would skip
/// syncing); the directories go when the factory does.
#[derive(Debug, Default)]
pub struct Sled {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

impl Factory for Sled {
    fn create(&self, opts: Options) -> Store {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Store::open(dir.path(), opts).expect("the sled store opens");
        self.dirs.lock().expect("not poisoned").push(dir);
        store
    }

    fn reopen(&self, store: Store) -> Store {
        let dir = store
            .dir()
            .expect("a sled store has a directory")
            .to_path_buf();
        let opts = store.options().clone();
        // The last handle closes sled (its writer is joined), so the directory can be opened again.
        drop(store);
        Store::open(dir, opts).expect("the sled store opens again")
    }
}

/// Stores on a real PostgreSQL (see `chronicle_testkit::postgres`), each in a schema of its own,
/// dropped when the factory goes.
#[derive(Debug, Default)]
pub struct Postgres {
    schemas: Mutex<Vec<crate::Target>>,
}

impl Factory for Postgres {
    fn create(&self, opts: Options) -> Store {
        let url = chronicle_testkit::postgres::url_with_schema(
            &chronicle_testkit::postgres::fresh_schema(),
        );
        let store = Store::open_postgres(&url, opts, crate::Create::IfAbsent)
            .expect("the PostgreSQL store opens");
        let target = store.postgres().expect("a PostgreSQL store").clone();
        self.schemas.lock().expect("not poisoned").push(target);
        store
    }

    fn reopen(&self, store: Store) -> Store {
        let target = store.postgres().expect("a PostgreSQL store").clone();
        let opts = store.options().clone();
        drop(store);
        Store::from_log(
            crate::PgLog::open_target(target, opts, crate::Create::No)
                .expect("the PostgreSQL store opens again"),
        )
    }

    fn another_handle(&self, store: &Store) -> Store {
        let target = store.postgres().expect("a PostgreSQL store").clone();
        Store::from_log(
            crate::PgLog::open_target(target, store.options().clone(), crate::Create::No)
                .expect("a second handle opens"),
        )
    }

    fn cut_connections(&self, store: &Store) {
        let target = store.postgres().expect("a PostgreSQL store");
        crate::PgLog::terminate_connections(target).expect("the connections are cut");
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        for target in self.schemas.lock().expect("not poisoned").drain(..) {
            let _ = crate::PgLog::drop_schema(&target);
        }
    }
}

/// One `#[tokio::test]` (one `#[test]` for the property) per conformance case, for the stores
/// `$factory` makes.
#[macro_export]
#[doc(hidden)]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@async $factory;
            a_new_store_is_empty_and_healthy,
            offsets_and_seqs_are_dense_from_zero,
            sixteen_writers_on_sixteen_runs,
            same_expected_seq_exactly_one_wins,
            bad_appends_write_nothing,
            reads_keep_their_bounds,
            follow_never_skips_or_repeats,
            heads_sessions_and_terminal_flags,
            store_backed_replay_with_snapshots_equals_from_zero,
            live_run_applies_and_snapshots_as_it_appends,
            snapshots_are_a_deletable_cache,
            blobs_are_content_addressed_and_checked,
            an_event_at_the_limit_is_stored_and_one_byte_over_is_refused,
            verify_is_clean_and_reports_the_heads,
            records_put_get_replace_delete,
            racing_puts_if_absent_exactly_one_stores,
            records_list_by_prefix_in_key_order,
            bad_record_keys_and_oversized_values_write_nothing,
            records_survive_a_reopen_and_stay_out_of_verify,
            a_stopped_store_refuses_record_writes,
            record_writes_apply_whole_or_not_at_all,
            record_pages_go_both_ways_within_their_prefix,
            written_appends_are_durable_once_waited_for,
            the_index_applies_batches_whole_and_pages_both_ways,
            bad_index_keys_write_nothing_and_a_stopped_store_refuses_the_index,
            two_handles_append_at_once_with_one_winner_per_seq,
            a_follower_on_one_handle_sees_the_other_handles_appends_in_order,
            cut_connections_leave_acknowledged_present_and_refused_absent,
        );
        #[test]
        fn the_store_behaves_like_a_map() {
            $crate::conformance::the_store_behaves_like_a_map(&$factory);
        }
    };
    (@async $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::conformance::$case(&$factory).await;
            }
        )*
    };
}

// ------------------------------------------------------------------------------------ helpers

pub fn run(i: u128) -> RunId {
    RunId::from_u128(0x5EED_0000 + i)
}

pub fn run_started(session: &str) -> Event {
    Event::RunStarted {
        session_id: SessionId::from(session),
        user_id: None,
        request_id: "req".into(),
        query: "강남구 아파트 시세 조회".into(),
        config: Default::default(),
        parent: None,
        owner: None,
        traceparent: None,
    }
}

pub fn note(i: u64) -> Event {
    Event::Reasoning {
        message: format!("step {i}"),
    }
}

/// A reasoning event of `bytes` letters that do not compress, so that a large one is stored out
/// of line (see `chronicle_testkit::incompressible_text`).
fn reasoning(bytes: usize, fill: char) -> Event {
    Event::Reasoning {
        message: chronicle_testkit::incompressible_text(bytes, u64::from(fill)),
    }
}

fn completed() -> Event {
    Event::RunCompleted {
        total_execution_time_ms: 1,
    }
}

/// Every offset from 0 is present exactly once, every run's seqs are dense from 0, everything is
/// durable, and `verify` agrees. Returns the number of events.
pub fn assert_dense(store: &Store) -> u64 {
    let all: Vec<_> = store.read_range(0, u64::MAX).map(Result::unwrap).collect();
    let mut seqs: BTreeMap<RunId, u64> = BTreeMap::new();
    for (i, env) in all.iter().enumerate() {
        assert_eq!(env.offset, i as u64);
        let next = seqs.entry(env.run_id).or_insert(0);
        assert_eq!(env.seq, *next, "run {} seq gap", env.run_id);
        *next += 1;
    }
    assert_eq!(store.durable_next_offset(), all.len() as u64);
    assert!(store.get(all.len() as u64).unwrap().is_none());
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problem);
    assert_eq!(report.next_offset, all.len() as u64);
    assert_eq!(report.events, all.len() as u64);
    all.len() as u64
}

/// Appends `n` events to run `r` one by one (a `RunStarted`, then notes).
async fn fill_run(store: &Store, r: u128, n: u64) {
    let run = run(r);
    for seq in 0..n {
        let ev = if seq == 0 {
            run_started("f")
        } else {
            note(seq)
        };
        store.append(run, seq, vec![ev]).await.unwrap();
    }
}

// -------------------------------------------------------------------------------------- cases

pub async fn a_new_store_is_empty_and_healthy(f: &dyn Factory) {
    let store = f.create(Options::default());
    assert_eq!(store.durable_next_offset(), 0);
    assert_eq!(*store.watch_head().borrow(), 0);
    assert!(store.get(0).unwrap().is_none());
    assert_eq!(store.read_range(0, u64::MAX).count(), 0);
    assert_eq!(store.runs().count(), 0);
    assert!(store.run_head(run(0)).unwrap().is_none());
    assert_eq!(store.durable_seq(run(0)).unwrap(), None);
    let report = store.verify().unwrap();
    assert!(report.ok() && report.heads.is_empty() && report.next_offset == 0);
    assert_eq!(store.health(), crate::StorageHealth::Ok);
    assert_eq!(store.failure(), None);
    assert_eq!(*store.watch_failure().borrow(), None);
    store.flush().unwrap();
}

/// Interleaved appends of 1 to 3 events over three runs take consecutive offsets across the log
/// and consecutive seqs per run, and each append's events share one `at`.
pub async fn offsets_and_seqs_are_dense_from_zero(f: &dyn Factory) {
    let store = f.create(Options::default());
    let mut next_seq = [0u64; 3];
    let mut next_offset = 0;
    for i in 0..30u64 {
        let k = (i % 3) as usize;
        let n = 1 + i % 3;
        let events: Vec<Event> = (0..n)
            .map(|j| {
                if next_seq[k] + j == 0 {
                    run_started(&format!("s{k}"))
                } else {
                    note(i)
                }
            })
            .collect();
        let envs = store
            .append(run(k as u128), next_seq[k], events)
            .await
            .unwrap();
        let offsets: Vec<u64> = envs.iter().map(|e| e.offset).collect();
        let seqs: Vec<u64> = envs.iter().map(|e| e.seq).collect();
        assert_eq!(offsets, (next_offset..next_offset + n).collect::<Vec<_>>());
        assert_eq!(seqs, (next_seq[k]..next_seq[k] + n).collect::<Vec<_>>());
        assert!(
            envs.iter()
                .all(|e| e.at == envs[0].at && e.run_id == run(k as u128))
        );
        next_offset += n;
        next_seq[k] += n;
        assert_eq!(store.durable_next_offset(), next_offset);
    }
    assert_eq!(assert_dense(&store), next_offset);
    for (k, &n) in next_seq.iter().enumerate() {
        let head = store.run_head(run(k as u128)).unwrap().unwrap();
        assert_eq!(head.next_seq(), n);
        assert_eq!(store.durable_seq(run(k as u128)).unwrap(), Some(n - 1));
    }
}

pub async fn sixteen_writers_on_sixteen_runs(f: &dyn Factory) {
    let store = f.create(Options::default());
    let mut tasks = Vec::new();
    for r in 0..16u128 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let run = run(r);
            store
                .append(run, 0, vec![run_started(&format!("s{r}"))])
                .await
                .unwrap();
            let mut seq = 1;
            for i in 0..40u64 {
                let batch: Vec<Event> = (0..=i % 2).map(|k| note(seq + k)).collect();
                let n = batch.len() as u64;
                let envs = store.append(run, seq, batch).await.unwrap();
                assert_eq!(
                    envs.iter().map(|e| e.seq).collect::<Vec<_>>(),
                    (seq..seq + n).collect::<Vec<_>>()
                );
                seq += n;
            }
            seq
        }));
    }
    let mut total = 0;
    for (r, t) in tasks.into_iter().enumerate() {
        let events = t.await.unwrap();
        total += events;
        let head = store.run_head(run(r as u128)).unwrap().unwrap();
        assert_eq!(head.last_seq + 1, events);
        assert_eq!(
            store.read_run(run(r as u128), 0, u64::MAX).count() as u64,
            events
        );
    }
    assert_eq!(assert_dense(&store), total);
}

pub async fn same_expected_seq_exactly_one_wins(f: &dyn Factory) {
    let store = f.create(Options::default());
    let r = run(1);
    store.append(r, 0, vec![run_started("s")]).await.unwrap();
    for round in 1..=20u64 {
        let (a, b) = tokio::join!(
            store.append(r, round, vec![note(round)]),
            store.append(r, round, vec![note(round + 1000)]),
        );
        let (wins, losses): (Vec<_>, Vec<_>) = [a, b].into_iter().partition(Result::is_ok);
        assert_eq!((wins.len(), losses.len()), (1, 1), "round {round}");
        match losses.into_iter().next().unwrap() {
            Err(Error::Conflict {
                run_id,
                expected,
                actual,
            }) => {
                assert_eq!((run_id, expected, actual), (r, round, round + 1));
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
    }
    assert_eq!(assert_dense(&store), 21);
}

pub async fn bad_appends_write_nothing(f: &dyn Factory) {
    let store = f.create(Options::default());
    let r = run(2);
    store.append(r, 0, vec![run_started("s")]).await.unwrap();
    let before = store.durable_next_offset();

    let err = store.append(r, 5, vec![note(5)]).await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict { run_id, expected: 5, actual: 1 } if run_id == r),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("conflict on run {r}: expected seq 5, but the run is at seq 1")
    );

    // One oversized event refuses the whole append, including the valid event before it.
    let err = store
        .append(r, 1, vec![note(1), reasoning(70_000, 'x')])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Encode { index: 1, .. }), "{err}");
    let (bytes, max) = err.event_too_large().expect("a size error");
    assert!(bytes > max && max == EVENT_BYTES_MAX, "{err}");
    assert_eq!(
        err.to_string(),
        format!("event #1 of the append: event Reasoning of {bytes} bytes exceeds {max}")
    );

    let err = store.append(run(3), 0, vec![note(0)]).await.unwrap_err();
    assert!(
        matches!(err, Error::FirstEventNotRunStarted { run_id, kind: "Reasoning" } if run_id == run(3)),
        "{err}"
    );
    let err = store
        .append(r, 1, vec![note(1), run_started("s")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::RunStartedNotFirst { run_id, seq: 2 } if run_id == r),
        "{err}"
    );
    for (session, bytes, contains_nul) in [
        ("a\0b".to_owned(), 3, true),
        (String::new(), 0, false),
        (
            "s".repeat(SESSION_ID_BYTES_MAX + 1),
            SESSION_ID_BYTES_MAX + 1,
            false,
        ),
    ] {
        let err = store
            .append(run(4), 0, vec![run_started(&session)])
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::BadSessionId { bytes: b, max: SESSION_ID_BYTES_MAX, contains_nul: n } if b == bytes && n == contains_nul),
            "{err}"
        );
    }
    let err = store.append(r, 1, vec![]).await.unwrap_err();
    assert!(
        matches!(err, Error::EmptyAppend { run_id } if run_id == r),
        "{err}"
    );
    // A conflict is told before anything else about the append.
    let err = store.append(r, 7, vec![]).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");

    assert_eq!(store.durable_next_offset(), before);
    assert!(store.run_head(run(3)).unwrap().is_none());
    assert!(store.run_head(run(4)).unwrap().is_none());
    assert_eq!(store.session_runs(&"a\0b".into()).unwrap(), []);
    assert_eq!(store.run_head(r).unwrap().unwrap().last_seq, 0);
    assert_eq!(assert_dense(&store), 1);
    // The run continues at the seq the conflict named, and the longest session id is fine.
    store.append(r, 1, vec![note(1)]).await.unwrap();
    let longest = "s".repeat(SESSION_ID_BYTES_MAX);
    store
        .append(run(4), 0, vec![run_started(&longest)])
        .await
        .unwrap();
    assert_eq!(store.session_runs(&SessionId(longest)).unwrap(), [run(4)]);
    assert_eq!(assert_dense(&store), 3);
}

/// `read_range(from, to)` is `from..to`, `read_run(run, from, to)` is `from..=to`; both stop at
/// the end of what is stored and are empty when the range is.
pub async fn reads_keep_their_bounds(f: &dyn Factory) {
    let store = f.create(Options::default());
    fill_run(&store, 0, 6).await;
    fill_run(&store, 1, 4).await;
    let offsets = |from, to| -> Vec<u64> {
        store
            .read_range(from, to)
            .map(|e| e.unwrap().offset)
            .collect()
    };
    assert_eq!(offsets(0, 10), (0..10).collect::<Vec<_>>());
    assert_eq!(offsets(3, 5), [3, 4]);
    assert_eq!(offsets(8, 1000), [8, 9]);
    assert_eq!(offsets(5, 5), [] as [u64; 0]);
    assert_eq!(offsets(7, 2), [] as [u64; 0]);
    assert_eq!(offsets(10, u64::MAX), [] as [u64; 0]);
    assert_eq!(offsets(u64::MAX, u64::MAX), [] as [u64; 0]);
    let starts = |from, to| -> Vec<u64> {
        let started = |e: &Event| matches!(e, Event::RunStarted { .. });
        store
            .read_range_where(from, to, started)
            .map(|e| e.unwrap().offset)
            .collect()
    };
    assert_eq!(starts(0, 10), [0, 6]);
    assert_eq!(starts(1, 10), [6]);
    assert_eq!(starts(1, 6), [] as [u64; 0]);
    assert_eq!(starts(7, 2), [] as [u64; 0]);
    let seqs = |r, from, to| -> Vec<u64> {
        store
            .read_run(run(r), from, to)
            .map(|e| e.unwrap().seq)
            .collect()
    };
    assert_eq!(seqs(0, 0, u64::MAX), (0..6).collect::<Vec<_>>());
    assert_eq!(seqs(0, 2, 4), [2, 3, 4]);
    assert_eq!(seqs(0, 3, 3), [3]);
    assert_eq!(seqs(1, 2, 100), [2, 3]);
    assert_eq!(seqs(0, 4, 3), [] as [u64; 0]);
    assert_eq!(seqs(1, 4, u64::MAX), [] as [u64; 0]);
    assert_eq!(seqs(9, 0, u64::MAX), [] as [u64; 0]);
    assert!(
        store
            .read_run(run(1), 0, u64::MAX)
            .all(|e| e.unwrap().run_id == run(1))
    );
    assert_eq!(store.get(9).unwrap().unwrap().run_id, run(1));
    assert!(store.get(10).unwrap().is_none());
    assert!(store.get(u64::MAX).unwrap().is_none());
}

pub async fn follow_never_skips_or_repeats(f: &dyn Factory) {
    let store = f.create(Options::default());
    fill_run(&store, 0, 50).await;
    let from_start = store.follow(0);
    let from_middle = store.follow(37);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { fill_run(&store, 1, 150).await })
    };
    let a: Vec<u64> = from_start
        .take(200)
        .map(|e| e.unwrap().offset)
        .collect()
        .await;
    let b: Vec<u64> = from_middle
        .take(163)
        .map(|e| e.unwrap().offset)
        .collect()
        .await;
    writer.await.unwrap();
    assert_eq!(a, (0..200).collect::<Vec<_>>());
    assert_eq!(b, (37..200).collect::<Vec<_>>());
    // A follower from the head waits for what comes next.
    let mut tail = store.follow(200);
    fill_run(&store, 2, 1).await;
    assert_eq!(tail.next().await.unwrap().unwrap().offset, 200);
}

pub async fn heads_sessions_and_terminal_flags(f: &dyn Factory) {
    let store = f.create(Options::default());
    let (a, b, c) = (run(10), run(11), run(12));
    let started = store
        .append(a, 0, vec![run_started("thread-1")])
        .await
        .unwrap();
    store
        .append(b, 0, vec![run_started("thread-2")])
        .await
        .unwrap();
    store
        .append(c, 0, vec![run_started("thread-1")])
        .await
        .unwrap();
    assert_eq!(store.session_runs(&"thread-1".into()).unwrap(), [a, c]);
    assert_eq!(store.session_runs(&"thread-2".into()).unwrap(), [b]);
    assert_eq!(store.session_runs(&"thread-".into()).unwrap(), []);
    assert_eq!(store.session_runs(&"thread-10".into()).unwrap(), []);
    let head = store.run_head(a).unwrap().unwrap();
    assert_eq!(head.session_id, SessionId::from("thread-1"));
    assert_eq!(
        (head.last_seq, head.last_offset, head.last_hash),
        (0, 0, started[0].hash)
    );
    assert_eq!(
        (head.created_at, head.updated_at),
        (started[0].at, started[0].at)
    );
    assert!(!head.terminal);
    let done = store.append(a, 1, vec![completed()]).await.unwrap();
    let head = store.run_head(a).unwrap().unwrap();
    assert!(head.terminal);
    assert_eq!((head.last_seq, head.last_offset), (1, 3));
    assert_eq!(
        (head.created_at, head.updated_at),
        (started[0].at, done[0].at)
    );
    let restore = Event::RunRestored {
        checkpoint_id: "cp_001".into(),
        to_seq: 0,
        by: Actor::user("u"),
    };
    store.append(a, 2, vec![restore]).await.unwrap();
    assert!(!store.run_head(a).unwrap().unwrap().terminal);
    // Later events of the session's runs do not change its index.
    assert_eq!(store.session_runs(&"thread-1".into()).unwrap(), [a, c]);
    let mut ids = vec![a, b, c];
    ids.sort();
    let runs: Vec<RunId> = store.runs().map(|h| h.unwrap().run_id).collect();
    assert_eq!(runs, ids, "every run, in run-id order");
}

/// The scenario-1 fixture, a restore and a restore onto the abandoned branch, stored for real:
/// snapshot-based state equals from-zero replay at every seq.
pub async fn store_backed_replay_with_snapshots_equals_from_zero(f: &dyn Factory) {
    let store = f.create(Options {
        snapshot_interval_events: 4,
        ..Options::default()
    });
    let r = run(20);
    let mut events = fixtures::scenario_1_events();
    let n = events.len() as u64;
    events.push(Event::RunRestored {
        checkpoint_id: "cp_006".into(),
        to_seq: 29,
        by: Actor::user("local"),
    });
    events.push(note(1));
    events.push(Event::RunRestored {
        checkpoint_id: "cp_009".into(),
        to_seq: n - 4,
        by: Actor::user("local"),
    });
    let last = events.len() as u64 - 1;
    store.append(r, 0, events).await.unwrap();
    assert_eq!(store.write_snapshots(r).unwrap(), (last as usize + 1) / 4);
    assert_eq!(store.write_snapshots(r).unwrap(), 0, "none is due twice");
    for seq in 0..=last {
        let with = store.state_at(r, seq).unwrap();
        let zero = replay_from_zero(&store.source(r), seq).unwrap();
        assert_eq!(with, zero, "seq {seq}");
    }
    assert_eq!(
        store
            .state_at(r, last)
            .unwrap()
            .supervisor
            .restored_from
            .unwrap()
            .as_str(),
        "cp_009"
    );
    store.clear_snapshots().unwrap();
    assert!(store.latest_snapshot(r, last).unwrap().is_none());
    assert_eq!(
        store.state_at(r, last).unwrap(),
        replay_from_zero(&store.source(r), last).unwrap()
    );
}

/// The live write path snapshots every K events on its own, and its state is the replay's.
pub async fn live_run_applies_and_snapshots_as_it_appends(f: &dyn Factory) {
    let store = f.create(Options {
        snapshot_interval_events: 5,
        ..Options::default()
    });
    let r = run(30);
    let mut live = store.load(r).unwrap();
    assert_eq!(live.state().next_seq(), 0);
    let events = fixtures::scenario_1_events();
    let total = events.len() as u64;
    for chunk in events.chunks(3) {
        live.append(chunk.to_vec()).await.unwrap();
    }
    assert_eq!(
        live.state(),
        &replay_from_zero(&store.source(r), total - 1).unwrap()
    );
    // Every 5 events, and at checkpoints and the end once 1 (5 / 4) event passed since.
    let mut schedule = snapshot::Schedule::new(5);
    let mut at_checkpoints = 0;
    for env in store.read_run(r, 0, total - 1) {
        let env = env.unwrap();
        let seq = env.seq;
        let due = schedule.due(&env);
        at_checkpoints += usize::from(due && (seq + 1) % 5 != 0);
        let snap = store
            .latest_snapshot(r, seq)
            .unwrap()
            .and_then(|s| s.last_seq);
        assert_eq!(snap == Some(seq), due, "seq {seq}: snapshot at {snap:?}");
    }
    assert!(
        at_checkpoints > 0,
        "the scenario has checkpoints between the counted snapshots"
    );
    // A second writer that loaded the same head loses, and the first one's state is untouched.
    let mut stale = store.load(r).unwrap();
    live.append(vec![note(1)]).await.unwrap();
    let err = stale.append(vec![note(2)]).await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict { expected, actual, .. } if expected == total && actual == total + 1)
    );
    assert_eq!(store.load(r).unwrap().state(), live.state());
}

/// Snapshots read back whole (also one far larger than a small stored value), the newest at or
/// before the seq asked wins, and deleting them all changes no state.
pub async fn snapshots_are_a_deletable_cache(f: &dyn Factory) {
    let store = f.create(Options::default());
    let r = run(7);
    store.append(r, 0, vec![run_started("s")]).await.unwrap();
    store.append(r, 1, vec![note(1), note(2)]).await.unwrap();
    let at0 = store.state_at(r, 0).unwrap();
    let mut big = store.state_at(r, 2).unwrap();
    big.supervisor.query = "q".repeat(20_000);
    store.put_snapshot(&at0).unwrap();
    store.put_snapshot(&big).unwrap();
    // A state of no run is not cached (and is no error).
    store
        .put_snapshot(&chronicle_projections::RunState::default())
        .unwrap();
    assert_eq!(store.latest_snapshot(r, 0).unwrap().as_ref(), Some(&at0));
    assert_eq!(store.latest_snapshot(r, 1).unwrap().as_ref(), Some(&at0));
    assert_eq!(store.latest_snapshot(r, 2).unwrap().as_ref(), Some(&big));
    assert_eq!(store.latest_snapshot(r, u64::MAX).unwrap(), Some(big));
    assert!(store.latest_snapshot(run(8), u64::MAX).unwrap().is_none());
    store.clear_snapshots().unwrap();
    assert!(store.latest_snapshot(r, u64::MAX).unwrap().is_none());
    assert_eq!(
        store.state_at(r, 2).unwrap(),
        replay_from_zero(&store.source(r), 2).unwrap()
    );
}

pub async fn blobs_are_content_addressed_and_checked(f: &dyn Factory) {
    let store = f.create(Options::default());
    let payload = vec![7u8; 200_000];
    let blob = store.put_blob(&payload).unwrap();
    assert_eq!(blob.hash, Hash::of_content(&payload));
    assert_eq!(blob.bytes, 200_000);
    assert_eq!(store.read_blob(&blob).unwrap(), payload);
    assert_eq!(store.put_blob(&payload).unwrap(), blob, "idempotent");
    let empty = store.put_blob(b"").unwrap();
    assert_eq!(store.read_blob(&empty).unwrap(), b"");
    let unknown = chronicle_schemas::BlobRef {
        hash: Hash::of_content(b"never stored"),
        bytes: 12,
    };
    assert!(matches!(store.read_blob(&unknown), Err(Error::BlobMissing(h)) if h == unknown.hash));
}

pub async fn an_event_at_the_limit_is_stored_and_one_byte_over_is_refused(f: &dyn Factory) {
    let store = f.create(Options::default());
    store
        .append(run(0), 0, vec![run_started("s")])
        .await
        .unwrap();
    // The record's size depends on the message only (offset and seq stay one-byte integers and
    // any current timestamp is a 9-byte one): find the message that makes it exactly the limit.
    let now = Timestamp(1_700_000_000_000_000);
    let size = |n: usize| {
        encode_record(1, run(0), 1, now, &Hash::ZERO, &reasoning(n, 'x'))
            .map(|(r, _)| r.len())
            .unwrap_or(usize::MAX)
    };
    let n = (60_000..66_000)
        .find(|&n| size(n) == EVENT_BYTES_MAX)
        .unwrap();
    let before = store.durable_next_offset();
    let err = store
        .append(run(0), 1, vec![reasoning(n + 1, 'x')])
        .await
        .unwrap_err();
    assert_eq!(
        err.event_too_large(),
        Some((EVENT_BYTES_MAX + 1, EVENT_BYTES_MAX)),
        "{err}"
    );
    assert_eq!(store.durable_next_offset(), before, "nothing was written");
    let env = store
        .append(run(0), 1, vec![reasoning(n, 'x')])
        .await
        .unwrap();
    assert_eq!(env[0].encode().unwrap().len(), EVENT_BYTES_MAX);
    assert_eq!(store.get(1).unwrap().unwrap(), env[0]);
    assert_eq!(assert_dense(&store), 2);
}

/// A value of every size class (empty, small, and split into many sled values), distinct per
/// `fill` so a stale piece would show.
fn record_value(bytes: usize, fill: u8) -> Vec<u8> {
    (0..bytes)
        .map(|i| fill.wrapping_add((i % 251) as u8))
        .collect()
}

/// Every key and value `records("")` lists, for comparing whole stores.
fn all_records(store: &Store) -> Vec<(String, Vec<u8>)> {
    store.records("").unwrap()
}

pub async fn records_put_get_replace_delete(f: &dyn Factory) {
    let store = f.create(Options::default());
    assert_eq!(store.record("thread/1").unwrap(), None);
    for (fill, size) in [
        (1u8, 10usize),
        (2, 0),
        (3, RECORD_VALUE_BYTES_MAX),
        (4, 5000),
        (5, 3),
    ] {
        let value = record_value(size, fill);
        store.put_record("thread/1", &value).unwrap();
        assert_eq!(
            store.record("thread/1").unwrap(),
            Some(value.clone()),
            "{size} bytes"
        );
        assert_eq!(all_records(&store), vec![("thread/1".to_owned(), value)]);
    }
    store.put_record("thread/2", b"two").unwrap();
    store.delete_record("thread/1").unwrap();
    assert_eq!(store.record("thread/1").unwrap(), None);
    store.delete_record("thread/1").unwrap();
    store.delete_record("never/there").unwrap();
    assert_eq!(
        all_records(&store),
        vec![("thread/2".to_owned(), b"two".to_vec())]
    );
    // Records are not events.
    assert_eq!(store.durable_next_offset(), 0);
}

/// `put_record_if_absent`: of sixteen callers racing for one key, exactly one stores and every
/// other one is answered that value; what was stored stays (also across a reopen), large values
/// included, and a bad key or value writes nothing.
pub async fn racing_puts_if_absent_exactly_one_stores(f: &dyn Factory) {
    let store = f.create(Options::default());
    for (round, size) in [(0u8, 5usize), (1, 5000), (2, RECORD_VALUE_BYTES_MAX)] {
        let key = format!("claim/{round}");
        let barrier = Arc::new(std::sync::Barrier::new(16));
        let racers: Vec<_> = (0..16u8)
            .map(|i| {
                let (store, barrier, key) = (store.clone(), barrier.clone(), key.clone());
                std::thread::spawn(move || {
                    let mine = record_value(size, i + 1);
                    barrier.wait();
                    (
                        mine.clone(),
                        store.put_record_if_absent(&key, &mine).unwrap(),
                    )
                })
            })
            .collect();
        let answers: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            racers.into_iter().map(|r| r.join().unwrap()).collect();
        let winners: Vec<&Vec<u8>> = answers
            .iter()
            .filter(|(_, there)| there.is_none())
            .map(|(mine, _)| mine)
            .collect();
        assert_eq!(winners.len(), 1, "{size} bytes: exactly one stores");
        let stored = winners[0].clone();
        for (_, there) in &answers {
            if let Some(there) = there {
                assert_eq!(there, &stored, "a loser is answered the winner's value");
            }
        }
        assert_eq!(store.record(&key).unwrap(), Some(stored.clone()));
        assert_eq!(
            store.put_record_if_absent(&key, b"late").unwrap(),
            Some(stored)
        );
    }
    assert!(matches!(
        store.put_record_if_absent("", b"v"),
        Err(Error::BadRecordKey { .. })
    ));
    let over = record_value(RECORD_VALUE_BYTES_MAX + 1, 9);
    assert!(matches!(
        store.put_record_if_absent("claim/over", &over),
        Err(Error::RecordTooLarge { .. })
    ));
    let store = f.reopen(store);
    assert_eq!(
        store
            .put_record_if_absent("claim/0", b"after")
            .unwrap()
            .map(|v| v.len()),
        Some(5)
    );
    assert_eq!(store.record("claim/over").unwrap(), None);
}

/// `records(prefix)` is exactly the keys starting with `prefix`, in byte order of their UTF-8.
pub async fn records_list_by_prefix_in_key_order(f: &dyn Factory) {
    let store = f.create(Options::default());
    let keys = [
        "thread/b",
        "run/1",
        "thread/a/x",
        "threads",
        "thread/é",
        "thread/a",
        "thread0",
        "thread/",
        "t",
    ];
    for (i, k) in keys.iter().enumerate() {
        store
            .put_record(k, &record_value(100 * i, i as u8))
            .unwrap();
    }
    let listed = |prefix: &str| -> Vec<String> {
        store
            .records(prefix)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    assert_eq!(
        listed("thread/"),
        ["thread/", "thread/a", "thread/a/x", "thread/b", "thread/é"]
    );
    let mut sorted: Vec<&str> = keys.to_vec();
    sorted.sort_unstable();
    assert_eq!(listed(""), sorted);
    assert_eq!(listed("thread/a"), ["thread/a", "thread/a/x"]);
    assert_eq!(listed("thread/é"), ["thread/é"]);
    assert!(listed("nothing").is_empty());
    assert!(listed("thread/c").is_empty());
    for (k, v) in store.records("").unwrap() {
        let i = keys.iter().position(|x| *x == k).unwrap();
        assert_eq!(v, record_value(100 * i, i as u8), "{k}");
    }
}

pub async fn bad_record_keys_and_oversized_values_write_nothing(f: &dyn Factory) {
    let store = f.create(Options::default());
    store.put_record("kept", b"before").unwrap();
    let longest = "k".repeat(RECORD_KEY_BYTES_MAX);
    store.put_record(&longest, b"at the limit").unwrap();
    // 257 two-byte characters: 514 bytes though only 257 chars.
    let too_long = "é".repeat(RECORD_KEY_BYTES_MAX / 2 + 1);
    let before = all_records(&store);
    for key in ["", too_long.as_str()] {
        let err = store.put_record(key, b"v").unwrap_err();
        assert!(
            matches!(err, Error::BadRecordKey { bytes, max: RECORD_KEY_BYTES_MAX } if bytes == key.len()),
            "{err}"
        );
        assert!(matches!(
            store.delete_record(key),
            Err(Error::BadRecordKey { .. })
        ));
    }
    let over = vec![9u8; RECORD_VALUE_BYTES_MAX + 1];
    for key in ["kept", "new"] {
        let err = store.put_record(key, &over).unwrap_err();
        assert!(
            matches!(err, Error::RecordTooLarge { bytes, max } if bytes == over.len() && max == RECORD_VALUE_BYTES_MAX),
            "{err}"
        );
    }
    assert_eq!(all_records(&store), before, "nothing was written");
    assert_eq!(
        store.failure(),
        None,
        "a refused write does not stop the store"
    );
}

/// Records outlive a restart as they were acknowledged (large ones whole), and `verify` does
/// not read them: a store with records and no events verifies as an empty log.
pub async fn records_survive_a_reopen_and_stay_out_of_verify(f: &dyn Factory) {
    let store = f.create(Options::default());
    store
        .put_record("a", &record_value(RECORD_VALUE_BYTES_MAX, 1))
        .unwrap();
    store.put_record("b", b"bee").unwrap();
    store.put_record("c", &record_value(20_000, 3)).unwrap();
    store.put_record("c", &record_value(9_000, 4)).unwrap();
    store.put_record("d", b"gone").unwrap();
    store.delete_record("d").unwrap();
    let before = all_records(&store);
    let store = f.reopen(store);
    assert_eq!(all_records(&store), before);
    assert_eq!(store.record("c").unwrap(), Some(record_value(9_000, 4)));
    assert_eq!(store.record("d").unwrap(), None);
    let report = store.verify().unwrap();
    assert!(report.ok() && report.events == 0 && report.heads.is_empty());
    store.put_record("e", b"after the restart").unwrap();
    fill_run(&store, 0, 2).await;
    assert_eq!(assert_dense(&store), 2);
    assert_eq!(store.records("").unwrap().len(), 4);
}

/// After a fail-stop, writes of records (and appends and blobs) are refused with `Stopped` and
/// change nothing; reads still answer.
pub async fn a_stopped_store_refuses_record_writes(f: &dyn Factory) {
    let store = f.create(Options::default());
    store.put_record("kept", b"before").unwrap();
    store.log.fail_stop("a drill");
    let stopped = |r: crate::Result<()>| matches!(r, Err(Error::Stopped(why)) if why == "a drill");
    assert!(stopped(store.put_record("kept", b"after")));
    assert!(stopped(store.put_record("new", b"after")));
    assert!(stopped(store.delete_record("kept")));
    assert!(stopped(store.put_blob(b"blob").map(drop)));
    let append = store.append(run(0), 0, vec![run_started("s")]).await;
    assert!(stopped(append.map(drop)));
    assert_eq!(
        all_records(&store),
        vec![("kept".to_owned(), b"before".to_vec())]
    );
    assert_eq!(store.failure().as_deref(), Some("a drill"));
    assert_eq!(*store.watch_failure().borrow(), Some("a drill".to_owned()));
    assert_eq!(
        store.health(),
        crate::StorageHealth::Failed("a drill".into())
    );
}

/// `records_apply`: every put and delete of a write, or none — a failed expectation, a bad key
/// or value anywhere, a write over its limits, or a stopped store writes nothing; large values
/// go whole; what was applied survives a reopen.
pub async fn record_writes_apply_whole_or_not_at_all(f: &dyn Factory) {
    use RecordOp::{Delete, Expect, Put};
    let store = f.create(Options::default());
    store.put_record("a", b"old a").unwrap();
    store.put_record("gone", b"to delete").unwrap();
    let big = record_value(RECORD_VALUE_BYTES_MAX, 5);
    store
        .records_apply(&[
            Expect("a".into(), Some(b"old a".to_vec())),
            Expect("b".into(), None),
            Put("a".into(), b"new a".to_vec()),
            Put("b".into(), big.clone()),
            Delete("gone".into()),
            Delete("never".into()),
        ])
        .unwrap();
    let applied = vec![
        ("a".to_owned(), b"new a".to_vec()),
        ("b".to_owned(), big.clone()),
    ];
    assert_eq!(all_records(&store), applied);
    store.records_apply(&[]).unwrap();

    // An expectation that does not hold (a value, a large value, an absence) writes nothing.
    for expect in [
        Expect("a".into(), Some(b"old a".to_vec())),
        Expect("b".into(), Some(record_value(RECORD_VALUE_BYTES_MAX, 6))),
        Expect("a".into(), None),
        Expect("c".into(), Some(Vec::new())),
    ] {
        let key = expect.key().to_owned();
        let err = store
            .records_apply(&[Put("c".into(), b"c".to_vec()), Delete("a".into()), expect])
            .unwrap_err();
        assert!(
            matches!(&err, Error::RecordConflict { key: k } if *k == key),
            "{err}"
        );
        assert_eq!(all_records(&store), applied, "nothing was written");
    }
    store
        .records_apply(&[Expect("b".into(), Some(big.clone()))])
        .unwrap();

    // A bad key or value anywhere, or a write over its limits: nothing is written.
    let too_long = "k".repeat(RECORD_KEY_BYTES_MAX + 1);
    let over = vec![1u8; RECORD_VALUE_BYTES_MAX + 1];
    type Refusal = fn(&Error) -> bool;
    let bad: Vec<(Vec<RecordOp>, Refusal)> = vec![
        (
            vec![
                Put("c".into(), b"c".to_vec()),
                Put(String::new(), b"v".to_vec()),
            ],
            |e| matches!(e, Error::BadRecordKey { bytes: 0, .. }),
        ),
        (
            vec![Put("c".into(), b"c".to_vec()), Delete(too_long)],
            |e| matches!(e, Error::BadRecordKey { .. }),
        ),
        (vec![Delete("a".into()), Put("c".into(), over)], |e| {
            matches!(e, Error::RecordTooLarge { .. })
        }),
        (
            (0..=RECORD_BATCH_OPS_MAX)
                .map(|i| Put(format!("many/{i}"), Vec::new()))
                .collect(),
            |e| matches!(e, Error::RecordBatchTooLarge { ops, max_ops: RECORD_BATCH_OPS_MAX, .. } if *ops == RECORD_BATCH_OPS_MAX + 1),
        ),
        (
            (0..=RECORD_BATCH_BYTES_MAX / RECORD_VALUE_BYTES_MAX)
                .map(|i| Put(format!("big/{i}"), big.clone()))
                .collect(),
            |e| matches!(e, Error::RecordBatchTooLarge { bytes, max_bytes: RECORD_BATCH_BYTES_MAX, .. } if *bytes > RECORD_BATCH_BYTES_MAX),
        ),
    ];
    for (ops, is) in bad {
        let err = store.records_apply(&ops).unwrap_err();
        assert!(is(&err), "{err}");
        assert_eq!(all_records(&store), applied, "nothing was written");
    }
    // At the limits: stored.
    let at: Vec<RecordOp> = (0..RECORD_BATCH_OPS_MAX)
        .map(|i| Put(format!("many/{i:04}"), Vec::new()))
        .collect();
    store.records_apply(&at).unwrap();
    assert_eq!(store.records("many/").unwrap().len(), RECORD_BATCH_OPS_MAX);
    let deletes: Vec<RecordOp> = (0..RECORD_BATCH_OPS_MAX)
        .map(|i| Delete(format!("many/{i:04}")))
        .collect();
    store.records_apply(&deletes).unwrap();

    let store = f.reopen(store);
    assert_eq!(all_records(&store), applied);

    store.log.fail_stop("a drill");
    let err = store
        .records_apply(&[Put("c".into(), b"c".to_vec())])
        .unwrap_err();
    assert!(
        matches!(&err, Error::Stopped(why) if why == "a drill"),
        "{err}"
    );
    assert_eq!(all_records(&store), applied);
}

/// `records_range`: the keys of a prefix (and none beside it) in pages of at most `limit`, after
/// a key, in key order or against it; paging on from each page's last key visits each key once.
pub async fn record_pages_go_both_ways_within_their_prefix(f: &dyn Factory) {
    let store = f.create(Options::default());
    // Neighbours on both sides of the prefix, and keys whose bytes sort past ASCII.
    let keys: Vec<String> = (0..23)
        .map(|i| format!("ix/{i:02}"))
        .chain(["ix/é".into(), "ix/\u{ffff}".into(), "ix/\u{10ffff}z".into()])
        .collect();
    for k in keys
        .iter()
        .chain(&["iw".to_owned(), "ix".to_owned(), "iy/0".to_owned()])
    {
        store.put_record(k, k.as_bytes()).unwrap();
    }
    let mut sorted = keys.clone();
    sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for reverse in [false, true] {
        for limit in [1, 4, 26, 100] {
            let mut seen = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = store
                    .records_range(&RecordRange {
                        prefix: "ix/".into(),
                        after: after.clone(),
                        reverse,
                        limit,
                    })
                    .unwrap();
                assert!(page.len() <= limit);
                for (k, v) in &page {
                    assert_eq!(v, k.as_bytes());
                }
                let full = page.len() == limit;
                after = page.last().map(|(k, _)| k.clone());
                seen.extend(page.into_iter().map(|(k, _)| k));
                if !full {
                    break;
                }
            }
            let mut want = sorted.clone();
            if reverse {
                want.reverse();
            }
            assert_eq!(seen, want, "reverse {reverse}, limit {limit}");
        }
    }
    let r = RecordRange::prefix("ix/", 0);
    assert!(store.records_range(&r).unwrap().is_empty());
    let r = RecordRange::prefix("nothing/", 5);
    assert!(store.records_range(&r).unwrap().is_empty());
    // A prefix whose last byte cannot be incremented in place still ends where it should.
    store.put_record("\u{10ffff}", b"x").unwrap();
    store.put_record("\u{10ffff}a", b"y").unwrap();
    let r = RecordRange {
        prefix: "\u{10ffff}".into(),
        after: None,
        reverse: true,
        limit: 10,
    };
    let page: Vec<String> = store
        .records_range(&r)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(page, ["\u{10ffff}a", "\u{10ffff}"]);
}

/// Appends only written keep every rule of `append` (dense offsets and seqs, conflicts write
/// nothing, snapshots when due); once `wait_durable` covers them they are durable and survive a
/// reopen; a stopped store refuses both.
pub async fn written_appends_are_durable_once_waited_for(f: &dyn Factory) {
    let store = f.create(Options {
        snapshot_interval_events: 5,
        ..Options::default()
    });
    let r = run(31);
    let mut live = store.load(r).unwrap();
    let events = fixtures::scenario_1_events();
    let total = events.len() as u64;
    let mut next = 0;
    for chunk in events.chunks(3) {
        let envs = live.append_written(chunk.to_vec()).await.unwrap();
        for env in &envs {
            assert_eq!((env.offset, env.seq), (next, next));
            next += 1;
        }
    }
    let stale = store.append_written(r, 1, vec![note(1)]).await.unwrap_err();
    assert!(matches!(stale, Error::Conflict { expected: 1, actual, .. } if actual == total));
    live.durable().await.unwrap();
    assert!(store.durable_next_offset() >= total);
    assert_eq!(store.durable_seq(r).unwrap(), Some(total - 1));
    for seq in (4..total).step_by(5) {
        let snap = store.latest_snapshot(r, seq).unwrap();
        assert_eq!(snap.and_then(|s| s.last_seq), Some(seq));
    }
    let expected = live.state().clone();
    drop(live);
    let store = f.reopen(store);
    assert_eq!(assert_dense(&store), total);
    assert_eq!(store.load(r).unwrap().state(), &expected);
    store.log.fail_stop("a drill");
    let stopped = |r: crate::Result<()>| matches!(r, Err(Error::Stopped(why)) if why == "a drill");
    assert!(stopped(store.wait_durable(total).await));
    let refused = store.append_written(r, total, vec![note(2)]).await;
    assert!(stopped(refused.map(drop)));
}

/// `verify` walks a clean log without a problem and reports every run's newest (seq, hash);
/// `verify_run` reports only its run's chain.
pub async fn verify_is_clean_and_reports_the_heads(f: &dyn Factory) {
    let store = f.create(Options::default());
    for r in 0..4u128 {
        fill_run(&store, r, 3 + r as u64).await;
    }
    store
        .append(run(1), 4, vec![note(9), note(10)])
        .await
        .unwrap();
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problem);
    assert_eq!((report.events, report.next_offset), (20, 20));
    let heads: BTreeMap<RunId, (u64, Hash)> = store
        .runs()
        .map(|h| {
            let h = h.unwrap();
            (h.run_id, (h.last_seq, h.last_hash))
        })
        .collect();
    assert_eq!(report.heads, heads);
    assert_eq!(report.heads[&run(1)].0, 5);
    let one = store.verify_run(run(2)).unwrap();
    assert!(one.ok(), "{:?}", one.problem);
    assert_eq!(one.events, 20, "offsets are still walked");
    assert_eq!(
        one.heads.into_iter().collect::<Vec<_>>(),
        [(run(2), heads[&run(2)])]
    );
}

// ------------------------------------------------------------------------------ the property

/// One step of the property: an append (possibly conflicting or empty), a restart, or a read.
#[derive(Clone, Debug)]
enum Op {
    Append {
        run: u8,
        /// Added to the run's next seq: anything but 0 is a conflict.
        skew: i8,
        events: u8,
    },
    Reopen,
    ReadRange {
        from: u8,
        to: u8,
    },
    ReadRun {
        run: u8,
        from: u8,
        to: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..4u8, prop_oneof![6 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)], 0..4u8)
            .prop_map(|(run, skew, events)| Op::Append { run, skew, events }),
        1 => Just(Op::Reopen),
        1 => (0..60u8, 0..60u8).prop_map(|(from, to)| Op::ReadRange { from, to }),
        1 => (0..4u8, 0..20u8, 0..20u8).prop_map(|(run, from, to)| Op::ReadRun { run, from, to }),
    ]
}

/// What the store must hold: every acknowledged envelope by offset.
#[derive(Default)]
struct Model {
    log: BTreeMap<u64, Envelope>,
    /// Per run, the offsets of its seqs.
    runs: HashMap<RunId, Vec<u64>>,
}

impl Model {
    fn next_seq(&self, run: RunId) -> u64 {
        self.runs.get(&run).map_or(0, |o| o.len() as u64)
    }

    fn run_events(&self, run: RunId) -> Vec<Envelope> {
        self.runs
            .get(&run)
            .into_iter()
            .flatten()
            .map(|o| self.log[o].clone())
            .collect()
    }

    /// The store holds exactly the model: the log, every run, every head, the sessions, the
    /// durable head, and a clean verification with the model's heads.
    fn check(&self, store: &Store) {
        let all: Vec<Envelope> = store.read_range(0, u64::MAX).map(Result::unwrap).collect();
        assert_eq!(all, self.log.values().cloned().collect::<Vec<_>>());
        assert_eq!(store.durable_next_offset(), self.log.len() as u64);
        let mut heads = BTreeMap::new();
        for r in (0..4).map(run) {
            let events = self.run_events(r);
            let stored: Vec<_> = store.read_run(r, 0, u64::MAX).map(Result::unwrap).collect();
            assert_eq!(stored, events, "run {r}");
            let head = store.run_head(r).unwrap();
            match events.last() {
                None => assert_eq!(head, None),
                Some(last) => {
                    let head = head.unwrap();
                    assert_eq!(
                        (head.last_seq, head.last_offset, head.last_hash),
                        (last.seq, last.offset, last.hash)
                    );
                    assert_eq!(head.created_at, events[0].at);
                    heads.insert(r, (last.seq, last.hash));
                }
            }
        }
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:?}", report.problem);
        assert_eq!(report.heads, heads);
        let mut sessions: BTreeMap<SessionId, Vec<(Timestamp, RunId)>> = BTreeMap::new();
        for r in heads.keys() {
            let first = &self.run_events(*r)[0];
            let Event::RunStarted { session_id, .. } = &first.event else {
                panic!("seq 0 is RunStarted")
            };
            sessions
                .entry(session_id.clone())
                .or_default()
                .push((first.at, *r));
        }
        for (session, mut runs) in sessions {
            runs.sort();
            let want: Vec<RunId> = runs.into_iter().map(|(_, r)| r).collect();
            assert_eq!(store.session_runs(&session).unwrap(), want);
        }
    }
}

/// Applies one op to the store and the model, checking the store's answer against the model's.
async fn step(f: &dyn Factory, store: Store, model: &mut Model, op: Op) -> Store {
    match op {
        Op::Append {
            run: k,
            skew,
            events,
        } => {
            let r = run(k.into());
            let actual = model.next_seq(r);
            let expected = actual.saturating_add_signed(skew.into());
            let events: Vec<Event> = (0..u64::from(events))
                .map(|i| {
                    if expected + i == 0 {
                        run_started(&format!("session-{}", k % 2))
                    } else {
                        note(i)
                    }
                })
                .collect();
            let n = events.len() as u64;
            let result = store.append(r, expected, events).await;
            if expected != actual {
                assert!(
                    matches!(result, Err(Error::Conflict { run_id, expected: e, actual: a })
                        if run_id == r && e == expected && a == actual),
                    "{result:?}"
                );
            } else if n == 0 {
                assert!(
                    matches!(result, Err(Error::EmptyAppend { .. })),
                    "{result:?}"
                );
            } else {
                let envs = result.unwrap();
                let first_offset = model.log.len() as u64;
                let mut prev = model
                    .runs
                    .get(&r)
                    .and_then(|o| o.last())
                    .map_or(Hash::ZERO, |o| model.log[o].hash);
                for (i, env) in (0u64..).zip(&envs) {
                    assert_eq!(
                        (env.offset, env.run_id, env.seq, env.prev_hash),
                        (first_offset + i, r, actual + i, prev)
                    );
                    prev = env.hash;
                    model.runs.entry(r).or_default().push(env.offset);
                    model.log.insert(env.offset, env.clone());
                }
            }
            assert_eq!(store.durable_next_offset(), model.log.len() as u64);
            store
        }
        Op::Reopen => {
            let store = f.reopen(store);
            model.check(&store);
            store
        }
        Op::ReadRange { from, to } => {
            let (from, to) = (u64::from(from), u64::from(to));
            let stored: Vec<_> = store.read_range(from, to).map(Result::unwrap).collect();
            let want: Vec<_> = model
                .log
                .range(from..to.max(from))
                .map(|(_, e)| e.clone())
                .collect();
            assert_eq!(stored, want, "read_range({from}, {to})");
            store
        }
        Op::ReadRun { run: k, from, to } => {
            let r = run(k.into());
            let (from, to) = (u64::from(from), u64::from(to));
            let stored: Vec<_> = store.read_run(r, from, to).map(Result::unwrap).collect();
            let want: Vec<_> = model
                .run_events(r)
                .into_iter()
                .filter(|e| from <= e.seq && e.seq <= to)
                .collect();
            assert_eq!(stored, want, "read_run({r}, {from}, {to})");
            store
        }
    }
}

/// Model-based: across random appends (conflicting and empty ones included), reads and
/// restarts, the store behaves like a `BTreeMap<offset, Envelope>` with a seq list per run.
pub fn the_store_behaves_like_a_map(f: &dyn Factory) {
    let config = proptest::test_runner::Config {
        cases: 24,
        failure_persistence: None,
        ..Default::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&proptest::collection::vec(op(), 1..40), |ops| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let mut store = f.create(Options::default());
        let mut model = Model::default();
        for op in ops {
            store = rt.block_on(step(f, store, &mut model, op));
        }
        model.check(&store);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

// ------------------------------------------------------------------------------------- index

fn put(k: &str, v: &str) -> IndexOp {
    IndexOp::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

fn keys_of(entries: &[crate::IndexEntry]) -> Vec<String> {
    entries
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// A batch puts and deletes and moves the watermark together; pages go either way from a
/// cursor, within their prefix and their limit; all of it survives a reopen once flushed.
pub async fn the_index_applies_batches_whole_and_pages_both_ways(f: &dyn Factory) {
    let store = f.create(Options::default());
    assert_eq!(store.index_watermark().unwrap(), 0);
    assert!(
        store
            .index_range(&IndexRange::prefix(b"r/", 10))
            .unwrap()
            .is_empty()
    );
    let ops: Vec<IndexOp> = (0..10)
        .map(|i| put(&format!("r/{i}"), &format!("v{i}")))
        .chain([put("s/0", "other"), put("q/9", "before")])
        .collect();
    store.index_apply(&ops, 0, 7).unwrap();
    let e = store.index_apply(&[put("z", "lost")], 3, 8).unwrap_err();
    assert!(
        matches!(
            e,
            Error::IndexConflict {
                expected: 3,
                actual: 7
            }
        ),
        "{e}"
    );
    assert_eq!(store.index_get(b"z").unwrap(), None);
    store
        .index_apply(
            &[IndexOp::Delete(b"r/3".to_vec()), put("r/4", "four")],
            7,
            9,
        )
        .unwrap();
    assert_eq!(store.index_watermark().unwrap(), 9);
    assert_eq!(store.index_get(b"r/4").unwrap(), Some(b"four".to_vec()));
    assert_eq!(store.index_get(b"r/3").unwrap(), None);
    let page = |after: Option<&str>, reverse, limit| {
        let r = IndexRange::prefix_after(b"r/", after.map(str::as_bytes), reverse, limit);
        keys_of(&store.index_range(&r).unwrap())
    };
    assert_eq!(page(None, false, 3), ["r/0", "r/1", "r/2"]);
    assert_eq!(page(Some("2"), false, 3), ["r/4", "r/5", "r/6"]);
    assert_eq!(page(Some("8"), false, 3), ["r/9"]);
    assert_eq!(page(None, true, 2), ["r/9", "r/8"]);
    assert_eq!(page(Some("5"), true, 3), ["r/4", "r/2", "r/1"]);
    assert_eq!(page(Some("0"), true, 3), Vec::<String>::new());
    assert_eq!(page(None, false, 0), Vec::<String>::new());
    // A range that is empty by its bounds answers nothing (and does not panic).
    let empty = IndexRange {
        start: std::ops::Bound::Excluded(b"r/5".to_vec()),
        end: std::ops::Bound::Excluded(b"r/5".to_vec()),
        reverse: false,
        limit: 10,
    };
    assert!(store.index_range(&empty).unwrap().is_empty());
    let before = store.index_range(&IndexRange::prefix(b"", 100)).unwrap();
    store.flush().unwrap();
    let store = f.reopen(store);
    assert_eq!(store.index_watermark().unwrap(), 9);
    let all = IndexRange {
        start: std::ops::Bound::Unbounded,
        end: std::ops::Bound::Unbounded,
        reverse: false,
        limit: 100,
    };
    let after = store.index_range(&all).unwrap();
    assert_eq!(keys_of(&after).len(), 11, "{:?}", keys_of(&after));
    assert_eq!(before, after);
}

/// A key that is empty, too long or starts with a 0 byte, or a value over the limit, fails the
/// whole batch and writes nothing; a stopped store refuses index writes and still reads.
pub async fn bad_index_keys_write_nothing_and_a_stopped_store_refuses_the_index(f: &dyn Factory) {
    let store = f.create(Options::default());
    store.index_apply(&[put("a", "1")], 0, 1).unwrap();
    let long = vec![b'k'; crate::INDEX_KEY_BYTES_MAX + 1];
    let bad: [Vec<IndexOp>; 4] = [
        vec![put("b", "2"), IndexOp::Put(Vec::new(), b"x".to_vec())],
        vec![put("b", "2"), IndexOp::Put(long, b"x".to_vec())],
        vec![put("b", "2"), IndexOp::Delete(b"\0watermark".to_vec())],
        vec![
            put("b", "2"),
            IndexOp::Put(b"c".to_vec(), vec![0; RECORD_VALUE_BYTES_MAX + 1]),
        ],
    ];
    for ops in bad {
        let e = store.index_apply(&ops, 1, 5).unwrap_err();
        assert!(
            matches!(e, Error::BadRecordKey { .. } | Error::RecordTooLarge { .. }),
            "{e}"
        );
        assert_eq!(store.index_watermark().unwrap(), 1);
        assert_eq!(store.index_get(b"b").unwrap(), None);
    }
    store.log.fail_stop("a drill");
    let e = store.index_apply(&[put("b", "2")], 1, 2).unwrap_err();
    assert!(
        matches!(e, Error::Stopped(ref why) if why == "a drill"),
        "{e}"
    );
    assert_eq!(store.index_get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.index_watermark().unwrap(), 1);
}

// ------------------------------------------------------------------- a store processes share

/// Two handles on one store (two processes on one database) race on the same runs and append
/// to their own: offsets stay dense across both, of two appends with one `expected_seq` exactly
/// one wins, and every acknowledged event is stored once.
pub async fn two_handles_append_at_once_with_one_winner_per_seq(f: &dyn Factory) {
    let a = f.create(Options::default());
    let b = f.another_handle(&a);
    const RUNS: u128 = 6;
    const SEQS: u64 = 25;
    let mut tasks = Vec::new();
    for r in 0..RUNS {
        for (side, store) in [(0u8, a.clone()), (1u8, b.clone())] {
            tasks.push(tokio::spawn(async move {
                // Both handles append every seq of the shared run; a loser learns the run moved.
                let shared = run(100 + r);
                let mut wins = Vec::new();
                for seq in 0..SEQS {
                    let ev = if seq == 0 {
                        run_started(&format!("shared{r}"))
                    } else {
                        note(seq)
                    };
                    loop {
                        match store.append(shared, seq, vec![ev.clone()]).await {
                            Ok(envs) => {
                                wins.push((seq, envs[0].hash));
                                break;
                            }
                            Err(Error::Conflict { actual, .. }) if actual > seq => break,
                            // The other side has not written seq - 1 yet.
                            Err(Error::Conflict { .. }) => tokio::task::yield_now().await,
                            Err(e) => panic!("append to a shared run: {e}"),
                        }
                    }
                }
                // And a run of its own, with nobody to race.
                let own = run(200 + r * 2 + u128::from(side));
                store
                    .append(own, 0, vec![run_started("own")])
                    .await
                    .unwrap();
                for seq in 1..SEQS {
                    store.append(own, seq, vec![note(seq)]).await.unwrap();
                }
                wins
            }));
        }
    }
    let mut won: BTreeMap<(u128, u64), usize> = BTreeMap::new();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = i as u128 / 2;
        for (seq, hash) in t.await.unwrap() {
            *won.entry((r, seq)).or_default() += 1;
            let stored = a.read_run(run(100 + r), seq, seq).next().unwrap().unwrap();
            assert_eq!(stored.hash, hash, "the winner's event is the one stored");
        }
    }
    for r in 0..RUNS {
        for seq in 0..SEQS {
            assert_eq!(
                won.get(&(r, seq)),
                Some(&1),
                "run {r} seq {seq}: one winner"
            );
        }
    }
    let events = assert_dense(&a);
    assert_eq!(events, RUNS as u64 * SEQS * 3);
    assert_eq!(assert_dense(&b), events, "both handles read the same log");
}

/// What one handle appends, a follower on the other sees: every offset once, in order, the same
/// events.
pub async fn a_follower_on_one_handle_sees_the_other_handles_appends_in_order(f: &dyn Factory) {
    let a = f.create(Options::default());
    let b = f.another_handle(&a);
    let follower = b.follow(0);
    let writer = {
        let a = a.clone();
        tokio::spawn(async move {
            let mut hashes = Vec::new();
            for r in 0..4u128 {
                let envs = a
                    .append(run(300 + r), 0, vec![run_started("f")])
                    .await
                    .unwrap();
                hashes.extend(envs.iter().map(|e| (e.offset, e.hash)));
                for seq in 1..30u64 {
                    let envs = a.append(run(300 + r), seq, vec![note(seq)]).await.unwrap();
                    hashes.extend(envs.iter().map(|e| (e.offset, e.hash)));
                }
            }
            hashes
        })
    };
    let seen: Vec<(u64, Hash)> = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        follower
            .take(120)
            .map(|e| {
                let e = e.unwrap();
                (e.offset, e.hash)
            })
            .collect(),
    )
    .await
    .expect("the follower on the other handle saw every append");
    assert_eq!(seen, writer.await.unwrap());
}

/// Connections cut again and again while appends go on: every acknowledged append is stored,
/// and an append that was refused is not (its run continues at the seq it would have taken).
/// The ones cut during a commit are the case this is for: their outcome is learned, not guessed.
pub async fn cut_connections_leave_acknowledged_present_and_refused_absent(f: &dyn Factory) {
    let store = f.create(Options {
        pg_reconcile_ms: 120_000,
        // Connections cut while the log head is held, and answers to commits lost, on a store
        // that has them.
        pg_drill_hold_lock_ms: 5,
        pg_drill_lose_commit_answer_every: 7,
        ..Options::default()
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for r in 0..4u128 {
        let (store, stop) = (store.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let run = run(400 + r);
            let mut acked = Vec::new();
            let mut refused = 0u32;
            let mut seq = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || seq < 5 {
                let ev = if seq == 0 {
                    run_started("cut")
                } else {
                    note(seq)
                };
                match store.append(run, seq, vec![ev, note(seq + 1)]).await {
                    Ok(envs) => {
                        acked.extend(envs.iter().map(|e| (e.seq, e.hash)));
                        seq += 2;
                    }
                    // Refused: nothing of it was stored, so the same seq is free.
                    Err(Error::Unavailable(_)) => refused += 1,
                    Err(e) => panic!("run {r} seq {seq}: {e}"),
                }
                // A store whose appends never wait would hold the thread otherwise.
                tokio::task::yield_now().await;
            }
            (run, acked, refused)
        }));
    }
    for _ in 0..25 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        f.cut_connections(&store);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut results = Vec::new();
    for w in writers {
        results.push(w.await.unwrap());
    }
    // The client learns of a cut connection when it next reads it: give the pooled ones a
    // moment, and read again when one was refused for that.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let read = |run| -> Result<Vec<(u64, Hash)>, Error> {
        store
            .read_run(run, 0, u64::MAX)
            .map(|e| e.map(|e| (e.seq, e.hash)))
            .collect()
    };
    for (run, acked, refused) in results {
        eprintln!(
            "run {run}: {} events acknowledged, {refused} appends refused",
            acked.len()
        );
        let stored = loop {
            match read(run) {
                Err(Error::Unavailable(_)) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => break other.unwrap(),
            }
        };
        assert_eq!(stored, acked, "run {run}: exactly the acknowledged events");
    }
    while matches!(store.verify(), Err(Error::Unavailable(_))) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_dense(&store);
}
