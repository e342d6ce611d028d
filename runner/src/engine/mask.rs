//! Secret masking and detection. A secret is found in a text in any of its renderings: as it is, in base64
//! (standard and URL-safe, padded or not) and hex (either case); inside percent-encoding (`%xx` in either case,
//! `+` for spaces) or JSON string escapes (`\uXXXX` in either case, `\/`) however the encoder mixed escaped and
//! plain characters; and inside any base64 token whose decoded bytes hold it (`Basic user:secret`). Numbers
//! whose text holds a secret are secrets too. Whatever holds a secret becomes `***` in everything the engine
//! reports, and a request that carries one is known by the names of the secrets it carries.

use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use hookflow_shared::api::executions::{MAX_RESULT_BODY, NodeResult};
use serde_json::Value;
use std::collections::BTreeMap;

pub const MASK: &str = "***";

/// Shortest base64 token looked into: shorter ones cannot hide anything worth the work.
const MIN_TOKEN: usize = 8;

#[derive(Debug, Clone)]
struct Secret {
    name: String,
    value: String,
    /// Renderings found as they are in a text, longest first.
    forms: Vec<String>,
}

/// Finds and hides the secrets of one run.
#[derive(Debug, Default, Clone)]
pub struct Masker {
    secrets: Vec<Secret>,
}

/// A text as read through one decoding: each decoded byte knows the source bytes it came from.
struct View {
    text: String,
    /// For each byte of `text`, the source range of the character it belongs to.
    spans: Vec<(usize, usize)>,
}

impl View {
    fn push(&mut self, c: char, start: usize, end: usize) {
        let mut buffer = [0u8; 4];
        let encoded = c.encode_utf8(&mut buffer);
        self.text.push_str(encoded);
        self.spans.extend(std::iter::repeat_n((start, end), encoded.len()));
    }

    /// The source range of `text[from..to]`.
    fn source(&self, from: usize, to: usize) -> (usize, usize) {
        (self.spans[from].0, self.spans[to - 1].1)
    }
}

