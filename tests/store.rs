//! The sled store, black-box: what only a store on disk has — corruption and truncation named
//! by offset, repair, restarts, async durability, blob files, the body file and sled's value
//! sizes, the disk reserve, the data directory's modes, a damaged sled snapshot file, and a
//! damaged run in the listing. What every store promises is the conformance suite's, in the
//! `chronicle-store` crate.

use std::collections::BTreeMap;

use chronicle_engine::store::{
    Durability, Error, Options, SCHEMA_VERSION, SLED_VALUE_BYTES_MAX, Store, plain_events_value,
    stored_record_bytes,
};
use chronicle_schemas::{Envelope, Event, RunId, SessionId};
use tokio_stream::StreamExt;

use crate::support::{note, open, run, run_started};

/// Every offset from 0 is present exactly once, and every run's seqs are dense from 0.
/// Every event in the store, in offset order.
fn read_all(store: &Store) -> Vec<Envelope> {
    store.read_range(0, u64::MAX).map(Result::unwrap).collect()
}

fn assert_dense(store: &Store) -> u64 {
    let all = read_all(store);
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

/// The plain bytes of the `events` value under `key` (stored compressed or not); a test that
/// damages them stores them back plain, which the store reads as well.
fn plain(events: &sled::Tree, key: [u8; 8]) -> Vec<u8> {
    plain_events_value(&events.get(key).unwrap().unwrap()).unwrap()
}

/// Opens the store in `dir` with `repair_truncate_tail`.
fn open_repairing(dir: &std::path::Path) -> Store {
    let repair = Options {
        repair_truncate_tail: true,
        ..Options::default()
    };
    Store::open(dir, repair).unwrap()
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
            let mut rec = plain(events, key);
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

/// What a crash can leave of a batch: some or all of its groups, index entries, sessions and run
/// heads, but not its end mark (`meta`'s next offset, written last). Open drops all of it and the
/// log goes on from the end mark.
#[tokio::test]
async fn open_drops_a_batch_that_a_crash_left_without_its_end_mark() {
    let (going, new, ended) = (run(0), run(7), run(1));
    // How far the batch got: everything but the end mark, or its groups and index entries only
    // (the old heads still in place).
    for heads_written in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        // Offsets 0..9: runs 0, 1 and 2 with seqs 0..3 each; run 1 then ends at offset 9.
        populate(dir.path(), 9).await;
        {
            let store = open(dir.path());
            let done = Event::RunFailed {
                error: "over".into(),
            };
            store.append(ended, 3, vec![done]).await.unwrap();
        }
        let (old_heads, old_sessions) = {
            let db = open_sled(dir.path());
            let runs = db.open_tree("runs").unwrap();
            let heads: Vec<_> = [going, new, ended]
                .iter()
                .map(|r| runs.get(r.as_bytes()).unwrap())
                .collect();
            let sessions = db.open_tree("sessions").unwrap().len();
            (heads, sessions)
        };
        let before: Vec<_> = {
            let store = open(dir.path());
            let all = read_all(&store);
            // The batch: run 0 goes on and ends, run 7 starts, and the ended run gets a note.
            let failed = Event::RunFailed {
                error: "dropped".into(),
            };
            store
                .append(going, 3, vec![note(100), failed])
                .await
                .unwrap();
            let started = vec![run_started("s7"), note(102)];
            store.append(new, 0, started).await.unwrap();
            store.append(ended, 4, vec![note(103)]).await.unwrap();
            all
        };
        {
            // The end mark of the batch before, and the batch's own record of its offsets.
            let db = open_sled(dir.path());
            let meta = db.open_tree("meta").unwrap();
            meta.insert("next_offset", &10u64.to_be_bytes()).unwrap();
            let batch = [10u64.to_be_bytes(), 15u64.to_be_bytes()].concat();
            meta.insert("batch", batch).unwrap();
            if !heads_written {
                let runs = db.open_tree("runs").unwrap();
                for (r, head) in [going, new, ended].iter().zip(&old_heads) {
                    match head {
                        Some(h) => runs.insert(r.as_bytes(), h).unwrap(),
                        None => runs.remove(r.as_bytes()).unwrap(),
                    };
                }
            }
            db.flush().unwrap();
        }
        let store = open(dir.path());
        assert_eq!(assert_dense(&store), 10, "heads written: {heads_written}");
        let after = read_all(&store);
        assert_eq!(after, before);
        let head = store.run_head(going).unwrap().unwrap();
        assert_eq!((head.last_seq, head.last_offset), (2, 6));
        assert_eq!(head.last_hash, before[6].hash);
        assert_eq!(head.updated_at, before[6].at);
        assert!(!head.terminal);
        let head = store.run_head(ended).unwrap().unwrap();
        assert_eq!((head.last_seq, head.terminal), (3, true));
        assert!(store.run_head(new).unwrap().is_none());
        assert!(
            store
                .session_runs(&SessionId::from("s7"))
                .unwrap()
                .is_empty()
        );
        // No index entry leads past the end any more.
        for (r, n) in [(going, 3), (new, 0), (ended, 4)] {
            let seqs: Vec<u64> = store
                .read_run(r, 0, u64::MAX)
                .map(|e| e.unwrap().seq)
                .collect();
            assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "run {r}");
        }
        // The log goes on where the end mark says, for old runs and for the dropped new one.
        store.append(going, 3, vec![note(200)]).await.unwrap();
        store.append(new, 0, vec![run_started("s7")]).await.unwrap();
        drop(store);
        let store = open(dir.path());
        assert_eq!(assert_dense(&store), 12);
        assert_eq!(
            store.session_runs(&SessionId::from("s7")).unwrap(),
            vec![new]
        );
        assert_eq!(store.runs().count(), 4);
        drop(store);
        let sessions = open_sled(dir.path()).open_tree("sessions").unwrap().len();
        assert_eq!(sessions, old_sessions + 1);
    }
}

