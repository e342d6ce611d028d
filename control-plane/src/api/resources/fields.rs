//! What secrets and variables read alike: the `{name}` of their routes, and the check of a name.

use crate::error::{ApiError, ApiResult};
use crate::extract::ApiPath;

/// The `{name}` of a secret's or a variable's routes: `ResourceName(name): ResourceName`.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(names("name"), parameter_in = Path)]
pub struct ResourceName(
    /// A letter or `_`, then letters, digits and `_`; at most 128 characters.
    #[param(schema_with = hookflow_shared::api::rules::resource_name)]
    pub String,
);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ResourceName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        ApiPath::<String>::from_request_parts(parts, state).await.map(|ApiPath(name)| ResourceName(name))
    }
}

/// Names usable in templates (`{{secret.NAME}}`, `{{NAME}}`): a letter or `_`, then letters, digits, `_`.
pub(super) fn check_name(name: &str) -> ApiResult<()> {
    if !hookflow_shared::api::rules::is_resource_name(name) {
        return Err(ApiError::invalid(format!(
            "`{name}` is not a valid name: a letter or _, then letters, digits and _, at most 128 characters"
        )));
    }
    Ok(())
}
