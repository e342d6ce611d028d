//! Swagger 2.0 to OpenAPI 3.0: `host`, `basePath` and `schemes` become `servers`; `definitions`, `parameters`,
//! `responses` and `securityDefinitions` move under `components` (every `$ref` rewritten); `body` and `formData`
//! parameters become the `requestBody` (for `consumes`); response `schema`s become `content` (for `produces`);
//! parameters' own types move into `schema`. The result is then imported as any OpenAPI 3.0 description.

use serde_json::{Map, Value, json};

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];
/// Keywords of a Swagger parameter that describe its value (they go into the 3.0 `schema`).
const SCHEMA_KEYS: [&str; 16] = [
    "type",
    "format",
    "items",
    "collectionFormat",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "enum",
];

/// Converts a Swagger 2.0 document (already checked to be one); `None` when the conversion would copy more than
/// [`COPY_BUDGET`] values.
pub fn convert(swagger: &Value) -> Option<Value> {
    COPIED.set(0);
    let converted = convert_within_budget(swagger);
    (COPIED.get() <= COPY_BUDGET).then_some(converted)
}

fn convert_within_budget(swagger: &Value) -> Value {
    let mut out = Map::new();
    out.insert("openapi".into(), json!("3.0.3"));
    out.insert("info".into(), swagger.get("info").cloned().unwrap_or_else(|| json!({"title": "API", "version": "1"})));
    out.insert("servers".into(), servers(swagger));
    for key in ["tags", "externalDocs", "security"] {
        if let Some(value) = swagger.get(key) {
            out.insert(key.into(), copy(value));
        }
    }
    let consumes = strings(&swagger["consumes"]);
    let produces = strings(&swagger["produces"]);
    let mut components = Map::new();
    if let Some(definitions) = swagger.get("definitions") {
        components.insert("schemas".into(), copy(definitions));
    }
    let mut shared_bodies = Map::new();
    if let Some(parameters) = swagger["parameters"].as_object() {
        let mut converted = Map::new();
        for (name, parameter) in parameters {
            // A shared body parameter has no 3.0 parameter form: it becomes a shared request body.
            if parameter["in"] == "body" {
                shared_bodies.insert(name.clone(), request_body(&[parameter], &consumes));
            } else if parameter["in"] != "formData" {
                converted.insert(name.clone(), parameter_3(parameter));
            }
        }
        components.insert("parameters".into(), Value::Object(converted));
    }
    if !shared_bodies.is_empty() {
        components.insert("requestBodies".into(), Value::Object(shared_bodies));
    }
    if let Some(responses) = swagger["responses"].as_object() {
        let converted = responses.iter().map(|(k, r)| (k.clone(), response(r, &produces))).collect();
        components.insert("responses".into(), Value::Object(converted));
    }
    if let Some(schemes) = swagger["securityDefinitions"].as_object() {
        let converted = schemes.iter().map(|(k, s)| (k.clone(), security_scheme(s))).collect();
        components.insert("securitySchemes".into(), Value::Object(converted));
    }
    out.insert("components".into(), Value::Object(components));
    let mut paths = Map::new();
    for (path, item) in swagger["paths"].as_object().into_iter().flatten() {
        paths.insert(path.clone(), path_item(swagger, item, &consumes, &produces));
    }
    out.insert("paths".into(), Value::Object(paths));
    Value::Object(out)
}

/// At most this many media types (`consumes`, `produces`) or schemes are read: each copies the schemas it covers.
const MAX_LISTED: usize = 16;

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).take(MAX_LISTED).map(str::to_owned).collect()
}

fn servers(swagger: &Value) -> Value {
    let base = swagger["basePath"].as_str().unwrap_or("");
    let Some(host) = swagger["host"].as_str() else {
        return json!([{"url": if base.is_empty() { "/" } else { base }}]);
    };
    let mut schemes = strings(&swagger["schemes"]);
    if schemes.is_empty() {
        schemes.push("https".into());
    }
    Value::Array(schemes.iter().map(|s| json!({"url": format!("{s}://{host}{base}")})).collect())
}

/// JSON values the conversion may copy in all: a schema is copied once per media type and operation, so a
/// small document could otherwise ask for gigabytes (a 4 MiB schema under 10,000 media types).
const COPY_BUDGET: usize = 4_000_000;

