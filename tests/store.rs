//! The event store, black-box: concurrency, optimistic conflicts, corruption and truncation,
//! tail-following, blobs, limits, restarts, and store-backed projections.

use std::collections::BTreeMap;
use std::sync::Arc;

use chronicle_engine::store::{Durability, Error, Options, Store};
use chronicle_projections::{fixtures, replay_from_zero};
use chronicle_schemas::{Actor, Event, Hash, RunId, SessionId};
use tokio_stream::StreamExt;

use crate::support::{note, open, run, run_started};

/// Every offset from 0 is present exactly once, and every run's seqs are dense from 0.
fn assert_dense(store: &Store) -> u64 {
    let all: Vec<_> = store.read_range(0, u64::MAX).map(Result::unwrap).collect();
    let mut seqs: BTreeMap<RunId, u64> = BTreeMap::new();
    for (i, env) in all.iter().enumerate() {
        assert_eq!(env.offset, i as u64);
        let next = seqs.entry(env.run_id).or_insert(0);
        assert_eq!(env.seq, *next, "run {} seq gap", env.run_id);
        *next += 1;
    }
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problem);
    assert_eq!(report.next_offset, all.len() as u64);
    all.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_on_sixteen_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_expected_seq_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
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

#[tokio::test]
async fn bad_appends_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let r = run(2);
    store.append(r, 0, vec![run_started("s")]).await.unwrap();
    let before = store.durable_next_offset();

    let err = store.append(r, 5, vec![note(5)]).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("conflict on run {r}: expected seq 5, but the run is at seq 1")
    );

    // One oversized event refuses the whole append, including the valid event before it.
    let big = Event::Reasoning {
        message: "x".repeat(70_000),
    };
    let err = store.append(r, 1, vec![note(1), big]).await.unwrap_err();
    assert!(
        err.to_string().contains("event #1") && err.to_string().contains("exceeds 65536"),
        "{err}"
    );

    let err = store.append(run(3), 0, vec![note(0)]).await.unwrap_err();
    assert!(err.to_string().contains("must be RunStarted"), "{err}");
    let err = store
        .append(r, 1, vec![run_started("s")])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("only be a run's first event"),
        "{err}"
    );
    let err = store
        .append(run(4), 0, vec![run_started("a\0b")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("without NUL"), "{err}");
    let err = store.append(r, 1, vec![]).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");

    assert_eq!(store.durable_next_offset(), before);
    assert!(store.run_head(run(3)).unwrap().is_none());
    assert_eq!(assert_dense(&store), 1);
    // The run continues at the seq the conflict named.
    store.append(r, 1, vec![note(1)]).await.unwrap();
}

/// Writes `n` events over 3 runs and closes the store; returns each event's (run, seq) by offset.
async fn populate(dir: &std::path::Path, n: u64) -> Vec<(RunId, u64)> {
    let store = open(dir);
    let mut index = Vec::new();
    let mut seqs = [0u64; 3];
    for i in 0..n {
        let k = (i % 3) as usize;
        let ev = if seqs[k] == 0 {
            run_started(&format!("s{k}"))
        } else {
            note(i)
        };
        let env = store
            .append(run(k as u128), seqs[k], vec![ev])
            .await
            .unwrap();
        index.push((env[0].run_id, env[0].seq));
        seqs[k] += 1;
    }
    index
}

/// The store's sled database, opened directly.
fn open_sled(dir: &std::path::Path) -> sled::Db {
    // Retry while a just-closed store's sled threads still hold the lock.
    let config = sled::Config::new()
        .path(dir.join("sled"))
        .flush_every_ms(None);
    (0..300)
        .find_map(|_| {
            config.open().ok().or_else(|| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                None
            })
        })
        .expect("sled opens")
}

fn with_sled<T>(dir: &std::path::Path, f: impl FnOnce(&sled::Tree, &sled::Tree) -> T) -> T {
    let db = open_sled(dir);
    let out = f(
        &db.open_tree("events").unwrap(),
        &db.open_tree("meta").unwrap(),
    );
    db.flush().unwrap();
    out
}

