//! Crash safety with a real process: a child appends to several runs at once and is killed with
//! SIGKILL at a random moment, 20 times in a row; after every kill the store reopens with every
//! acknowledged append present, dense offsets, verified chains, and appends continue.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use chronicle_schemas::RunId;
use rand::Rng;

use crate::support::{note, open};

const KILLS: usize = 20;
const RUNS: u128 = 4;

#[derive(Debug)]
struct Ack {
    run: RunId,
    first_seq: u64,
    count: u64,
    first_offset: u64,
}

fn parse(line: &str) -> Option<Ack> {
    let mut p = line.strip_prefix("ACK ")?.split(' ');
    Some(Ack {
        run: p.next()?.parse().ok()?,
        first_seq: p.next()?.parse().ok()?,
        count: p.next()?.parse().ok()?,
        first_offset: p.next()?.parse().ok()?,
    })
}

#[test]
fn sigkill_loses_no_acknowledged_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut all_acks: Vec<Ack> = Vec::new();
    for round in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-child"))
            .arg(dir.path())
            .arg(RUNS.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            // `lines` yields only complete lines: a line cut by the kill is not an ack.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let ready = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("child starts");
        assert_eq!(ready, "READY", "round {round}");
        std::thread::sleep(Duration::from_millis(rng.random_range(5..150)));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        reader.join().unwrap();
        let acks: Vec<Ack> = rx.try_iter().filter_map(|l| parse(&l)).collect();
        all_acks.extend(acks);

        let store = open(dir.path());
        let report = store.verify().unwrap();
        assert!(report.ok(), "round {round}: {:?}", report.problem);
        assert_eq!(report.next_offset, store.durable_next_offset());
        for ack in &all_acks {
            let got: Vec<_> = store
                .read_run(ack.run, ack.first_seq, ack.first_seq + ack.count - 1)
                .map(Result::unwrap)
                .collect();
            assert_eq!(
                got.len() as u64,
                ack.count,
                "round {round}: acked {ack:?} lost"
            );
            assert_eq!(got[0].offset, ack.first_offset, "round {round}: {ack:?}");
        }
        // Appends continue where each run's head is, at the next dense offset.
        let mut next_offset = report.next_offset;
        for i in 0..RUNS {
            let run = RunId::from_u128(0xC4A5_0000 + i);
            if let Some(head) = store.run_head(run).unwrap() {
                let envs = store
                    .append_blocking(run, head.next_seq(), vec![note(head.next_seq())])
                    .unwrap();
                assert_eq!(
                    (envs[0].offset, envs[0].seq),
                    (next_offset, head.next_seq())
                );
                next_offset += 1;
            }
        }
        assert!(store.verify().unwrap().ok());
    }
    assert!(
        all_acks.len() > KILLS,
        "the child acknowledged too little to test anything: {}",
        all_acks.len()
    );
}
