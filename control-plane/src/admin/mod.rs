//! Administration: the scope catalog, API keys, the organization and its audit log.

pub mod keys;
pub mod organization;
pub mod permissions;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(permissions::routes()).merge(keys::routes()).merge(organization::routes())
}

/// Validates a display name: trimmed, 1 to 200 characters.
pub fn display_name(field: &str, name: &str) -> Result<String, crate::error::ApiError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(crate::error::ApiError::invalid(format!("`{field}` must be 1 to 200 characters")));
    }
    Ok(name.to_owned())
}

/// Refuses optional free text longer than `max` characters, naming the field.
pub fn bounded_text(field: &str, value: Option<&str>, max: usize) -> Result<(), crate::error::ApiError> {
    if value.is_some_and(|text| text.chars().count() > max) {
        return Err(crate::error::ApiError::invalid(format!("`{field}` must be at most {max} characters")));
    }
    Ok(())
}
