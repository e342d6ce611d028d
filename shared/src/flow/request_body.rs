//! What a request node sends besides a text body (issue #54): urlencoded `form` pairs, `multipart` parts, a
//! `graphql` operation; its `cookies` switch and `client_certificate`. The shapes, their budgets and their checks
//! (exactly one body kind; a part holds exactly one of value, base64 or secret; a secret is named as
//! `{{secret.NAME}}`, so the server finds it like any other the definition names).

use crate::flow::template;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Pairs a `form` holds at most.
pub const MAX_FORM_PAIRS: usize = 1000;
/// Parts a `multipart` body holds at most.
pub const MAX_MULTIPART_PARTS: usize = 100;
/// Largest multipart body the definition may carry (its parts' contents together, decoded).
pub const MAX_MULTIPART_BYTES: usize = 16 * 1024 * 1024;
/// Largest GraphQL query text.
pub const MAX_GRAPHQL_QUERY: usize = 256 * 1024;

/// One part of a `multipart/form-data` body: exactly one of `value` (text, templates rendered), `base64` (bytes,
/// sent as decoded) or `secret` (`{{secret.NAME}}`: the secret's value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MultipartPart {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Makes the part a file part (`filename="..."` in its `Content-Disposition`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

/// A GraphQL operation, sent as the GraphQL-over-HTTP POST (`application/json` with `query`, `variables`,
/// `operationName`). The node fails when the answer's `errors` is non-empty unless `allow_errors`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphqlRequest {
    pub query: String,
    /// A JSON object; its string values are templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_name: Option<String>,
    #[serde(default)]
    pub allow_errors: bool,
}

/// The OpenAPI schema of `form`: an array of `[name, value]` pairs (two strings each).
pub fn form_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let pair =
        ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)).min_items(Some(2)).max_items(Some(2));
    ArrayBuilder::new().items(pair).max_items(Some(MAX_FORM_PAIRS)).build()
}

/// The secret's name when `text` is exactly `{{secret.NAME}}`.
pub fn secret_reference(text: &str) -> Option<String> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
    let name = inner.strip_prefix("secret.")?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .then(|| name.to_owned())
}

/// The alternatives a request carries to a text body.
#[derive(Debug, Clone, Copy)]
pub struct BodyParts<'a> {
    pub body: Option<&'a str>,
    pub form: Option<&'a [(String, String)]>,
    pub multipart: Option<&'a [MultipartPart]>,
    pub graphql: Option<&'a GraphqlRequest>,
    pub client_certificate: Option<&'a str>,
}

/// A text unsafe in a header value (a part's file name or content type).
fn unsafe_in_header(text: &str) -> bool {
    text.chars().any(|c| c.is_control() || c == '"')
}

/// Problems of the body alternatives and the client certificate, as `(field, message)` under `at`.
pub fn body_problems(at: &str, parts: BodyParts<'_>) -> Vec<(String, String)> {
    let field = |name: &str| if at.is_empty() { name.to_owned() } else { format!("{at}.{name}") };
    let mut problems = Vec::new();
    let given: Vec<&str> = [
        ("body", parts.body.is_some()),
        ("form", parts.form.is_some()),
        ("multipart", parts.multipart.is_some()),
        ("graphql", parts.graphql.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, present)| present.then_some(name))
    .collect();
    if given.len() > 1 {
        problems.push((
            field(given[1]),
            format!("give one of body, form, multipart or graphql, not {}", given.join(" and ")),
        ));
    }
    let template = |problems: &mut Vec<(String, String)>, name: String, text: &str| {
        if let Err(e) = template::check(text) {
            problems.push((name, e.to_string()));
        }
    };
    if let Some(form) = parts.form {
        if form.len() > MAX_FORM_PAIRS {
            problems.push((field("form"), format!("at most {MAX_FORM_PAIRS} pairs")));
        }
        for (i, (name, value)) in form.iter().enumerate().take(MAX_FORM_PAIRS) {
            template(&mut problems, field(&format!("form[{i}][0]")), name);
            template(&mut problems, field(&format!("form[{i}][1]")), value);
        }
    }
    if let Some(graphql) = parts.graphql {
        if graphql.query.trim().is_empty() || graphql.query.len() > MAX_GRAPHQL_QUERY {
            problems.push((field("graphql.query"), format!("a query of 1 to {MAX_GRAPHQL_QUERY} bytes")));
        }
        template(&mut problems, field("graphql.query"), &graphql.query);
        if graphql.variables.as_ref().is_some_and(|v| !v.is_object() && !v.is_null()) {
            problems.push((field("graphql.variables"), "a JSON object of the operation's variables".into()));
        }
        if let Some(name) = &graphql.operation_name {
            template(&mut problems, field("graphql.operation_name"), name);
        }
    }
    if let Some(parts) = parts.multipart {
        problems.extend(multipart_problems(&field("multipart"), parts));
    }
    if let Some(certificate) = parts.client_certificate
        && secret_reference(certificate).is_none()
    {
        problems.push((field("client_certificate"), "name an organization secret as `{{secret.NAME}}`".into()));
    }
    problems
}

