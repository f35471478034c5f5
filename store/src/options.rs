//! Store settings. Every limit carries its unit; each field says which implementation reads it.

/// When a caller is acknowledged relative to the durability barrier (sled).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledge after the batch passed the barrier (the default).
    #[default]
    Sync,
    /// Acknowledge before the barrier; a background thread runs it every `async_flush_ms`.
    /// A crash may lose the last `async_flush_ms` of acknowledged appends.
    Async,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(Durability::Sync),
            "async" => Ok(Durability::Async),
            _ => Err(format!("durability must be `sync` or `async`, got {s:?}")),
        }
    }
}

/// Store settings. `follow_buffer_events` and `snapshot_interval_events` apply to every store
/// (the [`Store`](crate::Store) handle reads them); those starting `pg_` are the PostgreSQL
/// store's, the others the sled store's.
#[derive(Clone, Debug)]
pub struct Options {
    pub durability: Durability,
    pub async_flush_ms: u64,
    /// sled's page cache.
    pub cache_capacity_bytes: u64,
    /// Most events one group-commit batch takes before it passes the barrier.
    pub append_batch_events_max: usize,
    /// Appends waiting for the writer before `append` applies back-pressure.
    pub write_queue_requests: usize,
    /// How many of the newest records `open` checks (decode and chain).
    pub open_verify_tail_events: u64,
    /// Drop an undecodable final record on open instead of refusing to open.
    pub repair_truncate_tail: bool,
    /// Buffer of each `follow` subscriber.
    pub follow_buffer_events: usize,
    pub snapshot_interval_events: u64,
    /// How long `open` waits for another holder of the database lock (a store of this process
    /// that is still closing) before it gives up.
    pub open_lock_wait_ms: u64,
    /// Free disk space the store keeps: an append that would leave less is refused with
    /// [`Error::StorageFull`](crate::Error::StorageFull) before anything is written (sled cannot
    /// recover from a write that fails for lack of space without a restart).
    pub disk_reserve_bytes: u64,
    /// Store each append's records compressed (zstd with a dictionary of the event shapes) when
    /// that makes them smaller. Either way the store reads both.
    pub compress_values: bool,
    /// PostgreSQL: most connections the store's pool opens.
    pub pg_pool_connections: usize,
    /// PostgreSQL: how long a statement waits for a lock (the log head's, a record's) before it
    /// is refused as unavailable.
    pub pg_lock_timeout_ms: u64,
    /// PostgreSQL: a transaction left idle this long (a frozen process holding the log head)
    /// is ended by the server.
    pub pg_idle_in_transaction_ms: u64,
    /// PostgreSQL: how long connecting, or waiting for a pooled connection, may take.
    pub pg_connect_timeout_ms: u64,
    /// PostgreSQL: how often the follower reads the log head besides the notifications.
    pub pg_poll_ms: u64,
    /// PostgreSQL: how long the store keeps asking whether a commit whose answer was lost
    /// happened, before it stops (fail-stop) rather than guess.
    pub pg_reconcile_ms: u64,
    /// PostgreSQL fault drill: the writer holds the log head's lock this long between the two
    /// round trips of every append (0: not at all), so that a test can cut its connection there
    /// or see what others wait for.
    #[doc(hidden)]
    pub pg_drill_hold_lock_ms: u64,
    /// PostgreSQL fault drill: every n-th commit (0: none) is answered as if its connection
    /// broke after it was sent, so that its outcome is learned by asking the database.
    #[doc(hidden)]
    pub pg_drill_lose_commit_answer_every: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            durability: Durability::Sync,
            async_flush_ms: 10,
            cache_capacity_bytes: 256 * 1024 * 1024,
            append_batch_events_max: 4096,
            write_queue_requests: 4096,
            open_verify_tail_events: 1024,
            repair_truncate_tail: false,
            follow_buffer_events: 256,
            snapshot_interval_events: chronicle_projections::SNAPSHOT_INTERVAL_EVENTS,
            open_lock_wait_ms: 3000,
            disk_reserve_bytes: 64 * 1024 * 1024,
            compress_values: true,
            pg_pool_connections: 16,
            pg_lock_timeout_ms: 10_000,
            pg_idle_in_transaction_ms: 5_000,
            pg_connect_timeout_ms: 5_000,
            pg_poll_ms: 250,
            pg_reconcile_ms: 30_000,
            pg_drill_hold_lock_ms: 0,
            pg_drill_lose_commit_answer_every: 0,
        }
    }
}