/// Records past the end mark that no unfinished batch explains are damage (or a `meta` gone
/// wrong), never dropped: open refuses and changes nothing.
#[tokio::test]
async fn open_refuses_records_past_the_end_mark_that_no_batch_explains() {
    let behind = 6u64.to_be_bytes().to_vec();
    let cases: [(&str, Vec<u8>); 2] = [("behind", behind), ("malformed", vec![0, 0, 9])];
    for (what, next_offset) in cases {
        let dir = tempfile::tempdir().unwrap();
        populate(dir.path(), 9).await;
        with_sled(dir.path(), |_, meta| {
            meta.insert("next_offset", next_offset).unwrap()
        });
        match Store::open(dir.path(), Options::default()) {
            Err(Error::Corrupt { reason, .. }) => {
                assert!(reason.contains("meta"), "{what}: {reason}")
            }
            other => panic!("{what}: open must refuse, got {other:?}"),
        }
        let events = with_sled(dir.path(), |events, _| events.len());
        assert_eq!(events, 9, "{what}: nothing dropped");
    }
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
    let store = open_repairing(dir.path());
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
async fn blob_files_are_content_addressed_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let payload = vec![7u8; 200_000];
    let blob = store.put_blob(&payload).unwrap();
    let path = dir.path().join("blobs").join(blob.hash.to_hex());
    assert_eq!(std::fs::read(&path).unwrap(), payload);
    std::fs::write(&path, b"tampered").unwrap();
    assert!(matches!(
        store.read_blob(&blob),
        Err(Error::BlobCorrupt { hash, .. }) if hash == blob.hash
    ));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(store.read_blob(&blob), Err(Error::BlobMissing(_))));
}

#[tokio::test]
async fn a_store_of_another_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 3).await;
    with_sled(dir.path(), |_, meta| {
        meta.insert("schema_version", &(SCHEMA_VERSION + 1).to_be_bytes())
            .unwrap()
    });
    match Store::open(dir.path(), Options::default()) {
        Err(Error::SchemaVersion { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION))
        }
        other => panic!("open must refuse another schema version, got {other:?}"),
    }
}

// ------------------------------------------------------------ large records and the body file

