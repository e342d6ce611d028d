//! The seven extractor kinds: `duration` (the exchange's milliseconds), `jsonPath` (RFC 9535, serde_json_path), `xmlPath` (XPath 1.0, sxd-xpath),
//! `statusCode`, `header` (case-insensitive; repeated headers give a list), `body` (whole text, or the first
//! capture group of `regex`) and `signature` (a captured request's verdict, for webhook nodes). Nothing matched is
//! `None`, not an error; an invalid expression is an error.

use crate::flow::budget;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum ExtractorKind {
    #[serde(rename = "jsonPath")]
    JsonPath,
    #[serde(rename = "xmlPath")]
    XmlPath,
    #[serde(rename = "statusCode")]
    StatusCode,
    #[serde(rename = "header")]
    Header,
    #[serde(rename = "body")]
    Body,
    /// The signature verdict of a captured request (webhook nodes only).
    #[serde(rename = "signature")]
    Signature,
    /// The exchange's total milliseconds (request nodes only).
    #[serde(rename = "duration")]
    Duration,
}

/// A field an extractor kind takes, for the catalog.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    pub name: &'static str,
    pub kind: &'static str,
    pub required: bool,
}

impl ExtractorKind {
    pub const ALL: [ExtractorKind; 7] = [
        ExtractorKind::JsonPath,
        ExtractorKind::XmlPath,
        ExtractorKind::StatusCode,
        ExtractorKind::Header,
        ExtractorKind::Body,
        ExtractorKind::Signature,
        ExtractorKind::Duration,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ExtractorKind::JsonPath => "jsonPath",
            ExtractorKind::XmlPath => "xmlPath",
            ExtractorKind::StatusCode => "statusCode",
            ExtractorKind::Header => "header",
            ExtractorKind::Body => "body",
            ExtractorKind::Signature => "signature",
            ExtractorKind::Duration => "duration",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            ExtractorKind::JsonPath => "A value from a JSON body by RFC 9535 JSONPath; several matches give a list.",
            ExtractorKind::XmlPath => "A value from an XML body by XPath 1.0; several nodes give a list of their text.",
            ExtractorKind::StatusCode => "The response's HTTP status code.",
            ExtractorKind::Header => "A response header by name (case-insensitive); a repeated header gives a list.",
            ExtractorKind::Body => "The whole body as text, or the first capture group of `regex`.",
            ExtractorKind::Signature => {
                "The signature verdict of the captured request a webhook node received: valid, invalid, missing, \
                 unverified or duplicate."
            }
            ExtractorKind::Duration => {
                "The exchange's total time in milliseconds, from sending to the body's end (a number; request nodes)."
            }
        }
    }

    /// The fields besides `name` and `kind`.
    pub fn fields(self) -> &'static [FieldSpec] {
        match self {
            ExtractorKind::JsonPath | ExtractorKind::XmlPath => {
                &[FieldSpec { name: "expression", kind: "string", required: true }]
            }
            ExtractorKind::StatusCode | ExtractorKind::Signature | ExtractorKind::Duration => &[],
            ExtractorKind::Header => &[FieldSpec { name: "header", kind: "string", required: true }],
            ExtractorKind::Body => &[FieldSpec { name: "regex", kind: "string", required: false }],
        }
    }
}

/// An extractor of a request node: stores what it finds under `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Extractor {
    pub name: String,
    pub kind: ExtractorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// The parts of a response extractors read.
#[derive(Debug, Clone, Copy)]
pub struct ResponseView<'a> {
    pub status: u16,
    /// A captured request's method, which `statusCode` reads instead of `status` (webhook nodes).
    pub method: Option<&'a str>,
    /// A captured request's signature verdict (webhook nodes).
    pub signature: Option<&'a str>,
    pub headers: &'a [(String, String)],
    pub body: &'a str,
    /// The exchange's total milliseconds (request nodes), which `duration` reads.
    pub duration_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("`{field}` is required for a {kind} extractor")]
    MissingField { field: &'static str, kind: &'static str },
    #[error("invalid {kind} expression `{expression}`: {detail}")]
    InvalidExpression { kind: &'static str, expression: String, detail: String },
    #[error("{detail}")]
    Budget { detail: String },
    /// The body is larger than a `jsonPath` or `xmlPath` extractor evaluates.
    #[error("body too large to evaluate: {detail}")]
    TooLarge { detail: String },
    #[error(
        "extracted values too large: the extractors of one response find at most {MAX_EXTRACTED_BYTES} bytes together"
    )]
    ExtractedTooLarge,
}

