//! Handshakes answered by echoing what the provider sent: Meta's `hub.challenge` (with its verify token), Microsoft
//! Graph's `validationToken`, Dropbox's `challenge`, Smartsheet's `Smartsheet-Hook-Challenge`, and Trello's `HEAD`.

use super::request::{Answer, Parts, Recognised, fit, header, query_value};
use aws_lc_rs::constant_time::verify_slices_are_equal;
use axum::http::{HeaderValue, Method};

/// Meta (WhatsApp, Instagram, Messenger): `GET ?hub.mode=subscribe&hub.challenge=c&hub.verify_token=t` -> `c`
/// when `t` is the secret, else 403.
pub fn meta(secret: Option<&str>, parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::GET || query_value(parts.query, "hub.mode").as_deref() != Some("subscribe") {
        return None;
    }
    let challenge = fit(query_value(parts.query, "hub.challenge")?)?;
    let token = query_value(parts.query, "hub.verify_token").unwrap_or_default();
    let matches = secret.is_some_and(|s| verify_slices_are_equal(s.as_bytes(), token.as_bytes()).is_ok());
    Some(if matches { Recognised::Answer(Answer::text(challenge)) } else { Recognised::Refused })
}

/// Microsoft Graph: `POST ?validationToken=v` -> `v` decoded, as text.
pub fn msgraph(parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::POST {
        return None;
    }
    let token = fit(query_value(parts.query, "validationToken")?)?;
    Some(Recognised::Answer(Answer::text(token)))
}

/// Dropbox: `GET ?challenge=c` -> `c` as text, with `X-Content-Type-Options: nosniff`.
pub fn dropbox(parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::GET {
        return None;
    }
    let challenge = fit(query_value(parts.query, "challenge")?)?;
    let mut answer = Answer::text(challenge);
    answer.headers.push(("x-content-type-options", "nosniff".into()));
    Some(Recognised::Answer(answer))
}

/// Smartsheet: `POST` with `Smartsheet-Hook-Challenge: c` -> `Smartsheet-Hook-Response: c` and
/// `{"smartsheetHookResponse": c}`.
pub fn smartsheet(parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::POST {
        return None;
    }
    let challenge = fit(header(parts.headers, "smartsheet-hook-challenge")?.to_owned())?;
    // A value the header cannot carry back is not a challenge Smartsheet sent.
    HeaderValue::from_str(&challenge).ok()?;
    let mut answer = Answer::json(&serde_json::json!({"smartsheetHookResponse": challenge}));
    answer.headers.push(("smartsheet-hook-response", challenge));
    Some(Recognised::Answer(answer))
}

/// Trello: `HEAD` -> 200, no body.
pub fn trello(parts: &Parts<'_>) -> Option<Recognised> {
    (parts.method == Method::HEAD)
        .then(|| Recognised::Answer(Answer { content_type: None, headers: Vec::new(), body: Vec::new() }))
}
