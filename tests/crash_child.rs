//! Child process for the crash test: appends to several runs at once, forever, printing one
//! line per acknowledged append (`ACK <run> <first_seq> <count> <first_offset>`), until killed.

use std::io::Write;

use chronicle_engine::store::{Options, Store};
use chronicle_schemas::{Event, RunId, SessionId};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: crash-child DIR RUNS");
    let runs: u128 = args.next().expect("RUNS").parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let store = Store::open(&dir, Options::default())?;
        println!("READY");
        let mut tasks = Vec::new();
        for i in 0..runs {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let run = RunId::from_u128(0xC4A5_0000 + i);
                let mut seq = store.run_head(run)?.map_or(0, |h| h.next_seq());
                loop {
                    let n = 1 + (seq % 3);
                    let events: Vec<Event> = (0..n)
                        .map(|k| {
                            if seq + k == 0 {
                                Event::RunStarted {
                                    session_id: SessionId(format!("crash-{i}")),
                                    user_id: None,
                                    request_id: "r".into(),
                                    query: "q".into(),
                                    config: Default::default(),
                                    parent: None,
                                    owner: None,
                                    traceparent: None,
                                }
                            } else {
                                Event::Reasoning {
                                    message: format!("run {i} seq {}", seq + k),
                                }
                            }
                        })
                        .collect();
                    let envs = store.append(run, seq, events).await?;
                    let line = format!("ACK {} {} {} {}\n", run, seq, envs.len(), envs[0].offset);
                    std::io::stdout().lock().write_all(line.as_bytes())?;
                    seq += envs.len() as u64;
                }
                #[allow(unreachable_code)]
                Ok::<(), anyhow::Error>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    })
}
