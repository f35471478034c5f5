//! `GET /info`: what a LangGraph client checks before anything else.

use axum::Json;
use chronicle_wire::langgraph::{ServerFlags, ServerInfo};

use crate::auth::Principal;

#[utoipa::path(get, path = "/info", operation_id = "langgraph_info", tag = "langgraph", security(("bearer" = [])),
    responses(
        (status = 200, description = "The server's version and the LangGraph features it has (assistants; no crons)", body = ServerInfo),
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
