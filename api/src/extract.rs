//! Extractors whose rejections speak the API's error format: malformed JSON → 400, JSON of the
//! wrong shape (an array where an object is expected included) → 422, a body over the limit →
//! 413, a body that does not arrive in time → 408, an unparsable path or query → 400. (A
//! state-changing request without a JSON `Content-Type` is refused before it gets here: 415.)
//!
//! And the request helpers every surface shares: a run id from a path ([`RunPath`]), a run the
//! caller may see ([`OwnedRun`]), a session id from a path ([`SessionPath`]); and the schemas
//! the document gives to parameters that are not one wire type.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use chronicle_schemas::{RunId, SessionId};
use serde::de::DeserializeOwned;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{
    AnyOfBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type,
};
use utoipa::openapi::{Ref, RefOr, Required};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use crate::auth::Principal;
use crate::connection::BodyTimeout;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// 408 when the body did not arrive within `body_read_timeout_ms` (the connection stopped
/// waiting for it, and closes after the answer).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> Option<ApiError> {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(t) = err.downcast_ref::<BodyTimeout>() {
            return Some(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                t.to_string(),
            ));
        }
        source = err.source();
    }
    None
}

/// The whole body, within the limit and the body-read timeout.
async fn body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large("request body exceeds the limit")
        } else {
            timed_out(&e).unwrap_or_else(|| ApiError::bad_request(e.body_text()))
        }
    })
}

#[derive(Debug)]
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body(req, state).await?;
        match axum::Json::<T>::from_bytes(&bytes) {
            // serde reads a struct from an array of its fields too; every body of the API is an
            // object (or `null` where it may be absent), so an array is the wrong shape.
            Ok(_) if bytes.trim_ascii_start().starts_with(b"[") => Err(ApiError::unprocessable(
                "the body must be a JSON object, not an array",
            )),
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(JsonRejection::JsonDataError(e)) => Err(ApiError::unprocessable(e.body_text())),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// A request body read and set aside, for routes that take none but whose clients may send one
/// (LangGraph clients send `{}` or nothing): reading it keeps the connection usable for the next
/// request.
#[derive(Debug)]
pub struct Unread;

impl<S: Send + Sync> FromRequest<S> for Unread {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        body(req, state).await.map(|_| Unread)
    }
}

#[derive(Debug)]
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e: PathRejection| ApiError::bad_request(e.body_text()))
    }
}

#[derive(Debug)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| ApiError::bad_request(e.body_text()))
    }
}

// ------------------------------------------------------------------ request helpers

/// `s` as a run id, else 400.
pub(crate) fn run_id(s: &str) -> ApiResult<RunId> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid run id {s:?}")))
}

/// `run` parsed, and one `who` may see: someone else's run is 404, as if it did not exist.
pub(crate) fn owned_run(
    st: &AppState,
    who: &chronicle_engine::Principal,
    run: &str,
) -> ApiResult<RunId> {
    let run = run_id(run)?;
    st.engine.authorize(who, run)?;
    Ok(run)
}

/// The run the path's `run_id` names (400 when it is not a run id). The engine decides who may
/// act on it.
#[derive(Clone, Copy, Debug)]
pub struct RunPath(pub RunId);

impl<S: Send + Sync> FromRequestParts<S> for RunPath {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(params) =
            Path::<HashMap<String, String>>::from_request_parts(parts, state).await?;
        let run = params
            .get("run_id")
            .ok_or_else(|| ApiError::internal("a run route without a run_id in its path"))?;
        run_id(run).map(RunPath)
    }
}

/// The run the path's `run_id` names, one the request's principal may see (someone else's run
/// is 404, as if it did not exist): 401 first, then 400 for a bad run id, then 404.
#[derive(Clone, Copy, Debug)]
pub struct OwnedRun(pub RunId);

impl FromRequestParts<AppState> for OwnedRun {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        let Principal(who) = Principal::from_request_parts(parts, st).await?;
        let RunPath(run) = RunPath::from_request_parts(parts, st).await?;
        st.engine.authorize(&who, run)?;
        Ok(Self(run))
    }
}

/// The path's `run_id` as the document declares it.
fn run_id_parameter() -> Parameter {
    ParameterBuilder::new()
        .name("run_id")
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some("The run"))
        .schema(Some(Ref::from_schema_name("RunId")))
        .build()
}

