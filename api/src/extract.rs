//! Extractors whose rejections speak the API's error format: malformed JSON → 400, JSON of the
//! wrong shape (an array where an object is expected included) → 422, a body over the limit → 413, an unparsable path or query → 400.

use axum::body::{Body, Bytes};
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

#[derive(Debug)]
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
            .await
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::too_large("request body exceeds the limit")
                } else {
                    ApiError::bad_request(e.body_text())
                }
            })?;
        let req = Request::from_parts(parts, Body::from(bytes.clone()));
        match axum::Json::<T>::from_request(req, state).await {
            // serde reads a struct from an array of its fields too; every body of the API is an
            // object (or `null` where it may be absent), so an array is the wrong shape.
            Ok(_) if bytes.trim_ascii_start().starts_with(b"[") => Err(ApiError::unprocessable(
                "the body must be a JSON object, not an array",
            )),
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(JsonRejection::JsonDataError(e)) => Err(ApiError::unprocessable(e.body_text())),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::too_large("request body exceeds the limit"))
            }
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
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