/// A reasoning event of `bytes` letters that do not compress (see `incompressible_text`), drawn
/// from a sequence seeded by `fill`.
fn reasoning(bytes: usize, fill: char) -> Event {
    Event::Reasoning {
        message: chronicle_testkit::incompressible_text(bytes, u64::from(fill)),
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
    let dir = tempfile::tempdir().unwrap();
    // 40-60 KB events, the size that made sled write unsynced page files of its own.
    let sizes: Vec<usize> = (0..60).map(|i| 40_000 + (i * 337) % 20_000).collect();
    let store = large_events(dir.path(), &sizes).await;
    let all = read_all(&store);
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

/// A body damaged on disk is not a crash's torn tail (a body is fsynced before the record that
/// points at it): open keeps every record and names the damaged one, whose reads fail naming it,
/// instead of refusing the whole store because the damage lies among the newest records.
#[tokio::test]
async fn a_damaged_body_before_the_last_record_opens_and_names_its_record() {
    let dir = tempfile::tempdir().unwrap();
    drop(large_events(dir.path(), &[50_000, 50_000, 50_000]).await);
    // The second body starts right after the first: flip a byte in its middle.
    let path = dir.path().join("bodies");
    let mut bytes = std::fs::read(&path).unwrap();
    let second = bytes.len() / 3 + bytes.len() / 6;
    bytes[second] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(dir.path(), Options::default())
        .unwrap_or_else(|e| panic!("open must keep the store, got {e}"));
    match store.get(2) {
        Err(Error::Corrupt { offset: 2, reason }) => {
            assert!(
                reason.contains(&format!("run {} seq 2", run(0))),
                "{reason}"
            );
        }
        other => panic!("the damaged record reads as damage, got {other:?}"),
    }
    let problem = store.verify().unwrap().problem.expect("corruption found");
    assert_eq!(
        (problem.offset, problem.run_id, problem.seq),
        (2, Some(run(0)), Some(2)),
        "{}",
        problem.reason
    );
    assert!(
        store.get(1).unwrap().is_some(),
        "the records around it read"
    );
    assert!(store.get(3).unwrap().is_some());
    // Nothing was dropped: the run goes on after its last record.
    assert_eq!(store.run_head(run(0)).unwrap().unwrap().last_seq, 3);
    store.append(run(0), 4, vec![note(4)]).await.unwrap();
    assert_eq!(store.durable_next_offset(), 5);
}

/// A damaged record in sled before the last one cannot be dropped (records after it were
/// acknowledged): open refuses, naming its offset and what to do.
#[tokio::test]
async fn a_damaged_record_before_the_last_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 10).await;
    with_sled(dir.path(), |events, _| {
        events
            .insert(7u64.to_be_bytes(), &b"\x01garbage"[..])
            .unwrap()
    });
    for opts in [
        Options::default(),
        Options {
            repair_truncate_tail: true,
            ..Options::default()
        },
    ] {
        match Store::open(dir.path(), opts) {
            Err(e @ Error::Corrupt { offset: 7, .. }) => {
                let message = e.to_string();
                assert!(message.contains("not the last"), "{message}");
                assert!(message.contains("chronicle verify"), "{message}");
                assert!(message.contains("backup"), "{message}");
            }
            other => panic!("open must refuse, got {other:?}"),
        }
    }
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

// ------------------------------------------------------------ groups: an append in one value

/// Run 0 starts with one event; run 1 appends `n` notes of about `bytes` each in one append;
/// run 0 adds one more. Returns the store (events at offsets 0, 1..=n+1, n+2).
async fn one_large_append(dir: &std::path::Path, n: u64, bytes: usize) -> Store {
    let store = open(dir);
    store
        .append(run(0), 0, vec![run_started("a")])
        .await
        .unwrap();
    let mut events = vec![run_started("b")];
    events.extend((0..n).map(|i| reasoning(bytes, char::from(b'a' + (i % 26) as u8))));
    store.append(run(1), 0, events).await.unwrap();
    store.append(run(0), 1, vec![note(7)]).await.unwrap();
    store
}

#[tokio::test]
async fn an_append_is_one_sled_value_and_reads_from_any_offset_or_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = one_large_append(dir.path(), 5, 50).await;
    let all = read_all(&store);
    assert_eq!(all.len(), 8);
    // Reads that start and end inside the group.
    let middle: Vec<u64> = store.read_range(3, 5).map(|e| e.unwrap().offset).collect();
    assert_eq!(middle, [3, 4]);
    for env in &all {
        assert_eq!(store.get(env.offset).unwrap().as_ref(), Some(env));
    }
    assert_eq!(store.get(8).unwrap(), None);
    let seqs: Vec<u64> = store
        .read_run(run(1), 2, 4)
        .map(|e| e.unwrap().seq)
        .collect();
    assert_eq!(seqs, [2, 3, 4]);
    let tail: Vec<u64> = store
        .read_run(run(1), 5, 99)
        .map(|e| e.unwrap().seq)
        .collect();
    assert_eq!(tail, [5]);
    assert_eq!(store.durable_seq(run(1)).unwrap(), Some(5));
    drop(store);
    let keys = with_sled(dir.path(), |events, _| events.len());
    assert_eq!(keys, 3, "three appends, three values");
    let store = open(dir.path());
    assert_eq!(assert_dense(&store), 8);
    assert_eq!(read_all(&store), all);
}

