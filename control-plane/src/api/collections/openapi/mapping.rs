//! From an OpenAPI description to collection requests. One folder per operation's first tag (untagged ones in the
//! root); name = summary, else operationId, else `METHOD path`; the first server URL (its variables at their
//! defaults) becomes the collection variable `base_url`; path parameters become `{{name}}`; query and header
//! parameters carry their example or default; bodies come from `example`/`examples`, else from the schema; security
//! schemes become placeholders (`{{api_key}}`, `Bearer {{token}}`). Each request keeps its operation key (METHOD +
//! normalized path) and fingerprints of its operation for sync. What cannot be mapped is skipped with a warning.

use crate::api::collections::crud::check_request;
use crate::api::collections::openapi::fingerprint::Fingerprinter;
use crate::api::collections::openapi::schema::{Examples, resolve};
use hookflow_shared::api::collections::WriteRequest;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const OPERATION_METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
/// Header parameters OpenAPI says to ignore: they come from the body, the security scheme or the client.
const IGNORED_HEADERS: [&str; 3] = ["accept", "content-type", "authorization"];
const MAX_NAME: usize = 200;
const MAX_DESCRIPTION: usize = 10_000;
/// Warnings listed in an answer; the rest are counted.
const MAX_WARNINGS: usize = 100;

/// A request as the description defines it.
#[derive(Debug, Clone)]
pub struct GeneratedRequest {
    pub request: WriteRequest,
    pub deprecated: bool,
    /// `parameters`, `body`, `responses`, `deprecation`, `summary`.
    pub fingerprints: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
pub struct Mapped {
    pub title: String,
    pub variables: BTreeMap<String, String>,
    pub requests: Vec<GeneratedRequest>,
    pub warnings: Vec<String>,
    /// Generating example bodies spent the document's whole budget: the description is refused.
    pub budget_exhausted: bool,
}

impl Mapped {
    pub fn folder_count(&self) -> usize {
        let mut folders: Vec<&str> = self.requests.iter().filter_map(|r| r.request.folder.as_deref()).collect();
        folders.sort_unstable();
        folders.dedup();
        folders.len()
    }
}

/// `METHOD /path/{}` with parameter names dropped, so renaming a parameter keeps the identity.
pub fn operation_key(method: &str, path: &str) -> String {
    let mut normalized = String::with_capacity(path.len());
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                normalized.push_str("{}");
            }
            '}' => in_param = false,
            c if !in_param => normalized.push(c),
            _ => {}
        }
    }
    let trimmed = normalized.trim_end_matches('/');
    let path = if trimmed.is_empty() {
        "/".to_owned()
    } else if trimmed.starts_with('/') {
        trimmed.to_owned()
    } else {
        format!("/{trimmed}")
    };
    format!("{} {path}", method.to_ascii_uppercase())
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// A parameter or example value as request text: strings as they are, lists comma-joined, the rest as JSON.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(as_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The first server URL with its variables at their defaults; relative URLs resolve against where the description
/// was fetched from.
fn base_url(document: &Value, source: Option<&reqwest::Url>, warnings: &mut Vec<String>) -> String {
    let Some(server) = document["servers"].as_array().and_then(|s| s.first()) else {
        warnings.push("the description names no server: set the collection variable `base_url`".to_owned());
        return String::new();
    };
    let mut url = server["url"].as_str().unwrap_or_default().to_owned();
    if let Some(variables) = server["variables"].as_object() {
        for (name, variable) in variables {
            url = url.replace(&format!("{{{name}}}"), &as_text(&variable["default"]));
        }
    }
    if !url.contains("://") {
        match source.and_then(|s| s.join(&url).ok()) {
            Some(absolute) => url = absolute.to_string(),
            None => {
                warnings.push(format!("the server URL `{url}` is relative: set the collection variable `base_url`"))
            }
        }
    }
    url.trim_end_matches('/').to_owned()
}

