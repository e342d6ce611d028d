//! What the handshake presets share: the parts of a request they read, what they answer, and the small readers of
//! a query value, a header, a challenge fit to echo and a JSON body.

use axum::http::{HeaderMap, Method};

/// Longest challenge echoed back: providers' challenges are short; a longer one is not a handshake.
pub const MAX_CHALLENGE: usize = 4096;

/// The parts of a request a preset looks at.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    pub method: &'a Method,
    /// The raw query string (without `?`).
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    /// Unix seconds now, for the signed checks' freshness.
    pub now_s: i64,
}

/// What a preset answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognised {
    Answer(Answer),
    /// The handshake is recognised but refused (403): a wrong verify token, a bad or stale signature, no secret.
    Refused,
}

/// A handshake's answer: status 200, its content type, extra headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// `None`: no body and no content type (Trello's HEAD).
    pub content_type: Option<&'static str>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub(super) fn text(body: impl Into<Vec<u8>>) -> Self {
        Self { content_type: Some("text/plain; charset=utf-8"), headers: Vec::new(), body: body.into() }
    }

    pub(super) fn json(value: &serde_json::Value) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_default();
        Self { content_type: Some("application/json"), headers: Vec::new(), body }
    }
}

/// The first value of query parameter `name`, decoded.
pub(super) fn query_value(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == name).map(|(_, v)| v.into_owned())
}

/// A header's value as text.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A challenge fit to echo: not empty, not longer than [`MAX_CHALLENGE`].
pub(super) fn fit(challenge: String) -> Option<String> {
    (!challenge.is_empty() && challenge.len() <= MAX_CHALLENGE).then_some(challenge)
}

/// The body as a JSON object, when it is one.
pub(super) fn json_body(body: &[u8]) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::from_slice(body).ok()? {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}
