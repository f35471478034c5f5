//! The API's views of a run's state in the shared wire types: an approval with its run, and the
//! checkpoint list (the REST routes and the WebSocket show the same shapes).

use chronicle_schemas::{Approval, RunId};
use chronicle_wire::{ApprovalView, CheckpointList};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// An approval as the API shows it (`id` is the approval id), with its run.
pub(crate) fn approval_json(run: RunId, a: &Approval) -> Value {
    // A view is plain data: it always encodes.
    serde_json::to_value(ApprovalView::new(run, a.clone())).unwrap_or(Value::Null)
}

/// The checkpoint tree of `run` as it stands, abandoned checkpoints included.
pub(crate) fn checkpoints_of(st: &AppState, run: RunId) -> ApiResult<axum::Json<Value>> {
    let s = st.engine.state(run, None)?;
    let list = CheckpointList::new(
        run,
        s.checkpoints.head.clone(),
        s.checkpoints.with_abandoned(),
    );
    Ok(axum::Json(
        serde_json::to_value(list).map_err(ApiError::internal)?,
    ))
}
