//! Shared pieces of the API's answers: the schemas of answers that are one of several wire
//! types (a chat turn or a command's outcome, a health report or a refusal), an SSE answer with
//! the server's keep-alive, and what a run waiting for a human tells a person whose words
//! started nothing.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::header;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chronicle_wire::{ChatCommand, ChatTurn, ChatWaiting, ErrorBody, Health};
use futures_util::Stream;
use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::state::AppState;

/// What a person may say to a run that waits for them, told when their words meant nothing.
pub(crate) const WAITING_HINT: &str = "the run waits for a human and your message started \
    nothing: answer approve or reject, send a /command (/help lists them), or /new <query> to \
    start another run";

/// An SSE response with the configured keep-alive. Proxies are asked not to buffer it.
pub(crate) fn sse_response(
    st: &AppState,
    stream: impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
) -> Response {
    let keep_alive =
        KeepAlive::new().interval(Duration::from_millis(st.config.sse_keepalive_ms.max(1)));
    let mut res = Sse::new(stream).keep_alive(keep_alive).into_response();
    res.headers_mut()
        .insert("x-accel-buffering", header::HeaderValue::from_static("no"));
    res
}

// ------------------------------------------------------------------ schemas of answers

fn schema_ref<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

/// What a chat turn answers with 200: the turn, or a command's outcome.
pub(crate) struct ChatAnswer;

impl PartialSchema for ChatAnswer {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(schema_ref::<ChatTurn>())
            .item(schema_ref::<ChatCommand>())
            .into()
    }
}

impl ToSchema for ChatAnswer {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<ChatTurn>(schemas);
        add::<ChatCommand>(schemas);
    }
}

/// What `/healthz` answers with 503: the health of a store that cannot append, or the error of a
/// connection over the cap.
pub(crate) struct HealthOrBusy;

impl PartialSchema for HealthOrBusy {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(schema_ref::<Health>())
            .item(schema_ref::<ErrorBody>())
            .into()
    }
}

impl ToSchema for HealthOrBusy {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<Health>(schemas);
        add::<ErrorBody>(schemas);
    }
}

/// A turn answered 409 because the run waits for a human: the error, the turn and the approvals.
pub(crate) struct WaitingForHuman;

impl PartialSchema for WaitingForHuman {
    fn schema() -> RefOr<Schema> {
        AllOfBuilder::new()
            .item(schema_ref::<ErrorBody>())
            .item(schema_ref::<ChatWaiting>())
            .into()
    }
}

impl ToSchema for WaitingForHuman {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<ErrorBody>(schemas);
        add::<ChatWaiting>(schemas);
    }
}

/// [`WaitingForHuman`], or a plain conflict.
pub(crate) struct WaitingForHumanOrConflict;

impl PartialSchema for WaitingForHumanOrConflict {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(WaitingForHuman::schema())
            .item(schema_ref::<ErrorBody>())
            .into()
    }
}

impl ToSchema for WaitingForHumanOrConflict {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        WaitingForHuman::schemas(schemas);
    }
}

fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}