impl Extractor {
    fn required<'a>(&self, value: &'a Option<String>, field: &'static str) -> Result<&'a str, ExtractError> {
        value.as_deref().ok_or(ExtractError::MissingField { field, kind: self.kind.name() })
    }

    fn invalid(&self, expression: &str, detail: impl ToString) -> ExtractError {
        ExtractError::InvalidExpression {
            kind: self.kind.name(),
            expression: expression.to_owned(),
            detail: detail.to_string(),
        }
    }

    /// Checks the fields and compiles the expression, without a response (validation on write).
    pub fn check(&self) -> Result<(), ExtractError> {
        match self.kind {
            ExtractorKind::JsonPath => {
                let expression = self.required(&self.expression, "expression")?;
                self.compile_json_path(expression).map(|_| ())
            }
            ExtractorKind::XmlPath => {
                let expression = self.required(&self.expression, "expression")?;
                self.compile_xpath(expression).map(|_| ())
            }
            ExtractorKind::StatusCode | ExtractorKind::Signature | ExtractorKind::Duration => Ok(()),
            ExtractorKind::Header => self.required(&self.header, "header").map(|_| ()),
            ExtractorKind::Body => match &self.regex {
                Some(pattern) => self.compile_regex(pattern).map(|_| ()),
                None => Ok(()),
            },
        }
    }

    fn compile_xpath(&self, expression: &str) -> Result<sxd_xpath::XPath, ExtractError> {
        budget::check_expression(expression).map_err(|e| self.invalid(expression, e))?;
        sxd_xpath::Factory::new()
            .build(expression)
            .map_err(|e| self.invalid(expression, e))?
            .ok_or_else(|| self.invalid(expression, "empty expression"))
    }

    fn compile_json_path(&self, expression: &str) -> Result<serde_json_path::JsonPath, ExtractError> {
        budget::check_json_path(expression).map_err(|e| self.invalid(expression, e))?;
        serde_json_path::JsonPath::parse(expression).map_err(|e| self.invalid(expression, e))
    }

    fn compile_regex(&self, pattern: &str) -> Result<regex::Regex, ExtractError> {
        budget::check_expression(pattern).map_err(|e| self.invalid(pattern, e))?;
        let regex = regex::Regex::new(pattern).map_err(|e| self.invalid(pattern, e))?;
        if regex.captures_len() < 2 {
            return Err(self.invalid(pattern, "needs one capture group, e.g. id=(\\d+)"));
        }
        Ok(regex)
    }

    /// Extracts from a response; `Ok(None)` when nothing matched (one extractor: the body is parsed for it).
    pub fn extract(&self, response: ResponseView<'_>) -> Result<Option<Value>, ExtractError> {
        self.extract_from(&Parsed::new(response))
    }

