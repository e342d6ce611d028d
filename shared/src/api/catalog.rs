//! Catalog and sandbox bodies: extractor kinds, assertion operators, special nodes, and their evaluators.

use crate::flow::assert::Operator;
use crate::flow::extract::Extractor;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub required: bool,
}

/// One entry of `GET /extractors` or `GET /special-nodes`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KindInfo {
    pub kind: String,
    pub description: String,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KindList {
    pub items: Vec<KindInfo>,
}

/// A response to run an extractor on.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleResponse {
    #[serde(default = "ok_status")]
    #[schema(minimum = 100, maximum = 599)]
    pub status: u16,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: String,
}

fn ok_status() -> u16 {
    200
}

/// `POST /extractors/evaluate`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateExtractor {
    pub extractor: Extractor,
    pub response: SampleResponse,
}

/// The extracted value; absent when nothing matched.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Extracted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OperatorInfo {
    pub name: String,
    pub description: String,
    pub takes_expected: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OperatorList {
    pub items: Vec<OperatorInfo>,
}

/// A check on a named value (its OpenAPI schema: `flow::assertion_schema`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    pub source: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
}

/// `POST /assertions/evaluate`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateAssertions {
    pub assertions: Vec<Assertion>,
    #[serde(default)]
    pub values: BTreeMap<String, Value>,
}

/// The outcome of one assertion.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AssertionResult {
    pub source: String,
    pub operator: Operator,
    pub expected: Option<Value>,
    pub actual: Option<Value>,
    pub passed: bool,
    /// `type_mismatch`, `missing` or a short text; null when passed.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AssertionResults {
    pub results: Vec<AssertionResult>,
}

impl Assertion {
    /// Evaluates against the value named by `source` (absent from `values`: missing).
    pub fn evaluate(&self, values: &BTreeMap<String, Value>) -> AssertionResult {
        let actual = values.get(&self.source);
        let outcome = crate::flow::assert::evaluate(self.operator, actual, self.expected.as_ref());
        AssertionResult {
            source: self.source.clone(),
            operator: self.operator,
            expected: self.expected.clone(),
            actual: actual.cloned(),
            passed: outcome.is_ok(),
            reason: outcome.err().map(|f| f.reason()),
        }
    }
}
