//! Extractors whose rejections speak the API's error format: malformed JSON → 400, JSON of the
//! wrong shape (an array where an object is expected included) → 422, a body over the limit →
//! 413, a body that does not arrive in time → 408, an unparsable path or query → 400. (A
//! state-changing request without a JSON `Content-Type` is refused before it gets here: 415.)

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::connection::BodyTimeout;
use crate::error::ApiError;

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
