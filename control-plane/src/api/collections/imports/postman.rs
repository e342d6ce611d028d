//! Postman collections (v2.0 and v2.1) and environments. Folders become the requests' `folder` (nested ones joined
//! by `/`); collection variables stay variables; auth (bearer, basic, API key; inherited from the nearest folder or
//! the collection) becomes headers or query; raw bodies stay text, urlencoded bodies become `form`, form-data
//! `multipart`; test scripts convert as `scripts` says, every other script line is reported.

use crate::api::collections::imports::model::{
    Body, Converted, MAX_FOLDER_DEPTH, MAX_SCRIPT_LINES, Request, add_header, basic, cut, file_part, has_header,
    request_name, text_part,
};
use crate::api::collections::imports::scripts::{self, Tests};
use crate::error::{ApiError, ApiResult};
use serde_json::Value;

/// Converts a Postman collection.
pub fn collection(document: &Value) -> ApiResult<Converted> {
    let Some(items) = document.get("item").and_then(Value::as_array) else {
        return Err(ApiError::invalid("not a Postman collection: `item` is missing"));
    };
    let mut converted = Converted {
        title: document["info"]["name"].as_str().unwrap_or("Postman collection").to_owned(),
        ..Converted::default()
    };
    for variable in document.get("variable").and_then(Value::as_array).into_iter().flatten() {
        if variable["disabled"] == true {
            continue;
        }
        let (Some(key), value) = (variable["key"].as_str().or(variable["id"].as_str()), &variable["value"]) else {
            continue;
        };
        converted.variable(key, text(value));
    }
    let mut walker = Walker { converted, script_lines: 0 };
    let title = walker.converted.title.clone();
    walker.events(document, &title, None)?;
    walker.items(items, &[], document.get("auth"), 0)?;
    Ok(walker.converted)
}

/// A JSON value as a variable's text (strings as they are, anything else as JSON).
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

struct Walker {
    converted: Converted,
    script_lines: usize,
}

impl Walker {
    fn items(&mut self, items: &[Value], folders: &[String], auth: Option<&Value>, depth: usize) -> ApiResult<()> {
        if depth > MAX_FOLDER_DEPTH {
            return Err(ApiError::invalid(format!("folders nest deeper than {MAX_FOLDER_DEPTH} levels")));
        }
        for item in items {
            let name = item["name"].as_str().unwrap_or("").trim().to_owned();
            let own_auth = item.get("auth").filter(|a| !a.is_null());
            let auth = own_auth.or(auth);
            if let Some(children) = item.get("item").and_then(Value::as_array) {
                let mut path = folders.to_vec();
                path.push(if name.is_empty() { "Folder".to_owned() } else { name });
                self.events(item, &path.join("/"), None)?;
                self.items(children, &path, auth, depth + 1)?;
            } else if let Some(request) = item.get("request") {
                self.request(item, request, folders, auth)?;
            }
        }
        Ok(())
    }

    /// Reads an item's scripts: tests into `tests` when given (a request's), every other line reported at `place`.
    fn events(&mut self, item: &Value, place: &str, mut tests: Option<&mut Tests>) -> ApiResult<()> {
        for event in item.get("event").and_then(Value::as_array).into_iter().flatten() {
            if event["disabled"] == true {
                continue;
            }
            let lines = scripts::lines(&event["script"]["exec"]);
            self.script_lines += lines.len();
            if self.script_lines > MAX_SCRIPT_LINES {
                return Err(ApiError::invalid(format!("the scripts hold more than {MAX_SCRIPT_LINES} lines")));
            }
            let report = &mut self.converted.report;
            match (event["listen"].as_str(), tests.as_deref_mut()) {
                (Some("test"), Some(tests)) => scripts::convert_tests(&lines, place, tests, report),
                _ => scripts::list_prerequest(&lines, place, report),
            }
        }
        Ok(())
    }

