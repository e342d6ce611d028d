//! Values held to a field's rule (`hookflow_shared::api::fields`) that do not arrive as that field of a request
//! body: a document's title, a request an import generated, a host a runner reports, an operator's argument. A
//! body's own fields are parsed into those types as it is read (`extract::parse_json`).

use crate::error::{ApiError, ApiResult};
use hookflow_shared::api::fields::Refusal;

/// Parses `value` into a rule's type; a refusal is a 400 naming `field`.
pub fn field<T: TryFrom<String, Error = Refusal>>(field: &str, value: impl Into<String>) -> ApiResult<T> {
    T::try_from(value.into()).map_err(|refusal| ApiError::invalid(refusal.for_field(field)))
}
