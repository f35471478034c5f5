//! The subscription bus: live events of a run for any number of subscribers, with history first,
//! no gap and no duplicate.
//!
//! One follower task tails the store's durable log (so subscribers only ever see events that
//! passed their durability barrier) and broadcasts each event to its run's channel. A subscriber
//! subscribes to the channel *before* reading history from the log, then forwards live events,
//! dropping any seq it already sent. A subscriber that lags behind the broadcast buffer is never
//! waited for: it re-reads what it missed from the log and carries on. So a slow subscriber costs
//! the run nothing, and costs itself a fixed amount: history is read in chunks of
//! [`SUBSCRIBER_BUFFER_EVENTS`], and a subscriber whose reader stops holds at most one chunk and
//! its channel of as many events (the broadcast buffer is the run's, shared by every subscriber).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chronicle_schemas::{Envelope, RunId};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::store::{self, Store};

type Channels = Arc<Mutex<HashMap<RunId, broadcast::Sender<Arc<Envelope>>>>>;

/// Events one subscriber holds for its reader at most (its channel), and reads from the log at
/// once (one chunk of history).
pub const SUBSCRIBER_BUFFER_EVENTS: usize = 16;

/// Fan-out of durable events per run.
#[derive(Clone, Debug)]
pub struct Bus {
    store: Store,
    runs: Channels,
    buffer_events: usize,
    shutdown: CancellationToken,
}

impl Bus {
    /// Starts the follower at the store's current durable head.
    pub fn start(store: Store, buffer_events: usize, shutdown: CancellationToken) -> Bus {
        let bus = Bus {
            runs: Arc::default(),
            buffer_events: buffer_events.max(1),
            store: store.clone(),
            shutdown: shutdown.clone(),
        };
        let runs = bus.runs.clone();
        let mut tail = store.follow(store.durable_next_offset());
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = tail.next() => next,
                    _ = shutdown.cancelled() => return,
                };
                match next {
                    Some(Ok(env)) => {
                        let run = env.run_id;
                        let mut runs = runs.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(tx) = runs.get(&run)
                            && tx.send(Arc::new(env)).is_err()
                        {
                            // Nobody listens any more: drop the channel.
                            runs.remove(&run);
                        }
                    }
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "bus follower stopped");
                        return;
                    }
                    None => return,
                }
            }
        });
        bus
    }

    fn channel(&self, run: RunId) -> broadcast::Receiver<Arc<Envelope>> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.entry(run)
            .or_insert_with(|| broadcast::channel(self.buffer_events).0)
            .subscribe()
    }

    /// Every event of `run` from `from_seq` on: stored history, then live events. Ends when the
    /// receiver is dropped or the store closes.
    pub fn subscribe(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> ReceiverStream<Result<Arc<Envelope>, store::Error>> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER_EVENTS);
        // Subscribe before reading history, so nothing appended in between is missed.
        let mut live = Listener {
            rx: self.channel(run),
            run,
            runs: self.runs.clone(),
        };
        let store = self.store.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut next = from_seq;
            // History, up to what is durable; anything newer arrives through `live`.
            if catch_up(&store, run, &mut next, &tx).await.is_err() {
                return;
            }
            loop {
                let msg = tokio::select! {
                    msg = live.rx.recv() => msg,
                    _ = tx.closed() => return,
                    _ = shutdown.cancelled() => return,
                };
                match msg {
                    Ok(env) if env.seq < next => {}
                    Ok(env) if env.seq == next => {
                        next += 1;
                        if tx.send(Ok(env)).await.is_err() {
                            return;
                        }
                    }
                    // A gap (or a lag): read what is missing from the log.
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if catch_up(&store, run, &mut next, &tx).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        ReceiverStream::new(rx)
    }
}

/// A subscriber's end of its run's channel. The last one to go removes the channel, so the bus
/// keeps channels only for runs someone follows (a finished run sends nothing that would).
struct Listener {
    rx: broadcast::Receiver<Arc<Envelope>>,
    run: RunId,
    runs: Channels,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        // This receiver still counts until it is dropped, after this.
        if runs
            .get(&self.run)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            runs.remove(&self.run);
        }
    }
}

/// Sends every durable event of `run` from `*next` on and advances `*next`, reading the log one
/// chunk at a time.
async fn catch_up(
    store: &Store,
    run: RunId,
    next: &mut u64,
    tx: &mpsc::Sender<Result<Arc<Envelope>, store::Error>>,
) -> Result<(), ()> {
    let durable = store.durable_next_offset();
    let chunk = SUBSCRIBER_BUFFER_EVENTS as u64;
    loop {
        let batch: Vec<_> = store.read_run(run, *next, *next + chunk - 1).collect();
        let complete = batch.len() as u64 == chunk;
        for item in batch {
            match item {
                Ok(env) if env.offset >= durable => return Ok(()),
                Ok(env) => {
                    *next = env.seq + 1;
                    tx.send(Ok(Arc::new(env))).await.map_err(|_| ())?;
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return Err(());
                }
            }
        }
        if !complete {
            return Ok(());
        }
    }
}