    fn request(&mut self, item: &Value, request: &Value, folders: &[String], auth: Option<&Value>) -> ApiResult<()> {
        // v2.0 allows a request that is only its URL.
        let (method, url) = match request {
            Value::String(url) => ("GET".to_owned(), url.clone()),
            _ => (request["method"].as_str().unwrap_or("GET").to_ascii_uppercase(), url_of(&request["url"])),
        };
        let folder = (!folders.is_empty()).then(|| cut(&folders.join("/"), 200));
        let name = request_name(item["name"].as_str().unwrap_or(""), &method, &url);
        let mut out = Request { name, folder, method, url, ..Request::default() };
        let place = out.place();
        for header in request.get("header").and_then(Value::as_array).into_iter().flatten() {
            if header["disabled"] != true
                && let Some(key) = header["key"].as_str()
            {
                add_header(&mut out.headers, key, &text(&header["value"]));
            }
        }
        let auth = request.get("auth").filter(|a| !a.is_null()).or(auth);
        if let Some(auth) = auth {
            self.auth(auth, &mut out);
        }
        self.body(&request["body"], &mut out);
        let mut tests = Tests::default();
        self.events(item, &place, Some(&mut tests))?;
        out.extractors = tests.extractors;
        out.assertions = tests.assertions;
        self.converted.push(out)
    }

    fn auth(&mut self, auth: &Value, out: &mut Request) {
        let kind = auth["type"].as_str().unwrap_or("noauth");
        let param = |name: &str| auth_param(&auth[kind], name);
        match kind {
            "noauth" => {}
            "bearer" => add_header(&mut out.headers, "Authorization", &format!("Bearer {}", param("token"))),
            "basic" => match basic(&param("username"), &param("password")) {
                Some(value) => add_header(&mut out.headers, "Authorization", &value),
                None => self.converted.warn(format!(
                    "{}: Basic auth made of variables cannot be encoded at import; set its Authorization header",
                    out.place()
                )),
            },
            "apikey" => {
                let key = param("key");
                let value = param("value");
                if key.is_empty() {
                    self.converted.warn(format!("{}: API key auth without a key name skipped", out.place()));
                } else if param("in") == "query" {
                    out.query.insert(key, value);
                } else {
                    add_header(&mut out.headers, &key, &value);
                }
            }
            other => self.converted.warn(format!("{}: `{other}` auth is not converted", out.place())),
        }
    }

    fn body(&mut self, body: &Value, out: &mut Request) {
        let Some(mode) = body.get("mode").and_then(Value::as_str) else { return };
        if body["disabled"] == true {
            return;
        }
        match mode {
            "raw" => {
                let raw = text(&body["raw"]);
                if raw.is_empty() {
                    return;
                }
                let content_type = match body["options"]["raw"]["language"].as_str() {
                    Some("json") => "application/json",
                    Some("xml") => "application/xml",
                    Some("html") => "text/html",
                    Some("javascript") => "application/javascript",
                    _ => "text/plain",
                };
                if !has_header(&out.headers, "content-type") {
                    add_header(&mut out.headers, "Content-Type", content_type);
                }
                out.body = Body::Text(raw);
            }
            "urlencoded" => {
                let pairs = enabled(&body["urlencoded"])
                    .filter_map(|p| Some((p["key"].as_str()?.to_owned(), text(&p["value"]))))
                    .collect();
                out.body = Body::Form(pairs);
            }
            "formdata" => {
                let mut parts = Vec::new();
                for part in enabled(&body["formdata"]) {
                    let Some(name) = part["key"].as_str() else { continue };
                    let content_type = part["contentType"].as_str();
                    if part["type"] == "file" {
                        let source = part["src"].as_str().unwrap_or("");
                        let filename = source.rsplit(['/', '\\']).next().unwrap_or("");
                        self.converted.warn(format!(
                            "{}: the file of form-data part `{name}` is on the exporter's disk ({}): imported empty",
                            out.place(),
                            cut(filename, 100)
                        ));
                        parts.push(file_part(name, filename, content_type));
                    } else {
                        parts.push(text_part(name, &text(&part["value"]), content_type));
                    }
                }
                out.body = Body::Multipart(parts);
            }
            "graphql" => {
                let query = text(&body["graphql"]["query"]);
                let variables: Value = match &body["graphql"]["variables"] {
                    Value::String(v) if !v.trim().is_empty() => serde_json::from_str(v).unwrap_or(Value::Null),
                    _ => Value::Null,
                };
                let payload = serde_json::json!({"query": query, "variables": variables});
                if !has_header(&out.headers, "content-type") {
                    add_header(&mut out.headers, "Content-Type", "application/json");
                }
                out.body = Body::Text(payload.to_string());
            }
            other => self.converted.warn(format!("{}: a `{other}` body is not converted", out.place())),
        }
    }
}