impl Masker {
    /// `secrets` are (name, value) pairs; empty values are ignored.
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let secrets = secrets
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(name, value)| Secret { name: name.to_owned(), value: value.to_owned(), forms: forms(value) })
            .collect();
        Self { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The source ranges of `text` that hold a secret, with the secrets' indexes.
    fn find(&self, text: &str) -> Vec<(usize, usize, usize)> {
        let mut found = Vec::new();
        if self.secrets.is_empty() || text.is_empty() {
            return found;
        }
        for (index, secret) in self.secrets.iter().enumerate() {
            for form in &secret.forms {
                found.extend(text.match_indices(form.as_str()).map(|(at, _)| (at, at + form.len(), index)));
            }
        }
        for view in [percent_view(text), json_view(text)].into_iter().flatten() {
            for (index, secret) in self.secrets.iter().enumerate() {
                for (at, _) in view.text.match_indices(secret.value.as_str()) {
                    let (start, end) = view.source(at, at + secret.value.len());
                    found.push((start, end, index));
                }
            }
        }
        for (start, end) in base64_tokens(text) {
            if let Some(index) = self.in_decoded(&text[start..end]) {
                found.push((start, end, index));
            }
        }
        found
    }

    /// The secret a base64 token decodes to something holding, if any.
    fn in_decoded(&self, token: &str) -> Option<usize> {
        let engines: [&GeneralPurpose; 4] = [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD];
        // A token the kept part cuts (or one with a stray character) is read as far as whole quartets go.
        let aligned = &token[..token.len() / 4 * 4];
        let decoded = engines.iter().find_map(|engine| engine.decode(token).ok()).or_else(|| {
            [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD].iter().find_map(|e| e.decode(aligned.trim_end_matches('=')).ok())
        })?;
        let decoded = String::from_utf8_lossy(&decoded);
        self.secrets.iter().position(|s| decoded.contains(s.value.as_str()))
    }

    /// The names of the secrets `text` carries, in any rendering.
    pub fn carried(&self, text: &str) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for (_, _, index) in self.find(text) {
            let name = self.secrets[index].name.as_str();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    pub fn text(&self, text: &str) -> String {
        self.masked_until(text, text.len())
    }

    /// `text` masked, written only as far as `stop_at` (a character boundary), or to the end of a secret that
    /// starts before it.
    fn masked_until(&self, text: &str, stop_at: usize) -> String {
        let mut ranges: Vec<(usize, usize)> = self.find(text).into_iter().map(|(s, e, _)| (s, e)).collect();
        if ranges.is_empty() {
            return text[..stop_at].to_owned();
        }
        ranges.sort_unstable();
        let mut out = String::with_capacity(stop_at);
        // `at`: where the text not yet written starts; ranges that overlap or touch the last one extend it.
        let mut at = 0;
        let mut open = false;
        for (start, end) in ranges {
            if open && start <= at {
                at = at.max(end);
                continue;
            }
            if start >= stop_at {
                break;
            }
            out.push_str(&text[at..start]);
            out.push_str(MASK);
            at = end;
            open = true;
        }
        if at < stop_at {
            out.push_str(&text[at..stop_at]);
        }
        out
    }

    /// The longest source text a secret's rendering can take (JSON's `\uXXXX` takes six bytes per byte; base64
    /// four per three, and a token's alignment).
    fn margin(&self) -> usize {
        self.secrets.iter().map(|s| s.value.len()).max().unwrap_or(0).saturating_mul(6).saturating_add(16)
    }

    /// A body as a result keeps it: masked, then cut to [`MAX_RESULT_BODY`] at a character boundary; `true` when
    /// something was cut. Only what can be kept is looked at, with a margin any secret's rendering fits in, never
    /// the whole body: a secret that starts in the kept part is seen whole and masked whole.
    pub fn kept(&self, text: &str) -> (String, bool) {
        let window_end = floor_char_boundary(text, MAX_RESULT_BODY.saturating_add(self.margin()));
        let masked = if window_end == text.len() {
            self.text(text)
        } else {
            self.masked_until(&text[..window_end], floor_char_boundary(text, MAX_RESULT_BODY))
        };
        let end = floor_char_boundary(&masked, MAX_RESULT_BODY);
        let truncated = window_end < text.len() || end < masked.len();
        let mut masked = masked;
        masked.truncate(end);
        (masked, truncated)
    }

    pub fn text_in_place(&self, text: &mut String) {
        if !self.is_empty() {
            *text = self.text(text);
        }
    }

    /// Masks strings, keys and numbers: a number whose text holds a secret becomes the string `***`.
    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.text_in_place(text),
            Value::Number(number) => {
                if !self.carried(&number.to_string()).is_empty() {
                    *value = Value::String(MASK.to_owned());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.value(&mut item);
                    map.insert(self.text(&key), item);
                }
            }
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn headers(&self, headers: &mut BTreeMap<String, String>) {
        let entries = std::mem::take(headers);
        for (name, mut value) in entries {
            self.text_in_place(&mut value);
            headers.insert(self.text(&name), value);
        }
    }

    /// Masks every text a node result carries.
    pub fn result(&self, result: &mut NodeResult) {
        if self.is_empty() {
            return;
        }
        if let Some(request) = &mut result.request {
            self.text_in_place(&mut request.url);
            self.headers(&mut request.headers);
            if let Some(body) = &mut request.body {
                self.text_in_place(body);
            }
        }
        if let Some(response) = &mut result.response {
            self.headers(&mut response.headers);
            self.text_in_place(&mut response.body);
        }
        let extracted = std::mem::take(&mut result.extracted);
        for (name, mut value) in extracted {
            self.value(&mut value);
            result.extracted.insert(self.text(&name), value);
        }
        for assertion in &mut result.assertions {
            self.text_in_place(&mut assertion.source);
            for value in [&mut assertion.expected, &mut assertion.actual].into_iter().flatten() {
                self.value(value);
            }
            if let Some(reason) = &mut assertion.reason {
                self.text_in_place(reason);
            }
        }
        if let Some(error) = &mut result.error {
            self.text_in_place(error);
        }
        for item in result.items.iter_mut().flatten() {
            let extracted = std::mem::take(&mut item.extracted);
            for (name, mut value) in extracted {
                self.value(&mut value);
                item.extracted.insert(self.text(&name), value);
            }
            if let Some(error) = &mut item.error {
                self.text_in_place(error);
            }
        }
    }
}

/// The largest character boundary of `text` at or below `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    let mut end = at;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The renderings of a value found as they are: itself, base64 in four flavours, hex in both cases.
fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = vec![
        value.to_owned(),
        STANDARD.encode(bytes),
        STANDARD_NO_PAD.encode(bytes),
        URL_SAFE.encode(bytes),
        URL_SAFE_NO_PAD.encode(bytes),
        hex::encode(bytes),
        hex::encode_upper(bytes),
    ];
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

/// The text with `%xx` (either case) and `+` decoded; `None` when there is nothing to decode.
fn percent_view(text: &str) -> Option<View> {
    if !text.contains('%') && !text.contains('+') {
        return None;
    }
    let bytes = text.as_bytes();
    let mut decoded: Vec<(u8, usize, usize)> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
        match bytes[i] {
            b'%' => match (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
                (Some(high), Some(low)) => {
                    decoded.push((high * 16 + low, i, i + 3));
                    i += 3;
                    continue;
                }
                _ => decoded.push((b'%', i, i + 1)),
            },
            b'+' => decoded.push((b' ', i, i + 1)),
            b => decoded.push((b, i, i + 1)),
        }
        i += 1;
    }
    Some(bytes_view(&decoded))
}

