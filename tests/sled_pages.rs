//! The vendored sled splits a leaf by bytes as well as items, and the leaf at a tree's right edge
//! keeps all but a few items when it splits (vendor/README.md): an append-only tree and a tree of
//! small values take far fewer pages than one leaf per 8 to 16 items, and every key reads back —
//! after a reopen, after removes that merge leaves, with writers racing the splits.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::index_workload::Rng;

fn open(dir: &Path) -> sled::Db {
    // A closed `Db`'s IO threads may hold the file lock for a moment, as the store knows.
    for _ in 0..2000 {
        match sled::Config::new()
            .path(dir)
            .cache_capacity(1 << 20)
            .flush_every_ms(None)
            .open()
        {
            Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            other => return other.unwrap(),
        }
    }
    panic!("{} stays locked", dir.display());
}

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Every tree of `model` holds exactly its keys and values, read by key and by a full scan.
fn check(db: &sled::Db, model: &Model) {
    for (name, keys) in model {
        let tree = db.open_tree(name).unwrap();
        for (k, v) in keys {
            assert_eq!(
                tree.get(k).unwrap().as_deref(),
                Some(&v[..]),
                "{name} {k:?}"
            );
        }
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = tree
            .iter()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(scanned.len(), expected.len(), "{name}");
        assert!(
            scanned == expected,
            "{name}: a scan differs from what was written"
        );
    }
}

/// Writes `items` into tree `name` and returns how many pages that took.
fn fill(db: &sled::Db, model: &mut Model, name: &str, items: Vec<(Vec<u8>, Vec<u8>)>) -> u64 {
    let tree = db.open_tree(name).unwrap();
    let before = db.pages_in_use();
    let keys = model.entry(name.to_string()).or_default();
    for (k, v) in items {
        tree.insert(&k, v.clone()).unwrap();
        keys.insert(k, v);
    }
    db.pages_in_use() - before
}

#[test]
fn appends_and_small_values_fill_their_leaves_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let db = open(dir.path());

    // Increasing keys with 400-byte values, as the events tree: a leaf of 17 passes 4 KiB and
    // splits, the right edge keeping 4; half-full leaves would take one page per 8 or 9 items.
    let n = 6_000u64;
    let appends = (0..n)
        .map(|i| (i.to_be_bytes().to_vec(), vec![(i % 251) as u8; 400]))
        .collect();
    let pages = fill(&db, &mut model, "appends", appends);
    assert!(
        pages <= n / 12,
        "{n} appended keys of 400 bytes took {pages} pages"
    );

    // Increasing keys with 24-byte values: leaves of up to 128 items, left full.
    let ascending = (0..20_000u64)
        .map(|i| (i.to_be_bytes().to_vec(), vec![7u8; 24]))
        .collect();
    let pages = fill(&db, &mut model, "small-ascending", ascending);
    assert!(
        pages <= 20_000 / 100,
        "20,000 appended keys of 24 bytes took {pages} pages"
    );

    // Keys in random order with 24-byte values: leaves split in the middle, by bytes.
    let random = (0..20_000u64)
        .map(|_| {
            (
                rng.next().to_be_bytes().to_vec(),
                vec![(rng.next() % 256) as u8; 24],
            )
        })
        .collect();
    let pages = fill(&db, &mut model, "small-random", random);
    assert!(
        pages <= 20_000 / 64,
        "20,000 random keys of 24 bytes took {pages} pages"
    );

    // Values of every size in random order: leaves of large values still split past 16 items.
    let mut mixed = Vec::new();
    for _ in 0..3_000 {
        let len = match rng.next() % 10 {
            0 => 2_000 + rng.next() % 30_000,
            1..=3 => 200 + rng.next() % 800,
            _ => rng.next() % 64,
        } as usize;
        mixed.push((
            (rng.next() % 100_000).to_be_bytes().to_vec(),
            vec![3u8; len],
        ));
    }
    fill(&db, &mut model, "mixed", mixed);
    check(&db, &model);

    let pages = db.pages_in_use();
    drop(db);
    let db = open(dir.path());
    check(&db, &model);
    assert_eq!(db.pages_in_use(), pages, "pages after a reopen");

    // Remove nine keys in ten of every tree, in random order: leaves under 4 items merge.
    for (name, keys) in model.iter_mut() {
        let tree = db.open_tree(name).unwrap();
        let mut all: Vec<Vec<u8>> = keys.keys().cloned().collect();
        for i in (1..all.len()).rev() {
            all.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        for k in all.iter().take(all.len() * 9 / 10) {
            assert!(tree.remove(k).unwrap().is_some());
            keys.remove(k);
        }
        // a scan visits every leaf, and traversals finish merges they meet
        assert_eq!(tree.iter().count(), keys.len(), "{name}");
    }
    check(&db, &model);
    let after_removes = db.pages_in_use();
    assert!(
        after_removes < pages / 2,
        "{pages} pages, {after_removes} after removing 90% of keys"
    );

    drop(db);
    let db = open(dir.path());
    check(&db, &model);
}

#[test]
fn writers_racing_at_the_right_edge_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let threads = 4u64;
    let per = 3_000u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let small = db.open_tree("small").unwrap();
                let large = db.open_tree("large").unwrap();
                // interleaved increasing keys: every writer appends at the right edge
                for i in 0..per {
                    let k = (i * threads + t).to_be_bytes();
                    small.insert(k, vec![t as u8; 20]).unwrap();
                    large.insert(k, vec![t as u8; 500]).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut model = Model::new();
    for (name, len) in [("small", 20), ("large", 500)] {
        let keys = model.entry(name.to_string()).or_default();
        for k in 0..threads * per {
            keys.insert(k.to_be_bytes().to_vec(), vec![(k % threads) as u8; len]);
        }
    }
    check(&db, &model);
    drop(db);
    let db = open(dir.path());
    check(&db, &model);
}