#[tokio::test]
async fn an_append_larger_than_a_sled_value_takes_several() {
    let dir = tempfile::tempdir().unwrap();
    let store = one_large_append(dir.path(), 12, 1500).await;
    let seqs: Vec<u64> = store
        .read_run(run(1), 4, 9)
        .map(|e| e.unwrap().seq)
        .collect();
    assert_eq!(seqs, [4, 5, 6, 7, 8, 9]);
    drop(store);
    let values = sled_value_sizes(dir.path());
    assert!(
        values.iter().all(|&v| v <= SLED_VALUE_BYTES_MAX),
        "{values:?}"
    );
    let groups = with_sled(dir.path(), |events, _| events.len());
    assert!((4..15).contains(&groups), "{groups} values for 3 appends");
    assert_eq!(assert_dense(&open(dir.path())), 15);
}

#[tokio::test]
async fn a_damaged_group_is_named_by_its_first_offset() {
    let dir = tempfile::tempdir().unwrap();
    drop(one_large_append(dir.path(), 5, 50).await);
    with_sled(dir.path(), |events, _| {
        let v = plain(events, 1u64.to_be_bytes());
        events
            .insert(1u64.to_be_bytes(), &v[..v.len() - 3])
            .unwrap();
    });
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let problem = store.verify().unwrap().problem.expect("damage found");
    assert_eq!((problem.offset, problem.run_id), (1, Some(run(1))));
    assert!(problem.reason.contains("framing"), "{}", problem.reason);
    assert!(matches!(
        store.get(3),
        Err(Error::Corrupt { offset: 1, .. })
    ));
}

#[tokio::test]
async fn repair_drops_an_undecodable_final_record_from_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .append(run(0), 0, vec![run_started("a")])
        .await
        .unwrap();
    let events = vec![run_started("b"), note(1), note(2), note(3), note(4)];
    store.append(run(1), 0, events).await.unwrap();
    drop(store);
    // Damage the last record's body: the end of run 1's group, the end of the log.
    with_sled(dir.path(), |events, _| {
        let mut v = plain(events, 1u64.to_be_bytes());
        *v.last_mut().unwrap() ^= 0x01;
        events.insert(1u64.to_be_bytes(), v).unwrap();
    });
    assert!(matches!(
        Store::open(dir.path(), Options::default()),
        Err(Error::Corrupt { offset: 5, .. })
    ));
    let store = open_repairing(dir.path());
    let rolled = store.run_head(run(1)).unwrap().unwrap();
    assert_eq!((rolled.last_seq, rolled.last_offset), (3, 4));
    assert_eq!(assert_dense(&store), 5);
    store.append(run(1), 4, vec![note(9)]).await.unwrap();
    let seqs: Vec<u64> = store
        .read_run(run(1), 0, 99)
        .map(|e| e.unwrap().seq)
        .collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    // run 0's second event went with the test's cut: the log is runs 0 (seq 0) and 1 (0..=4).
    assert_eq!(assert_dense(&store), 6);
}

#[tokio::test]
async fn a_store_of_plain_values_opens_and_is_marked_with_the_current_version() {
    // Version 1 stores hold one plain record per value; version 2 ones also plain groups.
    for old in [1u64, 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut index = populate(dir.path(), 9).await;
        if old == 2 {
            let (r, seq) = index[8];
            let store = open(dir.path());
            store
                .append(r, seq + 1, vec![note(10), note(11)])
                .await
                .unwrap();
            index[8].1 = seq + 2;
        }
        with_sled(dir.path(), |events, meta| {
            for kv in events.iter() {
                let (k, v) = kv.unwrap();
                events.insert(k, plain_events_value(&v).unwrap()).unwrap();
            }
            meta.insert("schema_version", &old.to_be_bytes()).unwrap()
        });
        let formats = value_formats(dir.path());
        assert!(
            formats.iter().all(|&f| f == 1 || f == 0x80),
            "plain: {formats:x?}"
        );
        assert_eq!(formats.contains(&0x80), old == 2, "{formats:x?}");
        let events = if old == 2 { 11 } else { 9 };
        opens_and_is_marked_current(dir.path(), events, index[8]).await;
    }
}

