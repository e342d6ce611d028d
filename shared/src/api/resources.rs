//! Resource bodies: organization secrets (write-only) and variables.

use crate::Timestamp;
use serde::{Deserialize, Serialize};

/// `PUT /secrets/{name}` and `PUT /variables/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutValue {
    pub value: String,
}

/// A secret's metadata; its value is never returned.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SecretInfo {
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Variable {
    pub name: String,
    pub value: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
