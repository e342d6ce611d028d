//! HAR 1.2 (as browsers save it): each entry's request in order, with its method, URL, headers (the ones the
//! client sets itself left out) and body text byte for byte with its content type. Named `METHOD /path`.

use crate::api::collections::imports::model::{Body, Converted, Request, add_header, has_header, request_name};
use crate::error::{ApiError, ApiResult};
use serde_json::Value;

/// Converts a HAR log.
pub fn log(document: &Value) -> ApiResult<Converted> {
    let Some(entries) = document["log"]["entries"].as_array() else {
        return Err(ApiError::invalid("not a HAR file: `log.entries` is missing"));
    };
    let title = document["log"]["pages"][0]["title"].as_str().unwrap_or("HAR import").to_owned();
    let mut converted = Converted { title, ..Converted::default() };
    for (index, entry) in entries.iter().enumerate() {
        let request = &entry["request"];
        let (Some(method), Some(url)) = (request["method"].as_str(), request["url"].as_str()) else {
            converted.warn(format!("entry {index}: no method or URL, skipped"));
            continue;
        };
        let method = method.to_ascii_uppercase();
        let path = reqwest::Url::parse(url).map(|u| u.path().to_owned()).unwrap_or_else(|_| url.to_owned());
        let name = request_name("", &method, &path);
        let mut out = Request { name, method, url: url.to_owned(), ..Request::default() };
        for header in request["headers"].as_array().into_iter().flatten() {
            if let (Some(name), Some(value)) = (header["name"].as_str(), header["value"].as_str()) {
                add_header(&mut out.headers, name, value);
            }
        }
        if let Some(text) = request["postData"]["text"].as_str().filter(|t| !t.is_empty()) {
            if let Some(mime) = request["postData"]["mimeType"].as_str().filter(|m| !m.is_empty())
                && !has_header(&out.headers, "content-type")
            {
                add_header(&mut out.headers, "Content-Type", mime);
            }
            out.body = Body::Text(text.to_owned());
        }
        converted.push(out)?;
    }
    Ok(converted)
}