thread_local! {
    /// Values copied so far by the conversion running on this thread ([`convert`] resets it).
    static COPIED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A copy of `value` with every `$ref` at its 3.0 place, counted against [`COPY_BUDGET`]: past it, `null` (and
/// [`convert`] refuses the document).
fn copy(value: &Value) -> Value {
    if COPIED.get() > COPY_BUDGET {
        return Value::Null;
    }
    refs(value.clone())
}

/// Rewrites every `$ref` to its 3.0 place.
fn refs(mut value: Value) -> Value {
    rewrite(&mut value, 0);
    value
}

fn rewrite(value: &mut Value, depth: usize) {
    COPIED.set(COPIED.get().saturating_add(1));
    if depth > 256 {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref") {
                for (from, to) in [
                    ("#/definitions/", "#/components/schemas/"),
                    ("#/parameters/", "#/components/parameters/"),
                    ("#/responses/", "#/components/responses/"),
                ] {
                    if let Some(rest) = target.strip_prefix(from) {
                        *target = format!("{to}{rest}");
                        break;
                    }
                }
            }
            // `x-nullable` is 3.0's `nullable`.
            if let Some(nullable) = map.remove("x-nullable") {
                map.insert("nullable".into(), nullable);
            }
            map.values_mut().for_each(|v| rewrite(v, depth + 1));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite(v, depth + 1)),
        _ => {}
    }
}

/// A non-body parameter: its value keywords move into `schema`.
fn parameter_3(parameter: &Value) -> Value {
    if parameter.get("$ref").is_some() {
        return copy(parameter);
    }
    let mut out = Map::new();
    let mut schema = Map::new();
    for (key, value) in parameter.as_object().into_iter().flatten() {
        if key == "collectionFormat" {
            if value == "multi" {
                out.insert("explode".into(), json!(true));
            }
        } else if key == "allowEmptyValue" || !SCHEMA_KEYS.contains(&key.as_str()) {
            out.insert(key.clone(), copy(value));
        } else {
            schema.insert(key.clone(), copy(value));
        }
    }
    if parameter.get("x-example").is_some() {
        out.insert("example".into(), parameter["x-example"].clone());
    }
    if parameter["type"] == "file" {
        schema.insert("type".into(), json!("string"));
        schema.insert("format".into(), json!("binary"));
    }
    out.insert("schema".into(), Value::Object(schema));
    Value::Object(out)
}

