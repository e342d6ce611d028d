//! Provider handshakes (issue #51): the URL checks some providers send before they accept a capture URL, each
//! recognised by its preset and answered as the provider documents it, or refused 403 (a wrong verify token, a bad
//! signature). Pure functions of the request: the capture path stores the request (marked with its preset) and
//! then sends what [`recognise`] answered. Echo-style checks are in `echo`, those holding an HMAC in `signed`.

mod echo;
mod request;
mod signed;

pub use request::{Answer, MAX_CHALLENGE, Parts, Recognised};

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

#[cfg(test)]
mod tests;
