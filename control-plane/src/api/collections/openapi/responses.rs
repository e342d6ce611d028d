//! From an OpenAPI description to a mock's response rules (#51): one rule per operation, matched by its method and
//! its path as the description writes it (`/pets/{petId}`), answering with its example: the first 2xx response (in
//! the document's order) with an example given inline (`example`) or under `examples` (the first), its content type
//! and body; an operation without any example answers its first 2xx status (else 200) with no body. Rules are
//! ordered as the description's operations, except that a literal segment goes before a parameter at the same place
//! (`/pets/mine` before `/pets/{petId}`), as OpenAPI matches paths.

use crate::api::collections::openapi::mapping::operation_key;
use crate::api::collections::openapi::schema::resolve;
use crate::capture::answer::rules::PathTemplate;
use crate::capture::answer::template::Template;
use hookflow_shared::api::answers::{RULE_BODY_MAX, ResponseRule, RuleMethod};
use serde_json::Value;
use std::collections::BTreeMap;

/// The operations a rule can answer (TRACE cannot be captured).
const METHODS: [(&str, RuleMethod); 7] = [
    ("get", RuleMethod::Get),
    ("put", RuleMethod::Put),
    ("post", RuleMethod::Post),
    ("delete", RuleMethod::Delete),
    ("options", RuleMethod::Options),
    ("head", RuleMethod::Head),
    ("patch", RuleMethod::Patch),
];

/// One operation's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub status: u16,
    /// The media type and the body, when the operation has an example.
    pub content: Option<(String, String)>,
}

/// The rules of a mock of `document`, for the operations whose key (`operation_key`) `keep` accepts; `Err` names an
/// operation a rule cannot answer (a path that is no path template, an example over a rule body's size).
pub fn mock_rules(document: &Value, keep: &dyn Fn(&str) -> bool) -> Result<Vec<ResponseRule>, String> {
    let mut rules: Vec<(Vec<u8>, ResponseRule)> = Vec::new();
    for (path, raw_item) in document["paths"].as_object().into_iter().flatten() {
        let item = resolve(document, raw_item);
        for (name, method) in METHODS {
            let Some(op) = item.get(name) else { continue };
            if !keep(&operation_key(name, path)) {
                continue;
            }
            let label = format!("{} {path}", method.as_str());
            let template = PathTemplate::parse(path)
                .map_err(|e| format!("{label}: its path cannot be a rule's path template ({e})"))?;
            let example = first_example(document, op);
            let mut headers = BTreeMap::new();
            let mut body = None;
            if let Some((media, text)) = example.content {
                if axum::http::HeaderValue::from_str(&media).is_ok() {
                    headers.insert("Content-Type".to_owned(), media);
                }
                if text.chars().count() > RULE_BODY_MAX {
                    return Err(format!(
                        "{label}: its example is longer than a rule's body ({RULE_BODY_MAX} characters)"
                    ));
                }
                Template::parse(&text).map_err(|e| format!("{label}: its example reads as a broken template ({e})"))?;
                // 204 and 205 answers carry no body.
                if !matches!(example.status, 204 | 205) {
                    body = Some(text);
                }
            }
            let summary =
                op["summary"].as_str().or(op["operationId"].as_str()).map(str::trim).filter(|s| !s.is_empty());
            let rule_name = summary.and_then(|s| s.lines().next()).unwrap_or(&label).chars().take(200).collect();
            let rule = ResponseRule {
                name: Some(rule_name),
                method: Some(method),
                path: Some(path.clone()),
                q: None,
                filter: None,
                status: example.status,
                headers,
                body,
                delay_ms: None,
            };
            // Before the first rule of as many segments with a parameter where this one has a literal first.
            let key = template.specificity();
            let at = rules.iter().position(|(k, _)| k.len() == key.len() && *k > key).unwrap_or(rules.len());
            rules.insert(at, (key, rule));
        }
    }
    Ok(rules.into_iter().map(|(_, rule)| rule).collect())
}

/// A 2xx response code's status (`2XX` reads as 200).
fn success_status(code: &str) -> Option<u16> {
    if code.eq_ignore_ascii_case("2XX") {
        return Some(200);
    }
    code.parse::<u16>().ok().filter(|s| (200..300).contains(s))
}

/// An operation's answer: its first 2xx response with an example, else its first 2xx status (else 200) alone.
pub fn first_example(document: &Value, op: &Value) -> Example {
    let mut first_status = None;
    for (code, raw) in op["responses"].as_object().into_iter().flatten() {
        let Some(status) = success_status(code) else { continue };
        first_status.get_or_insert(status);
        let response = resolve(document, raw);
        for (media, raw_spec) in response["content"].as_object().into_iter().flatten() {
            let spec = resolve(document, raw_spec);
            let example = spec.get("example").cloned().or_else(|| {
                let first = spec.get("examples")?.as_object()?.values().next()?;
                resolve(document, first).get("value").cloned()
            });
            if let Some(example) = example {
                return Example { status, content: Some((media.clone(), as_body(media, &example))) };
            }
        }
    }
    Example { status: first_status.unwrap_or(200), content: None }
}

/// An example as a body: JSON media types get JSON text; others a string as it is, anything else as JSON text.
fn as_body(media: &str, example: &Value) -> String {
    let essence = media.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let json = essence == "application/json" || essence.ends_with("+json");
    match example {
        Value::String(text) if !json => text.clone(),
        other => format!("{other:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn examples_inline_or_named_come_first_in_document_order() {
        let document = json!({"openapi": "3.0.3", "paths": {
            "/pets/{petId}": {"get": {"summary": "One pet", "responses": {
                "default": {"content": {"application/json": {"example": {"no": 1}}}},
                "200": {"content": {"application/json": {"examples": {
                    "rex": {"$ref": "#/components/examples/rex"}, "tom": {"value": {"name": "Tom"}}}}}}}}},
            "/pets/mine": {"get": {"responses": {"201": {"content": {"text/plain": {"example": "mine"}}}}}},
            "/pets": {"post": {"responses": {"204": {"description": "none"}}},
                      "get": {"responses": {"404": {}}}}},
            "components": {"examples": {"rex": {"value": {"name": "Rex"}}}}});
        let rules = mock_rules(&document, &|_| true).expect("rules");
        let seen: Vec<(&str, &str, u16, Option<&str>)> = rules
            .iter()
            .map(|r| (r.method.unwrap().as_str(), r.path.as_deref().unwrap(), r.status, r.body.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                ("GET", "/pets/mine", 201, Some("mine")),
                ("GET", "/pets/{petId}", 200, Some("{\n  \"name\": \"Rex\"\n}")),
                ("GET", "/pets", 200, None),
                ("POST", "/pets", 204, None),
            ]
        );
        assert_eq!(rules[0].headers["Content-Type"], "text/plain");
        assert_eq!(rules[1].name.as_deref(), Some("One pet"));
        assert_eq!(rules[3].name.as_deref(), Some("POST /pets"));
        assert!(rules[2].headers.is_empty());
        let only_posts = mock_rules(&document, &|key| key.starts_with("POST")).expect("rules");
        assert_eq!(only_posts.len(), 1);
    }

    #[test]
    fn paths_that_are_no_template_are_named() {
        let document = json!({"paths": {"/files/{name}.json": {"get": {"responses": {}}}}});
        let error = mock_rules(&document, &|_| true).expect_err("not a template");
        assert!(error.starts_with("GET /files/{name}.json"), "{error}");
    }
}
