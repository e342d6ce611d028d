//! Handshakes holding an HMAC: Slack's `url_verification` (its signature checked when a signing secret is known),
//! Zoom's `endpoint.url_validation` (answered with an HMAC of its token), X's CRC (likewise) and Twitch's
//! `webhook_callback_verification` (its signature checked before the challenge is echoed).

use super::request::{Answer, Parts, Recognised, fit, header, json_body, query_value};
use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::hmac;
use axum::http::Method;
use base64::Engine as _;

/// How far from now a signed handshake's timestamp may be (Slack's five minutes; Twitch asks for ten).
const SLACK_TOLERANCE_S: i64 = 5 * 60;
const TWITCH_TOLERANCE_S: i64 = 10 * 60;

fn hmac_sha256(secret: &str, parts: &[&[u8]]) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut context = hmac::Context::with_key(&key);
    for part in parts {
        context.update(part);
    }
    context.sign().as_ref().to_vec()
}

/// Whether `given` (`<prefix><hex>`) is the hex HMAC `expected`, compared in constant time.
fn hex_matches(given: Option<&str>, prefix: &str, expected: &[u8]) -> bool {
    let Some(hex_part) = given.and_then(|g| g.strip_prefix(prefix)) else { return false };
    hex::decode(hex_part).is_ok_and(|tag| verify_slices_are_equal(&tag, expected).is_ok())
}

/// Slack: `POST {"type": "url_verification", "challenge": c}` -> `{"challenge": c}`. With a signing secret, the
/// request's `X-Slack-Signature` (`v0=` hex HMAC of `v0:<timestamp>:<body>`) must verify and its timestamp be
/// within five minutes, else 403.
pub fn slack(secret: Option<&str>, parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::POST {
        return None;
    }
    let body = json_body(parts.body)?;
    if body.get("type").and_then(|t| t.as_str()) != Some("url_verification") {
        return None;
    }
    let challenge = fit(body.get("challenge")?.as_str()?.to_owned())?;
    if let Some(secret) = secret {
        let timestamp = header(parts.headers, "x-slack-request-timestamp").unwrap_or_default();
        let fresh = timestamp.parse::<i64>().is_ok_and(|t| (parts.now_s - t).abs() <= SLACK_TOLERANCE_S);
        let expected = hmac_sha256(secret, &[b"v0:", timestamp.as_bytes(), b":", parts.body]);
        if !fresh || !hex_matches(header(parts.headers, "x-slack-signature"), "v0=", &expected) {
            return Some(Recognised::Refused);
        }
    }
    Some(Recognised::Answer(Answer::json(&serde_json::json!({"challenge": challenge}))))
}

/// Zoom: `POST {"event": "endpoint.url_validation", "payload": {"plainToken": p}}` ->
/// `{"plainToken": p, "encryptedToken": hex(HMAC-SHA256(secret, p))}`; 403 without a secret.
pub fn zoom(secret: Option<&str>, parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::POST {
        return None;
    }
    let body = json_body(parts.body)?;
    if body.get("event").and_then(|e| e.as_str()) != Some("endpoint.url_validation") {
        return None;
    }
    let plain = fit(body.get("payload")?.get("plainToken")?.as_str()?.to_owned())?;
    let Some(secret) = secret else { return Some(Recognised::Refused) };
    let encrypted = hex::encode(hmac_sha256(secret, &[plain.as_bytes()]));
    Some(Recognised::Answer(Answer::json(&serde_json::json!({"plainToken": plain, "encryptedToken": encrypted}))))
}

/// X (Twitter) CRC: `GET ?crc_token=t` -> `{"response_token": "sha256=" + base64(HMAC-SHA256(secret, t))}`; 403
/// without a secret.
pub fn twitter(secret: Option<&str>, parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::GET {
        return None;
    }
    let token = fit(query_value(parts.query, "crc_token")?)?;
    let Some(secret) = secret else { return Some(Recognised::Refused) };
    let tag = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(secret, &[token.as_bytes()]));
    Some(Recognised::Answer(Answer::json(&serde_json::json!({"response_token": format!("sha256={tag}")}))))
}

/// Twitch EventSub: `POST` with `Twitch-Eventsub-Message-Type: webhook_callback_verification` and
/// `{"challenge": c, ...}` -> `c` as text, when `Twitch-Eventsub-Message-Signature` is `sha256=` hex
/// HMAC-SHA256(secret, message id + timestamp + body) and the timestamp is within ten minutes; else 403.
pub fn twitch(secret: Option<&str>, parts: &Parts<'_>) -> Option<Recognised> {
    if parts.method != Method::POST
        || header(parts.headers, "twitch-eventsub-message-type") != Some("webhook_callback_verification")
    {
        return None;
    }
    let challenge =
        json_body(parts.body).and_then(|body| body.get("challenge")?.as_str().map(str::to_owned)).and_then(fit);
    let (Some(secret), Some(challenge)) = (secret, challenge) else { return Some(Recognised::Refused) };
    let id = header(parts.headers, "twitch-eventsub-message-id").unwrap_or_default();
    let timestamp = header(parts.headers, "twitch-eventsub-message-timestamp").unwrap_or_default();
    let fresh = chrono::DateTime::parse_from_rfc3339(timestamp)
        .is_ok_and(|t| (parts.now_s - t.timestamp()).abs() <= TWITCH_TOLERANCE_S);
    let expected = hmac_sha256(secret, &[id.as_bytes(), timestamp.as_bytes(), parts.body]);
    if !fresh || !hex_matches(header(parts.headers, "twitch-eventsub-message-signature"), "sha256=", &expected) {
        return Some(Recognised::Refused);
    }
    Some(Recognised::Answer(Answer::text(challenge)))
}