fn multipart_problems(at: &str, parts: &[MultipartPart]) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    if parts.is_empty() || parts.len() > MAX_MULTIPART_PARTS {
        problems.push((at.to_owned(), format!("1 to {MAX_MULTIPART_PARTS} parts")));
        return problems;
    }
    let mut total = 0_usize;
    for (i, part) in parts.iter().enumerate() {
        let field = |name: &str| format!("{at}[{i}].{name}");
        if part.name.is_empty() || unsafe_in_header(&part.name) {
            problems.push((field("name"), "a name without quotes or control characters".into()));
        }
        let contents = [part.value.is_some(), part.base64.is_some(), part.secret.is_some()];
        if contents.iter().filter(|c| **c).count() != 1 {
            problems.push((format!("{at}[{i}]"), "give exactly one of value, base64 or secret".into()));
        }
        if let Some(value) = &part.value {
            total += value.len();
            if let Err(e) = template::check(value) {
                problems.push((field("value"), e.to_string()));
            }
        }
        if let Some(encoded) = &part.base64 {
            match base64::engine::general_purpose::STANDARD.decode(encoded.trim()) {
                Ok(bytes) => total += bytes.len(),
                Err(_) => problems.push((field("base64"), "not valid base64".into())),
            }
        }
        if part.secret.as_deref().is_some_and(|s| secret_reference(s).is_none()) {
            problems.push((field("secret"), "name an organization secret as `{{secret.NAME}}`".into()));
        }
        for (name, text) in [("filename", &part.filename), ("content_type", &part.content_type)] {
            if text.as_deref().is_some_and(unsafe_in_header) {
                problems.push((field(name), "no quotes or control characters".into()));
            }
        }
    }
    if total > MAX_MULTIPART_BYTES {
        problems.push((at.to_owned(), format!("the parts hold at most {MAX_MULTIPART_BYTES} bytes together")));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(value: Value) -> Vec<(String, String)> {
        let parts: Vec<MultipartPart> = serde_json::from_value(value["multipart"].clone()).unwrap_or_default();
        let form: Option<Vec<(String, String)>> = serde_json::from_value(value["form"].clone()).ok();
        body_problems(
            "request",
            BodyParts {
                body: value["body"].as_str(),
                form: form.as_deref(),
                multipart: value.get("multipart").map(|_| parts.as_slice()),
                graphql: None,
                client_certificate: value["client_certificate"].as_str(),
            },
        )
    }

    #[test]
    fn one_body_kind_and_well_formed_parts() {
        let two = problems(json!({"body": "x", "form": [["a", "b"]]}));
        assert_eq!(two[0].0, "request.form", "{two:?}");
        assert!(problems(json!({"form": [["a", "{{b}}"]]})).is_empty());
        let both = problems(json!({"multipart": [{"name": "f", "value": "a", "base64": "YQ=="}]}));
        assert_eq!(both[0].0, "request.multipart[0]");
        let bad = problems(json!({"multipart": [{"name": "f", "base64": "***"}]}));
        assert_eq!(bad[0].0, "request.multipart[0].base64");
        let secret = problems(json!({"multipart": [{"name": "f", "secret": "KEY"}]}));
        assert_eq!(secret[0].0, "request.multipart[0].secret");
        let header = problems(json!({"multipart": [{"name": "f", "value": "a", "filename": "a\"b"}]}));
        assert_eq!(header[0].0, "request.multipart[0].filename");
        assert_eq!(problems(json!({"client_certificate": "KEY"}))[0].0, "request.client_certificate");
        assert!(problems(json!({"client_certificate": "{{secret.CLIENT}}"})).is_empty());
        assert_eq!(secret_reference("{{ secret.A_b }}").as_deref(), Some("A_b"));
        assert_eq!(secret_reference("x{{secret.A}}"), None);
    }
}
