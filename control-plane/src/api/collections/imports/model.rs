//! What every converter produces: requests (with the body kind the tool used, and the extractors and assertions
//! of converted tests), the collection's variables and the report; plus the budgets hostile documents meet and the
//! helpers converters share (names, headers, Basic credentials).

use crate::error::ApiError;
use base64::Engine as _;
use hookflow_shared::api::imports::ImportReport;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Requests one document may hold.
pub const MAX_REQUESTS: usize = 5_000;
/// How deep folders may nest.
pub const MAX_FOLDER_DEPTH: usize = 32;
/// Script lines (tests and pre-request scripts together) one document may hold.
pub const MAX_SCRIPT_LINES: usize = 50_000;
/// Warnings listed; the rest are counted in one last warning.
pub const MAX_WARNINGS: usize = 200;
/// Longest request name kept (names are cut there).
const MAX_NAME_CHARS: usize = 200;

/// A converted document, and for OpenAPI descriptions what sync needs.
#[derive(Debug)]
pub struct Prepared {
    pub format: hookflow_shared::api::imports::ImportFormat,
    pub converted: Converted,
    /// OpenAPI and Swagger 2.0: the mapped requests with their operation keys and fingerprints.
    pub openapi: Option<crate::api::collections::openapi::mapping::Mapped>,
    pub sha256: Option<String>,
}

/// A request's body as the tool had it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Body {
    #[default]
    None,
    Text(String),
    /// `application/x-www-form-urlencoded` pairs, in order.
    Form(Vec<(String, String)>),
    /// `multipart/form-data` parts as the flow definition's `multipart` takes them.
    Multipart(Vec<Value>),
}

/// One imported request.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub name: String,
    /// Nested folders joined by `/`.
    pub folder: Option<String>,
    pub method: String,
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub query: BTreeMap<String, String>,
    pub body: Body,
    /// From converted test lines: they go to the flow's node (collection requests hold none).
    pub extractors: Vec<Value>,
    pub assertions: Vec<Value>,
}

impl Request {
    /// Where its script lines are reported: `<folder>/<request name>`, the name alone at the top level.
    pub fn place(&self) -> String {
        match &self.folder {
            Some(folder) => format!("{folder}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// A converted document.
#[derive(Debug, Default)]
pub struct Converted {
    /// The document's own name (collection, workspace, page title), for the collection's.
    pub title: String,
    pub variables: BTreeMap<String, String>,
    pub requests: Vec<Request>,
    pub report: ImportReport,
}

impl Converted {
    pub fn warn(&mut self, warning: impl Into<String>) {
        self.report.warnings.push(warning.into());
    }

    /// Adds a request, refusing the document past [`MAX_REQUESTS`].
    pub fn push(&mut self, request: Request) -> Result<(), ApiError> {
        if self.requests.len() >= MAX_REQUESTS {
            return Err(ApiError::invalid(format!("the document holds more than {MAX_REQUESTS} requests")));
        }
        self.requests.push(request);
        Ok(())
    }

    /// Keeps variables whose names collections and flows accept; warns about the others.
    pub fn variable(&mut self, name: &str, value: String) {
        if hookflow_shared::api::rules::is_key(name, 100) && hookflow_shared::flow::names::is_name(name) {
            self.variables.insert(name.to_owned(), value);
        } else {
            self.warn(format!("variable `{}` skipped: not a usable variable name", cut(name, 100)));
        }
    }

    /// Cuts the warnings to [`MAX_WARNINGS`], counting the rest.
    pub fn finish(&mut self) {
        let warnings = &mut self.report.warnings;
        if warnings.len() > MAX_WARNINGS {
            let more = warnings.len() - MAX_WARNINGS;
            warnings.truncate(MAX_WARNINGS);
            warnings.push(format!("... and {more} more warnings"));
        }
    }
}

/// The first `max` characters of `text`.
pub fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// A request name as collections take it: trimmed, cut, never empty.
pub fn request_name(name: &str, method: &str, url: &str) -> String {
    let name = name.trim();
    let name = if name.is_empty() { format!("{method} {url}") } else { name.to_owned() };
    cut(name.trim(), MAX_NAME_CHARS)
}

/// Headers the client sets itself (and HTTP/2 pseudo-headers): not imported.
pub fn is_client_header(name: &str) -> bool {
    name.starts_with(':')
        || ["host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade", "te"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
}

/// Adds a header; a repeated name joins its values as HTTP does (`; ` for cookies).
pub fn add_header(headers: &mut BTreeMap<String, String>, name: &str, value: &str) {
    let name = name.trim();
    if name.is_empty() || is_client_header(name) {
        return;
    }
    let existing = headers.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned();
    match existing {
        Some(key) => {
            let joined = if name.eq_ignore_ascii_case("cookie") { "; " } else { ", " };
            let entry = headers.entry(key).or_default();
            entry.push_str(joined);
            entry.push_str(value);
        }
        None => {
            headers.insert(name.to_owned(), value.to_owned());
        }
    }
}

/// Whether a header of that name (any case) is set.
pub fn has_header(headers: &BTreeMap<String, String>, name: &str) -> bool {
    headers.keys().any(|k| k.eq_ignore_ascii_case(name))
}

/// `Basic <base64(user:password)>`; templates inside cannot be encoded at import, so they are refused (`None`).
pub fn basic(user: &str, password: &str) -> Option<String> {
    if user.contains("{{") || password.contains("{{") {
        return None;
    }
    Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))))
}

/// A multipart text part.
pub fn text_part(name: &str, value: &str, content_type: Option<&str>) -> Value {
    let mut part = json!({"name": name, "value": value});
    if let Some(content_type) = content_type.filter(|t| !t.is_empty()) {
        part["content_type"] = json!(content_type);
    }
    part
}

/// A multipart file part whose content the document does not hold (a path on the exporter's disk): empty
/// content under its file name, with a warning by the caller.
pub fn file_part(name: &str, filename: &str, content_type: Option<&str>) -> Value {
    let mut part = json!({"name": name, "value": "", "filename": filename});
    if let Some(content_type) = content_type.filter(|t| !t.is_empty()) {
        part["content_type"] = json!(content_type);
    }
    part
}