/// Opens the store of `events` events, the newest of run and seq `last`, appends two more to
/// that run, and checks it is marked with the current version.
async fn opens_and_is_marked_current(dir: &std::path::Path, events: u64, last: (RunId, u64)) {
    let store = open(dir);
    assert_eq!(assert_dense(&store), events);
    let (r, seq) = last;
    store
        .append(r, seq + 1, vec![note(1), note(2)])
        .await
        .unwrap();
    let seqs: Vec<u64> = store.read_run(r, 0, 99).map(|e| e.unwrap().seq).collect();
    assert_eq!(seqs, (0..=seq + 2).collect::<Vec<_>>());
    drop(store);
    let version = with_sled(dir, |_, meta| meta.get("schema_version").unwrap().unwrap());
    assert_eq!(version.as_ref(), SCHEMA_VERSION.to_be_bytes());
}

#[tokio::test]
async fn a_run_read_decodes_only_the_seqs_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    drop(one_large_append(dir.path(), 5, 50).await);
    // Damage the body of run 1's seq 1 (offset 2), inside its group; the framing stays intact.
    with_sled(dir.path(), |events, _| {
        let mut v = plain(events, 1u64.to_be_bytes());
        let count = u16::from_be_bytes([v[1], v[2]]) as usize;
        let len = |i: usize| u32::from_be_bytes(v[3 + 4 * i..7 + 4 * i].try_into().unwrap());
        let at = 3 + 4 * count + len(0) as usize + len(1) as usize - 2;
        v[at] ^= 0x20;
        events.insert(1u64.to_be_bytes(), v).unwrap();
    });
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let seqs: Vec<u64> = store
        .read_run(run(1), 3, 5)
        .map(|e| e.unwrap().seq)
        .collect();
    assert_eq!(seqs, [3, 4, 5]);
    let all: Vec<_> = store.read_run(run(1), 0, 5).collect();
    assert!(
        matches!(all[1], Err(Error::Corrupt { offset: 2, .. })),
        "{:?}",
        all[1]
    );
    assert_eq!(store.verify().unwrap().problem.unwrap().offset, 2);
}

// ----------------------------------------------------------------------- compressed values

/// The first byte of every `events` value of the store in `dir`.
fn value_formats(dir: &std::path::Path) -> Vec<u8> {
    let db = open_sled(dir);
    let events = db.open_tree("events").unwrap();
    events.iter().map(|kv| kv.unwrap().1[0]).collect()
}