/// The enabled entries of a list of key/value pairs.
fn enabled(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten().filter(|p| p["disabled"] != true)
}

/// An auth parameter: v2.1 lists `{key, value}` pairs, v2.0 has an object.
fn auth_param(params: &Value, name: &str) -> String {
    match params {
        Value::Array(list) => list.iter().find(|p| p["key"] == name).map(|p| text(&p["value"])).unwrap_or_default(),
        Value::Object(map) => map.get(name).map(text).unwrap_or_default(),
        _ => String::new(),
    }
}

/// A request's URL: a string, or an object with `raw` (else rebuilt from its parts).
fn url_of(url: &Value) -> String {
    match url {
        Value::String(url) => url.clone(),
        Value::Object(parts) => {
            if let Some(raw) = parts.get("raw").and_then(Value::as_str) {
                return path_variables(raw, parts.get("variable"));
            }
            let join = |v: Option<&Value>, sep: &str| match v {
                Some(Value::Array(list)) => list.iter().map(text).collect::<Vec<_>>().join(sep),
                Some(v) => text(v),
                None => String::new(),
            };
            let protocol = parts.get("protocol").map(text).unwrap_or_else(|| "https".into());
            let url = format!("{protocol}://{}/{}", join(parts.get("host"), "."), join(parts.get("path"), "/"));
            path_variables(&url, parts.get("variable"))
        }
        _ => String::new(),
    }
}

/// Postman's path variables (`/users/:id` with `variable: [{key: "id", value: "7"}]`): each segment `:key` becomes its
/// value, or `{{key}}` when it has none.
fn path_variables(raw: &str, variables: Option<&Value>) -> String {
    let Some(variables) = variables.and_then(Value::as_array).filter(|v| !v.is_empty()) else {
        return raw.to_owned();
    };
    let (base, rest) = raw.find(['?', '#']).map_or((raw, ""), |at| raw.split_at(at));
    let segments: Vec<String> = base
        .split('/')
        .map(|segment| {
            let Some(key) = segment.strip_prefix(':') else { return segment.to_owned() };
            match variables.iter().find(|v| v["key"] == key) {
                Some(v) if !text(&v["value"]).is_empty() => text(&v["value"]),
                _ => format!("{{{{{key}}}}}"),
            }
        })
        .collect();
    format!("{}{rest}", segments.join("/"))
}

/// Converts a Postman environment: its enabled values become variables.
pub fn environment(document: &Value) -> ApiResult<Converted> {
    let Some(values) = document.get("values").and_then(Value::as_array) else {
        return Err(ApiError::invalid("not a Postman environment: `values` is missing"));
    };
    let mut converted = Converted {
        title: document["name"].as_str().unwrap_or("Postman environment").to_owned(),
        ..Converted::default()
    };
    for value in values {
        if value["enabled"] == false {
            continue;
        }
        if let Some(key) = value["key"].as_str() {
            converted.variable(key, text(&value["value"]));
        }
    }
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn path_variables_take_their_values_or_become_templates() {
        let variables = json!([{"key": "id", "value": "7"}, {"key": "part", "value": ""}]);
        let url = super::path_variables("{{base_url}}/users/:id/:part?x=:id", Some(&variables));
        assert_eq!(url, "{{base_url}}/users/7/{{part}}?x=:id");
        assert_eq!(super::path_variables("https://a.example/:id", None), "https://a.example/:id");
    }
}
