//! Administration bodies: the scope catalog, API keys, the organization and its audit log.

use crate::api::fields::Name;
use crate::ids::{ApiKeyId, OrgId};
use crate::{Scope, Timestamp};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `GET /permissions`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Permissions {
    pub scopes: Vec<ScopeInfo>,
    pub presets: Vec<PresetInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ScopeInfo {
    pub scope: Scope,
    pub description: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PresetInfo {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub description: String,
}

/// `POST /api-keys`: either `scopes` or `preset`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    #[schema(schema_with = crate::api::rules::scopes)]
    pub scopes: Option<Vec<String>>,
    #[schema(schema_with = crate::api::rules::preset)]
    pub preset: Option<String>,
    pub expires_at: Option<Timestamp>,
}

impl CreateApiKey {
    /// A key of `name` and nothing else yet: give it `scopes` or a `preset`.
    pub fn new(name: Name) -> Self {
        CreateApiKey { name, scopes: None, preset: None, expires_at: None }
    }
}

/// An API key as listed; never carries the secret.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: String,
    pub scopes: Vec<Scope>,
    /// The first characters of the key, to recognise it; not a secret.
    pub prefix: String,
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
}

/// `POST /api-keys` answer: the key record plus its secret, shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub record: ApiKey,
    /// The secret. Store it now: it is never shown again.
    pub key: String,
}

/// Retention applied to webhook endpoints that set none of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_age_days: Option<i32>,
    #[schema(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub max_requests: Option<i64>,
}

/// `GET /organization`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Organization {
    pub id: OrgId,
    pub name: String,
    pub default_retention: Retention,
    /// Default `max_body_bytes` of new webhook endpoints.
    pub default_max_body_bytes: i64,
    /// Captures per second accepted by each endpoint before answering 429.
    pub capture_rate_limit_per_s: i32,
    /// Whether the operator lets the server's own requests for this organization (embedded runner, replay,
    /// import) reach loopback and private addresses. Set by the operator only.
    pub private_network: bool,
    pub created_at: Timestamp,
}

/// `PATCH /organization`: any subset of the changeable fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateOrganization {
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    pub default_retention: Option<Retention>,
    #[schema(schema_with = crate::api::rules::optional_body_limit)]
    pub default_max_body_bytes: Option<i64>,
    #[schema(minimum = 1, maximum = 2147483647)]
    pub capture_rate_limit_per_s: Option<i32>,
}

/// One entry of `GET /audit-log`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    pub id: Uuid,
    /// What happened, e.g. `api_key.created`.
    pub action: String,
    /// Who did it: `key:<id>`, `user:<id>` or `operator`.
    pub actor: String,
    /// The id or name of what it happened to.
    pub target: String,
    pub details: serde_json::Value,
    pub created_at: Timestamp,
}

/// `GET /organization/usage`: what the organization stores and has received today (UTC), and the limits in force
/// (its own, else the server's defaults; `null`: none).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Usage {
    /// Bytes of capture bodies and node results stored.
    #[schema(minimum = 0)]
    pub stored_bytes: i64,
    #[schema(minimum = 0)]
    pub endpoints: i64,
    #[schema(minimum = 0)]
    pub flows: i64,
    /// Captures received since 00:00 UTC (deleting them later does not give them back).
    #[schema(minimum = 0)]
    pub captures_today: i64,
    pub limits: UsageLimits,
}

/// The limits in force of `Usage`; `null`: none.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UsageLimits {
    #[schema(minimum = 0)]
    pub stored_bytes: Option<i64>,
    #[schema(minimum = 0)]
    pub endpoints: Option<i64>,
    #[schema(minimum = 0)]
    pub flows: Option<i64>,
    #[schema(minimum = 0)]
    pub captures_per_day: Option<i64>,
    #[schema(minimum = 1)]
    pub execution_retention_days: Option<i32>,
    #[schema(minimum = 1)]
    pub audit_retention_days: Option<i32>,
}