#[tokio::test]
async fn values_are_stored_compressed_and_stores_written_either_way_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    drop(one_large_append(dir.path(), 5, 50).await);
    let formats = value_formats(dir.path());
    assert_eq!(formats.len(), 3, "three appends, three values");
    assert!(
        formats.iter().all(|&f| f == 0x81),
        "compressed values: {formats:x?}"
    );
    let compressed = open(dir.path());
    let written = read_all(&compressed);
    drop(compressed);
    // A store opened without compression reads them, and adds plain values beside them.
    let plain_opts = || Options {
        compress_values: false,
        ..Options::default()
    };
    let store = Store::open(dir.path(), plain_opts()).unwrap();
    assert_eq!(read_all(&store), written);
    store
        .append(run(1), 6, vec![note(8), note(9)])
        .await
        .unwrap();
    drop(store);
    let formats = value_formats(dir.path());
    assert_eq!(formats.last(), Some(&0x80), "a plain group: {formats:x?}");
    // Both kinds read back, chain and verify, with compression on again.
    let store = open(dir.path());
    assert_eq!(assert_dense(&store), 10);
    let seqs: Vec<u64> = store
        .read_run(run(1), 0, 99)
        .map(|e| e.unwrap().seq)
        .collect();
    assert_eq!(seqs, (0..=7).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_large_record_that_compresses_stays_inline_and_one_that_does_not_goes_out_of_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .append(run(0), 0, vec![run_started("s")])
        .await
        .unwrap();
    let repetitive = Event::Reasoning {
        message: "the same line of a report, again and again\n".repeat(600),
    };
    store
        .append(run(0), 1, vec![repetitive.clone()])
        .await
        .unwrap();
    let body_file = dir.path().join("bodies");
    let body_bytes = || std::fs::metadata(&body_file).map_or(0, |m| m.len());
    assert_eq!(
        body_bytes(),
        0,
        "a 26 KB record that compresses stays in sled"
    );
    store
        .append(run(0), 2, vec![reasoning(26_000, 'q')])
        .await
        .unwrap();
    assert!(
        body_bytes() > 20_000,
        "one that does not compress goes out of line"
    );
    let encoded: u64 = store
        .read_range(0, u64::MAX)
        .map(|e| e.unwrap().encode().unwrap().len() as u64)
        .sum();
    drop(store);
    // What the records take as stored: the body as it is, the rest compressed.
    let stored = stored_record_bytes(dir.path()).unwrap();
    assert!(
        (body_bytes()..body_bytes() + 2_000).contains(&stored),
        "{stored} stored, {} in the body file, {encoded} encoded",
        body_bytes()
    );
    assert!(
        encoded > stored + 20_000,
        "{encoded} encoded, {stored} stored"
    );
    let largest = sled_value_sizes(dir.path()).into_iter().max().unwrap();
    assert!(
        largest <= SLED_VALUE_BYTES_MAX,
        "a sled value of {largest} bytes"
    );
    let store = open(dir.path());
    assert_eq!(assert_dense(&store), 3);
    assert_eq!(store.get(1).unwrap().unwrap().event, repetitive);
}

#[tokio::test]
async fn a_damaged_compressed_value_is_named_by_its_first_offset() {
    // Cut short, or naming a dictionary this store does not have.
    for damage in [
        (|v: &mut Vec<u8>| v.truncate(v.len() - 4)) as fn(&mut Vec<u8>),
        |v| v[1] = 9,
    ] {
        let dir = tempfile::tempdir().unwrap();
        drop(one_large_append(dir.path(), 5, 50).await);
        with_sled(dir.path(), |events, _| {
            let mut v = events.get(1u64.to_be_bytes()).unwrap().unwrap().to_vec();
            assert_eq!(v[0], 0x81, "stored compressed");
            damage(&mut v);
            events.insert(1u64.to_be_bytes(), v).unwrap();
        });
        match Store::open(dir.path(), Options::default()) {
            Err(Error::Corrupt { offset, reason }) => {
                assert_eq!(offset, 1, "{reason}");
                assert!(reason.contains("compressed"), "{reason}");
            }
            other => panic!("open must refuse, got {other:?}"),
        }
        let store = Store::open(dir.path(), no_tail_check()).unwrap();
        let problem = store.verify().unwrap().problem.expect("damage found");
        assert_eq!((problem.offset, problem.run_id), (1, Some(run(1))));
        assert!(problem.reason.contains("compressed"), "{}", problem.reason);
        assert!(matches!(
            store.get(4),
            Err(Error::Corrupt { offset: 1, .. })
        ));
        assert!(store.get(7).unwrap().is_some(), "the next value reads");
    }
}

#[tokio::test]
async fn a_final_value_that_does_not_inflate_is_dropped_by_repair_and_refused_without() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .append(run(0), 0, vec![run_started("a")])
        .await
        .unwrap();
    store
        .append(run(0), 1, vec![note(1), note(2)])
        .await
        .unwrap();
    store.append(run(0), 3, vec![note(3)]).await.unwrap();
    drop(store);
    // The last value holds one record (offset 3), stored compressed: cut its frame short.
    with_sled(dir.path(), |events, _| {
        let mut v = events.get(3u64.to_be_bytes()).unwrap().unwrap().to_vec();
        assert_eq!(v[0], 0x81, "stored compressed");
        v.truncate(v.len() - 3);
        events.insert(3u64.to_be_bytes(), v).unwrap();
    });
    match Store::open(dir.path(), Options::default()) {
        Err(Error::Corrupt { offset: 3, reason }) => {
            assert!(reason.contains("compressed"), "{reason}")
        }
        other => panic!("open must refuse, got {other:?}"),
    }
    let store = open_repairing(dir.path());
    let head = store.run_head(run(0)).unwrap().unwrap();
    assert_eq!((head.last_seq, head.last_offset), (2, 2));
    assert_eq!(assert_dense(&store), 3);
    store.append(run(0), 3, vec![note(9)]).await.unwrap();
    assert_eq!(assert_dense(&store), 4);
}

