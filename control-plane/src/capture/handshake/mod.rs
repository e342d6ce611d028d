//! Provider handshakes (issue #51): the URL checks some providers send before they accept a capture URL, each
//! recognised by its preset and answered as the provider documents it, or refused 403 (a wrong verify token, a bad
//! signature). Pure functions of the request: the capture path stores the request (marked with its preset) and
//! then sends what [`recognise`] answered. Echo-style checks are in `echo`, those holding an HMAC in `signed`.

mod echo;
mod signed;

use axum::http::{HeaderMap, Method};
use hookflow_shared::api::webhooks::HandshakePreset;

/// An endpoint's handshake on the capture path: its preset and the secret it answers with (its own, opened from
/// its sealed column, or else the endpoint's first verification secret).
pub struct EndpointHandshake {
    pub preset: HandshakePreset,
    secret: Option<String>,
}

impl std::fmt::Debug for EndpointHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointHandshake")
            .field("preset", &self.preset)
            .field("secret_set", &self.secret.is_some())
            .finish()
    }
}

impl EndpointHandshake {
    pub fn new(preset: HandshakePreset, secret: Option<String>) -> Self {
        Self { preset, secret }
    }

    /// Whether it recognises this request, and its answer.
    pub fn recognise(&self, parts: &Parts<'_>) -> Option<Recognised> {
        recognise(self.preset, self.secret.as_deref(), parts)
    }
}

/// The name a handshake's own secret is sealed under (with the endpoint's organization).
pub fn sealed_name(webhook_id: hookflow_shared::WebhookId) -> String {
    format!("webhook-handshake:{webhook_id}")
}

/// The answer as sent: status 200 (403 refused), served like custom answers (no sniffing, a `sandbox` CSP).
pub fn response(recognised: &Recognised) -> axum::response::Response {
    use axum::http::{HeaderName, HeaderValue, StatusCode, header};
    use axum::response::IntoResponse as _;
    let answer = match recognised {
        Recognised::Refused => {
            // The signature code, with the status providers expect for a refused check.
            let mut error = crate::error::ApiError::new(
                hookflow_shared::ErrorCode::SignatureInvalid,
                "this handshake is refused: its verify token or signature does not match",
            );
            error.status = Some(403);
            return error.into_response();
        }
        Recognised::Answer(answer) => answer,
    };
    let mut response = (StatusCode::OK, answer.body.clone()).into_response();
    response.extensions_mut().insert(crate::error::Verbatim);
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    if let Some(content_type) = answer.content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    for (name, value) in &answer.headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'"));
    response
}

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
    fn text(body: impl Into<Vec<u8>>) -> Self {
        Self { content_type: Some("text/plain; charset=utf-8"), headers: Vec::new(), body: body.into() }
    }

    fn json(value: &serde_json::Value) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_default();
        Self { content_type: Some("application/json"), headers: Vec::new(), body }
    }
}

/// Whether `preset` recognises this request, and its answer. `secret` is the handshake's secret (its own, or the
/// endpoint's first verification secret); presets that need one refuse without it.
pub fn recognise(preset: HandshakePreset, secret: Option<&str>, parts: &Parts<'_>) -> Option<Recognised> {
    match preset {
        HandshakePreset::Slack => signed::slack(secret, parts),
        HandshakePreset::Meta => echo::meta(secret, parts),
        HandshakePreset::Msgraph => echo::msgraph(parts),
        HandshakePreset::Zoom => signed::zoom(secret, parts),
        HandshakePreset::Dropbox => echo::dropbox(parts),
        HandshakePreset::Twitter => signed::twitter(secret, parts),
        HandshakePreset::Twitch => signed::twitch(secret, parts),
        HandshakePreset::Smartsheet => echo::smartsheet(parts),
        HandshakePreset::Trello => echo::trello(parts),
    }
}

/// The first value of query parameter `name`, decoded.
fn query_value(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == name).map(|(_, v)| v.into_owned())
}

/// A header's value as text.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A challenge fit to echo: not empty, not longer than [`MAX_CHALLENGE`].
fn fit(challenge: String) -> Option<String> {
    (!challenge.is_empty() && challenge.len() <= MAX_CHALLENGE).then_some(challenge)
}

/// The body as a JSON object, when it is one.
fn json_body(body: &[u8]) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::from_slice(body).ok()? {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