fn no_tail_check() -> Options {
    Options {
        open_verify_tail_events: 0,
        ..Options::default()
    }
}

#[tokio::test]
async fn a_flipped_byte_is_reported_at_its_offset() {
    for target in [0u64, 7, 29] {
        let dir = tempfile::tempdir().unwrap();
        populate(dir.path(), 30).await;
        with_sled(dir.path(), |events, _| {
            let key = target.to_be_bytes();
            let mut rec = events.get(key).unwrap().unwrap().to_vec();
            let i = rec.len() - 3;
            rec[i] ^= 0x20;
            events.insert(key, rec).unwrap();
        });
        // Open checks the tail (here: the whole log) and refuses, naming the offset...
        match Store::open(dir.path(), Options::default()) {
            Err(Error::Corrupt { offset, .. }) => assert_eq!(offset, target),
            other => panic!("open must refuse a corrupt tail, got {other:?}"),
        }
        // ...and a full verify of a store opened without the tail check names it too.
        let store = Store::open(dir.path(), no_tail_check()).unwrap();
        let problem = store.verify().unwrap().problem.expect("corruption found");
        assert_eq!(problem.offset, target, "{}", problem.reason);
        assert!(
            matches!(store.get(target), Err(Error::Corrupt { offset, .. }) if offset == target)
        );
    }
}

#[tokio::test]
async fn a_swapped_but_intact_record_breaks_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 12).await;
    // Offsets 3 and 6 are both run 0 (seq 1 and 2): swap their records. Each record hashes fine
    // alone, but claims another offset and breaks the chain.
    with_sled(dir.path(), |events, _| {
        let a = events.get(3u64.to_be_bytes()).unwrap().unwrap();
        let b = events.get(6u64.to_be_bytes()).unwrap().unwrap();
        events.insert(3u64.to_be_bytes(), b).unwrap();
        events.insert(6u64.to_be_bytes(), a).unwrap();
    });
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    assert_eq!(store.verify().unwrap().problem.unwrap().offset, 3);
}

#[tokio::test]
async fn a_truncated_tail_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 10).await;
    with_sled(dir.path(), |events, _| {
        events.remove(9u64.to_be_bytes()).unwrap().unwrap()
    });
    match Store::open(dir.path(), Options::default()) {
        Err(Error::Corrupt { offset: 9, reason }) => {
            assert!(reason.contains("meta records 10"), "{reason}")
        }
        other => panic!("open must refuse a truncated tail, got {other:?}"),
    }
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let problem = store.verify().unwrap().problem.unwrap();
    assert_eq!(problem.offset, 9);
    assert!(problem.reason.contains("truncated"), "{}", problem.reason);
}

#[tokio::test]
async fn a_run_cut_short_is_detected_by_its_head() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 10).await;
    // Drop the last record *and* make meta agree: only the run head still knows.
    with_sled(dir.path(), |events, meta| {
        events.remove(9u64.to_be_bytes()).unwrap().unwrap();
        meta.insert("next_offset", &9u64.to_be_bytes()).unwrap();
    });
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let report = store.verify().unwrap();
    let problem = report.problem.unwrap();
    assert_eq!(problem.offset, 9, "{}", problem.reason);
    assert!(
        problem.reason.contains("head says seq 3"),
        "{}",
        problem.reason
    );
}