impl IntoParams for RunPath {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![run_id_parameter()]
    }
}

impl IntoParams for OwnedRun {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![run_id_parameter()]
    }
}

/// Declares extractors of one named parameter of the path, as sent (each route reads it at the
/// point where a bad one is told).
macro_rules! path_params {
    ($($(#[$doc:meta])* $name:ident = $param:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name(pub String);

        impl<S: Send + Sync> FromRequestParts<S> for $name {
            type Rejection = ApiError;
            async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
                let Path(mut params) =
                    Path::<HashMap<String, String>>::from_request_parts(parts, state).await?;
                params.remove($param).map($name).ok_or_else(|| {
                    ApiError::internal(concat!("a route without ", $param, " in its path"))
                })
            }
        }
    )*};
}

path_params! {
    /// The path's `approval_id`.
    ApprovalIdPath = "approval_id";
    /// The path's `checkpoint_id`.
    CheckpointIdPath = "checkpoint_id";
}

/// The session a path names (its one parameter): what a session id may be, else 400 (a longer
/// one names no session).
#[derive(Clone, Debug)]
pub struct SessionPath(pub SessionId);

impl<S: Send + Sync> FromRequestParts<S> for SessionPath {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(s) = Path::<String>::from_request_parts(parts, state).await?;
        let session = SessionId(s);
        chronicle_engine::check_session_id(&session)
            .map_err(|e| ApiError::bad_request(format!("invalid thread id: {e}")))?;
        Ok(SessionPath(session))
    }
}

/// The request's `Idempotency-Key` header, if any: a retry that sends the same key again gets
/// the run the first try started instead of a second one.
#[derive(Clone, Debug, Default)]
pub struct IdempotencyKey(pub Option<String>);

/// The header's name.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(v) = parts.headers.get(IDEMPOTENCY_KEY) else {
            return Ok(IdempotencyKey(None));
        };
        let key = v
            .to_str()
            .map_err(|_| ApiError::bad_request("the Idempotency-Key header is not ASCII text"))?;
        chronicle_engine::check_idempotency_key(key)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(IdempotencyKey(Some(key.to_owned())))
    }
}

impl IntoParams for IdempotencyKey {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![
            ParameterBuilder::new()
                .name("Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "Sent again with a retry of the same request: the same key (from the same \
                     principal) gives the run the first try started, never a second one. 1 to \
                     255 characters of visible ASCII.",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(1))
                        .max_length(Some(255))
                        .pattern(Some("^[!-~]+$")),
                ))
                .build(),
        ]
    }
}

// ------------------------------------------------------------------ schemas of parameters

/// A session (thread) id in a path or a query: 1..=64 characters without NUL.
pub(crate) struct ThreadId;

impl PartialSchema for ThreadId {
    fn schema() -> RefOr<Schema> {
        chronicle_wire::openapi::session_id().into()
    }
}

impl ToSchema for ThreadId {}

/// The sessions listing's `cursor`: opaque, as a page's `next_cursor` gives it.
pub(crate) struct SessionsCursor;

impl PartialSchema for SessionsCursor {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9a-f]{16}([0-9a-f]{2})+$"))
            .description(Some("A page's `next_cursor`, unchanged"))
            .into()
    }
}

impl ToSchema for SessionsCursor {}

/// The inbox's `older_than`: a duration or an instant.
pub(crate) struct OlderThan;

impl PartialSchema for OlderThan {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^[0-9]{1,18}(ms|s|m|h|d)$"))
                    .description(Some("A duration: `250ms`, `30s`, `5m`, `2h`, `1d`")),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
                    .description(Some("An RFC 3339 instant")),
            )
            .into()
    }
}

impl ToSchema for OlderThan {}

/// The audit export's `format`.
pub(crate) struct ExportFormat;

impl PartialSchema for ExportFormat {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["jsonl", "csv"]))
            .into()
    }
}

impl ToSchema for ExportFormat {}

/// A LangGraph id in a path (thread, run, checkpoint): a UUID.
pub(crate) struct LgUuid;

impl PartialSchema for LgUuid {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::Custom("uuid".into())))
            .pattern(Some(chronicle_wire::langgraph::UUID_PATTERN))
            .into()
    }
}

impl ToSchema for LgUuid {}
