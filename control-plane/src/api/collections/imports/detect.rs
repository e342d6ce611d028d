//! Reading an import's text: JSON or YAML (within the YAML budget: alias bombs stop there) unless it is curl
//! command lines, and telling the format from the document's own marks when the body does not name it.

use crate::api::collections::openapi::yaml;
use crate::error::{ApiError, ApiResult};
use hookflow_shared::api::imports::ImportFormat;
use serde_json::Value;

/// How deep a document's JSON may nest (the JSON parser's own limit is 128; YAML is checked against this).
pub const MAX_DEPTH: usize = 128;

/// Whether the text is curl command lines.
pub fn is_curl(text: &str) -> bool {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
    first == "curl" || first.starts_with("curl ")
}

/// Parses JSON or YAML text.
pub fn parse(text: &str) -> ApiResult<Value> {
    let value = if text.trim_start().starts_with(['{', '[']) {
        serde_json::from_str::<Value>(text)
            .map_err(|e| ApiError::invalid(format!("invalid field `source.document`: not valid JSON: {e}")))?
    } else {
        yaml::to_json(text)
            .map_err(|e| ApiError::invalid(format!("invalid field `source.document`: not valid JSON or YAML: {e}")))?
    };
    if depth(&value, 0) > MAX_DEPTH {
        return Err(ApiError::invalid(format!(
            "invalid field `source.document`: it nests deeper than {MAX_DEPTH} levels"
        )));
    }
    if !value.is_object() {
        return Err(ApiError::invalid("invalid field `source.document`: not a JSON or YAML object"));
    }
    Ok(value)
}

/// How deep a value nests, counted until past `MAX_DEPTH`.
fn depth(value: &Value, at: usize) -> usize {
    if at > MAX_DEPTH {
        return at;
    }
    match value {
        Value::Array(items) => items.iter().map(|v| depth(v, at + 1)).max().unwrap_or(at + 1),
        Value::Object(map) => map.values().map(|v| depth(v, at + 1)).max().unwrap_or(at + 1),
        _ => at,
    }
}

/// The format a parsed document announces.
pub fn detect(document: &Value) -> ApiResult<ImportFormat> {
    let schema = document["info"]["schema"].as_str().unwrap_or("");
    let format = if document["swagger"].is_string() {
        ImportFormat::Swagger2
    } else if document.get("openapi").is_some() {
        ImportFormat::Openapi
    } else if schema.contains("getpostman.com") || document["info"].get("_postman_id").is_some() {
        ImportFormat::Postman
    } else if document["_postman_variable_scope"].is_string()
        || (document["values"].is_array() && document["name"].is_string())
    {
        ImportFormat::PostmanEnvironment
    } else if document["_type"] == "export" && document.get("__export_format").is_some() {
        ImportFormat::Insomnia
    } else if document["log"]["entries"].is_array() {
        ImportFormat::Har
    } else {
        return Err(ApiError::invalid(
            "invalid field `format`: the document's format could not be detected; name it (openapi, swagger2, \
             postman, postman_environment, insomnia, har, curl)",
        ));
    };
    Ok(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_documents_are_refused() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(&format!("a: {deep}")).is_err(), "YAML");
        assert!(parse(&format!("{{\"a\": {deep}}}")).is_err(), "JSON");
        let mut nested = serde_json::json!(1);
        for _ in 0..130 {
            nested = serde_json::json!([nested]);
        }
        assert!(depth(&nested, 0) > MAX_DEPTH);
    }
}