/// A parameter's example, default or first enum value.
fn parameter_value(document: &Value, parameter: &Value) -> Option<Value> {
    if let Some(example) = parameter.get("example") {
        return Some(example.clone());
    }
    if let Some(first) = parameter.get("examples").and_then(Value::as_object).and_then(|e| e.values().next()) {
        return resolve(document, first).get("value").cloned();
    }
    let schema = resolve(document, parameter.get("schema")?);
    ["example", "default"]
        .iter()
        .find_map(|key| schema.get(*key).cloned())
        .or_else(|| schema.get("examples").and_then(Value::as_array).and_then(|e| e.first()).cloned())
        .or_else(|| schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()).cloned())
}

/// Flattens an object into form fields with bracket notation (`a[b]=1`, `list[0]=x`).
fn form_fields(prefix: &str, value: &Value, into: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let name = if prefix.is_empty() { key.clone() } else { format!("{prefix}[{key}]") };
                form_fields(&name, inner, into);
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                form_fields(&format!("{prefix}[{i}]"), inner, into);
            }
        }
        Value::Null => {}
        other => into.push((prefix.to_owned(), as_text(other))),
    }
}

/// Everything one operation's mapping needs.
struct Operation<'d> {
    method: &'static str,
    path: &'d str,
    op: &'d Value,
    parameters: Vec<&'d Value>,
}

struct Mapper<'d> {
    document: &'d Value,
    examples: Examples<'d>,
    fingerprints: Fingerprinter<'d>,
    mapped: Mapped,
}

impl<'d> Mapper<'d> {
    fn body(&mut self, operation: &Operation<'d>, request: &mut WriteRequest) {
        let Some(raw) = operation.op.get("requestBody") else { return };
        let body = resolve(self.document, raw);
        let Some(content) = body["content"].as_object() else { return };
        let is_json = |media: &str| media.starts_with("application/json") || media.contains("+json");
        let Some((media, spec)) = content.iter().find(|(m, _)| is_json(m)).or_else(|| content.iter().next()) else {
            return;
        };
        let example = spec
            .get("example")
            .cloned()
            .or_else(|| {
                let first = spec.get("examples").and_then(Value::as_object).and_then(|e| e.values().next())?;
                resolve(self.document, first).get("value").cloned()
            })
            .or_else(|| spec.get("schema").map(|schema| self.examples.of(schema)));
        let text = if is_json(media) {
            example.map(|e| format!("{e:#}"))
        } else if media == "application/x-www-form-urlencoded" {
            example.map(|e| {
                let mut fields = Vec::new();
                form_fields("", &e, &mut fields);
                form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish()
            })
        } else if media.starts_with("text/") || media.ends_with("/xml") {
            example.map(|e| as_text(&e))
        } else {
            self.mapped.warnings.push(format!(
                "{} {}: `{media}` bodies are not generated; the request has no body",
                operation.method.to_ascii_uppercase(),
                operation.path
            ));
            return;
        };
        request.headers.insert("content-type".to_owned(), media.clone());
        request.body = text;
    }

