//! Senders whose one header signs the body (or the URL and the body) with HMAC-SHA256, and GitLab's token:
//!
//! - GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body.
//! - Shopify: `X-Shopify-Hmac-Sha256: <base64>` over the body.
//! - Linear: `Linear-Signature: <hex>` over the body; the timestamp (unix milliseconds) is the `Linear-Timestamp`
//!   header or else the body's top-level `webhookTimestamp` number, as Linear's SDK reads it.
//! - Square: `x-square-hmacsha256-signature: <base64>` over the notification URL then the body.
//! - GitLab: `X-Gitlab-Token` is the secret itself, compared in constant time (through SHA-256, so neither the
//!   content nor the length of the secret shows in the time taken).

use super::common::{Check, Claim, Encoding, Judge, Message, Offered, Stamp, header};
use aws_lc_rs::constant_time;
use sha2::{Digest as _, Sha256};

pub(super) fn github(judge: &Judge, message: &Message) -> Check {
    const HEADER: &str = "X-Hub-Signature-256";
    let Some(value) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    let Some(signature) = value.strip_prefix("sha256=") else {
        return Check::malformed(HEADER, "no sha256= prefix");
    };
    one(judge, HEADER, signature, Encoding::Hex, &[message.body], None)
}

pub(super) fn shopify(judge: &Judge, message: &Message) -> Check {
    const HEADER: &str = "X-Shopify-Hmac-Sha256";
    let Some(value) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    one(judge, HEADER, value, Encoding::Base64, &[message.body], None)
}

pub(super) fn square(judge: &Judge, message: &Message) -> Check {
    const HEADER: &str = "x-square-hmacsha256-signature";
    let Some(value) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    one(judge, HEADER, value, Encoding::Base64, &[message.url.as_bytes(), message.body], None)
}

pub(super) fn linear(judge: &Judge, message: &Message) -> Check {
    const HEADER: &str = "Linear-Signature";
    const TIMESTAMP: &str = "Linear-Timestamp";
    let Some(value) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    let stamp = match header(message, TIMESTAMP) {
        Some(text) => match Stamp::millis(text) {
            Some(stamp) => Some(stamp),
            None => return Check::malformed(TIMESTAMP, "not a unix time in milliseconds"),
        },
        None => body_timestamp(message.body),
    };
    one(judge, HEADER, value, Encoding::Hex, &[message.body], stamp)
}

/// The body's top-level `webhookTimestamp` when the body is a JSON object and that field a whole number.
fn body_timestamp(body: &[u8]) -> Option<Stamp> {
    #[derive(serde::Deserialize)]
    struct Fields {
        #[serde(rename = "webhookTimestamp")]
        webhook_timestamp: Option<serde_json::Value>,
    }
    let fields: Fields = serde_json::from_slice(body).ok()?;
    fields.webhook_timestamp?.as_i64().filter(|ms| *ms >= 0).map(Stamp::Millis)
}

/// One signature over `content`.
fn one(
    judge: &Judge,
    header: &str,
    signature: &str,
    encoding: Encoding,
    content: &[&[u8]],
    stamp: Option<Stamp>,
) -> Check {
    let mut offered = Offered::new(encoding, 32);
    offered.push(signature);
    if let Some(check) = offered.unreadable(header, "the") {
        return check;
    }
    judge.hmac(&Claim { content, offered: &offered, no_match: "signature did not match", stamp })
}

/// GitLab: the SHA-256 of each secret, made once.
pub(super) fn gitlab(secrets: &[[u8; 32]], message: &Message) -> Check {
    const HEADER: &str = "X-Gitlab-Token";
    let Some(token) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    let digest = Sha256::digest(token.as_bytes());
    match secrets.iter().position(|s| constant_time::verify_slices_are_equal(s, &digest).is_ok()) {
        Some(index) => Check::valid(index),
        None => Check::invalid("token did not match"),
    }
}
