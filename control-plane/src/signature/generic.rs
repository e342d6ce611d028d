//! The generic `hmac` scheme: the signature in `header` (after `prefix`, which must be there when set), written
//! in hex or base64, an HMAC (SHA-1, SHA-256 or SHA-512) over the body, or over
//! `<timestamp><separator><body>` when `timestamp_header` is set. That timestamp is held to the tolerance when it
//! reads as unix seconds, as milliseconds (above 10^12) or as RFC 3339; any other text is signed but not timed.

use super::common::{Check, Claim, Encoding, Judge, Message, Offered, Stamp, header};
use hookflow_shared::api::signatures::{HmacAlgorithm, SignatureEncoding, VerificationSettings};

/// The separator when none is set.
pub(super) const DEFAULT_SEPARATOR: &str = ".";

pub(super) fn check(settings: &VerificationSettings, judge: &Judge, message: &Message) -> Check {
    let name = settings.header.as_deref().unwrap_or_default();
    let Some(value) = header(message, name) else {
        return Check::missing(name);
    };
    let prefix = settings.prefix.as_deref().unwrap_or_default();
    let Some(signature) = strip_prefix(value, prefix) else {
        return Check::malformed(name, &format!("no {prefix} prefix"));
    };
    let size = match settings.algorithm.unwrap_or_default() {
        HmacAlgorithm::Sha1 => 20,
        HmacAlgorithm::Sha256 => 32,
        HmacAlgorithm::Sha512 => 64,
    };
    let encoding = match settings.encoding.unwrap_or_default() {
        SignatureEncoding::Hex => Encoding::Hex,
        SignatureEncoding::Base64 => Encoding::AnyBase64,
    };
    let mut offered = Offered::new(encoding, size);
    offered.push(signature);
    if let Some(check) = offered.unreadable(name, "the") {
        return check;
    }
    let no_match = "signature did not match";
    let Some(time_name) = settings.timestamp_header.as_deref() else {
        return judge.hmac(&Claim { content: &[message.body], offered: &offered, no_match, stamp: None });
    };
    let Some(time) = header(message, time_name) else {
        return Check::missing_beside(time_name);
    };
    let separator = settings.separator.as_deref().unwrap_or(DEFAULT_SEPARATOR);
    let content: [&[u8]; 3] = [time.as_bytes(), separator.as_bytes(), message.body];
    judge.hmac(&Claim { content: &content, offered: &offered, no_match, stamp: Stamp::guess(time) })
}

/// The value after `prefix` (ASCII case-insensitive), trimmed.
fn strip_prefix<'a>(value: &'a str, prefix: &str) -> Option<&'a str> {
    let head = value.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| value[prefix.len()..].trim())
}
