//! Checks of plain fields that many handlers share: display names, bounded free text, runner labels. Each
//! answers 400 naming the field.

use crate::http::error::{ApiError, ApiResult};

/// Validates a display name: trimmed, 1 to 200 characters.
pub fn display_name(field: &str, name: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::invalid(format!("`{field}` must be 1 to 200 characters")));
    }
    Ok(name.to_owned())
}

/// Refuses optional free text longer than `max` characters, naming the field.
pub fn bounded_text(field: &str, value: Option<&str>, max: usize) -> ApiResult<()> {
    if value.is_some_and(|text| text.chars().count() > max) {
        return Err(ApiError::invalid(format!("`{field}` must be at most {max} characters")));
    }
    Ok(())
}

/// Labels: at most 20, each 1 to 64 characters without surrounding spaces.
pub fn check_labels(field: &str, labels: &[String]) -> ApiResult<()> {
    if labels.len() > 20 || labels.iter().any(|l| l.trim().is_empty() || l.len() > 64 || l.trim() != l) {
        return Err(ApiError::invalid(format!("invalid field `{field}`: at most 20 labels of 1 to 64 characters")));
    }
    Ok(())
}