/// A view of decoded bytes, each with its source range; invalid UTF-8 becomes U+FFFD.
fn bytes_view(decoded: &[(u8, usize, usize)]) -> View {
    let mut view = View { text: String::new(), spans: Vec::new() };
    let raw: Vec<u8> = decoded.iter().map(|(b, ..)| *b).collect();
    let mut at = 0;
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            let len = c.len_utf8();
            view.push(c, decoded[at].1, decoded[at + len - 1].2);
            at += len;
        }
        for _ in chunk.invalid() {
            view.push('\u{FFFD}', decoded[at].1, decoded[at].2);
            at += 1;
        }
    }
    view
}

/// The text with JSON string escapes decoded (`\uXXXX` in either case, surrogate pairs, `\/` and the rest);
/// `None` when there is no backslash.
fn json_view(text: &str) -> Option<View> {
    if !text.contains('\\') {
        return None;
    }
    let mut view = View { text: String::with_capacity(text.len()), spans: Vec::with_capacity(text.len()) };
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            view.push(c, at, at + c.len_utf8());
            continue;
        }
        let Some(&(_, next)) = chars.peek() else {
            view.push(c, at, at + 1);
            break;
        };
        let simple = match next {
            '"' | '\\' | '/' => Some(next),
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            _ => None,
        };
        if let Some(decoded) = simple {
            chars.next();
            view.push(decoded, at, at + 2);
        } else if let Some((decoded, len)) = unicode_escape(&text[at..]) {
            for _ in 1..len {
                chars.next();
            }
            view.push(decoded, at, at + len);
        } else {
            view.push(c, at, at + 1);
        }
    }
    Some(view)
}

/// `\uXXXX` (or a surrogate pair of two) at the start of `text`: the character and the escape's length.
fn unicode_escape(text: &str) -> Option<(char, usize)> {
    let unit = |s: &str| -> Option<u32> {
        let digits = s.strip_prefix("\\u")?.get(..4)?;
        u32::from_str_radix(digits, 16).ok()
    };
    let first = unit(text)?;
    if (0xD800..0xDC00).contains(&first) {
        let second = unit(text.get(6..)?)?;
        if (0xDC00..0xE000).contains(&second) {
            let c = char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))?;
            return Some((c, 12));
        }
        return None;
    }
    Some((char::from_u32(first)?, 6))
}

