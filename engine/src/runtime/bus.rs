//! The subscription bus: live events of a run for any number of subscribers, with history first,
//! no gap and no duplicate; and beside them, the live chunks of the run's model answers.
//!
//! One follower task tails the store's durable log (so subscribers only ever see events that
//! passed their durability barrier) and broadcasts each event to its run's channel; the newest
//! events come from the log's memory, shared, so an event nobody follows costs no copy. A subscriber
//! subscribes to the channel *before* reading history from the log, then forwards live events,
//! dropping any seq it already sent. A subscriber that lags behind the broadcast buffer is never
//! waited for: it re-reads what it missed from the log and carries on. So a slow subscriber costs
//! the run nothing, and costs itself a fixed amount: history is read in chunks of
//! [`SUBSCRIBER_BUFFER_EVENTS`], and a subscriber whose reader stops holds at most one chunk and
//! its channel of as many events (the broadcast buffer is the run's, shared by every subscriber).
//!
//! Chunks ([`crate::chunks`]) are never stored, so they cannot be re-read: they go through a
//! second broadcast channel of the run (and one of all runs, for the all-runs stream), which
//! exists only while someone listens. A subscriber that lags behind it loses the chunks it
//! missed; the run never waits and nothing grows. Each chunk names the run's last event when it
//! was written, and a subscriber sends it only after that event, so a chunk never arrives before
//! the events that came before it (the phase event announcing a model call, say).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chronicle_schemas::{Envelope, RunId, TodoId};
use chronicle_wire::names::{ChunkContent, ChunkData, ChunkType};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{BroadcastStream, ReceiverStream};
use tokio_util::sync::CancellationToken;

use crate::plugin::chunks::{self, Chunk, ChunkSink};
use crate::plugin::llm::Delta;
use crate::store::{self, Store};

type Channels = Arc<Mutex<HashMap<RunId, RunChannels>>>;

/// Events one subscriber holds for its reader at most (its channel), and reads from the log at
/// once (one chunk of history).
pub const SUBSCRIBER_BUFFER_EVENTS: usize = 16;

/// Chunks of every run buffered for the all-runs streams (allocated once, when the bus starts).
pub const ALL_RUNS_BUFFER_CHUNKS: usize = 256;

/// A run's channels: durable events, and, while someone listens for them, chunks.
struct RunChannels {
    events: broadcast::Sender<Arc<Envelope>>,
    chunks: Option<broadcast::Sender<Arc<Chunk>>>,
}

/// What a live subscription ([`Bus::subscribe_live`]) yields.
#[derive(Clone, Debug)]
pub enum Live {
    /// A durable event, in seq order, none missing.
    Event(Arc<Envelope>),
    /// A piece of a model's answer, after the events that came before it; a subscriber that lags
    /// loses some.
    Chunk(Arc<Chunk>),
}

/// Fan-out of durable events and live chunks per run.
#[derive(Clone, Debug)]
pub struct Bus {
    store: Store,
    runs: Channels,
    buffer_events: usize,
    buffer_chunks: usize,
    all_chunks: broadcast::Sender<Arc<Chunk>>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for RunChannels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunChannels")
            .field("events", &self.events.receiver_count())
            .finish_non_exhaustive()
    }
}

/// What a subscription's channel carries: durable events only, or events and chunks.
trait Item: Send + 'static {
    const CHUNKS: bool;
    fn event(env: Arc<Envelope>) -> Self;
    fn chunk(chunk: Arc<Chunk>) -> Option<Self>
    where
        Self: Sized;
}

impl Item for Arc<Envelope> {
    const CHUNKS: bool = false;
    fn event(env: Arc<Envelope>) -> Self {
        env
    }
    fn chunk(_: Arc<Chunk>) -> Option<Self> {
        None
    }
}

impl Item for Live {
    const CHUNKS: bool = true;
    fn event(env: Arc<Envelope>) -> Self {
        Live::Event(env)
    }
    fn chunk(chunk: Arc<Chunk>) -> Option<Self> {
        Some(Live::Chunk(chunk))
    }
}

