//! From converted requests to what is stored: collection requests (bodies as text: a form urlencoded, multipart
//! parts under a fixed boundary, each with its `Content-Type`) and the flow of the requests in order (inline request
//! nodes with `body`, `form` or `multipart`, and the extractors and assertions of converted tests).

use crate::api::collections::crud::check_request;
use crate::api::collections::imports::model::{Body, Converted, add_header, has_header};
use crate::api::collections::openapi::mapping::GeneratedRequest;
use hookflow_shared::api::collections::WriteRequest;
use regex::Regex;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

/// The boundary of multipart bodies kept as text in collection requests.
pub const BOUNDARY: &str = "hookflow-import-boundary";

static TEMPLATE: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)] // A constant pattern.
    Regex::new(r"\{\{[^{}]*\}\}").unwrap()
});

/// URL-encodes text but its `{{templates}}`.
fn encode(text: &str) -> String {
    let mut out = String::new();
    let mut last = 0;
    let plain = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    for m in TEMPLATE.find_iter(text) {
        out.push_str(&plain(&text[last..m.start()]));
        out.push_str(m.as_str());
        last = m.end();
    }
    out.push_str(&plain(&text[last..]));
    out
}

/// A body as collection requests hold it (text), with the content type it needs.
fn text_body(body: &Body, headers: &mut BTreeMap<String, String>) -> Option<String> {
    match body {
        Body::None => None,
        Body::Text(text) => Some(text.clone()),
        Body::Form(pairs) => {
            if !has_header(headers, "content-type") {
                add_header(headers, "Content-Type", "application/x-www-form-urlencoded");
            }
            Some(pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&"))
        }
        Body::Multipart(parts) => {
            headers.retain(|k, _| !k.eq_ignore_ascii_case("content-type"));
            add_header(headers, "Content-Type", &format!("multipart/form-data; boundary={BOUNDARY}"));
            let mut text = String::new();
            for part in parts {
                text.push_str(&format!(
                    "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{}\"",
                    str(&part["name"])
                ));
                if let Some(filename) = part["filename"].as_str() {
                    text.push_str(&format!("; filename=\"{filename}\""));
                }
                text.push_str("\r\n");
                if let Some(content_type) = part["content_type"].as_str() {
                    text.push_str(&format!("Content-Type: {content_type}\r\n"));
                }
                text.push_str(&format!("\r\n{}\r\n", str(&part["value"])));
            }
            text.push_str(&format!("--{BOUNDARY}--\r\n"));
            Some(text)
        }
    }
}

fn str(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// Checks every converted request as a collection request; one the rules refuse is dropped with a warning (the
/// answer says which and why). Answers the collection requests, in the order of `converted.requests`.
pub fn collection_requests(converted: &mut Converted) -> Vec<GeneratedRequest> {
    let mut kept = Vec::new();
    let mut generated = Vec::new();
    for request in std::mem::take(&mut converted.requests) {
        let mut headers = request.headers.clone();
        let body = text_body(&request.body, &mut headers);
        let write = WriteRequest {
            name: request.name.clone(),
            folder: request.folder.clone(),
            method: request.method.clone(),
            url: request.url.clone(),
            headers,
            query: request.query.clone(),
            body,
            description: None,
            operation_key: None,
        };
        match check_request(write) {
            Ok(write) => {
                generated.push(GeneratedRequest { request: write, deprecated: false, fingerprints: BTreeMap::new() });
                kept.push(request);
            }
            Err(e) => converted.warn(format!("{}: not imported: {}", request.place(), e.message)),
        }
    }
    converted.requests = kept;
    generated
}

/// A node id from a request name: letters, digits, `_` and `-`, unique within the flow.
fn node_id(name: &str, taken: &mut HashSet<String>) -> String {
    let mut id = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            id.push(c.to_ascii_lowercase());
        } else if !id.ends_with('_') && !id.is_empty() {
            id.push('_');
        }
    }
    let mut base: String = id.trim_end_matches('_').chars().take(56).collect();
    if base.is_empty() {
        base = "request".into();
    }
    let mut id = base.clone();
    let mut n = 1;
    while !taken.insert(id.clone()) {
        n += 1;
        id = format!("{base}_{n}");
    }
    id
}

/// The flow definition of the requests in order.
pub fn flow_definition(converted: &Converted) -> Value {
    let mut taken = HashSet::new();
    let nodes: Vec<Value> = converted
        .requests
        .iter()
        .map(|request| {
            let mut spec = json!({"method": request.method, "url": request.url, "headers": request.headers,
                "query": request.query});
            match &request.body {
                Body::None => {}
                Body::Text(text) => spec["body"] = json!(text),
                Body::Form(pairs) => spec["form"] = json!(pairs.iter().map(|(k, v)| [k, v]).collect::<Vec<_>>()),
                Body::Multipart(parts) => {
                    // The engine chooses the boundary: a content type naming another would lie.
                    if let Some(headers) = spec["headers"].as_object_mut() {
                        headers.retain(|k, _| !k.eq_ignore_ascii_case("content-type"));
                    }
                    spec["multipart"] = json!(parts);
                }
            }
            if matches!(request.body, Body::Form(_))
                && let Some(headers) = spec["headers"].as_object_mut()
            {
                headers.retain(|k, v| {
                    !(k.eq_ignore_ascii_case("content-type") && v.as_str().is_some_and(|v| v.contains("urlencoded")))
                });
            }
            json!({"id": node_id(&request.place(), &mut taken), "kind": "request", "name": request.place(),
                "request": spec, "extractors": request.extractors, "assertions": request.assertions})
        })
        .collect();
    json!({"variables": converted.variables, "nodes": nodes})
}
