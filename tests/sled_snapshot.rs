//! The vendored sled writes snapshots of its page table while it runs (`Db::write_snapshot_quiesced`),
//! not only at open. The oracle: the snapshot built from memory at a quiescent point is byte for
//! byte the one sled's own recovery computes from the previous snapshot and the log (reopen, and
//! read the snapshot file recovery wrote). Workloads: many trees, inserts, removes, overwrites,
//! values large enough for sled's blob files, enough data for segment cleaning to relocate pages,
//! node splits and merges, batches, transactions, a dropped tree; single-threaded and with writers
//! racing the snapshots. After reopening, every write is there.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::index_workload::Rng;

fn config(dir: &Path) -> sled::Config {
    sled::Config::new()
        .path(dir)
        // Small segments: cleaning relocates pages after a few MB, not hundreds.
        .segment_size(1 << 16)
        .cache_capacity(1 << 20)
        .flush_every_ms(None)
}

/// Opens `dir`, waiting (up to 20 s) for the IO threads of a closed `Db` on it to let go of
/// its file lock, as the store does.
fn reopen(dir: &Path) -> sled::Db {
    for _ in 0..2000 {
        match config(dir).open() {
            Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            other => return other.unwrap(),
        }
    }
    panic!("{} stays locked", dir.display());
}

/// The newest snapshot file's body (the serialized snapshot, before its length and checksum).
fn newest_snapshot(dir: &Path) -> (String, Vec<u8>) {
    let mut snaps: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snap.") && !n.ends_with(".generating"))
        .collect();
    snaps.sort();
    let name = snaps.pop().expect("a snapshot file");
    let mut bytes = std::fs::read(dir.join(&name)).unwrap();
    bytes.truncate(bytes.len() - 12);
    (name, bytes)
}

type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn value(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(20) {
        // past a quarter of a segment: a blob file
        0 => 20_000 + rng.below(40_000),
        1..=4 => 1_000 + rng.below(4_000),
        _ => 1 + rng.below(200),
    };
    let b = rng.below(256) as u8;
    vec![b; len]
}

/// One step of a varied workload on `db`, mirrored in `model`.
fn step(db: &sled::Db, rng: &mut Rng, model: &mut Model) {
    let tree_name = format!("t{}", rng.below(6));
    let tree = db.open_tree(&tree_name).unwrap();
    let key = (rng.below(600) as u32).to_be_bytes().to_vec();
    match rng.below(100) {
        0..=54 => {
            let v = value(rng);
            tree.insert(&key, v.clone()).unwrap();
            model.insert((tree_name, key), v);
        }
        55..=79 => {
            tree.remove(&key).unwrap();
            model.remove(&(tree_name, key));
        }
        80..=89 => {
            // a batch: a range of keys written or removed at once (splits, then merges)
            let mut batch = sled::Batch::default();
            let start = rng.below(560) as u32;
            let remove = rng.below(2) == 0;
            for k in start..start + 40 {
                let k = k.to_be_bytes().to_vec();
                if remove {
                    batch.remove(k.clone());
                    model.remove(&(tree_name.clone(), k));
                } else {
                    let v = vec![k[3]; 1 + (k[3] as usize % 64)];
                    batch.insert(k.clone(), v.clone());
                    model.insert((tree_name.clone(), k), v);
                }
            }
            tree.apply_batch(batch).unwrap();
        }
        90..=96 => {
            let v = value(rng);
            tree.transaction(|tx| {
                tx.insert(key.clone(), v.clone())?;
                Ok::<_, sled::transaction::ConflictableTransactionError<()>>(())
            })
            .unwrap();
            model.insert((tree_name, key), v);
        }
        97 => {
            db.drop_tree(&tree_name).unwrap();
            model.retain(|(t, _), _| *t != tree_name);
        }
        _ => {
            db.write_snapshot_quiesced().unwrap();
        }
    }
}

/// The snapshot built from memory now; if the log's tip is where none is taken, a small write
/// moves it first.
fn memory_snapshot(db: &sled::Db, model: &mut Model) -> Vec<u8> {
    for i in 0..8u32 {
        if let Some(bytes) = db.quiesced_snapshot_bytes().unwrap() {
            return bytes;
        }
        let key = i.to_be_bytes().to_vec();
        db.open_tree("nudge")
            .unwrap()
            .insert(&key, vec![1])
            .unwrap();
        model.insert(("nudge".into(), key), vec![1]);
    }
    panic!("no quiescent snapshot after 8 nudges");
}

