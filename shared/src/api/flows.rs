//! Flow bodies: flows, versions, environments, validation results, and the export document.

use crate::Timestamp;
use crate::api::executions::ExecutionStatus;
use crate::api::fields::{Name, ShortText, Tags};
use crate::api::flows_as_code::FlowKey;
use crate::api::patch::Patch;
use crate::flow::definition::Problem;
use crate::ids::{FlowId, FlowVersionId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `POST /flows` and `PUT /flows/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFlow {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    #[schema(schema_with = crate::api::rules::short_text)]
    pub description: Option<ShortText>,
    #[serde(default)]
    #[schema(schema_with = crate::api::rules::tags)]
    pub tags: Tags,
    /// The flow definition (API.md section 3), stored as given once valid.
    #[schema(value_type = crate::flow::definition::FlowDefinition)]
    pub definition: Value,
    /// A cron expression such as `0 * * * *`.
    pub schedule: Option<String>,
    /// **Added:** the flow's key, unique in the organization. On `PUT`, absent keeps the key the flow has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::flows_as_code::optional_flow_key_schema)]
    pub key: Option<FlowKey>,
    /// **Added:** whether `hookflow apply` manages the flow (default false; on `PUT`, absent keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<bool>,
}

impl WriteFlow {
    /// A flow of `name` and `definition`, without description, tags or schedule.
    pub fn new(name: Name, definition: Value) -> Self {
        WriteFlow {
            name,
            description: None,
            tags: Tags::default(),
            definition,
            schedule: None,
            key: None,
            managed: None,
        }
    }
}

/// `PATCH /flows/{id}`: absent fields stay; `null` clears description or schedule.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchFlow {
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(schema_with = crate::api::rules::short_text)]
    pub description: Patch<ShortText>,
    #[schema(schema_with = crate::api::rules::optional_tags)]
    pub tags: Option<Tags>,
    #[schema(value_type = Option<crate::flow::definition::FlowDefinition>)]
    pub definition: Option<Value>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<String>)]
    pub schedule: Patch<String>,
    /// **Added:** a new key, or `null` to clear it.
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(schema_with = crate::api::flows_as_code::optional_flow_key_schema)]
    pub key: Patch<FlowKey>,
    /// **Added:** whether `hookflow apply` manages the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Flow {
    pub id: FlowId,
    pub name: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    #[schema(value_type = crate::flow::definition::FlowDefinition)]
    pub definition: Value,
    pub schedule: Option<String>,
    pub draft_revision: i32,
    /// The newest published version number, if any.
    pub published_version: Option<i32>,
    pub last_status: Option<ExecutionStatus>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// **Added:** the flow's key (what a flow file names it by), or null.
    #[serde(default)]
    pub key: Option<String>,
    /// **Added:** made or taken over by `hookflow apply` (only such flows are pruned).
    #[serde(default)]
    pub managed: bool,
}

/// `POST /flows/search`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFlows {
    /// Text in the name or description.
    pub q: Option<String>,
    /// Flows carrying every one of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
    pub last_status: Option<ExecutionStatus>,
    #[schema(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TagCount {
    pub tag: String,
    pub count: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TagList {
    pub items: Vec<TagCount>,
}

/// **Added.** `POST /flows/validate`: a definition to check without storing it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateDefinition {
    /// The flow definition (API.md section 3): an object, or the request is refused before any check.
    #[schema(value_type = BTreeMap<String, Value>)]
    pub definition: Value,
    /// The flow the definition is meant for, so a module node naming it is reported.
    #[serde(default)]
    pub flow_id: Option<FlowId>,
}

/// `POST /flows/{id}/validate`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Validation {
    pub valid: bool,
    pub problems: Vec<Problem>,
}

/// `POST /flows/{id}/publish`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    #[schema(schema_with = crate::api::rules::short_text)]
    pub note: Option<ShortText>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowVersion {
    pub id: FlowVersionId,
    pub version: i32,
    pub note: Option<String>,
    #[schema(value_type = crate::flow::definition::FlowDefinition)]
    pub definition: Value,
    pub created_at: Timestamp,
}

/// `PUT /flows/{id}/environments/{key}`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutEnvironment {
    pub variables: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Environment {
    pub key: String,
    pub variables: BTreeMap<String, String>,
    /// Secret names the values reference (`{{secret.NAME}}`); never their values.
    pub secret_refs: Vec<String>,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EnvironmentList {
    pub items: Vec<Environment>,
}

/// The format name of the export document.
pub const EXPORT_FORMAT: &str = "hookflow.flow/v1";

/// `GET /flows/{id}/export` and `POST /flows/import`: self-contained, never with secret values.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowDocument {
    #[schema(value_type = String, pattern = "^hookflow\\.flow/v1$")]
    pub format: String,
    /// The flow as `POST /flows` takes it.
    pub flow: WriteFlow,
    #[serde(default)]
    pub versions: Vec<ExportedVersion>,
    #[serde(default)]
    pub environments: Vec<ExportedEnvironment>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedVersion {
    pub version: i32,
    #[schema(schema_with = crate::api::rules::short_text)]
    pub note: Option<String>,
    #[schema(value_type = crate::flow::definition::FlowDefinition)]
    pub definition: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedEnvironment {
    #[schema(schema_with = crate::api::rules::environment_key)]
    pub key: String,
    pub variables: BTreeMap<String, String>,
}

/// **Added.** `POST /flows/{flow_id}/try`: one request node to send now, with the flow's variables; nothing is
/// stored.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TryNode {
    /// One request node as a definition holds it (`kind: "request"`, with `request` or `request_ref`); any other
    /// kind is refused.
    #[schema(schema_with = request_node)]
    pub node: Value,
    /// Key of one of the flow's environments, whose variables the node sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Variables over the environment's and the flow's, as a launch's: plain values, never templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
}

/// `TryNode::node`: the request member of the node union (registered with the flow definition's schemas).
fn request_node() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::Ref::from_schema_name("RequestNode").into()
}
