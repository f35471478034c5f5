//! The error answers the OpenAPI document declares, each written once:
//!
//! - the reusable responses (`RunNotFound`, `LgBusy`...): components of the document, each with
//!   the one status it answers;
//! - the error sets a handler returns (`RunReadError`, `LgRunStartError`...): an [`ApiError`]
//!   that answers as one (`IntoResponse`) and declares the statuses of its set
//!   (`IntoResponses`), so a route's annotation names the set instead of listing its answers.
//!
//! A set holds what the handler itself may answer. What the router answers before a handler
//! runs (a bad `Host`, a refused `Origin`, a missing token, a body too slow, too large or not
//! JSON, a full connection cap, a write quota) is declared for every route by the document's
//! post-processing (`openapi.rs`).

use std::collections::BTreeMap;

use axum::response::IntoResponse;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{IntoResponses, ToResponse};

use crate::error::ApiError;

/// Declares reusable responses: each a component of the document (`ToResponse`) and, alone,
/// the status it answers (`IntoResponses`), which an error set lists.
macro_rules! responses {
    ($($(#[$doc:meta])* $name:ident: $status:literal = $response:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<Response>) {
                (stringify!($name), $response)
            }
        }

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                BTreeMap::from([(
                    $status.to_owned(),
                    RefOr::Ref(Ref::from_response_name(stringify!($name))),
                )])
            }
        }
    )*};
}

responses! {
    /// 400, on every route that has no other.
    BadHost: "400" = error("A `Host` header that names another server (`bad_host`)");
    /// 401, on every route that takes a principal.
    Unauthorized: "401" = error("No bearer token, or an unknown one (`unauthorized`)");
    /// 403, on every route.
    Forbidden: "403" = error("The request comes from a web page whose `Origin` the server does not allow (`forbidden_origin`)");
    /// 404 of a run route.
    RunNotFound: "404" = error("No such run, another principal's, or a run of a deleted session (`not_found`: the same answer)");
    /// 408, on every route with a body.
    RequestTimeout: "408" = error("The body did not arrive within the server's body-read timeout (`request_timeout`); the connection is closed");
    /// 413, on every route with a body.
    PayloadTooLarge: "413" = error("The body is over the server's limit (256 KiB by default), or what the request would record is over an event's 64 KiB (`payload_too_large`); nothing was written");
    /// 415, on every route with a body.
    UnsupportedMediaType: "415" = error("A request that changes state without `Content-Type: application/json` (`unsupported_media_type`)");
    /// 429 of a state-changing route on a server with tokens.
    TooManyWrites: "429" = capped(TOO_MANY_WRITES);
    /// 500, on every route that reads the store.
    Internal: "500" = error("The log is damaged (`corrupt_log`, naming the offset: run `chronicle verify`), or an internal error (`internal_error`)");
    /// 503 of a route that reads or writes the store.
    Unavailable: "503" = capped(&format!("{}; or {BUSY}", upper_first(STORE_UNAVAILABLE)));
    /// 503 of a streaming route.
    StreamsUnavailable: "503" = capped(&format!(
        "The server streams as many streams as it may, in all or for this principal (`too_many_streams`, with `Retry-After`); {STORE_UNAVAILABLE}; or {BUSY}"
    ));
    /// 503 of `POST /api/v1/stream-tickets`.
    TicketsUnavailable: "503" = capped(&format!(
        "As many tickets are outstanding as the server keeps (`too_many_tickets`, with `Retry-After`: tickets expire after a minute); or {BUSY}"
    ));
    /// 503 of a route that touches nothing but the connection.
    Busy: "503" = capped(&upper_first(BUSY));
    /// 507, on every route that appends.
    InsufficientStorage: "507" = error("The disk is full (`insufficient_storage`): nothing was written; try again once space is freed");
}