fn assert_model(db: &sled::Db, model: &Model) {
    let mut found = Model::new();
    for name in db.tree_names() {
        let name = String::from_utf8(name.to_vec()).unwrap();
        if name == "__sled__default" {
            continue;
        }
        for kv in db.open_tree(&name).unwrap().iter() {
            let (k, v) = kv.unwrap();
            found.insert((name.clone(), k.to_vec()), v.to_vec());
        }
    }
    assert!(
        found == *model,
        "the reopened database differs from what was written"
    );
}

/// Closes `db`, reopens it, and checks that the snapshot recovery wrote is `expected`.
fn reopen_and_compare(dir: &Path, db: sled::Db, expected: &[u8], what: &str) -> sled::Db {
    drop(db);
    let db = reopen(dir);
    let (name, recovered) = newest_snapshot(dir);
    assert!(
        recovered == expected,
        "{what}: the snapshot built from memory ({} bytes) differs from the one recovery wrote \
         ({name}, {} bytes)",
        expected.len(),
        recovered.len()
    );
    db
}

#[test]
fn a_quiesced_snapshot_equals_the_one_recovery_computes() {
    for seed in [7u64, 1234, 99_991] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let mut rng = Rng::new(seed);
        let mut model = Model::new();
        let mut db = config(&dir).open().unwrap();
        for round in 0..4 {
            for _ in 0..700 {
                step(&db, &mut rng, &mut model);
            }
            let mem = memory_snapshot(&db, &mut model);
            db = reopen_and_compare(&dir, db, &mem, &format!("seed {seed} round {round}"));
            assert_model(&db, &model);
        }
        // The log went on well past the file's length: segments were cleaned (their pages
        // relocated) and reused.
        let (name, _) = newest_snapshot(&dir);
        let lsn = i64::from_str_radix(name.trim_start_matches("snap."), 16).unwrap();
        let file_len = std::fs::metadata(dir.join("db")).unwrap().len();
        assert!(
            lsn as u64 > 2 * file_len,
            "seed {seed}: {lsn} bytes of log in a {file_len}-byte file: no segment was reused"
        );
    }
}

#[test]
fn snapshots_taken_while_writers_run_lose_nothing_and_match_recovery() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = config(&dir).open().unwrap();
    let model = Arc::new(Mutex::new(Model::new()));
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let db = db.clone();
            let model = model.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(w * 7919 + 17);
                let tree_name = format!("w{w}");
                let tree = db.open_tree(&tree_name).unwrap();
                for _ in 0..1500 {
                    let key = (rng.below(400) as u32).to_be_bytes().to_vec();
                    let mut m = model.lock().unwrap();
                    if rng.below(4) == 0 {
                        tree.remove(&key).unwrap();
                        m.remove(&(tree_name.clone(), key));
                    } else {
                        let v = value(&mut rng);
                        tree.insert(&key, v.clone()).unwrap();
                        m.insert((tree_name.clone(), key), v);
                    }
                }
            })
        })
        .collect();
    let mut written = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        if db.write_snapshot_quiesced().unwrap().is_some() {
            written += 1;
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(written > 0, "no snapshot was written while the writers ran");
    let mut model = Arc::try_unwrap(model).unwrap().into_inner().unwrap();
    let mem = memory_snapshot(&db, &mut model);
    let db = reopen_and_compare(&dir, db, &mem, "after concurrent writers");
    assert_model(&db, &model);
}

#[test]
fn an_open_replays_only_the_log_after_the_last_quiesced_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = config(&dir).open().unwrap();
    let tree = db.open_tree("t").unwrap();
    for i in 0..2000u32 {
        tree.insert(i.to_be_bytes(), vec![7; 300]).unwrap();
    }
    assert!(db.log_bytes_since_snapshot() > 500_000);
    let mut model = Model::new();
    let lsn = loop {
        if let Some(lsn) = db.write_snapshot_quiesced().unwrap() {
            break lsn;
        }
        tree.insert("nudge", vec![1]).unwrap();
        model.insert(("t".into(), b"nudge".to_vec()), vec![1]);
    };
    assert!(db.log_bytes_since_snapshot() < 1000);
    assert_eq!(newest_snapshot(&dir).0, format!("snap.{lsn:016X}"));
    // Writes after it: the reopened database has them all, replayed from the snapshot.
    for i in 0..2000u32 {
        tree.insert(i.to_be_bytes(), vec![8; 300]).unwrap();
        model.insert(("t".into(), i.to_be_bytes().to_vec()), vec![8; 300]);
    }
    drop(tree);
    drop(db);
    let db = reopen(&dir);
    assert_model(&db, &model);
}
