//! What can go wrong talking to a server.

use chronicle_wire::ErrorBody;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server's address is not an `http(s)://host[:port]` URL.
    #[error("the server must be an http(s) URL like http://127.0.0.1:8080, got {0:?}")]
    Url(String),
    /// The server could not be reached, or the connection broke.
    #[error("cannot reach the server at {url}: {cause}")]
    Connection { url: String, cause: String },
    /// The server answered with an error: its status and its error body.
    #[error("{} (HTTP {status})", body.error.message)]
    Http { status: u16, body: ErrorBody },
    /// The answer is not the JSON the route sends.
    #[error("the answer to {what} does not decode: {source}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// The answer is not what the protocol promises (a content type, an SSE stream's order).
    #[error("{0}")]
    Protocol(String),
}

impl Error {
    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error body's `code` of an error answer (`not_found`, `conflict`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Http { body, .. } => Some(&body.error.code),
            _ => None,
        }
    }

    /// The server refused the request (a 4xx): the caller's to fix, not an outage.
    pub fn is_refusal(&self) -> bool {
        self.status().is_some_and(|s| (400..500).contains(&s))
    }
}

/// The innermost cause of a transport error (`connection refused`): what a user can act on.
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