    /// Extracts from a response whose body is parsed at most once for every extractor that reads it; what it
    /// finds is charged to the response's budget of extracted bytes. One match over the kinds on purpose: each
    /// arm is the whole of its kind.
    pub fn extract_from(&self, parsed: &Parsed<'_>) -> Result<Option<Value>, ExtractError> {
        let response = parsed.view;
        let found = match self.kind {
            ExtractorKind::StatusCode => Some(match response.method {
                Some(method) => Value::String(method.to_owned()),
                None => Value::from(response.status),
            }),
            ExtractorKind::Signature => response.signature.map(|v| Value::String(v.to_owned())),
            ExtractorKind::Duration => response.duration_ms.and_then(serde_json::Number::from_f64).map(Value::Number),
            ExtractorKind::Header => {
                let name = self.required(&self.header, "header")?;
                let mut values: Vec<Value> = Vec::new();
                for (_, value) in response.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    parsed.charge(value.len() + 2)?;
                    values.push(Value::String(value.clone()));
                }
                match values.len() {
                    0 => None,
                    1 => values.into_iter().next(),
                    _ => Some(Value::Array(values)),
                }
            }
            ExtractorKind::Body => {
                let text = match &self.regex {
                    None => Some(response.body),
                    Some(pattern) => {
                        let regex = self.compile_regex(pattern)?;
                        regex.captures(response.body).and_then(|c| c.get(1)).map(|m| m.as_str())
                    }
                };
                match text {
                    Some(text) => {
                        parsed.charge(text.len() + 2)?;
                        Some(Value::String(text.to_owned()))
                    }
                    None => None,
                }
            }
            ExtractorKind::JsonPath => {
                let expression = self.required(&self.expression, "expression")?;
                let path = self.compile_json_path(expression)?;
                let Some(document) = parsed.json()? else { return Ok(None) };
                let nodes = path.query(document).all();
                for node in &nodes {
                    parsed.charge_json(node)?;
                }
                match nodes.len() {
                    0 => None,
                    1 => Some(nodes[0].clone()),
                    _ => Some(Value::Array(nodes.into_iter().cloned().collect())),
                }
            }
            ExtractorKind::XmlPath => {
                let expression = self.required(&self.expression, "expression")?;
                let xpath = self.compile_xpath(expression)?;
                let Some(package) = parsed.xml()? else { return Ok(None) };
                let document = package.as_document();
                let context = sxd_xpath::Context::new();
                let value = xpath.evaluate(&context, document.root()).map_err(|e| self.invalid(expression, e))?;
                match value {
                    sxd_xpath::Value::Nodeset(nodes) => {
                        let mut texts: Vec<Value> = Vec::new();
                        for node in nodes.document_order() {
                            let text = node.string_value();
                            parsed.charge(text.len() + 2)?;
                            texts.push(Value::String(text));
                        }
                        match texts.len() {
                            0 => None,
                            1 => texts.into_iter().next(),
                            _ => Some(Value::Array(texts)),
                        }
                    }
                    sxd_xpath::Value::String(s) => {
                        parsed.charge(s.len() + 2)?;
                        Some(Value::String(s))
                    }
                    sxd_xpath::Value::Number(n) => serde_json::Number::from_f64(n).map(Value::Number),
                    sxd_xpath::Value::Boolean(b) => Some(Value::Bool(b)),
                }
            }
        };
        Ok(found)
    }
}

/// Extractors a node has at most (each is work over every response the node reads).
pub const MAX_EXTRACTORS: usize = 50;
/// The largest body a `jsonPath` or `xmlPath` extractor evaluates: a parsed document takes many times its text.
pub const MAX_EVALUATED_BODY: usize = 8 * 1024 * 1024;
/// What the extractors of one response find, together, at most (as JSON text, estimated before anything is
/// copied): extracting the whole body, or `$`, fifty times must not take fifty bodies.
pub const MAX_EXTRACTED_BYTES: usize = 8 * 1024 * 1024;

/// A response as its extractors read it: the body parsed as JSON, or as XML, at most once whatever the number of
/// extractors, and a budget of extracted bytes they share. Not `Sync` (an XML package is not): one thread.
pub struct Parsed<'a> {
    view: ResponseView<'a>,
    json: std::cell::OnceCell<Option<Value>>,
    xml: std::cell::OnceCell<Result<Option<sxd_document::Package>, String>>,
    left: std::cell::Cell<usize>,
}

impl std::fmt::Debug for Parsed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parsed").field("body_len", &self.view.body.len()).field("left", &self.left).finish()
    }
}

impl<'a> Parsed<'a> {
    pub fn new(view: ResponseView<'a>) -> Self {
        Self {
            view,
            json: std::cell::OnceCell::new(),
            xml: std::cell::OnceCell::new(),
            left: std::cell::Cell::new(MAX_EXTRACTED_BYTES),
        }
    }

    fn evaluable(&self) -> Result<(), ExtractError> {
        let size = self.view.body.len();
        if size > MAX_EVALUATED_BODY {
            return Err(ExtractError::TooLarge {
                detail: format!(
                    "the body is {size} bytes; jsonPath and xmlPath extractors evaluate bodies of at most \
                     {MAX_EVALUATED_BODY} bytes"
                ),
            });
        }
        Ok(())
    }

    /// The body as JSON, parsed on first use; `None` when it is not JSON.
    fn json(&self) -> Result<Option<&Value>, ExtractError> {
        self.evaluable()?;
        Ok(self.json.get_or_init(|| serde_json::from_str::<Value>(self.view.body).ok()).as_ref())
    }