    fn security(&mut self, operation: &Operation<'d>, request: &mut WriteRequest) {
        let requirements = operation.op.get("security").or_else(|| self.document.get("security"));
        let Some(first) = requirements.and_then(Value::as_array).and_then(|r| r.first()).and_then(Value::as_object)
        else {
            return;
        };
        for scheme_name in first.keys() {
            let Some(raw) = self
                .document
                .pointer(&format!("/components/securitySchemes/{}", scheme_name.replace('~', "~0").replace('/', "~1")))
            else {
                continue;
            };
            let scheme = resolve(self.document, raw);
            let name = scheme["name"].as_str().unwrap_or("X-Api-Key");
            match (
                scheme["type"].as_str(),
                scheme["in"].as_str(),
                scheme["scheme"].as_str().map(str::to_ascii_lowercase),
            ) {
                (Some("apiKey"), Some("query"), _) => {
                    request.query.insert(name.to_owned(), "{{api_key}}".to_owned());
                }
                (Some("apiKey"), Some("cookie"), _) => {
                    request.headers.insert("cookie".to_owned(), format!("{name}={{{{api_key}}}}"));
                }
                (Some("apiKey"), _, _) => {
                    request.headers.insert(name.to_owned(), "{{api_key}}".to_owned());
                }
                (Some("http"), _, Some(kind)) if kind == "bearer" => {
                    request.headers.insert("authorization".to_owned(), "Bearer {{token}}".to_owned());
                }
                (Some("http"), _, Some(kind)) if kind == "basic" => {
                    request.headers.insert("authorization".to_owned(), "Basic {{basic_auth}}".to_owned());
                }
                (Some("oauth2" | "openIdConnect"), _, _) => {
                    request.headers.insert("authorization".to_owned(), "Bearer {{access_token}}".to_owned());
                }
                (kind, _, _) => self.mapped.warnings.push(format!(
                    "security scheme `{scheme_name}` ({}) has no placeholder; add its credentials by hand",
                    kind.unwrap_or("unknown type")
                )),
            }
        }
    }

    /// Path parameters become collection variables; query and header parameters carry their example or default
    /// (required ones without either become `{{name}}`); required cookies are reported.
    fn parameters(&mut self, operation: &Operation<'d>, method: &str, request: &mut WriteRequest) {
        for parameter in &operation.parameters {
            let name = parameter["name"].as_str().unwrap_or_default();
            let value = parameter_value(self.document, parameter);
            let required = parameter["required"].as_bool() == Some(true);
            match parameter["in"].as_str() {
                Some("path") => {
                    if let Some(value) = value {
                        self.mapped.variables.entry(name.to_owned()).or_insert_with(|| as_text(&value));
                    }
                }
                Some("query") if value.is_some() || required => {
                    let text = value.map_or_else(|| format!("{{{{{name}}}}}"), |v| as_text(&v));
                    request.query.insert(name.to_owned(), text);
                }
                Some("header")
                    if !IGNORED_HEADERS.contains(&name.to_ascii_lowercase().as_str())
                        && (value.is_some() || required) =>
                {
                    let text = value.map_or_else(|| format!("{{{{{name}}}}}"), |v| as_text(&v));
                    request.headers.insert(name.to_owned(), text);
                }
                Some("cookie") if required => self.mapped.warnings.push(format!(
                    "{method} {}: cookie parameter `{name}` is not mapped; add a Cookie header by hand",
                    operation.path
                )),
                _ => {}
            }
        }
    }

    fn operation(&mut self, operation: &Operation<'d>) -> Option<GeneratedRequest> {
        let (op, method) = (operation.op, operation.method.to_ascii_uppercase());
        let summary = op["summary"].as_str().map(str::trim).filter(|s| !s.is_empty());
        let operation_id = op["operationId"].as_str().map(str::trim).filter(|s| !s.is_empty());
        let name = summary
            .and_then(|s| s.lines().next())
            .or(operation_id)
            .map_or_else(|| format!("{method} {}", operation.path), str::to_owned);
        let mut url = String::from("{{base_url}}");
        url.push_str(&operation.path.replace('{', "{{").replace('}', "}}"));
        let mut request = WriteRequest {
            name: truncate(&name, MAX_NAME),
            folder: op["tags"]
                .as_array()
                .and_then(|t| t.first())
                .and_then(Value::as_str)
                .map(|t| truncate(t.trim(), MAX_NAME)),
            method: method.clone(),
            url,
            description: op["description"].as_str().map(|d| truncate(d, MAX_DESCRIPTION)),
            operation_key: Some(operation_key(&method, operation.path)),
            ..WriteRequest::default()
        };
        self.parameters(operation, &method, &mut request);
        self.body(operation, &mut request);
        self.security(operation, &mut request);
        let request = match check_request(request) {
            Ok(request) => request,
            Err(e) => {
                self.mapped.warnings.push(format!("{method} {} skipped: {}", operation.path, e.message));
                return None;
            }
        };
        let deprecated = op["deprecated"].as_bool() == Some(true);
        let parameters: Vec<Value> = operation.parameters.iter().map(|p| (*p).clone()).collect();
        let described = json!([op.get("summary"), op.get("operationId"), op.get("description"), op.get("tags")]);
        let fingerprints = BTreeMap::from([
            ("parameters".to_owned(), self.fingerprints.of(&Value::Array(parameters))),
            ("body".to_owned(), self.fingerprints.of(op.get("requestBody").unwrap_or(&Value::Null))),
            ("responses".to_owned(), self.fingerprints.of(op.get("responses").unwrap_or(&Value::Null))),
            ("deprecation".to_owned(), deprecated.to_string()),
            ("summary".to_owned(), self.fingerprints.of(&described)),
        ]);
        Some(GeneratedRequest { request, deprecated, fingerprints })
    }
}