#[tokio::test]
async fn a_byte_that_inflates_to_other_bytes_fails_a_hash_in_its_group() {
    let dir = tempfile::tempdir().unwrap();
    drop(one_large_append(dir.path(), 5, 50).await);
    // Find a flipped byte of the compressed group (offsets 1..=6) that still inflates, to other
    // bytes: the records' hashes catch what the frame (which has no checksum) lets through.
    with_sled(dir.path(), |events, _| {
        let v = events.get(1u64.to_be_bytes()).unwrap().unwrap().to_vec();
        let plain = plain_events_value(&v).unwrap();
        let damaged = (2..v.len())
            .rev()
            .map(|i| {
                let mut d = v.clone();
                d[i] ^= 0x01;
                d
            })
            .find(|d| plain_events_value(d).is_ok_and(|p| p != plain && p.len() == plain.len()))
            .expect("a flip that inflates to other bytes of the same length");
        events.insert(1u64.to_be_bytes(), damaged).unwrap();
    });
    let store = Store::open(dir.path(), no_tail_check()).unwrap();
    let problem = store.verify().unwrap().problem.expect("damage found");
    assert!((1..=6).contains(&problem.offset), "{problem:?}");
    assert_eq!(problem.run_id, Some(run(1)), "{}", problem.reason);
}

#[tokio::test]
async fn a_store_whose_sled_files_are_gone_is_refused_not_opened_empty() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 6).await;
    let marker = dir.path().join("store");
    assert!(marker.exists(), "a new store marks its directory");
    // A store made before the marker existed gets it when opened.
    std::fs::remove_file(&marker).unwrap();
    assert_eq!(assert_dense(&open(dir.path())), 6);
    assert!(marker.exists());
    // Small records only: the body file is empty, and still the lost log is noticed.
    assert_eq!(
        std::fs::metadata(dir.path().join("bodies")).map_or(0, |m| m.len()),
        0
    );
    std::fs::remove_dir_all(dir.path().join("sled")).unwrap();
    match Store::open(dir.path(), Options::default()) {
        Err(Error::Unopenable(why)) => assert!(why.contains("lost or emptied"), "{why}"),
        other => panic!("open must refuse, got {other:?}"),
    }
    assert!(
        matches!(
            Store::open(dir.path(), Options::default()),
            Err(Error::Unopenable(_))
        ),
        "refused again: the refused open started nothing over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_checks_the_log_as_it_stood_while_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let writers: Vec<_> = (0..4u128)
        .map(|k| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .append(run(k), 0, vec![run_started("s")])
                    .await
                    .unwrap();
                for seq in 1..300 {
                    store.append(run(k), seq, vec![note(seq)]).await.unwrap();
                }
            })
        })
        .collect();
    let mut checked = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        let report = tokio::task::block_in_place(|| store.verify().unwrap());
        assert!(report.ok(), "{:?}", report.problem);
        checked += 1;
    }
    for w in writers {
        w.await.unwrap();
    }
    assert!(checked > 0);
    assert_eq!(assert_dense(&store), 1200);
}

// ---------------------------------------------------- the data directory and damage around it

/// Every directory and file under `dir`, `dir` included, with its permission bits.
fn modes(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        out.push((path, meta.permissions().mode() & 0o777));
    }
    out
}

#[tokio::test]
async fn the_data_directory_and_every_file_the_store_writes_are_private() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let store = large_events(&dir, &[30_000]).await;
    store.put_blob(b"a payload of its own").unwrap();
    store.put_record("thread:t", b"value").unwrap();
    drop(store);
    // The second open writes sled's snapshot file.
    drop(open(&dir));
    let all = modes(&dir);
    let named = |name: &str| {
        all.iter().any(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(name))
        })
    };
    assert!(
        named("snap.") && named("bodies") && named("db") && named("conf"),
        "{all:?}"
    );
    assert!(
        modes(&dir.join("blobs")).len() > 1,
        "a blob file was written"
    );
    for (path, mode) in &all {
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} is {mode:o}", path.display());
    }
}

