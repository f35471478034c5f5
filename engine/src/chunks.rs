//! Pieces of a model's answer while it is being written: they go to the run's live subscribers
//! (SSE, WebSocket) as they arrive and are never stored one by one; the whole message is one
//! durable event once the model has finished.

use std::sync::Arc;

use crate::llm::{Delta, OnDelta};

/// Where an agent (or a node) sends the deltas of a model answer. The default sends nowhere.
#[derive(Clone, Default)]
pub struct ChunkSink(Option<Arc<OnDelta<'static>>>);

impl std::fmt::Debug for ChunkSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ChunkSink")
            .field(&self.0.as_ref().map(|_| "live"))
            .finish()
    }
}

impl ChunkSink {
    pub fn new(send: impl for<'d> Fn(Delta<'d>) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(send)))
    }

    /// Sends one delta to whoever listens now (nobody: it is dropped).
    pub fn send(&self, delta: Delta<'_>) {
        if let Some(send) = &self.0 {
            send(delta);
        }
    }
}
