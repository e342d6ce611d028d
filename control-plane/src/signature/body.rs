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

/// The body's top-level `webhookTimestamp` when the body is a JSON object and that field a whole number. The body
/// is read in one pass without building a tree: every other value, and a `webhookTimestamp` that is not a number,
/// is skipped as it is read (`IgnoredAny`), so a crafted body costs its length and nothing more.
fn body_timestamp(body: &[u8]) -> Option<Stamp> {
    #[derive(serde::Deserialize)]
    struct Fields {
        #[serde(rename = "webhookTimestamp", default)]
        webhook_timestamp: Millis,
    }
    // An object only (a derived struct would also read an array's first element as the field).
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let fields: Fields = serde_json::from_slice(body).ok()?;
    fields.webhook_timestamp.0.map(Stamp::Millis)
}

/// A whole, non-negative number of milliseconds, or `None` for any other JSON value (skipped, never kept).
#[derive(Default)]
struct Millis(Option<i64>);

impl<'de> serde::Deserialize<'de> for Millis {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Millis;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E>(self, n: i64) -> Result<Millis, E> {
                Ok(Millis((n >= 0).then_some(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Millis, E> {
                Ok(Millis(i64::try_from(n).ok()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Millis, E> {
                Ok(Millis(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Millis, E> {
                Ok(Millis(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Millis, E> {
                Ok(Millis(None))
            }
            fn visit_unit<E>(self) -> Result<Millis, E> {
                Ok(Millis(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Millis, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Millis(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Millis, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(Millis(None))
            }
        }
        deserializer.deserialize_any(Visit)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_timestamp_is_a_top_level_whole_number_read_without_a_tree() {
        let read = |body: &str| body_timestamp(body.as_bytes());
        assert_eq!(
            read(r#"{"a":{"webhookTimestamp":1},"webhookTimestamp":1700000000000}"#),
            Some(Stamp::Millis(1_700_000_000_000))
        );
        for other in [
            r#"{"webhookTimestamp":-1}"#,
            r#"{"webhookTimestamp":1.5}"#,
            r#"{"webhookTimestamp":"1"}"#,
            r#"{"webhookTimestamp":[1,2]}"#,
            r#"{"webhookTimestamp":{"a":1}}"#,
            r#"{"webhookTimestamp":null}"#,
            r#"{"other":1}"#,
            "[1]",
            "not json",
            r#"{"webhookTimestamp":18446744073709551615}"#,
        ] {
            assert_eq!(read(other), None, "{other}");
        }
        // A large value in the field is skipped as it is read (no tree of a million values).
        let huge = format!(r#"{{"webhookTimestamp":[{}0],"x":1}}"#, "0,".repeat(500_000));
        assert_eq!(read(&huge), None);
    }
}
