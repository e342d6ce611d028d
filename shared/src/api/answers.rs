//! How a capture URL answers (#51, part A): an endpoint's response `rules` (tried in order, the first match
//! answering with a status, allowed headers, a body template and a delay), its `cors` settings, and the
//! `POST /webhooks/{id}/rules/test` bodies.

use crate::api::search::SearchFilter;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Rules one endpoint holds at most.
pub const RULES_MAX: usize = 50;
/// Longest body template of a rule, in characters.
pub const RULE_BODY_MAX: usize = 65_536;
/// Longest delay of a rule, in milliseconds.
pub const RULE_DELAY_MAX_MS: u64 = 30_000;
/// Longest path template of a rule, in characters.
pub const RULE_PATH_MAX: usize = 1_024;
/// Longest `q` of a rule, in characters.
pub const RULE_Q_MAX: usize = 4_096;
/// Longest rendered answer body, in bytes: a template that renders more is cut here.
pub const RENDERED_MAX: usize = 1_048_576;
/// Origins, and allowed request headers, of one endpoint's `cors` at most.
pub const CORS_LIST_MAX: usize = 50;
/// Longest `cors.max_age_s`.
pub const CORS_MAX_AGE_MAX: u32 = 86_400;
/// `cors.max_age_s` when it is not set.
pub const CORS_MAX_AGE_DEFAULT: u32 = 600;

/// A method a rule answers (`GET` also answers `HEAD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RuleMethod {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
    Options,
}

impl RuleMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleMethod::Get => "GET",
            RuleMethod::Post => "POST",
            RuleMethod::Put => "PUT",
            RuleMethod::Patch => "PATCH",
            RuleMethod::Delete => "DELETE",
            RuleMethod::Head => "HEAD",
            RuleMethod::Options => "OPTIONS",
        }
    }
}

/// One response rule: which requests it answers (all its conditions hold) and what it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponseRule {
    /// A label for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200)]
    pub name: Option<String>,
    /// The method it answers; absent: any (`GET` also answers `HEAD`, without a body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<RuleMethod>,
    /// A path template relative to the capture URL: `/orders/{id}` (a parameter is one whole segment), `*` as the
    /// last segment matches the rest; `/` is the capture URL itself. Absent: any path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1024, pattern = "^/")]
    pub path: Option<String>,
    /// The capture search language, as in a search's `q`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub q: Option<String>,
    /// The structured search filter, as in a search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<SearchFilter>,
    /// HTTP status of the answer, 200 to 599, not a redirect.
    #[schema(schema_with = crate::api::rules::answer_status)]
    pub status: u16,
    /// Headers of the answer (plain text, not templates): `Content-Type`, `Content-Language`, `Retry-After` and
    /// `X-` names of your own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(schema_with = crate::api::rules::custom_response_headers)]
    pub headers: BTreeMap<String, String>,
    /// The body, a template (`{{request.params.id}}`, `{{request.body.$.order.id}}`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 65536)]
    pub body: Option<String>,
    /// Wait this long (after storing the capture) before answering, 0 to 30,000 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 30000)]
    pub delay_ms: Option<u64>,
}

/// CORS for browser senders: preflights from the allowed origins are answered, and every answer to them carries
/// `Access-Control-Allow-Origin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Cors {
    /// `scheme://host[:port]` origins, or `["*"]` for any (then the answer names the request's `Origin`).
    #[schema(min_items = 1, max_items = 50)]
    pub allow_origins: Vec<String>,
    /// Request headers a browser may send (answered in `Access-Control-Allow-Headers`; default `Content-Type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 50)]
    pub allow_headers: Option<Vec<String>>,
    /// How long a browser may keep a preflight's answer, 0 to 86,400 s (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400)]
    pub max_age_s: Option<u32>,
}

/// `POST /webhooks/{id}/rules/test`: a request as a sender would send it to the capture URL.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RulesTest {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, `HEAD` or `OPTIONS`.
    pub method: RuleMethod,
    /// The path relative to the capture URL, `/` for its root.
    #[schema(max_length = 2048, pattern = "^/")]
    pub path: String,
    /// The raw query string (without `?`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 8192)]
    pub query: Option<String>,
    /// Request headers, `{name: value}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The body, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1048576)]
    pub body: Option<String>,
}

/// What the capture URL would answer to a [`RulesTest`] request (nothing is stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RulesTestResult {
    /// The rule that answers (its index in `rules`), or `null` for the endpoint's `response` or the receipt.
    pub rule_index: Option<usize>,
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// `POST /collections/{collection_id}/mock`: an endpoint whose rules answer each operation of the collection's
/// OpenAPI description with its example.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMock {
    /// The endpoint's name (default: `Mock of <collection name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<crate::api::fields::Name>,
}