/// The files of sled's snapshot of its page table (`sled/snap.*`) in the store in `dir`.
fn sled_snapshots(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir.join("sled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("snap.")
        })
        .collect()
}

/// sled's snapshot file is a cache of its page table, which sled rebuilds from its log when the
/// file is absent: a damaged one is set aside (kept beside sled's directory) and nothing is lost.
#[tokio::test]
async fn a_damaged_sled_snapshot_is_set_aside_and_every_event_kept() {
    let damages: [fn(&mut Vec<u8>); 2] = [
        |b| {
            let i = b.len() / 2;
            b[i] ^= 0x10
        },
        |b| b.truncate(5),
    ];
    for damage in damages {
        let dir = tempfile::tempdir().unwrap();
        populate(dir.path(), 30).await;
        // The second open writes sled's snapshot.
        drop(open(dir.path()));
        let snaps = sled_snapshots(dir.path());
        assert_eq!(snaps.len(), 1, "{snaps:?}");
        let mut bytes = std::fs::read(&snaps[0]).unwrap();
        damage(&mut bytes);
        std::fs::write(&snaps[0], &bytes).unwrap();
        let store = Store::open(dir.path(), Options::default())
            .unwrap_or_else(|e| panic!("the store must open without the snapshot: {e}"));
        assert_eq!(assert_dense(&store), 30);
        store.append(run(0), 10, vec![note(30)]).await.unwrap();
        drop(store);
        let name = snaps[0].file_name().unwrap().to_string_lossy();
        let kept = dir.path().join(format!("sled-{name}.damaged"));
        assert_eq!(std::fs::read(&kept).unwrap(), bytes, "kept as it was found");
        assert_eq!(assert_dense(&open(dir.path())), 31);
    }
}

/// A crash while sled writes its snapshot leaves `snap.<lsn>.generating`, which sled reads as
/// its newest snapshot (it takes every `snap.*`): set aside like a damaged one.
#[tokio::test]
async fn a_half_written_sled_snapshot_left_by_a_crash_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 12).await;
    drop(open(dir.path()));
    let snap = sled_snapshots(dir.path()).pop().unwrap();
    let bytes = std::fs::read(&snap).unwrap();
    let generating = snap.with_file_name(format!(
        "{}.generating",
        snap.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&generating, &bytes[..bytes.len() / 2]).unwrap();
    let store = Store::open(dir.path(), Options::default())
        .unwrap_or_else(|e| panic!("the store must open without the snapshot: {e}"));
    assert_eq!(assert_dense(&store), 12);
    drop(store);
    assert!(
        sled_snapshots(dir.path())
            .iter()
            .all(|p| !p.to_string_lossy().ends_with(".generating")),
        "set aside"
    );
}

/// `GET /api/v1/runs` with one run whose record is damaged: the others are listed, and the
/// damaged one is named with the offset of its damage.
#[tokio::test]
async fn a_damaged_run_is_named_in_the_listing_and_the_others_listed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for k in 0..3u128 {
        let mut events = vec![run_started(&format!("s{k}"))];
        if k == 1 {
            events.push(reasoning(30_000, 'b'));
        }
        events.push(Event::RunCompleted {
            total_execution_time_ms: 1,
        });
        store.append(run(k), 0, events).await.unwrap();
    }
    drop(store);
    // Run 1's body (offset 3, the only body) is damaged.
    let path = dir.path().join("bodies");
    let mut bytes = std::fs::read(&path).unwrap();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let srv = crate::api_support::server_on(
        dir,
        store,
        chronicle_api::Tokens::none(),
        chronicle_realestate::settings(),
        chronicle_api::ApiConfig::default(),
    )
    .await;
    let res = srv.http.get(srv.url("/api/v1/runs")).send().await.unwrap();
    let status = res.status();
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    let listed: Vec<String> = body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, [run(0).to_string(), run(2).to_string()], "{body}");
    let damaged = body["damaged"].as_array().expect("damaged runs named");
    assert_eq!(damaged.len(), 1, "{body}");
    assert_eq!(damaged[0]["run_id"], run(1).to_string());
    let error = damaged[0]["error"].as_str().unwrap();
    assert!(error.contains("corrupt log at offset 3"), "{error}");
    srv.stop().await;
}