    /// The body as XML, checked and parsed on first use; `None` when it is not XML.
    fn xml(&self) -> Result<Option<&sxd_document::Package>, ExtractError> {
        self.evaluable()?;
        let parsed = self.xml.get_or_init(|| {
            budget::check_xml(self.view.body)?;
            Ok(sxd_document::parser::parse(self.view.body).ok())
        });
        match parsed {
            Ok(package) => Ok(package.as_ref()),
            Err(detail) => Err(ExtractError::Budget { detail: detail.clone() }),
        }
    }

    /// Takes `bytes` from the budget of extracted bytes.
    fn charge(&self, bytes: usize) -> Result<(), ExtractError> {
        let left = self.left.get();
        if bytes > left {
            return Err(ExtractError::ExtractedTooLarge);
        }
        self.left.set(left - bytes);
        Ok(())
    }

    /// Charges a JSON value's size, walking it no further than the budget left.
    fn charge_json(&self, value: &Value) -> Result<(), ExtractError> {
        let left = self.left.get();
        match budget::json_size_within(value, left) {
            Some(size) => self.charge(size),
            None => self.charge(left.saturating_add(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn extractor(
        kind: ExtractorKind,
        expression: Option<&str>,
        header: Option<&str>,
        regex: Option<&str>,
    ) -> Extractor {
        Extractor {
            name: "x".into(),
            kind,
            expression: expression.map(Into::into),
            header: header.map(Into::into),
            regex: regex.map(Into::into),
        }
    }

    fn response<'a>(headers: &'a [(String, String)], body: &'a str) -> ResponseView<'a> {
        ResponseView { status: 201, method: None, signature: None, headers, body, duration_ms: None }
    }

    #[test]
    fn json_path_single_many_and_none() {
        let body = r#"{"token": "t1", "items": [{"id": 1}, {"id": 2}]}"#;
        let one = extractor(ExtractorKind::JsonPath, Some("$.token"), None, None);
        assert_eq!(one.extract(response(&[], body)), Ok(Some(json!("t1"))));
        let many = extractor(ExtractorKind::JsonPath, Some("$.items[*].id"), None, None);
        assert_eq!(many.extract(response(&[], body)), Ok(Some(json!([1, 2]))));
        let filtered = extractor(ExtractorKind::JsonPath, Some("$.items[?@.id > 1].id"), None, None);
        assert_eq!(filtered.extract(response(&[], body)), Ok(Some(json!(2))));
        let none = extractor(ExtractorKind::JsonPath, Some("$.missing"), None, None);
        assert_eq!(none.extract(response(&[], body)), Ok(None));
        assert_eq!(one.extract(response(&[], "not json")), Ok(None));
        let bad = extractor(ExtractorKind::JsonPath, Some("$.["), None, None);
        assert!(matches!(bad.check(), Err(ExtractError::InvalidExpression { .. })));
        assert!(matches!(
            extractor(ExtractorKind::JsonPath, None, None, None).check(),
            Err(ExtractError::MissingField { .. })
        ));
    }

    #[test]
    fn xml_path_nodes_and_scalars() {
        let body = "<order><id>42</id><item>a</item><item>b</item></order>";
        let id = extractor(ExtractorKind::XmlPath, Some("/order/id"), None, None);
        assert_eq!(id.extract(response(&[], body)), Ok(Some(json!("42"))));
        let items = extractor(ExtractorKind::XmlPath, Some("//item"), None, None);
        assert_eq!(items.extract(response(&[], body)), Ok(Some(json!(["a", "b"]))));
        let count = extractor(ExtractorKind::XmlPath, Some("count(//item)"), None, None);
        assert_eq!(count.extract(response(&[], body)), Ok(Some(json!(2.0))));
        let none = extractor(ExtractorKind::XmlPath, Some("/order/missing"), None, None);
        assert_eq!(none.extract(response(&[], body)), Ok(None));
        assert!(extractor(ExtractorKind::XmlPath, Some("//["), None, None).check().is_err());
    }

    #[test]
    fn bodies_past_the_evaluated_size_fail_json_and_xml_extractors_only() {
        let body = format!("[{}1]", "1,".repeat(MAX_EVALUATED_BODY / 2));
        let parsed = Parsed::new(response(&[], &body));
        for (kind, expression) in [(ExtractorKind::JsonPath, "$[0]"), (ExtractorKind::XmlPath, "/a")] {
            let error = extractor(kind, Some(expression), None, None).extract_from(&parsed).expect_err("too large");
            assert!(error.to_string().starts_with("body too large to evaluate"), "{error}");
        }
        let regex = extractor(ExtractorKind::Body, None, None, Some(r"^\[(\d)"));
        assert_eq!(regex.extract_from(&parsed), Ok(Some(json!("1"))));
    }

    #[test]
    fn one_parse_serves_every_extractor_within_one_budget() {
        let body = format!(r#"{{"big": "{}", "n": 7}}"#, "x".repeat(MAX_EXTRACTED_BYTES / 3));
        let parsed = Parsed::new(response(&[], &body));
        let n = extractor(ExtractorKind::JsonPath, Some("$.n"), None, None);
        assert_eq!(n.extract_from(&parsed), Ok(Some(json!(7))));
        assert!(parsed.json.get().is_some(), "parsed once, kept for the next extractor");
        let big = extractor(ExtractorKind::JsonPath, Some("$.big"), None, None);
        assert!(big.extract_from(&parsed).is_ok());
        assert!(big.extract_from(&parsed).is_ok());
        assert_eq!(big.extract_from(&parsed), Err(ExtractError::ExtractedTooLarge), "the third copy passes it");
        let whole = extractor(ExtractorKind::Body, None, None, None);
        assert_eq!(whole.extract_from(&parsed), Err(ExtractError::ExtractedTooLarge));
        assert_eq!(n.extract_from(&parsed), Ok(Some(json!(7))), "a small value still fits what is left");
    }

    #[test]
    fn status_header_and_body() {
        let headers = vec![
            ("Set-Cookie".to_owned(), "a=1".to_owned()),
            ("Content-Type".to_owned(), "text/plain".to_owned()),
            ("set-cookie".to_owned(), "b=2".to_owned()),
        ];
        assert_eq!(
            extractor(ExtractorKind::StatusCode, None, None, None).extract(response(&headers, "")),
            Ok(Some(json!(201)))
        );
        let cookie = extractor(ExtractorKind::Header, None, Some("SET-COOKIE"), None);
        assert_eq!(cookie.extract(response(&headers, "")), Ok(Some(json!(["a=1", "b=2"]))));
        let ct = extractor(ExtractorKind::Header, None, Some("content-type"), None);
        assert_eq!(ct.extract(response(&headers, "")), Ok(Some(json!("text/plain"))));
        assert_eq!(
            extractor(ExtractorKind::Header, None, Some("x-none"), None).extract(response(&headers, "")),
            Ok(None)
        );
        let whole = extractor(ExtractorKind::Body, None, None, None);
        assert_eq!(whole.extract(response(&headers, "order 77 ok")), Ok(Some(json!("order 77 ok"))));
        let number = extractor(ExtractorKind::Body, None, None, Some(r"order (\d+)"));
        assert_eq!(number.extract(response(&headers, "order 77 ok")), Ok(Some(json!("77"))));
        assert_eq!(number.extract(response(&headers, "nothing")), Ok(None));
        assert!(
            extractor(ExtractorKind::Body, None, None, Some(r"\d+")).check().is_err(),
            "a capture group is required"
        );
    }

    /// The public JSONPath Compliance Test Suite (RFC 9535) against the jsonPath extractor's engine.
    #[test]
    fn jsonpath_compliance_test_suite() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/jsonpath-cts/cts.json");
        let suite: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("cts.json")).expect("json");
        let cases = suite["tests"].as_array().expect("tests");
        let mut failed = Vec::new();
        for case in cases {
            let selector = case["selector"].as_str().expect("selector");
            let parsed = serde_json_path::JsonPath::parse(selector);
            let ok = if case["invalid_selector"] == json!(true) {
                parsed.is_err()
            } else {
                match parsed {
                    Err(_) => false,
                    Ok(path) => {
                        let got: Vec<Value> = path.query(&case["document"]).all().into_iter().cloned().collect();
                        let got = Value::Array(got);
                        match (&case.get("result"), case.get("results").and_then(Value::as_array)) {
                            (Some(expected), _) => &got == *expected,
                            (None, Some(alternatives)) => alternatives.contains(&got),
                            _ => false,
                        }
                    }
                }
            };
            if !ok {
                failed.push(case["name"].as_str().unwrap_or("?").to_owned());
            }
        }
        let passed = cases.len() - failed.len();
        eprintln!("JSONPath CTS: {passed} of {} cases pass; failing: {failed:?}", cases.len());
        assert_eq!(failed, Vec::<String>::new(), "{passed} of {} pass", cases.len());
    }
}
