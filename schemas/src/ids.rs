//! Typed ids, so a TODO id can never be passed where an approval id is expected.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One run = one stream of events.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct RunId(pub Uuid);

impl RunId {
    pub const fn from_u128(v: u128) -> Self {
        Self(Uuid::from_u128(v))
    }
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for RunId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
    };
}

string_id!(
    /// A conversation (the chat API's `thread_id`); several runs may share one.
    SessionId
);

/// The longest session id a run may be started with, in characters: 64 characters are at most
/// 256 bytes of UTF-8, what the store's session index keeps, and leave room for any id scheme
/// (a UUID is 36).
pub const SESSION_ID_CHARS_MAX: usize = 64;
string_id!(
    /// `todo_001`, `todo_002`, ... (the plan → TODO converter numbers them).
    TodoId
);
string_id!(
    /// One approval request; carries at most one decision.
    ApprovalId
);
string_id!(
    /// `cp_001`, `cp_002`, ... in the order the run saved them.
    CheckpointId
);
string_id!(
    /// One tool call inside an agent attempt.
    ToolCallId
);