#[tokio::test]
async fn repair_drops_only_an_undecodable_final_record() {
    let dir = tempfile::tempdir().unwrap();
    let index = populate(dir.path(), 10).await;
    with_sled(dir.path(), |events, _| {
        events
            .insert(9u64.to_be_bytes(), &b"\x01garbage"[..])
            .unwrap()
    });
    assert!(matches!(
        Store::open(dir.path(), Options::default()),
        Err(Error::Corrupt { offset: 9, .. })
    ));
    let repaired = Options {
        repair_truncate_tail: true,
        ..Options::default()
    };
    let store = Store::open(dir.path(), repaired).unwrap();
    assert_eq!(assert_dense(&store), 9);
    let (r, seq) = index[9];
    let head = store.run_head(r).unwrap().unwrap();
    assert_eq!(
        head.next_seq(),
        seq,
        "the head rolled back to the record before"
    );
    store.append(r, seq, vec![note(99)]).await.unwrap();
    assert_eq!(assert_dense(&store), 10);
}

#[tokio::test]
async fn reopen_keeps_everything_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let index = populate(dir.path(), 20).await;
    let store = open(dir.path());
    assert_eq!(store.durable_next_offset(), 20);
    for (offset, (r, seq)) in index.iter().enumerate() {
        let env = store.get(offset as u64).unwrap().unwrap();
        assert_eq!((env.run_id, env.seq), (*r, *seq));
    }
    let head = store.run_head(run(0)).unwrap().unwrap();
    assert_eq!(head.session_id, SessionId::from("s0"));
    let env = store
        .append(run(0), head.next_seq(), vec![note(0)])
        .await
        .unwrap();
    assert_eq!(env[0].offset, 20);
    assert_eq!(env[0].prev_hash, head.last_hash);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_never_skips_or_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    populate_store(&store, 0, 50).await;
    let from_start = store.follow(0);
    let from_middle = store.follow(37);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { populate_store(&store, 1, 150).await })
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
}

async fn populate_store(store: &Store, r: u128, n: u64) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_durability_acknowledges_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(
            dir.path(),
            Options {
                durability: Durability::Async,
                async_flush_ms: 5,
                ..Options::default()
            },
        )
        .unwrap();
        populate_store(&store, 7, 100).await;
        // Subscribers see events once the periodic barrier has covered them.
        let seen: Vec<_> = store.follow(0).take(100).collect().await;
        assert_eq!(seen.len(), 100);
    }
    let store = open(dir.path());
    assert_eq!(assert_dense(&store), 100);
}

#[tokio::test]
async fn blobs_are_content_addressed_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let payload = vec![7u8; 200_000];
    let blob = store.put_blob(&payload).unwrap();
    assert_eq!(blob.hash, Hash::of_content(&payload));
    assert_eq!(blob.bytes, 200_000);
    let path = dir.path().join("blobs").join(blob.hash.to_hex());
    assert!(path.exists());
    assert_eq!(store.read_blob(&blob).unwrap(), payload);
    assert_eq!(store.put_blob(&payload).unwrap(), blob, "idempotent");
    std::fs::write(&path, b"tampered").unwrap();
    assert!(matches!(
        store.read_blob(&blob),
        Err(Error::BlobCorrupt { .. })
    ));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(store.read_blob(&blob), Err(Error::BlobMissing(_))));
}

#[tokio::test]
async fn heads_sessions_and_terminal_flags() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let (a, b, c) = (run(10), run(11), run(12));
    store
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
    assert_eq!(store.session_runs(&"thread-".into()).unwrap(), []);
    store
        .append(
            a,
            1,
            vec![Event::RunCompleted {
                total_execution_time_ms: 1,
            }],
        )
        .await
        .unwrap();
    assert!(store.run_head(a).unwrap().unwrap().terminal);
    let restore = Event::RunRestored {
        checkpoint_id: "cp_001".into(),
        to_seq: 0,
        by: Actor::user("u"),
    };
    store.append(a, 2, vec![restore]).await.unwrap();
    assert!(!store.run_head(a).unwrap().unwrap().terminal);
    assert_eq!(store.runs().count(), 3);
}

/// The seed-000 fixture, a restore and a restore onto the abandoned branch, stored for real:
/// snapshot-based state equals from-zero replay at every seq.
#[tokio::test]
async fn store_backed_replay_with_snapshots_equals_from_zero() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        snapshot_interval_events: 4,
        ..Options::default()
    };
    let store = Arc::new(Store::open(dir.path(), opts).unwrap());
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
}

