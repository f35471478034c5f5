//! What a turn is given besides its query: the session's earlier turns (its conversation) and the
//! user's long-term memory. Both are recorded in the run that was given them, so a replay shows
//! exactly what the turn saw.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{RunId, RunStatus, Timestamp};

/// An earlier turn of the session, as a later turn was given it (`SessionContextLoaded`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct PriorTurn {
    /// The earlier turn's run.
    pub run_id: RunId,
    /// The last event of that run the turn drew on.
    pub seq: u64,
    pub query: String,
    /// The turn's final answer as text (cut to the context budget); empty when it had none.
    pub answer: String,
    /// How that run stood then.
    pub status: RunStatus,
}

/// What a remembered item is: a fact about the user, or a preference that shapes later turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    #[default]
    Fact,
    Preference,
}

/// One item of a user's long-term memory, saved at the end of a turn (`MemorySaved`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct Memory {
    /// `mem_<uuid>`: unique over the whole log.
    pub memory_id: String,
    pub kind: MemoryKind,
    /// What it is about (`deal_type`, `district`, ...): a later preference with the same key
    /// replaces an earlier one when memories are loaded.
    pub key: String,
    /// The domain's value (`"jeonse"`: any JSON), for the rules that use it.
    pub value: Value,
    /// The item in words, for people and prompts.
    pub text: String,
    /// The user it belongs to.
    pub user_id: String,
    /// The run whose turn saved it.
    pub run_id: RunId,
    pub saved_at: Option<Timestamp>,
}