/// The request body of an operation's `body` or `formData` parameters.
fn request_body(parameters: &[&Value], consumes: &[String]) -> Value {
    if let Some(body) = parameters.iter().find(|p| p["in"] == "body") {
        let types: Vec<String> = if consumes.is_empty() { vec!["application/json".into()] } else { consumes.to_vec() };
        let schema = body.get("schema").cloned().unwrap_or_else(|| json!({}));
        let mut content = Map::new();
        for media in types.iter().filter(|t| !t.contains("form")) {
            content.insert(media.clone(), json!({"schema": copy(&schema)}));
        }
        if content.is_empty() {
            content.insert("application/json".into(), json!({"schema": copy(&schema)}));
        }
        let mut out = json!({"content": content, "required": body["required"] == true});
        if let Some(description) = body.get("description") {
            out["description"] = description.clone();
        }
        return out;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut file = false;
    for parameter in parameters.iter().filter(|p| p["in"] == "formData") {
        let Some(name) = parameter["name"].as_str() else { continue };
        let converted = parameter_3(parameter);
        properties.insert(name.to_owned(), converted["schema"].clone());
        file |= parameter["type"] == "file";
        if parameter["required"] == true {
            required.push(json!(name));
        }
    }
    let media = if file || consumes.iter().any(|c| c == "multipart/form-data") {
        "multipart/form-data"
    } else {
        "application/x-www-form-urlencoded"
    };
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    json!({"content": {media: {"schema": schema}}})
}

fn response(response: &Value, produces: &[String]) -> Value {
    if response.get("$ref").is_some() {
        return copy(response);
    }
    let mut out = Map::new();
    out.insert("description".into(), response.get("description").cloned().unwrap_or_else(|| json!("")));
    if let Some(schema) = response.get("schema") {
        let types: Vec<String> = if produces.is_empty() { vec!["application/json".into()] } else { produces.to_vec() };
        let mut content = Map::new();
        for media in types {
            let mut entry = json!({"schema": copy(schema)});
            if let Some(example) = response["examples"].get(&media) {
                entry["example"] = example.clone();
            }
            content.insert(media, entry);
        }
        out.insert("content".into(), Value::Object(content));
    }
    if let Some(headers) = response["headers"].as_object() {
        let converted = headers
            .iter()
            .map(|(name, h)| {
                let mut header = parameter_3(h);
                if let Some(map) = header.as_object_mut() {
                    map.remove("name");
                    map.remove("in");
                }
                (name.clone(), header)
            })
            .collect();
        out.insert("headers".into(), Value::Object(converted));
    }
    Value::Object(out)
}

fn security_scheme(scheme: &Value) -> Value {
    let description = scheme.get("description").cloned();
    let mut out = match scheme["type"].as_str() {
        Some("basic") => json!({"type": "http", "scheme": "basic"}),
        Some("apiKey") => json!({"type": "apiKey", "name": scheme["name"], "in": scheme["in"]}),
        Some("oauth2") => {
            let scopes = scheme.get("scopes").cloned().unwrap_or_else(|| json!({}));
            let flow = match scheme["flow"].as_str() {
                Some("implicit") => {
                    ("implicit", json!({"authorizationUrl": scheme["authorizationUrl"], "scopes": scopes}))
                }
                Some("password") => ("password", json!({"tokenUrl": scheme["tokenUrl"], "scopes": scopes})),
                Some("application") => ("clientCredentials", json!({"tokenUrl": scheme["tokenUrl"], "scopes": scopes})),
                _ => (
                    "authorizationCode",
                    json!({"authorizationUrl": scheme["authorizationUrl"], "tokenUrl": scheme["tokenUrl"], "scopes": scopes}),
                ),
            };
            json!({"type": "oauth2", "flows": {flow.0: flow.1}})
        }
        _ => json!({"type": "http", "scheme": "bearer"}),
    };
    if let Some(description) = description {
        out["description"] = description;
    }
    out
}

fn path_item(swagger: &Value, item: &Value, consumes: &[String], produces: &[String]) -> Value {
    let mut out = Map::new();
    let shared: Vec<&Value> = item["parameters"].as_array().into_iter().flatten().collect();
    for (key, value) in item.as_object().into_iter().flatten() {
        if METHODS.contains(&key.as_str()) {
            out.insert(key.clone(), operation(swagger, value, &shared, consumes, produces));
        } else if key != "parameters" {
            out.insert(key.clone(), copy(value));
        }
    }
    let common: Vec<Value> = shared.iter().filter(|p| !is_body(swagger, p)).map(|p| parameter_3(p)).collect();
    if !common.is_empty() {
        out.insert("parameters".into(), Value::Array(common));
    }
    Value::Object(out)
}

/// A body or form parameter, also through a `$ref` to a shared one.
fn is_body(swagger: &Value, parameter: &Value) -> bool {
    let resolved = resolve(swagger, parameter);
    resolved["in"] == "body" || resolved["in"] == "formData"
}

fn resolve<'a>(swagger: &'a Value, parameter: &'a Value) -> &'a Value {
    match parameter["$ref"].as_str().and_then(|r| r.strip_prefix("#/parameters/")) {
        Some(name) => &swagger["parameters"][name],
        None => parameter,
    }
}

fn operation(swagger: &Value, op: &Value, shared: &[&Value], consumes: &[String], produces: &[String]) -> Value {
    let consumes = if op.get("consumes").is_some() { strings(&op["consumes"]) } else { consumes.to_vec() };
    let produces = if op.get("produces").is_some() { strings(&op["produces"]) } else { produces.to_vec() };
    let mut out = Map::new();
    for (key, value) in op.as_object().into_iter().flatten() {
        if !["parameters", "responses", "consumes", "produces", "schemes"].contains(&key.as_str()) {
            out.insert(key.clone(), copy(value));
        }
    }
    let own: Vec<&Value> = op["parameters"].as_array().into_iter().flatten().collect();
    let bodies: Vec<&Value> = own
        .iter()
        .chain(shared.iter())
        .map(|p| resolve(swagger, p))
        .filter(|p| p["in"] == "body" || p["in"] == "formData")
        .collect();
    let parameters: Vec<Value> = own.iter().filter(|p| !is_body(swagger, p)).map(|p| parameter_3(p)).collect();
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    // A shared body parameter is one shared request body (`components/requestBodies`), referred to, not copied
    // into every operation that names it.
    let shared_body = own.iter().chain(shared.iter()).find_map(|p| {
        let name = p["$ref"].as_str()?.strip_prefix("#/parameters/")?;
        (swagger["parameters"][name]["in"] == "body").then(|| format!("#/components/requestBodies/{name}"))
    });
    if let Some(reference) = shared_body {
        out.insert("requestBody".into(), json!({"$ref": reference}));
    } else if !bodies.is_empty() {
        out.insert("requestBody".into(), request_body(&bodies, &consumes));
    }
    let responses =
        op["responses"].as_object().map(|r| r.iter().map(|(k, v)| (k.clone(), response(v, &produces))).collect());
    out.insert("responses".into(), Value::Object(responses.unwrap_or_default()));
    Value::Object(out)
}