/// The live write path snapshots every K events on its own, and its state is the replay's.
#[tokio::test]
async fn live_run_applies_and_snapshots_as_it_appends() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        snapshot_interval_events: 5,
        ..Options::default()
    };
    let store = Store::open(dir.path(), opts).unwrap();
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
    for seq in 0..total {
        let due = (seq + 1) % 5 == 0;
        let snap = store
            .latest_snapshot(r, seq)
            .unwrap()
            .and_then(|s| s.last_seq);
        assert_eq!(snap == Some(seq), due, "seq {seq}: snapshot at {snap:?}");
    }
    // A second writer that loaded the same head loses, and the first one's state is untouched.
    let mut stale = store.load(r).unwrap();
    live.append(vec![note(1)]).await.unwrap();
    let err = stale.append(vec![note(2)]).await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict { expected, actual, .. } if expected == total && actual == total + 1)
    );
    assert_eq!(store.load(r).unwrap().state(), live.state());
}

// ------------------------------------------------------------ large records and the body file

fn reasoning(bytes: usize, fill: char) -> Event {
    Event::Reasoning {
        message: fill.to_string().repeat(bytes),
    }
}

/// Appends one RunStarted and `sizes.len()` events of those sizes to run 0; returns the store.
async fn large_events(dir: &std::path::Path, sizes: &[usize]) -> Store {
    let store = open(dir);
    store
        .append(run(0), 0, vec![run_started("s")])
        .await
        .unwrap();
    for (i, &n) in sizes.iter().enumerate() {
        let fill = char::from(b'a' + (i % 26) as u8);
        store
            .append(run(0), 1 + i as u64, vec![reasoning(n, fill)])
            .await
            .unwrap();
    }
    store
}

/// Every value in every sled tree of the store in `dir`.
fn sled_value_sizes(dir: &std::path::Path) -> Vec<usize> {
    let db = open_sled(dir);
    let mut sizes = Vec::new();
    for name in db.tree_names() {
        for kv in db.open_tree(name).unwrap().iter() {
            sizes.push(kv.unwrap().1.len());
        }
    }
    sizes
}

