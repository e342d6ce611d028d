//! What a capture search matches: the structured filter (methods, time range, headers, query, body, JSONPath
//! conditions, sizes, address, signature verdicts) that searches, exports, endpoints' triggers and flows' waits
//! share.

use crate::Timestamp;
use serde::{Deserialize, Serialize};

/// Comparison of a search filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MatchOp {
    Eq,
    Ne,
    Contains,
    Prefix,
    Exists,
}

impl MatchOp {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Eq => "eq",
            MatchOp::Ne => "ne",
            MatchOp::Contains => "contains",
            MatchOp::Prefix => "prefix",
            MatchOp::Exists => "exists",
        }
    }
}

/// A header or query-parameter condition (names of headers match case-insensitively).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldMatch {
    pub name: String,
    pub op: MatchOp,
    pub value: Option<String>,
}

/// A condition on the JSON body at a JSONPath such as `$.action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonMatch {
    pub path: String,
    pub op: MatchOp,
    pub value: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFilter {
    pub methods: Option<Vec<String>>,
    pub received_after: Option<Timestamp>,
    pub received_before: Option<Timestamp>,
    #[serde(default)]
    pub headers: Vec<FieldMatch>,
    #[serde(default)]
    pub query: Vec<FieldMatch>,
    pub body_contains: Option<String>,
    #[serde(default)]
    pub body_json: Vec<JsonMatch>,
    pub content_type: Option<String>,
    pub min_size: Option<i64>,
    pub max_size: Option<i64>,
    pub source_ip: Option<String>,
    /// Captures with any of these signature verdicts.
    pub signatures: Option<Vec<crate::api::signatures::Verdict>>,
}
