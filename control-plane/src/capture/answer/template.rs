//! Body templates of response rules: `{{request.method}}`, `{{request.path}}`, `{{request.params.<name>}}`,
//! `{{request.query.<name>}}`, `{{request.headers.<name>}}`, `{{request.body}}`, `{{request.body.<JSONPath>}}`
//! and `{{request.id}}`. A `{{` not followed by `request` is text. Rendered values are escaped as JSON string
//! content when the answer is JSON; the rendered body is cut at [`RENDERED_MAX`] bytes. Only bodies are templates:
//! header values never are, so nothing a sender sends reaches an answer's headers.

use hookflow_shared::api::answers::RENDERED_MAX;
use serde_json_path::JsonPath;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One piece of a template.
#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    Method,
    Path,
    Param(String),
    Query(String),
    Header(String),
    Body,
    BodyPath(Box<JsonPath>),
    Id,
}

/// A parsed body template.
#[derive(Debug, Clone, Default)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// What a template reads of a request.
#[derive(Debug)]
pub struct Values<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub params: &'a [(String, String)],
    pub query: &'a BTreeMap<String, Vec<String>>,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub request_id: String,
}

impl Template {
    /// Parses `source`, or says what is wrong (an unclosed `{{request`, an unknown name, a bad JSONPath).
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = source;
        while let Some(at) = rest.find("{{") {
            let after = &rest[at + 2..];
            if !after.trim_start().starts_with("request") {
                text.push_str(&rest[..at + 2]);
                rest = after;
                continue;
            }
            text.push_str(&rest[..at]);
            let Some(end) = after.find("}}") else {
                return Err(format!("`{{{{{}` is not closed with `}}}}`", after.chars().take(40).collect::<String>()));
            };
            let expression = after[..end].trim();
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(piece(expression)?);
            rest = &after[end + 2..];
        }
        text.push_str(rest);
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { pieces })
    }

    /// Renders the template for `values`, each value escaped as JSON string content when `json`.
    pub fn render(&self, values: &Values<'_>, json: bool) -> String {
        let parsed: OnceLock<Option<serde_json::Value>> = OnceLock::new();
        let mut out = String::new();
        for piece in &self.pieces {
            let value: std::borrow::Cow<'_, str> = match piece {
                Piece::Text(text) => {
                    push_within(&mut out, text);
                    continue;
                }
                Piece::Method => values.method.into(),
                Piece::Path => values.path.into(),
                Piece::Param(name) => first(values.params.iter().filter(|(n, _)| n == name)).into(),
                Piece::Query(name) => {
                    values.query.get(name).and_then(|v| v.first()).map(String::as_str).unwrap_or_default().into()
                }
                Piece::Header(name) => {
                    first(values.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name))).into()
                }
                Piece::Body => String::from_utf8_lossy(values.body),
                Piece::BodyPath(path) => {
                    let document = parsed.get_or_init(|| serde_json::from_slice(values.body).ok());
                    match document.as_ref().and_then(|d| path.query(d).first()) {
                        None => "".into(),
                        Some(serde_json::Value::String(s)) => s.as_str().into(),
                        Some(other) => other.to_string().into(),
                    }
                }
                Piece::Id => values.request_id.as_str().into(),
            };
            if json {
                let quoted = serde_json::Value::String(value.into_owned()).to_string();
                push_within(&mut out, &quoted[1..quoted.len() - 1]);
            } else {
                push_within(&mut out, &value);
            }
            if out.len() >= RENDERED_MAX {
                break;
            }
        }
        out
    }
}

fn first<'a>(mut pairs: impl Iterator<Item = &'a (String, String)>) -> &'a str {
    pairs.next().map(|(_, v)| v.as_str()).unwrap_or_default()
}

/// Appends `text`, never past [`RENDERED_MAX`] bytes (cut at a character boundary).
fn push_within(out: &mut String, text: &str) {
    let room = RENDERED_MAX.saturating_sub(out.len());
    if text.len() <= room {
        out.push_str(text);
        return;
    }
    let mut end = room;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&text[..end]);
}

fn piece(expression: &str) -> Result<Piece, String> {
    let unknown = || {
        format!(
            "`{{{{{expression}}}}}` is not a template: use request.method, request.path, request.params.<name>, \
             request.query.<name>, request.headers.<name>, request.body, request.body.<JSONPath> or request.id"
        )
    };
    let name = |rest: &str| if rest.is_empty() { Err(unknown()) } else { Ok(rest.to_owned()) };
    match expression {
        "request.method" => return Ok(Piece::Method),
        "request.path" => return Ok(Piece::Path),
        "request.body" => return Ok(Piece::Body),
        "request.id" => return Ok(Piece::Id),
        _ => {}
    }
    if let Some(rest) = expression.strip_prefix("request.params.") {
        return name(rest).map(Piece::Param);
    }
    if let Some(rest) = expression.strip_prefix("request.query.") {
        return name(rest).map(Piece::Query);
    }
    if let Some(rest) = expression.strip_prefix("request.headers.") {
        return name(rest).map(|n| Piece::Header(n.to_ascii_lowercase()));
    }
    if let Some(rest) = expression.strip_prefix("request.body.") {
        // Budgeted first: a capture URL answers a stranger's body with it.
        hookflow_shared::flow::budget::check_capture_json_path(rest)
            .map_err(|e| format!("`{rest}` is refused: {e}"))?;
        let path = JsonPath::parse(rest).map_err(|e| format!("`{rest}` is not a JSONPath: {e}"))?;
        return Ok(Piece::BodyPath(Box::new(path)));
    }
    Err(unknown())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(query: &'a BTreeMap<String, Vec<String>>, body: &'a [u8]) -> Values<'a> {
        Values { method: "POST", path: "/o/1", params: &[], query, headers: &[], body, request_id: "id".into() }
    }

    #[test]
    fn values_are_escaped_for_json_and_literal_braces_stay() {
        let query = BTreeMap::from([("q".to_owned(), vec!["a\"b\\c\n{{d".to_owned()])]);
        let template = Template::parse(r#"{"v": "{{request.query.q}}", "x": "{{ not a template"}"#).expect("parses");
        let rendered = template.render(&values(&query, b""), true);
        let parsed: serde_json::Value = serde_json::from_str(&rendered).expect("JSON");
        assert_eq!(parsed["v"], "a\"b\\c\n{{d");
        assert_eq!(parsed["x"], "{{ not a template");
    }

    #[test]
    fn json_paths_read_the_first_match() {
        let query = BTreeMap::new();
        let template =
            Template::parse("{{request.body.$.a[*]}}|{{request.body.$.s}}|{{request.body.$.none}}").expect("parses");
        let rendered = template.render(&values(&query, br#"{"a": [{"k": 1}, 2], "s": "t"}"#), false);
        assert_eq!(rendered, r#"{"k":1}|t|"#);
        assert!(Template::parse("{{request.nope}}").is_err());
        assert!(Template::parse("{{request.body").is_err());
        assert!(Template::parse("{{request.body.$[}}").is_err());
        let explosive = Template::parse("{{request.body.$..*..*..*}}").expect_err("two descendants too many");
        assert!(explosive.contains("3 descendant segments"), "{explosive}");
    }

    #[test]
    fn a_rendered_body_is_bounded() {
        let query = BTreeMap::new();
        let template = Template::parse(&"{{request.body}}".repeat(100)).expect("parses");
        let body = vec![b'x'; 100_000];
        assert_eq!(template.render(&values(&query, &body), false).len(), RENDERED_MAX);
    }
}
