//! Request extractors that answer the contract's errors: JSON bodies (unknown fields refused, the failing field
//! named), query strings and path ids.

use crate::error::{ApiError, ApiResult};
use crate::strict_json::StrictJson;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use hookflow_shared::ErrorCode;
use hookflow_shared::api::fields::Refusal;
use serde::de::DeserializeOwned;

/// A JSON request body. Any content type is accepted (curl sends forms by default); the body must be JSON.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, "request body too large")
            } else {
                ApiError::invalid(format!("could not read the request body: {rejection}"))
            }
        })?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses a JSON body, naming the field at fault (`scopes[1]: unknown scope ...`).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    if bytes.is_empty() {
        return Err(ApiError::invalid("the request body is empty; send a JSON object"));
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))?;
    serde_path_to_error::deserialize(StrictJson(&value)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if let Some(refusal) = Refusal::from_message(&inner) {
            // A field's rule (`fields`): its own message, naming the field's path.
            ApiError::invalid(refusal.for_field(&path))
        } else if path == "." || path.is_empty() {
            ApiError::invalid(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::invalid(format!("invalid field `{path}`: {inner}"))
        }
    })
}

/// Query-string parameters; a malformed value answers 400 naming it.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        if let Some((name, _)) =
            form_urlencoded::parse(query.as_bytes()).find(|(n, v)| n.contains('\0') || v.contains('\0'))
        {
            return Err(ApiError::invalid(format!("invalid query parameter `{name}`: it holds a NUL character")));
        }
        let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(ApiQuery)
            .map_err(|e| ApiError::invalid(format!("invalid query parameter `{}`: {}", e.path(), e.inner())))
    }
}

/// A path id: anything that is not a UUID names no resource, so it answers 404.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|_| ApiError::not_found("resource"))
    }
}

/// The `{id}` of a route that names one resource, as its typed id: `Id(id): Id<FlowId>`. Anything that is not a
/// UUID answers 404. Handlers document it as `params(Id)`.
#[derive(Debug, Clone, Copy)]
pub struct Id<T = uuid::Uuid>(pub T);

/// How `params(Id)` documents the `{id}`, whatever the id's type (each is a UUID).
#[derive(utoipa::IntoParams)]
#[into_params(names("id"), parameter_in = Path)]
#[allow(dead_code)]
struct IdParameter(
    /// The resource's id.
    uuid::Uuid,
);

impl<T> utoipa::IntoParams for Id<T> {
    fn into_params(
        parameter_in: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>,
    ) -> Vec<utoipa::openapi::path::Parameter> {
        IdParameter::into_params(parameter_in)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Id<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        ApiPath::<T>::from_request_parts(parts, state).await.map(|ApiPath(id)| Id(id))
    }
}
