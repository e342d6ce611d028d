//! An owner-set answer (the endpoint's `response`, a response rule's) as it is sent: served on the API's origin, so
//! sandboxed whatever it says.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::webhooks::CustomResponse;

/// An endpoint's own answer. It is served on the API's origin, so it is sandboxed whatever it says: no content
/// sniffing, a `sandbox` CSP (no script, a unique origin), and only the headers the allow-list admits (refused
/// when the endpoint is written; dropped here as well for endpoints stored before that rule): never framing,
/// hop-by-hop, cookie, cache or browser-state headers.
pub fn custom_response(custom: &CustomResponse) -> Response {
    let status = StatusCode::from_u16(custom.status).unwrap_or(StatusCode::OK);
    let mut response = (status, custom.body.clone()).into_response();
    response.extensions_mut().insert(crate::error::Verbatim);
    let headers = response.headers_mut();
    let allowed =
        custom.headers.iter().filter(|(name, _)| hookflow_shared::api::rules::custom_response_header_allowed(name));
    for (name, value) in allowed {
        // A Content-Type that names no media type (`""`, `json`) would be a malformed answer: the default stays.
        if name.eq_ignore_ascii_case("content-type") && !is_media_type(value) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str())) {
            headers.insert(name, value);
        }
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'"));
    response
}

/// Whether `value` reads as a media type: `type/subtype` of token characters, parameters after a `;` unchecked.
fn is_media_type(value: &str) -> bool {
    let token = |part: &str| {
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.split_once('/').is_some_and(|(kind, sub)| token(kind) && token(sub))
}