/// Parameters of a path item and an operation, the operation's winning on the same name and location.
fn merged_parameters<'d>(document: &'d Value, item: &'d Value, op: &'d Value) -> Vec<&'d Value> {
    let mut merged: Vec<&'d Value> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")].into_iter().flatten() {
        for raw in list.as_array().map(Vec::as_slice).unwrap_or_default() {
            let parameter = resolve(document, raw);
            let same = |p: &&Value| p["name"] == parameter["name"] && p["in"] == parameter["in"];
            merged.retain(|p| !same(p));
            merged.push(parameter);
        }
    }
    merged
}

/// What the whole document leaves to say: webhooks not imported, example bodies cut short or left unresolved,
/// and the warning list capped.
fn add_closing_warnings(document: &Value, examples: &Examples, mapped: &mut Mapped) {
    if let Some(webhooks) = document["webhooks"].as_object().filter(|w| !w.is_empty()) {
        let names: Vec<&str> = webhooks.keys().map(String::as_str).collect();
        mapped.warnings.push(format!(
            "{} webhook(s) ({}) describe requests the API sends, not requests to send: not imported",
            names.len(),
            names.join(", ")
        ));
    }
    if examples.truncated > 0 {
        mapped.warnings.push(format!(
            "{} example bod(ies) cut short: their schemas reference each other too widely",
            examples.truncated
        ));
    }
    if examples.exhausted() {
        mapped.budget_exhausted = true;
    }
    if examples.cycles_cut > 0 {
        mapped.warnings.push(format!("{} `$ref` cycle(s) cut while generating example bodies", examples.cycles_cut));
    }
    if !examples.unresolved.is_empty() {
        let shown: Vec<&str> = examples.unresolved.iter().take(10).map(String::as_str).collect();
        mapped.warnings.push(format!("external or broken `$ref`s not followed: {}", shown.join(", ")));
    }
    if mapped.warnings.len() > MAX_WARNINGS {
        let more = mapped.warnings.len() - MAX_WARNINGS;
        mapped.warnings.truncate(MAX_WARNINGS);
        mapped.warnings.push(format!("... and {more} more warnings"));
    }
}

