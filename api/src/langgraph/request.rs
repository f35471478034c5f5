//! What the LangGraph routes' requests carry and their pages answer: the ids of a path, each
//! declared once for the document; a page's size; a page with its pagination headers.

use std::collections::HashMap;

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use chronicle_wire::langgraph::PAGE_MAX;
use utoipa::openapi::Required;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::{IntoParams, PartialSchema};

use crate::error::{ApiError, ApiResult};
use crate::extract::{LgUuid, Path};

/// The path's `thread_id`, as sent: a handler reads it as a UUID ([`super::loaded::uuid_of`])
/// at the point where a bad one is told.
#[derive(Clone, Debug)]
pub(crate) struct ThreadPath(pub String);

/// The path's `thread_id` and `run_id`, as sent (see [`ThreadPath`]).
#[derive(Clone, Debug)]
pub(crate) struct ThreadRunPath(pub String, pub String);

/// The named parameters of the path.
async fn path_params<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
) -> Result<HashMap<String, String>, ApiError> {
    let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state).await?;
    Ok(params)
}

fn param(params: &mut HashMap<String, String>, name: &str) -> Result<String, ApiError> {
    params
        .remove(name)
        .ok_or_else(|| ApiError::internal(format!("a route without {name} in its path")))
}

impl<S: Send + Sync> FromRequestParts<S> for ThreadPath {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let mut params = path_params(parts, state).await?;
        Ok(Self(param(&mut params, "thread_id")?))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ThreadRunPath {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let mut params = path_params(parts, state).await?;
        Ok(Self(
            param(&mut params, "thread_id")?,
            param(&mut params, "run_id")?,
        ))
    }
}

/// A UUID of the path, as the document declares it.
fn uuid_parameter(name: &str, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(LgUuid::schema()))
        .build()
}

const THREAD: &str = "The thread: a UUID";
const RUN: &str = "The run: a UUID";

impl IntoParams for ThreadPath {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![uuid_parameter("thread_id", THREAD)]
    }
}

impl IntoParams for ThreadRunPath {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![
            uuid_parameter("thread_id", THREAD),
            uuid_parameter("run_id", RUN),
        ]
    }
}

/// A page's size: `limit` (10 when absent) within 1..=1000, else 422.
pub(crate) fn page_limit(limit: Option<u64>) -> ApiResult<usize> {
    let limit = limit.unwrap_or(10);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::unprocessable(format!(
            "limit must be between 1 and {PAGE_MAX}, got {limit}"
        )));
    }
    Ok(limit as usize)
}

/// One page of `all` as JSON, with `X-Pagination-Total` (and `X-Pagination-Next` when more
/// follow).
pub(crate) fn paged<T: serde::Serialize>(
    all: Vec<T>,
    offset: Option<u64>,
    limit: usize,
) -> Response {
    let total = all.len();
    let offset = usize::try_from(offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let page: Vec<T> = all.into_iter().skip(offset).take(limit).collect();
    page_of(page, total, offset, limit)
}

/// `page` (at `offset`, of `total` in all) as JSON with the pagination headers.
pub(crate) fn page_of<T: serde::Serialize>(
    page: Vec<T>,
    total: usize,
    offset: usize,
    limit: usize,
) -> Response {
    let mut res = Json(page).into_response();
    let headers = res.headers_mut();
    headers.insert("x-pagination-total", HeaderValue::from(total));
    let next = offset.saturating_add(limit);
    if next < total {
        headers.insert("x-pagination-next", HeaderValue::from(next));
    }
    res
}