/// Runs of base64 characters (either alphabet, with padding) of at least [`MIN_TOKEN`] bytes.
fn base64_tokens(text: &str) -> Vec<(usize, usize)> {
    let is_b64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=');
    let mut tokens = Vec::new();
    let mut start = None;
    for (i, b) in text.bytes().enumerate().chain(std::iter::once((text.len(), b' '))) {
        match (is_b64(b) && i < text.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s >= MIN_TOKEN {
                    tokens.push((s, i));
                }
                start = None;
            }
            _ => {}
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "p@ss word/\"x\"";

    fn masker() -> Masker {
        Masker::new([("PASSWORD", SECRET), ("PIN", "987654")])
    }

    #[test]
    fn masks_the_value_and_its_encodings() {
        let m = masker();
        assert_eq!(m.text("raw p@ss word/\"x\" end"), "raw *** end");
        assert_eq!(m.text(&format!("b64 {}", STANDARD.encode(SECRET))), "b64 ***");
        assert_eq!(m.text(&format!("b64url {}", URL_SAFE_NO_PAD.encode(SECRET))), "b64url ***");
        assert_eq!(m.text(&format!("hex {} {}", hex::encode(SECRET), hex::encode_upper(SECRET))), "hex *** ***");
        assert_eq!(m.text("url p%40ss+word%2F%22x%22"), "url ***");
        assert_eq!(m.text("url p%40ss%20word%2f%22x%22 lower"), "url *** lower");
        assert_eq!(m.text(r#"{"password":"p@ss word/\"x\""}"#), r#"{"password":"***"}"#);
        assert_eq!(m.text(r#"{"password":"p@ss word\/\"x\""}"#), r#"{"password":"***"}"#);
        assert_eq!(m.text(r#"{"p":"\u0070@ss\u0020word\u002F\"x\""}"#), r#"{"p":"***"}"#);
        assert_eq!(m.text(r#"{"p":"\u0070\u0040\u0073\u0073 word/\u0022x\u0022"}"#), r#"{"p":"***"}"#);
        assert_eq!(Masker::new([("E", "")]).text("nothing to hide"), "nothing to hide");
    }

    #[test]
    fn finds_a_secret_inside_a_longer_base64_token() {
        let m = masker();
        let basic = STANDARD.encode(format!("admin:{SECRET}"));
        assert_eq!(m.text(&format!("Authorization: Basic {basic}")), "Authorization: Basic ***");
        assert_eq!(m.carried(&format!("Basic {basic}")), ["PASSWORD"]);
        assert!(m.carried("Basic YWRtaW46aHVudGVyMg==").is_empty(), "admin:hunter2 holds no secret here");
    }

    #[test]
    fn numbers_keys_and_nested_values_are_masked() {
        let m = masker();
        let mut value = serde_json::json!({"pin": 987654, "list": [SECRET, 1], "987654": true, "other": 12});
        m.value(&mut value);
        assert_eq!(value, serde_json::json!({"pin": "***", "list": ["***", 1], "***": true, "other": 12}));
    }

    #[test]
    fn a_long_body_is_masked_in_what_is_kept_only() {
        let m = masker();
        let encoded = STANDARD.encode(format!("user:{SECRET}:{}", "z".repeat(200_000)));
        for at in [0, 100, MAX_RESULT_BODY - 40, MAX_RESULT_BODY - 2, MAX_RESULT_BODY - 300] {
            for secret in [SECRET.to_owned(), "p%40ss+word%2F%22x%22".to_owned(), format!("Basic {encoded}")] {
                let body = format!("{}{secret}{}", "a".repeat(at), "b".repeat(3 * MAX_RESULT_BODY));
                let (kept, truncated) = m.kept(&body);
                assert!(truncated);
                assert!(kept.len() <= MAX_RESULT_BODY);
                assert!(!kept.contains("p@ss") && !kept.contains("p%40ss"), "at {at}");
                assert!(!kept.contains(&encoded[..40]), "at {at}: no part of the token is kept");
                assert!(kept.starts_with(&"a".repeat(at.min(100))));
            }
        }
        let (short, truncated) = m.kept("a p@ss word/\"x\" b");
        assert_eq!((short.as_str(), truncated), ("a *** b", false));
        let (plain, truncated) = Masker::default().kept(&"é".repeat(MAX_RESULT_BODY));
        assert!(truncated && plain.len() <= MAX_RESULT_BODY && plain.len() > MAX_RESULT_BODY - 2);
    }

    #[test]
    fn carried_names_each_secret_once() {
        let m = masker();
        let mut names = m.carried("987654 and 987654 and p@ss word/\"x\"");
        names.sort_unstable();
        assert_eq!(names, ["PASSWORD", "PIN"]);
        assert!(m.carried("nothing").is_empty());
    }
}
