//! Pieces of a model's answer while it is being written: they go to the run's live subscribers
//! (SSE, WebSocket) as they arrive and are never stored one by one; the whole message is one
//! durable event once the model has finished.
//!
//! A [`ChunkSink`] is what a writer (the respond node through [`crate::llm::Llm::streaming`], an
//! agent through its `AgentContext`) sends deltas to; the bus builds it for a run
//! ([`crate::Bus`]), and it never waits for anyone: with nobody listening a delta costs a lookup.

use std::sync::Arc;

use chronicle_wire::ChunkData;

use crate::plugin::llm::{Delta, OnDelta};

/// Bytes of text one chunk carries at most: a longer delta (a server that sent its answer whole)
/// goes out as several chunks, so that what a run's buffer holds stays small.
pub const CHUNK_TEXT_BYTES_MAX: usize = 4 * 1024;

/// A chunk as one node of a cluster sends it to another, whose subscribers follow the run: one
/// JSON line each.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelayedChunk {
    pub after_seq: u64,
    pub data: ChunkData,
}

impl From<&Chunk> for RelayedChunk {
    fn from(c: &Chunk) -> Self {
        RelayedChunk {
            after_seq: c.after_seq,
            data: c.data.clone(),
        }
    }
}

impl From<RelayedChunk> for Chunk {
    fn from(c: RelayedChunk) -> Self {
        Chunk {
            after_seq: c.after_seq,
            data: c.data,
        }
    }
}

/// One live chunk: its `data` as the streams send it, and the seq of the run's last event when
/// it was written, so a subscriber can send it after that event (and the events before it),
/// never before.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub(crate) after_seq: u64,
    pub data: ChunkData,
}

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

/// `text` in pieces of at most [`CHUNK_TEXT_BYTES_MAX`] bytes, cut between characters.
pub(crate) fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(CHUNK_TEXT_BYTES_MAX);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_between_characters() {
        let text = "가".repeat(CHUNK_TEXT_BYTES_MAX);
        let cut: Vec<&str> = pieces(&text).collect();
        // 4,095 bytes a piece: the next character would not fit.
        assert_eq!(cut.len(), 4);
        assert!(cut.iter().all(|p| p.len() <= CHUNK_TEXT_BYTES_MAX));
        assert_eq!(cut.concat(), text);
        assert_eq!(pieces("").count(), 0);
        assert_eq!(pieces("short").collect::<Vec<_>>(), ["short"]);
    }
}
