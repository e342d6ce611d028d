//! Resource bodies: organization secrets (write-only) and variables.

use crate::Timestamp;
use crate::api::fields::ValueText;
use serde::{Deserialize, Serialize};

/// `PUT /variables/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutValue {
    #[schema(schema_with = crate::api::rules::value)]
    pub value: ValueText,
}

/// `PUT /secrets/{name}`: the value and the secret's rules.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSecret {
    #[schema(schema_with = crate::api::rules::value)]
    pub value: ValueText,
    /// Hosts the secret may be sent to (`api.example.com`, `*.example.com`); empty: only hosts the stored flow
    /// and its environment name (a launch variable can never choose where a secret goes).
    #[serde(default)]
    #[schema(schema_with = crate::api::rules::host_patterns)]
    pub allowed_hosts: Vec<String>,
    /// Only registered runners get it; ephemeral runs (the CLI) do not.
    #[serde(default)]
    pub runners_only: bool,
}

/// A secret's metadata and rules; its value is never returned.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SecretInfo {
    pub name: String,
    pub allowed_hosts: Vec<String>,
    pub runners_only: bool,
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