#[tokio::test]
async fn large_records_keep_sled_values_small_and_sled_writes_no_blob_file() {
    use chronicle_engine::store::SLED_VALUE_BYTES_MAX;
    let dir = tempfile::tempdir().unwrap();
    // 40-60 KB events, the size that made sled write unsynced page files of its own.
    let sizes: Vec<usize> = (0..60).map(|i| 40_000 + (i * 337) % 20_000).collect();
    let store = large_events(dir.path(), &sizes).await;
    let all: Vec<_> = store.read_range(0, u64::MAX).map(Result::unwrap).collect();
    assert_eq!(all.len(), 61);
    drop(store);
    let values = sled_value_sizes(dir.path());
    let largest = values.iter().max().copied().unwrap_or(0);
    assert!(
        largest <= SLED_VALUE_BYTES_MAX,
        "a sled value of {largest} bytes"
    );
    let sled_blobs: Vec<_> = std::fs::read_dir(dir.path().join("sled/blobs"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(sled_blobs.is_empty(), "sled wrote {sled_blobs:?}");
    // Everything reads back as written after a reopen, and verifies.
    let store = open(dir.path());
    assert_eq!(assert_dense(&store), 61);
    for (env, &n) in store.read_range(1, 61).map(Result::unwrap).zip(&sizes) {
        let Event::Reasoning { message } = &env.event else {
            panic!("{:?}", env.event.kind())
        };
        assert_eq!(message.len(), n);
    }
    assert_eq!(
        store
            .read_range(0, 61)
            .map(Result::unwrap)
            .collect::<Vec<_>>(),
        all
    );
}

#[tokio::test]
async fn an_event_at_the_limit_is_stored_and_one_byte_over_is_refused() {
    use chronicle_schemas::{EVENT_BYTES_MAX, Timestamp, encode_record};
    let dir = tempfile::tempdir().unwrap();
    let store = large_events(dir.path(), &[]).await;
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

#[tokio::test]
async fn a_flipped_byte_in_an_out_of_line_body_names_its_offset_run_and_seq() {
    let dir = tempfile::tempdir().unwrap();
    drop(large_events(dir.path(), &[50_000, 50_000, 50_000]).await);
    // The second body starts right after the first: flip a byte in its middle.
    let path = dir.path().join("bodies");
    let mut bytes = std::fs::read(&path).unwrap();
    let second = bytes.len() / 3 + bytes.len() / 6;
    bytes[second] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    match Store::open(dir.path(), Options::default()) {
        Err(Error::Corrupt { offset, reason }) => {
            assert_eq!(offset, 2, "{reason}");
            assert!(
                reason.contains(&format!("run {} seq 2", run(0))),
                "{reason}"
            );
        }
        other => panic!("open must refuse, got {other:?}"),
    }
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let problem = store.verify().unwrap().problem.expect("corruption found");
    assert_eq!(
        (problem.offset, problem.run_id, problem.seq),
        (2, Some(run(0)), Some(2)),
        "{}",
        problem.reason
    );
    assert!(matches!(
        store.get(2),
        Err(Error::Corrupt { offset: 2, .. })
    ));
    assert!(
        store.get(1).unwrap().is_some(),
        "the records around it read"
    );
    assert!(store.get(3).unwrap().is_some());
}

#[tokio::test]
async fn a_body_file_cut_short_names_the_first_record_it_lost() {
    let dir = tempfile::tempdir().unwrap();
    drop(large_events(dir.path(), &[30_000, 30_000, 30_000]).await);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("bodies"))
        .unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len / 2).unwrap();
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let problem = store.verify().unwrap().problem.expect("loss found");
    assert_eq!(problem.offset, 2, "{}", problem.reason);
    assert!(problem.reason.contains("body file"), "{}", problem.reason);
}

#[tokio::test]
async fn large_snapshots_go_to_blob_files_and_read_back() {
    use chronicle_engine::store::SLED_VALUE_BYTES_MAX;
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let r = run(7);
    store.append(r, 0, vec![run_started("s")]).await.unwrap();
    let mut state = store.state_at(r, 0).unwrap();
    // A state whose encoding is well over the sled value limit.
    state.supervisor.query = "q".repeat(3 * SLED_VALUE_BYTES_MAX);
    store.put_snapshot(&state).unwrap();
    assert_eq!(store.latest_snapshot(r, 0).unwrap(), Some(state));
    drop(store);
    assert!(
        sled_value_sizes(dir.path())
            .iter()
            .all(|&n| n <= SLED_VALUE_BYTES_MAX)
    );
}

#[tokio::test]
async fn an_append_that_would_eat_the_disk_reserve_is_refused_and_writes_nothing() {
    use chronicle_engine::store::StorageHealth;
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .append(run(0), 0, vec![run_started("s")])
        .await
        .unwrap();
    drop(store);
    // A reserve larger than any disk: every append finds the disk full.
    let opts = Options {
        disk_reserve_bytes: u64::MAX / 4,
        ..Options::default()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    let before = store.durable_next_offset();
    let err = store.append(run(0), 1, vec![note(1)]).await.unwrap_err();
    assert!(matches!(err, Error::StorageFull { .. }), "{err}");
    assert!(err.to_string().starts_with("the disk is full"), "{err}");
    assert!(matches!(store.health(), StorageHealth::Full { .. }));
    assert!(matches!(
        store.put_blob(b"x"),
        Err(Error::StorageFull { .. })
    ));
    assert_eq!(store.durable_next_offset(), before);
    // Reads work, and a failed append did not stop the store.
    assert_eq!(assert_dense(&store), 1);
    assert_eq!(store.failure(), None);
}
