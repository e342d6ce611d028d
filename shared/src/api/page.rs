//! The list shape every collection endpoint answers: `{"items": [...], "next_cursor": "..." | null}`.

use serde::{Deserialize, Serialize};

/// Largest page a list answers; larger requested limits are clamped to it.
pub const MAX_LIMIT: i64 = 100;
/// Page size when the caller names none.
pub const DEFAULT_LIMIT: i64 = 50;

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque; pass it back as `cursor` for the next page. `null` on the last page.
    pub next_cursor: Option<String>,
}
