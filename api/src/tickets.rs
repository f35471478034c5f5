//! `POST /api/v1/stream-tickets`: a one-time ticket for a stream, for clients that cannot send
//! the `Authorization` header (a browser's `EventSource` or `WebSocket`); see [`crate::auth`].

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chronicle_wire::{ErrorBody, StreamTicket, StreamTicketRequest};

use crate::auth::{Principal, TICKET_TTL_MS};
use crate::extract::Json;
use crate::refusals::TicketError;
use crate::state::AppState;

#[utoipa::path(post, path = "/api/v1/stream-tickets", tag = "streams", request_body = StreamTicketRequest, security(("bearer" = [])),
    responses(
        (status = 201, description = "A ticket for one stream, valid for `expires_in_ms`: pass it as `?ticket=` to `/ws`, `/api/v1/events` or `/api/v1/agent/{run_id}/events` (for clients that cannot send the `Authorization` header, such as a browser's `EventSource` or `WebSocket`)", body = StreamTicket),
        (status = 400, description = "Malformed JSON (`bad_request`), or a `Host` header that names another server (`bad_host`)", body = ErrorBody),
        (status = 422, description = "A body other than `{}` (`unprocessable_entity`)", body = ErrorBody),
        TicketError,
    ))]
pub(crate) async fn issue_ticket(
    State(st): State<AppState>,
    Principal(who): Principal,
    Json(StreamTicketRequest {}): Json<StreamTicketRequest>,
) -> Result<Response, TicketError> {
    let ticket = st.tickets.issue(who)?;
    let body = StreamTicket {
        ticket,
        expires_in_ms: TICKET_TTL_MS,
    };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}