/// Maps a (checked) description into requests.
pub fn map(document: &Value, source: Option<&reqwest::Url>) -> Mapped {
    let mut mapper = Mapper {
        document,
        examples: Examples::new(document),
        fingerprints: Fingerprinter::new(document),
        mapped: Mapped::default(),
    };
    mapper.mapped.title = document["info"]["title"]
        .as_str()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("Imported API")
        .to_owned();
    let base = base_url(document, source, &mut mapper.mapped.warnings);
    mapper.mapped.variables.insert("base_url".to_owned(), base);
    let mut seen = std::collections::HashSet::new();
    for (path, raw_item) in document["paths"].as_object().into_iter().flatten() {
        let item = resolve(document, raw_item);
        for method in OPERATION_METHODS {
            let Some(op) = item.get(method) else { continue };
            if method == "trace" {
                mapper.mapped.warnings.push(format!("TRACE {path} skipped: TRACE requests are not supported"));
                continue;
            }
            let operation = Operation { method, path, op, parameters: merged_parameters(document, item, op) };
            let Some(generated) = mapper.operation(&operation) else { continue };
            let key = generated.request.operation_key.clone().unwrap_or_default();
            if !seen.insert(key.clone()) {
                mapper.mapped.warnings.push(format!(
                    "{method} {path} skipped: another operation already maps to `{key}`",
                    method = method.to_ascii_uppercase()
                ));
                continue;
            }
            mapper.mapped.requests.push(generated);
        }
    }
    let Mapper { examples, mut mapped, .. } = mapper;
    add_closing_warnings(document, &examples, &mut mapped);
    mapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_keys_ignore_parameter_names_and_trailing_slashes() {
        assert_eq!(operation_key("get", "/pets/{petId}/"), "GET /pets/{}");
        assert_eq!(operation_key("post", "/pets/{id}/toys/{toy}"), "POST /pets/{}/toys/{}");
        assert_eq!(operation_key("get", "/"), "GET /");
    }

    #[test]
    fn a_small_description_maps_to_folders_urls_parameters_bodies_and_auth() {
        let document = json!({"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
            "servers": [{"url": "https://{region}.example.com/v1", "variables": {"region": {"default": "eu"}}}],
            "security": [{"key": []}],
            "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                                               "bearer": {"type": "http", "scheme": "bearer"}},
                           "schemas": {"Pet": {"type": "object", "properties": {"name": {"type": "string", "example": "Rex"}}}}},
            "paths": {"/pets/{petId}": {"parameters": [{"name": "petId", "in": "path", "required": true, "example": 7}],
                "get": {"tags": ["pets"], "summary": "Get a pet", "parameters": [
                    {"name": "expand", "in": "query", "schema": {"type": "string", "default": "owner"}},
                    {"name": "page", "in": "query", "required": true, "schema": {"type": "integer"}},
                    {"name": "skip", "in": "query", "schema": {"type": "integer"}}]},
                "put": {"operationId": "updatePet", "security": [{"bearer": []}],
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}},
                "/health": {"get": {"responses": {}}}}});
        let mapped = map(&document, None);
        assert_eq!(mapped.variables["base_url"], "https://eu.example.com/v1");
        assert_eq!(mapped.variables["petId"], "7");
        let by_key = |key: &str| {
            mapped.requests.iter().map(|r| &r.request).find(|r| r.operation_key.as_deref() == Some(key)).expect(key)
        };
        let get = by_key("GET /pets/{}");
        assert_eq!(
            (get.name.as_str(), get.folder.as_deref(), get.url.as_str()),
            ("Get a pet", Some("pets"), "{{base_url}}/pets/{{petId}}")
        );
        assert_eq!(
            get.query,
            BTreeMap::from([("expand".to_owned(), "owner".to_owned()), ("page".to_owned(), "{{page}}".to_owned())])
        );
        assert_eq!(get.headers["X-Key"], "{{api_key}}");
        let put = by_key("PUT /pets/{}");
        assert_eq!(put.name, "updatePet");
        assert_eq!(put.headers["authorization"], "Bearer {{token}}");
        assert_eq!(
            serde_json::from_str::<Value>(put.body.as_deref().unwrap_or_default()).ok(),
            Some(json!({"name": "Rex"}))
        );
        let health = by_key("GET /health");
        assert_eq!((health.name.as_str(), health.folder.as_deref()), ("GET /health", None));
        assert_eq!(mapped.folder_count(), 1);
    }
}
