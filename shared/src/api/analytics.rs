//! Analytics bodies: capture volume over time, method breakdown, the organization overview.

use crate::Timestamp;
use crate::ids::WebhookId;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Bucket {
    Minute,
    #[default]
    Hour,
    Day,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VolumePoint {
    /// Start of the bucket.
    pub t: Timestamp,
    pub count: i64,
    /// Captures whose signature verified.
    pub valid: i64,
    /// Captures whose signature did not verify (the `invalid` verdict only: not `missing`).
    pub invalid: i64,
}

/// `GET /webhooks/{id}/analytics/volume`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Volume {
    pub bucket: Bucket,
    pub from: Timestamp,
    pub to: Timestamp,
    pub total: i64,
    pub points: Vec<VolumePoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MethodCount {
    pub method: String,
    pub count: i64,
    /// Fraction of the total, 0 to 1.
    pub share: f64,
}

/// `GET /webhooks/{id}/analytics/methods`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MethodBreakdown {
    pub from: Timestamp,
    pub to: Timestamp,
    pub total: i64,
    pub methods: Vec<MethodCount>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EndpointCount {
    pub webhook_id: WebhookId,
    pub name: String,
    pub count: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CaptureTotals {
    pub total: i64,
    /// Busiest first.
    pub endpoints: Vec<EndpointCount>,
}

/// `GET /analytics/overview`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Overview {
    pub from: Timestamp,
    pub to: Timestamp,
    pub captures: CaptureTotals,
    /// Executions created in the window, by status (every status present, zeros included).
    pub executions: std::collections::BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutionPoint {
    /// Start of the bucket.
    pub t: Timestamp,
    pub succeeded: i64,
    /// Failed, errored and lost executions.
    pub failed: i64,
    /// Median duration of the bucket's finished executions; null when none finished.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// `GET /flows/{id}/analytics/executions`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutionStats {
    pub bucket: Bucket,
    pub from: Timestamp,
    pub to: Timestamp,
    pub points: Vec<ExecutionPoint>,
}