// The LangGraph routes' errors: the same refusals, with the `{"detail"}` body.
responses! {
    LgBadHost: "400" = detail("A `Host` header that names another server");
    LgBadBody: "400" = detail("Malformed JSON, or a `Host` header that names another server");
    LgUnauthorized: "401" = detail("No bearer token, or an unknown one");
    LgForbidden: "403" = detail("The request comes from a web page whose `Origin` the server does not allow");
    LgThreadNotFound: "404" = detail("No thread has this id (or it is another principal's, or deleted)");
    LgRunNotFound: "404" = detail("No thread has this id, or the thread has no run with this id");
    LgRunNotStarted: "404" = detail("No thread has this id (and `if_not_exists` is not `create`), no assistant has this id or graph id, or a `checkpoint` names no checkpoint of the thread");
    LgRequestTimeout: "408" = detail("The body did not arrive within the server's body-read timeout; the connection is closed");
    LgRunConflict: "409" = detail("The thread is busy and `multitask_strategy` is `reject`; a `command` for a thread with no pending interrupt; a `checkpoint` inside an earlier turn (input goes after a turn's last checkpoint or from its first; without input only a turn's first checkpoint or one of the latest turn's is a place to run from); nothing was done");
    LgPayloadTooLarge: "413" = detail("The body is over the server's limit (256 KiB by default)");
    LgUnsupportedMediaType: "415" = detail("A request that changes state without `Content-Type: application/json`");
    LgRunRefused: "422" = detail("An id that is not a UUID, a field of the wrong type, an unknown stream mode, input without a human message, a resume value that decides nothing pending, both `input` and a `command` (an empty `input` object is none), or a run with neither input, command nor an older checkpoint; nothing was done");
    /// 429 of a state-changing LangGraph route on a server with tokens.
    LgTooManyWrites: "429" = capped_of("Detail", TOO_MANY_WRITES);
    LgInternal: "500" = detail("The log is damaged (run `chronicle verify`), or an internal error");
    /// 503 of a LangGraph route: the connection cap, with `Retry-After`.
    LgBusy: "503" = capped_of("Detail", &upper_first(BUSY));
    LgInsufficientStorage: "507" = detail("The disk is full: nothing was written; try again once space is freed");
}

/// Declares error sets: each an [`ApiError`] (any error converts into it with `?`) whose
/// `IntoResponses` is the union of its members'.
macro_rules! error_sets {
    ($($(#[$doc:meta])* $name:ident = [$($member:ident),* $(,)?];)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name(pub ApiError);

        impl<E: Into<ApiError>> From<E> for $name {
            fn from(e: E) -> Self {
                Self(e.into())
            }
        }

        impl IntoResponse for $name {
            fn into_response(self) -> axum::response::Response {
                self.0.into_response()
            }
        }

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                let mut all = BTreeMap::new();
                $(all.extend(<$member as IntoResponses>::responses());)*
                all
            }
        }
    )*};
}

error_sets! {
    /// A handler that reads the store.
    ReadError = [Internal, Unavailable];
    /// A handler that reads one run, named in its path.
    RunReadError = [RunNotFound, Internal, Unavailable];
    /// A handler that appends to the store.
    WriteError = [Internal, Unavailable, InsufficientStorage];
    /// A handler that appends to one run, named in its path.
    RunWriteError = [RunNotFound, Internal, Unavailable, InsufficientStorage];
    /// A stream of every run.
    StreamError = [StreamsUnavailable];
    /// A stream of one run, named in its path.
    RunStreamError = [RunNotFound, Internal, StreamsUnavailable];
    /// The stream tickets' handler.
    TicketError = [TicketsUnavailable];
    /// A LangGraph handler that reads the store.
    LgReadError = [LgInternal];
    /// A LangGraph handler that appends to the store.
    LgWriteError = [LgInternal, LgInsufficientStorage];
    /// A LangGraph handler that reads one thread.
    LgThreadReadError = [LgThreadNotFound, LgInternal];
    /// A LangGraph handler that changes one thread.
    LgThreadWriteError = [LgThreadNotFound, LgInternal, LgInsufficientStorage];
    /// A LangGraph handler that reads one run of a thread.
    LgRunReadError = [LgRunNotFound, LgInternal];
    /// A LangGraph handler that changes one run of a thread.
    LgRunWriteError = [LgRunNotFound, LgInternal, LgInsufficientStorage];
    /// A LangGraph handler that creates a run.
    LgRunStartError = [LgRunNotStarted, LgRunConflict, LgRunRefused, LgInternal, LgInsufficientStorage];
}

const TOO_MANY_WRITES: &str = "The caller is over its quota of writes a second (`too_many_writes`, with `Retry-After`): nothing was done";
const BUSY: &str =
    "the server holds as many connections as it may (`too_many_connections`, with `Retry-After`)";
const STORE_UNAVAILABLE: &str = "the store cannot take the request (`storage_unavailable`: it stopped after a failed fsync, and the server exits so that a restart recovers), or the server is shutting down (`shutting_down`)";

fn error(description: &str) -> RefOr<Response> {
    error_of("ErrorBody", description).build().into()
}

fn detail(description: &str) -> RefOr<Response> {
    error_of("Detail", description).build().into()
}

/// An error answer with the body schema called `body`.
fn error_of(body: &str, description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(body)))
            .build(),
    )
}

/// A refusal that may carry `Retry-After` (a full cap is worth retrying).
fn capped(description: &str) -> RefOr<Response> {
    capped_of("ErrorBody", description)
}

/// [`capped`] with the body schema called `body`.
fn capped_of(body: &str, description: &str) -> RefOr<Response> {
    let retry_after = HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .description(Some(
            "With `too_many_connections`, `too_many_streams`, `too_many_tickets` or `too_many_writes`: seconds to wait before trying again",
        ))
        .build();
    error_of(body, description)
        .header("Retry-After", retry_after)
        .build()
        .into()
}

fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
