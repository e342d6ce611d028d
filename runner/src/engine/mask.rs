//! Secret masking: every secret value, and its base64, URL-encoded and JSON-escaped forms, is replaced by `***`
//! in everything the engine reports (requests, responses, extracted values, assertions, errors).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hookflow_shared::api::executions::NodeResult;
use serde_json::Value;

pub const MASK: &str = "***";

/// The needles to hide, longest first (so a longer encoding is masked whole before a shorter one inside it).
#[derive(Debug, Default, Clone)]
pub struct Masker {
    needles: Vec<String>,
}

impl Masker {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut needles: Vec<String> = Vec::new();
        for value in secrets {
            if value.is_empty() {
                continue;
            }
            let json = json_string(value);
            let forms = [
                value.to_owned(),
                STANDARD.encode(value),
                URL_SAFE_NO_PAD.encode(value),
                form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>(),
                form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>().replace('+', "%20"),
                json,
            ];
            for form in forms {
                if !form.is_empty() && !needles.contains(&form) {
                    needles.push(form);
                }
            }
        }
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        Self { needles }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        self.text_in_place(&mut out);
        out
    }

    pub fn text_in_place(&self, text: &mut String) {
        for needle in &self.needles {
            if text.contains(needle.as_str()) {
                *text = text.replace(needle.as_str(), MASK);
            }
        }
    }

    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.text_in_place(text),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.value(v)),
            _ => {}
        }
    }

    /// Masks every text a node result carries.
    pub fn result(&self, result: &mut NodeResult) {
        if self.is_empty() {
            return;
        }
        if let Some(request) = &mut result.request {
            self.text_in_place(&mut request.url);
            request.headers.values_mut().for_each(|v| self.text_in_place(v));
            if let Some(body) = &mut request.body {
                self.text_in_place(body);
            }
        }
        if let Some(response) = &mut result.response {
            response.headers.values_mut().for_each(|v| self.text_in_place(v));
            self.text_in_place(&mut response.body);
        }
        result.extracted.values_mut().for_each(|v| self.value(v));
        for assertion in &mut result.assertions {
            if let Some(v) = &mut assertion.expected {
                self.value(v);
            }
            if let Some(v) = &mut assertion.actual {
                self.value(v);
            }
            if let Some(reason) = &mut assertion.reason {
                self.text_in_place(reason);
            }
        }
        if let Some(error) = &mut result.error {
            self.text_in_place(error);
        }
    }
}

/// The inside of a JSON string literal holding `text`, as serde_json writes it.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_value_and_its_encodings() {
        let masker = Masker::new(["p@ss word/\"x\""]);
        assert_eq!(masker.text("raw p@ss word/\"x\" end"), "raw *** end");
        assert_eq!(masker.text(&format!("b64 {}", STANDARD.encode("p@ss word/\"x\""))), "b64 ***");
        assert_eq!(masker.text("url p%40ss+word%2F%22x%22"), "url ***");
        assert_eq!(masker.text("url p%40ss%20word%2F%22x%22"), "url ***");
        assert_eq!(masker.text(r#"{"password":"p@ss word/\"x\""}"#), r#"{"password":"***"}"#);
        let mut value = serde_json::json!({"a": ["p@ss word/\"x\"", 1]});
        masker.value(&mut value);
        assert_eq!(value, serde_json::json!({"a": ["***", 1]}));
        assert_eq!(Masker::new([""]).text("nothing to hide"), "nothing to hide");
    }
}
