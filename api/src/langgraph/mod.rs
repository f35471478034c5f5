//! The LangGraph Agent Server API, served at the root (`/info`, `/assistants/...`) beside
//! Chronicle's own routes, so a LangGraph client (`langgraph-sdk`, agent-chat-ui) is given the
//! server's plain URL and works unchanged. Threads are Chronicle sessions, a LangGraph run is one
//! Chronicle run (a turn), interrupts are pending approvals.
//!
//! Errors on these paths are LangGraph's `{"detail": "..."}` with the status Chronicle would give
//! (see [`detail`]).

mod assistants;
mod branch;
pub mod detail;
mod filter;
mod graphs;
mod info;
mod loaded;
mod records;
mod request;
mod runs;
mod stream;
mod thread_index;
mod thread_search;
mod threads;
pub mod views;

#[doc(hidden)]
pub use thread_search::full_scan as thread_search_full_scan;
pub use thread_search::{THREAD_SEARCH_EXAMINED_MAX, THREAD_SEARCH_LOADED_MAX};

/// Builds the thread index of a store whose thread records predate it (once: a store whose
/// index is built is not read); how many threads it indexed.
pub fn build_thread_index(store: &chronicle_engine::store::Store) -> Result<usize, ApiError> {
    thread_index::build(store)
}

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::state::AppState;

/// The LangGraph routes, to be merged into the API's router: each path's handlers, whose
/// `#[utoipa::path]` gives the route and its OpenAPI entry.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(info::info))
        .routes(routes!(assistants::search))
        .routes(routes!(assistants::get_assistant))
        .routes(routes!(assistants::graph))
        .routes(routes!(assistants::schemas))
        .routes(routes!(threads::create))
        .routes(routes!(threads::search))
        .routes(routes!(threads::get, threads::delete))
        .routes(routes!(threads::state, threads::update_state))
        .routes(routes!(threads::state_at_checkpoint_post))
        .routes(routes!(threads::state_at_checkpoint))
        .routes(routes!(threads::history))
        .routes(routes!(threads::copy))
        .routes(routes!(runs::list, runs::create_on_thread))
        .routes(routes!(runs::stream_on_thread))
        .routes(routes!(runs::wait_on_thread))
        .routes(routes!(runs::get, runs::delete))
        .routes(routes!(runs::join))
        .routes(routes!(runs::join_stream))
        .routes(routes!(runs::cancel))
        .routes(routes!(runs::create_stateless))
        .routes(routes!(runs::cancel_many))
        .routes(routes!(runs::stream_stateless))
        .routes(routes!(runs::wait_stateless))
}