impl Bus {
    /// Starts the follower at the store's current durable head.
    pub fn start(
        store: Store,
        buffer_events: usize,
        buffer_chunks: usize,
        shutdown: CancellationToken,
        on_tombstone: Box<dyn Fn(RunId) + Send + Sync>,
    ) -> Bus {
        let bus = Bus {
            runs: Arc::default(),
            buffer_events: buffer_events.max(1),
            buffer_chunks: buffer_chunks.max(1),
            all_chunks: broadcast::channel(ALL_RUNS_BUFFER_CHUNKS).0,
            store: store.clone(),
            shutdown: shutdown.clone(),
        };
        let runs = bus.runs.clone();
        // Pulled here rather than through a follower task and its channel: one task, no hop.
        let mut tail = store.tail(store.durable_next_offset(), store::FOLLOW_CHUNK_EVENTS);
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = tail.next() => next,
                    _ = shutdown.cancelled() => return,
                };
                match next {
                    Some(Ok(env)) => {
                        let run = env.run_id;
                        // A session deleted by another process (a node of a cluster): what is
                        // cached of its runs is read again.
                        if matches!(env.event, chronicle_schemas::Event::SessionDeleted { .. }) {
                            on_tombstone(run);
                        }
                        let mut runs = runs.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some(ch) = runs.get(&run)
                            && ch.events.send(env).is_err()
                        {
                            // Nobody listens any more: drop the channels.
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

    /// The run's event channel, and its chunk channel when `chunks`.
    fn channels(
        &self,
        run: RunId,
        chunks: bool,
    ) -> (
        broadcast::Receiver<Arc<Envelope>>,
        Option<broadcast::Receiver<Arc<Chunk>>>,
    ) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let ch = runs.entry(run).or_insert_with(|| RunChannels {
            events: broadcast::channel(self.buffer_events).0,
            chunks: None,
        });
        let chunks = chunks.then(|| {
            ch.chunks
                .get_or_insert_with(|| broadcast::channel(self.buffer_chunks).0)
                .subscribe()
        });
        (ch.events.subscribe(), chunks)
    }

    /// Every event of `run` from `from_seq` on: stored history, then live events. Ends when the
    /// receiver is dropped or the store closes.
    pub fn subscribe(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> ReceiverStream<Result<Arc<Envelope>, store::Error>> {
        self.subscriber(run, from_seq)
    }

    /// [`Bus::subscribe`], with the run's live chunks from now on between the events.
    pub fn subscribe_live(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> ReceiverStream<Result<Live, store::Error>> {
        self.subscriber(run, from_seq)
    }

    /// The live chunks of every run from now on (a reader that lags loses some).
    pub fn all_chunks(
        &self,
    ) -> impl tokio_stream::Stream<Item = Arc<Chunk>> + Send + Unpin + use<> {
        BroadcastStream::new(self.all_chunks.subscribe()).filter_map(Result::ok)
    }

    fn subscriber<T: Item>(
        &self,
        run: RunId,
        from_seq: u64,
    ) -> ReceiverStream<Result<T, store::Error>> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER_EVENTS);
        // Subscribe before reading history, so nothing appended in between is missed.
        let (events, chunks) = self.channels(run, T::CHUNKS);
        let mut live = Listener {
            rx: events,
            chunks,
            run,
            runs: self.runs.clone(),
        };
        let store = self.store.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut next = from_seq;
            // History, up to what is durable; anything newer arrives through `live`.
            if catch_up(&store, run, &mut next, u64::MAX, &tx)
                .await
                .is_err()
            {
                return;
            }
            // A chunk whose preceding events are not sent yet (at most one: the channel keeps
            // the ones after it).
            let mut held: Option<Arc<Chunk>> = None;
            loop {
                if let Some(chunk) = held.take_if(|c| c.after_seq < next) {
                    if let Some(item) = T::chunk(chunk)
                        && tx.send(Ok(item)).await.is_err()
                    {
                        return;
                    }
                    continue;
                }
                tokio::select! {
                    biased;
                    _ = tx.closed() => return,
                    _ = shutdown.cancelled() => return,
                    // Chunks first: one waiting in the channel was written before any event
                    // still waiting beside it.
                    chunk = next_chunk(&mut live.chunks), if held.is_none() => {
                        if let Some(chunk) = chunk {
                            // The events before it are durable: read them from the log rather
                            // than wait for the broadcast, and only them, so that it goes out
                            // before the events written after it.
                            if chunk.after_seq >= next
                                && catch_up(&store, run, &mut next, chunk.after_seq, &tx)
                                    .await
                                    .is_err()
                            {
                                return;
                            }
                            held = Some(chunk);
                        }
                    }
                    msg = live.rx.recv() => match msg {
                        Ok(env) if env.seq < next => {}
                        Ok(env) if env.seq == next => {
                            next += 1;
                            if tx.send(Ok(T::event(env))).await.is_err() {
                                return;
                            }
                        }
                        // A gap (or a lag): read what is missing from the log.
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                            if catch_up(&store, run, &mut next, u64::MAX, &tx).await.is_err() {
                                return;
                            }
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        });
        ReceiverStream::new(rx)
    }

    /// The live chunks of `run` from now on, alone: what a node of a cluster sends the other
    /// nodes whose subscribers follow the run. Ends when the receiver is dropped.
    pub fn run_chunks(&self, run: RunId) -> ReceiverStream<Arc<Chunk>> {
        let (tx, rx) = mpsc::channel(self.buffer_chunks);
        let (events, chunks) = self.channels(run, true);
        let mut live = Listener {
            rx: events,
            chunks,
            run,
            runs: self.runs.clone(),
        };
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = shutdown.cancelled() => return,
                    chunk = next_chunk(&mut live.chunks) => {
                        let sent = match chunk {
                            Some(chunk) => tx.send(chunk).await.is_ok(),
                            // Lagged, the lost chunks lost (the next ones follow), or closed.
                            None => live.chunks.is_some(),
                        };
                        if !sent {
                            return;
                        }
                    }
                }
            }
        });
        ReceiverStream::new(rx)
    }

    /// Whether a subscriber listens for `run`'s chunks on this node now.
    pub(crate) fn listens_for_chunks(&self, run: RunId) -> bool {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.get(&run)
            .and_then(|ch| ch.chunks.as_ref())
            .is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// Hands a chunk another node relayed to this node's subscribers of its run, as if written
    /// here.
    pub(crate) fn relay(&self, chunk: Arc<Chunk>) {
        let Some(run_tx) = self.listeners(chunk.data.run_id) else {
            return;
        };
        if let Some(tx) = &run_tx {
            let _ = tx.send(chunk.clone());
        }
        let _ = self.all_chunks.send(chunk);
    }

    /// Where the model answers of `run` send their pieces: to the run's subscribers and the
    /// all-runs streams that listen now, marked as coming after the run's event `after_seq`,
    /// with the TODO and agent they come from (none for the supervisor's own answer).
    pub(crate) fn chunk_sink(
        &self,
        run: RunId,
        after_seq: u64,
        todo_id: Option<TodoId>,
        agent: Option<String>,
    ) -> ChunkSink {
        let bus = self.clone();
        ChunkSink::new(move |delta| {
            let Some(run_tx) = bus.listeners(run) else {
                return;
            };
            let (kind_type, text) = match delta {
                Delta::Text(t) => (ChunkType::Message, t),
                Delta::Reasoning(t) => (ChunkType::Reasoning, t),
            };
            for piece in chunks::pieces(text) {
                let content = ChunkContent {
                    text: piece.to_owned(),
                    todo_id: todo_id.clone(),
                    agent: agent.clone(),
                };
                let chunk = Arc::new(Chunk {
                    after_seq,
                    data: ChunkData::new(run, kind_type, content),
                });
                // Broadcasting never waits: a subscriber that lags loses the oldest chunks.
                if let Some(tx) = &run_tx {
                    let _ = tx.send(chunk.clone());
                }
                let _ = bus.all_chunks.send(chunk);
            }
        })
    }

    /// Who listens for chunks of `run` now: `None` when nobody does (the chunk is not even
    /// built), else the run's chunk channel if it has listeners (the all-runs one may).
    fn listeners(&self, run: RunId) -> Option<Option<broadcast::Sender<Arc<Chunk>>>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let run_tx = runs
            .get(&run)
            .and_then(|ch| ch.chunks.clone())
            .filter(|tx| tx.receiver_count() > 0);
        (run_tx.is_some() || self.all_chunks.receiver_count() > 0).then_some(run_tx)
    }
}

