//! Insomnia v4 exports (JSON or YAML): the workspace's requests with their folders (request groups, nested ones
//! joined by `/`), the base environment's data as variables, `{{ _.name }}` templates as `{{name}}`, auth (bearer,
//! basic, API key) as headers or query, and bodies: text, urlencoded (`form`), multipart (`multipart`).

use crate::api::collections::imports::model::{
    Body, Converted, MAX_FOLDER_DEPTH, Request, add_header, basic, cut, file_part, has_header, request_name, text_part,
};
use crate::error::{ApiError, ApiResult};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

static TEMPLATE: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)] // A constant pattern, covered by the tests.
    Regex::new(r"\{\{\s*(?:_\.)?([A-Za-z_][\w.-]*)\s*\}\}").unwrap()
});

/// `{{ _.base_url }}` as `{{base_url}}`.
fn template(text: &str) -> String {
    TEMPLATE.replace_all(text, "{{$1}}").into_owned()
}

fn string(value: &Value) -> String {
    match value {
        Value::String(s) => template(s),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Converts an Insomnia v4 export.
pub fn export(document: &Value) -> ApiResult<Converted> {
    let Some(resources) = document.get("resources").and_then(Value::as_array) else {
        return Err(ApiError::invalid("not an Insomnia export: `resources` is missing"));
    };
    let of = |kind: &'static str| resources.iter().filter(move |r| r["_type"] == kind);
    let workspace = of("workspace").next();
    let mut converted = Converted {
        title: workspace.and_then(|w| w["name"].as_str()).unwrap_or("Insomnia workspace").to_owned(),
        ..Converted::default()
    };
    let workspace_id = workspace.and_then(|w| w["_id"].as_str());
    for environment in of("environment") {
        let base = workspace_id.is_some() && environment["parentId"].as_str() == workspace_id;
        if base || workspace_id.is_none() {
            for (key, value) in environment["data"].as_object().into_iter().flatten() {
                converted.variable(key, string(value));
            }
        } else {
            let name = environment["name"].as_str().unwrap_or("");
            converted.warn(format!("environment `{}` not imported: only the base environment is", cut(name, 100)));
        }
    }
    let groups: HashMap<&str, &Value> = of("request_group").filter_map(|g| Some((g["_id"].as_str()?, g))).collect();
    for request in of("request") {
        let folder = folder(&groups, request["parentId"].as_str())?;
        let method = request["method"].as_str().unwrap_or("GET").to_ascii_uppercase();
        let url = string(&request["url"]);
        let name = request_name(request["name"].as_str().unwrap_or(""), &method, &url);
        let mut out = Request { name, folder, method, url, ..Request::default() };
        for header in enabled(&request["headers"]) {
            if let Some(name) = header["name"].as_str() {
                add_header(&mut out.headers, name, &string(&header["value"]));
            }
        }
        for parameter in enabled(&request["parameters"]) {
            if let Some(name) = parameter["name"].as_str() {
                out.query.insert(name.to_owned(), string(&parameter["value"]));
            }
        }
        auth(&mut converted, &request["authentication"], &mut out);
        body(&mut converted, &request["body"], &mut out);
        converted.push(out)?;
    }
    if converted.requests.is_empty() && workspace.is_none() {
        return Err(ApiError::invalid("not an Insomnia export: it holds no workspace and no request"));
    }
    Ok(converted)
}

fn enabled(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten().filter(|p| p["disabled"] != true)
}

/// The request group path of a parent id, outermost first.
fn folder<'a>(groups: &HashMap<&'a str, &'a Value>, mut parent: Option<&'a str>) -> ApiResult<Option<String>> {
    let mut names = Vec::new();
    while let Some(group) = parent.and_then(|id| groups.get(id)) {
        if names.len() >= MAX_FOLDER_DEPTH {
            return Err(ApiError::invalid(format!("folders nest deeper than {MAX_FOLDER_DEPTH} levels")));
        }
        names.push(group["name"].as_str().unwrap_or("Folder").trim().to_owned());
        parent = group["parentId"].as_str();
    }
    names.reverse();
    Ok((!names.is_empty()).then(|| cut(&names.join("/"), 200)))
}

fn auth(converted: &mut Converted, auth: &Value, out: &mut Request) {
    if auth["disabled"] == true {
        return;
    }
    match auth["type"].as_str() {
        None | Some("none") => {}
        Some("bearer") => {
            let prefix = auth["prefix"].as_str().filter(|p| !p.is_empty()).unwrap_or("Bearer");
            add_header(&mut out.headers, "Authorization", &format!("{prefix} {}", string(&auth["token"])));
        }
        Some("basic") => match basic(&string(&auth["username"]), &string(&auth["password"])) {
            Some(value) => add_header(&mut out.headers, "Authorization", &value),
            None => converted.warn(format!(
                "{}: Basic auth made of variables cannot be encoded at import; set its Authorization header",
                out.place()
            )),
        },
        Some("apikey") => {
            let key = string(&auth["key"]);
            if auth["addTo"] == "queryParams" {
                out.query.insert(key, string(&auth["value"]));
            } else {
                add_header(&mut out.headers, &key, &string(&auth["value"]));
            }
        }
        Some(other) => converted.warn(format!("{}: `{other}` auth is not converted", out.place())),
    }
}

fn body(converted: &mut Converted, body: &Value, out: &mut Request) {
    let mime = body["mimeType"].as_str().unwrap_or("");
    let set_type = |out: &mut Request, mime: &str| {
        if !mime.is_empty() && !has_header(&out.headers, "content-type") {
            add_header(&mut out.headers, "Content-Type", mime);
        }
    };
    match mime {
        "application/x-www-form-urlencoded" => {
            let pairs = enabled(&body["params"])
                .filter_map(|p| Some((p["name"].as_str()?.to_owned(), string(&p["value"]))))
                .collect();
            out.body = Body::Form(pairs);
        }
        "multipart/form-data" => {
            let mut parts = Vec::new();
            for part in enabled(&body["params"]) {
                let Some(name) = part["name"].as_str() else { continue };
                if part["type"] == "file" {
                    let path = part["fileName"].as_str().unwrap_or("");
                    let filename = path.rsplit(['/', '\\']).next().unwrap_or("");
                    converted.warn(format!(
                        "{}: the file of multipart part `{name}` is on the exporter's disk: imported empty",
                        out.place()
                    ));
                    parts.push(file_part(name, filename, None));
                } else {
                    parts.push(text_part(name, &string(&part["value"]), None));
                }
            }
            out.body = Body::Multipart(parts);
        }
        "application/graphql" => {
            set_type(out, "application/json");
            out.body = Body::Text(string(&body["text"]));
        }
        _ => {
            let text = string(&body["text"]);
            if !text.is_empty() {
                set_type(out, mime);
                out.body = Body::Text(text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn templates_lose_their_underscore() {
        assert_eq!(super::template("{{ _.base_url }}/users/{{id}}"), "{{base_url}}/users/{{id}}");
    }
}
