//! Flows as code (issue #52, part A): a flow's `key`, the body of `POST /executions` (an inline definition run
//! without any stored flow) and where an execution's definition came from (`source`).

use crate::api::executions::LaunchMode;
use crate::api::fields::{Labels, Name, Refusal};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};

pub use crate::api::sources::{ExecutionSource, SourceKind};

/// A flow key: a lower-case letter or digit, then up to 63 of `a-z0-9_-`.
pub const FLOW_KEY: &str = "^[a-z0-9][a-z0-9_-]{0,63}$";

/// Whether `key` keeps the rule of [`FLOW_KEY`].
pub fn is_flow_key(key: &str) -> bool {
    let mut chars = key.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && key.len() <= 64
        && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The OpenAPI schema of a flow key.
pub fn flow_key_schema() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(64)).pattern(Some(FLOW_KEY))
}

/// A flow key or null.
pub fn optional_flow_key_schema() -> ObjectBuilder {
    flow_key_schema()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some("Unique in the organization; what a flow file names its flow by (`hookflow apply`)."))
}

/// A flow's key, held to [`FLOW_KEY`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct FlowKey(String);

impl FlowKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for FlowKey {
    type Error = Refusal;

    fn try_from(text: String) -> Result<Self, Refusal> {
        if !is_flow_key(&text) {
            return Err(Refusal::new(
                "`{field}` must be 1 to 64 of a-z, 0-9, `_` and `-`, starting with a letter or a digit",
            ));
        }
        Ok(FlowKey(text))
    }
}

impl std::str::FromStr for FlowKey {
    type Err = Refusal;

    fn from_str(text: &str) -> Result<Self, Refusal> {
        Self::try_from(text.to_owned())
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for FlowKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Longest `source.path`, `source.git_commit` and `source.git_ref`, in characters.
pub const SOURCE_TEXT_MAX: usize = 1_000;

/// `source` of `POST /executions`: where the definition came from, as the caller says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceIn {
    /// The file's path (1 to 1,000 characters), as the caller names it.
    #[schema(min_length = 1, max_length = 1000)]
    pub path: String,
    /// The Git commit the file was read at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1000)]
    pub git_commit: Option<String>,
    /// The Git branch (or other ref) checked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1000)]
    pub git_ref: Option<String>,
}

/// An environment carried inline by `POST /executions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InlineEnvironment {
    #[schema(schema_with = crate::api::rules::environment_key)]
    pub key: String,
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
}

/// `POST /executions`: run a definition without a stored flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InlineLaunch {
    /// The flow definition (API.md section 3), validated as a flow's; its JSON text as received is what
    /// `source.definition_sha256` hashes.
    #[schema(value_type = crate::flow::definition::FlowDefinition)]
    pub definition: Value,
    /// The execution's flow name (default `inline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<InlineEnvironment>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    #[schema(schema_with = crate::api::rules::labels)]
    pub runner_labels: Labels,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LaunchMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceIn>,
    /// 1 (highest) to 5 (lowest); absent: 3 (issue #53).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<crate::api::fields::Priority>,
    /// Run the definition once per row, as one batch (each row's values launch variables over `variables`; at
    /// most 10,000 rows): the answer is then `{batch_id, executions}` (issue #52).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 10000)]
    pub rows: Option<Vec<BTreeMap<String, String>>>,
}
