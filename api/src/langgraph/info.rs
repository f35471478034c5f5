//! `GET /info`: what a LangGraph client checks before anything else.

use axum::Json;
use chronicle_wire::langgraph::{ServerFlags, ServerInfo};

use crate::auth::Principal;
use crate::openapi::{LgBadHost, LgBusy, LgForbidden, LgUnauthorized};

#[utoipa::path(get, path = "/info", operation_id = "langgraph_info", tag = "langgraph", security(("bearer" = [])),
    responses(
        (status = 200, description = "The server's version and the LangGraph features it has (assistants; no crons)", body = ServerInfo),
        (status = 400, response = LgBadHost), (status = 401, response = LgUnauthorized),
        (status = 403, response = LgForbidden), (status = 503, response = LgBusy),
    ))]
pub(crate) async fn info(_who: Principal) -> Json<ServerInfo> {
    Json(ServerInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        flags: ServerFlags {
            assistants: true,
            crons: false,
            langsmith: false,
        },
    })
}
