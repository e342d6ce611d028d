//! Imports from other tools (`POST /collections/import` and its preview): the body naming the format and the
//! source, and the answer with the collection, the conversion report and the flow made of the requests.

use crate::api::collections::{CollectionDetail, ImportSummary, OpenApiSource};
use crate::api::fields::Name;
use crate::ids::FlowId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The formats `POST /collections/import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImportFormat {
    Openapi,
    Swagger2,
    Postman,
    PostmanEnvironment,
    Insomnia,
    Har,
    Curl,
}

impl ImportFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ImportFormat::Openapi => "openapi",
            ImportFormat::Swagger2 => "swagger2",
            ImportFormat::Postman => "postman",
            ImportFormat::PostmanEnvironment => "postman_environment",
            ImportFormat::Insomnia => "insomnia",
            ImportFormat::Har => "har",
            ImportFormat::Curl => "curl",
        }
    }
}

/// `flow` of an import: also make a flow of the requests in order.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportFlowName {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
}

/// `POST /collections/import` and `POST /collections/import/preview`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportDocument {
    /// The collection's name; without it, the document's own name (title, collection or environment name).
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    /// Absent: detected from the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<ImportFormat>,
    pub source: OpenApiSource,
    /// Also make a flow of the requests in order (converted Postman tests become its extractors and assertions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<ImportFlowName>,
    /// With `postman_environment`: the environment becomes this flow's environment, keyed by its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<FlowId>,
}

/// A script line that was not converted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NotConverted {
    /// `<folder>/<request name>` (nested folders joined by `/`; the request name alone at the top level).
    #[serde(rename = "where")]
    pub place: String,
    /// From 1 within its script (a request's pre-request and test scripts counted apart).
    pub line: usize,
    pub text: String,
}

/// What the conversion did with the document's scripts and what it could not map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// Test lines converted into extractors and assertions.
    pub converted: usize,
    /// Every other non-blank, non-comment test or pre-request script line.
    pub not_converted: Vec<NotConverted>,
    pub warnings: Vec<String>,
}

/// The flow an import made (`id` null in a preview, which also shows the `definition` it would store).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportedFlow {
    pub id: Option<FlowId>,
    pub name: String,
    /// Only in a preview: the definition the import would store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub definition: Option<Value>,
    /// With `flow_id` and a Postman environment: the key of the environment written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

/// `POST /collections/import` answer (201) and its preview's (200, nothing stored: ids are placeholders).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportAnswer {
    /// Null when a Postman environment went into a flow (`flow_id`).
    pub collection: Option<CollectionDetail>,
    pub summary: ImportSummary,
    pub report: ImportReport,
    pub flow: Option<ImportedFlow>,
}
