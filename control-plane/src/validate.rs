//! Checks of plain fields that many handlers share: display names, bounded free text, runner labels. Each
//! answers 400 naming the field.

use crate::error::{ApiError, ApiResult};
use hookflow_shared::api::rules::{NAME_MAX, TAG_MAX, TAGS_MAX, is_blank};

/// Validates a display name (1 to 200 characters, not only white space) and answers it trimmed.
pub fn display_name(field: &str, name: &str) -> ApiResult<String> {
    if is_blank(name) || name.chars().count() > NAME_MAX {
        return Err(ApiError::invalid(format!("`{field}` must be 1 to {NAME_MAX} characters, not only white space")));
    }
    Ok(name.trim().to_owned())
}

/// Refuses optional free text longer than `max` characters, naming the field.
pub fn bounded_text(field: &str, value: Option<&str>, max: usize) -> ApiResult<()> {
    if value.is_some_and(|text| text.chars().count() > max) {
        return Err(ApiError::invalid(format!("`{field}` must be at most {max} characters")));
    }
    Ok(())
}

/// Labels: at most 20, each 1 to 64 characters without surrounding white space.
pub fn check_labels(field: &str, labels: &[String]) -> ApiResult<()> {
    let bad = |l: &String| l.is_empty() || l.chars().count() > TAG_MAX || l.trim() != l;
    if labels.len() > TAGS_MAX || labels.iter().any(bad) {
        return Err(ApiError::invalid(format!("invalid field `{field}`: at most 20 labels of 1 to 64 characters")));
    }
    Ok(())
}
