//! Organization resources: secrets (write-only, encrypted at rest, with the hosts they may go to) and plain
//! variables. Names are what templates use: `{{secret.NAME}}` and `{{NAME}}`.

pub mod secrets;
pub mod variables;

use crate::http::error::{ApiError, ApiResult};
use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

/// Largest secret or variable value.
const MAX_VALUE: usize = 64 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(secrets::list_secrets))
        .routes(routes!(secrets::put_secret, secrets::delete_secret))
        .routes(routes!(variables::list_variables))
        .routes(routes!(variables::put_variable, variables::delete_variable))
}

/// Names usable in templates (`{{secret.NAME}}`, `{{NAME}}`): a letter or `_`, then letters, digits, `_`.
fn check_name(name: &str) -> ApiResult<()> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || name.len() > 128 || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(ApiError::invalid(format!(
            "`{name}` is not a valid name: use letters, digits and _ (not first), at most 128 characters"
        )));
    }
    Ok(())
}

fn check_value(value: &str) -> ApiResult<()> {
    if value.len() > MAX_VALUE {
        return Err(ApiError::invalid("`value` must be at most 64 KiB"));
    }
    Ok(())
}