/// The next chunk from `rx`; `None` after a lag (the missed chunks are lost) or when there is no
/// chunk channel (never ready then).
async fn next_chunk(rx: &mut Option<broadcast::Receiver<Arc<Chunk>>>) -> Option<Arc<Chunk>> {
    let Some(receiver) = rx.as_mut() else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(chunk) => Some(chunk),
        Err(broadcast::error::RecvError::Lagged(_)) => None,
        Err(broadcast::error::RecvError::Closed) => {
            *rx = None;
            None
        }
    }
}

/// A subscriber's end of its run's channels. The last one to go removes them, so the bus keeps
/// channels only for runs someone follows (a finished run sends nothing that would).
struct Listener {
    rx: broadcast::Receiver<Arc<Envelope>>,
    chunks: Option<broadcast::Receiver<Arc<Chunk>>>,
    run: RunId,
    runs: Channels,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        // This receiver still counts until it is dropped, after this.
        if runs
            .get(&self.run)
            .is_some_and(|ch| ch.events.receiver_count() <= 1)
        {
            runs.remove(&self.run);
        } else if self.chunks.is_some()
            && let Some(ch) = runs.get_mut(&self.run)
            && ch
                .chunks
                .as_ref()
                .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            // The last chunk listener: the run's chunk buffer goes with it.
            ch.chunks = None;
        }
    }
}

/// Sends every durable event of `run` from `*next` up to seq `upto` and advances `*next`,
/// reading the log one chunk at a time.
async fn catch_up<T: Item>(
    store: &Store,
    run: RunId,
    next: &mut u64,
    upto: u64,
    tx: &mpsc::Sender<Result<T, store::Error>>,
) -> Result<(), ()> {
    let durable = store.durable_next_offset();
    let chunk = SUBSCRIBER_BUFFER_EVENTS as u64;
    while *next <= upto {
        let last = (*next + chunk - 1).min(upto);
        // Read without blocking the runtime (a store over the network waits for it).
        let batch = match store.read_run_async(run, *next, last).await {
            Ok(batch) => batch,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return Err(());
            }
        };
        let complete = batch.len() as u64 == last - *next + 1;
        for env in batch {
            if env.offset >= durable {
                return Ok(());
            }
            *next = env.seq + 1;
            tx.send(Ok(T::event(Arc::new(env)))).await.map_err(|_| ())?;
        }
        if !complete {
            return Ok(());
        }
    }
    Ok(())
}
