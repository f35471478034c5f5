//! Several processes serving one store: which node drives which session's runs.
//!
//! A node joins under its name, heartbeats, and owns sessions. Ownership is fenced: each session
//! has an epoch, bumped by every change of owner, and every append of a joined node checks in its
//! own transaction that the node is still alive and still owns each session it writes to under
//! the epoch it claimed it with. Once another node took a session over, nothing the old owner
//! writes to it can land. Times are the database's, never a node's clock.
//!
//! Only a store several processes share implements it (PostgreSQL); the embedded stores have one
//! process, which drives every run.

use std::time::Duration;

use async_trait::async_trait;

use crate::Result;

/// A node as the others see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// Bumped each time a process joins under the name.
    pub incarnation: u64,
    /// Where the other nodes reach its internal routes.
    pub url: String,
    /// `alive`, `dead` (declared by another node) or `left` (stopped gracefully).
    pub state: String,
    /// Milliseconds since its last heartbeat, by the database's clock.
    pub quiet_ms: u64,
}

/// Who owns a session, as [`Membership::claim`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This node owns it now, under this epoch.
    Mine(u64),
    /// Another live node owns it.
    Elsewhere(Node),
}

/// A session this node gives up: nobody owns it until a node claims it, on an input or once
/// `wake_at` (µs since the epoch, database time) has passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub session: String,
    /// `None`: only an input wakes it.
    pub wake_at_us: Option<i64>,
}

/// The timing of liveness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// A node that has not heartbeat for this long is declared dead (machine loss, a partition,
    /// a stopped process).
    pub ttl: Duration,
    /// A node whose process is gone (its liveness lock is free) and that has not heartbeat for
    /// this long is declared dead: a crash is seen in about this time.
    pub crash_grace: Duration,
}

/// Nodes and the sessions they own (see the module documentation).
#[async_trait]
pub trait Membership: Send + Sync {
    /// Joins as node `name`, reachable at `url`: takes the name's liveness lock (refused with
    /// [`Error::Locked`](crate::Error::Locked) while another process runs under it), starts a new
    /// incarnation, releases what an earlier incarnation owned, and gives every session with an
    /// unfinished run that no node owns an ownership record, due now. Returns the incarnation.
    /// From then on every append of this store is fenced.
    async fn join(&self, name: &str, url: &str) -> Result<u64>;

    /// Tells the others this node is alive. [`Error::Fenced`](crate::Error::Fenced) when it was
    /// declared dead meanwhile: the store has stopped, and so must the node.
    async fn heartbeat(&self) -> Result<()>;

    /// Declares dead the nodes that stopped heartbeating (see [`Lease`]) and releases their
    /// sessions, due now. Returns their names.
    async fn sweep(&self, lease: Lease) -> Result<Vec<String>>;

    /// Makes this node the owner of `session`: a new one, one nobody owns, or one whose owner is
    /// dead (declared so now, when its lease says so). The owner when it is another live node.
    async fn claim(&self, session: &str, lease: Lease) -> Result<Claim>;

    /// Claims up to `limit` sessions nobody owns whose wake-up time has passed, oldest first,
    /// skipping those another node is claiming. Returns them.
    async fn claim_due(&self, limit: u32) -> Result<Vec<String>>;

    /// The sessions the database says this node owns and it does not know of (a claim whose
    /// answer was lost): taken as its own now. Returns them.
    async fn adopt(&self) -> Result<Vec<String>>;

    /// Whether this node owns `session` now (no database round trip).
    fn owns(&self, session: &str) -> bool;

    /// Gives up `session`, to be claimed on an input or at its wake-up time. It stops being
    /// this node's at once: an append to it is refused from now on.
    async fn release(&self, release: Release) -> Result<()>;

    /// Leaves gracefully: every session released, due now, and the node marked `left`.
    async fn leave(&self) -> Result<()>;

    /// The node that owns `session` now, `None` when nobody does.
    async fn owner(&self, session: &str) -> Result<Option<Node>>;
}
