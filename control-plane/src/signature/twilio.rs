//! Twilio: `X-Twilio-Signature`, the base64 HMAC-SHA1 (keyed with the auth token) of the URL Twilio called,
//! followed for an `application/x-www-form-urlencoded` body by every form parameter's name then value, sorted by
//! name (values of a repeated name sorted too), without separators. A JSON body is not signed itself: Twilio adds
//! `bodySHA256=<hex SHA-256 of the body>` to the URL's query, signs the URL alone, and the body must match it.
//! As Twilio's own libraries do, the URL is tried as called and then with its port toggled (removed when there
//! is one, the scheme's default added when there is none). When a Webhooks Rule signs with a shared key, Twilio
//! names the algorithm in `X-Twilio-Webhooks-Signature-Settings: key=..,algorithm=HMAC_SHA256`.
//!
//! What the signature does not cover is never `valid`: a non-empty body that is neither a form nor covered by
//! `bodySHA256` is `invalid` (else one signed GET would let anyone post any JSON under its signature), and so is a
//! form of more than [`MAX_PARAMS`] parameters, counted before anything is decoded or sorted.

use super::common::{Check, Claim, Encoding, Judge, Message, Offered, header, sha256_hex};
use std::borrow::Cow;

const HEADER: &str = "X-Twilio-Signature";
const SETTINGS: &str = "X-Twilio-Webhooks-Signature-Settings";
/// The most form parameters a signature is checked over (Twilio sends a few dozen).
pub(super) const MAX_PARAMS: usize = 1000;

/// The same secrets keyed for HMAC-SHA1 (the default) and HMAC-SHA256.
pub(super) fn check(sha1: &Judge, sha256: &Judge, message: &Message) -> Check {
    let Some(value) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    let (judge, size) = match header(message, SETTINGS).map(algorithm) {
        None => (sha1, 20),
        Some(Some("HMAC_SHA1")) => (sha1, 20),
        Some(Some("HMAC_SHA256")) => (sha256, 32),
        Some(Some(_)) => return Check::invalid(format!("unsupported algorithm in {SETTINGS}")),
        Some(None) => return Check::malformed(SETTINGS, "no algorithm="),
    };
    let mut offered = Offered::new(Encoding::Base64, size);
    offered.push(value);
    if let Some(check) = offered.unreadable(HEADER, "the") {
        return check;
    }
    let body_sha256 = query_value(message.url, "bodySHA256");
    let params = match body_sha256 {
        Some(_) => Vec::new(),
        None if is_form(message) => {
            if params_over(message.body, MAX_PARAMS) {
                return Check::invalid(format!(
                    "the form has more than {MAX_PARAMS} parameters; Twilio signs no such form"
                ));
            }
            sorted_params(message.body)
        }
        None if message.body.is_empty() => Vec::new(),
        None => {
            return Check::invalid(
                "the body is not signed: it is neither a form nor covered by a bodySHA256 in the URL",
            );
        }
    };
    let alternative = other_port(message.url);
    let mut urls = std::iter::once(message.url).chain(alternative.as_deref());
    let matched = urls.find_map(|url| judge.any_match(&[url.as_bytes(), params.as_slice()], &offered));
    let Some(index) = matched else {
        let content: [&[u8]; 2] = [message.url.as_bytes(), params.as_slice()];
        return judge.mismatch(&Claim {
            content: &content,
            offered: &offered,
            no_match: "signature did not match",
            stamp: None,
        });
    };
    match body_sha256 {
        Some(hash) if !hash.eq_ignore_ascii_case(&sha256_hex(message.body)) => {
            Check::invalid("the bodySHA256 in the URL does not match the body")
        }
        _ => Check::valid(index),
    }
}

/// The `algorithm=` of the settings header.
fn algorithm(settings: &str) -> Option<&str> {
    settings.split(',').find_map(|entry| entry.trim().strip_prefix("algorithm=")).map(str::trim)
}

fn is_form(message: &Message) -> bool {
    header(message, "Content-Type")
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
}

/// The first value of a query parameter of the URL.
fn query_value<'a>(url: &'a str, name: &str) -> Option<Cow<'a, str>> {
    let query = url.split_once('?')?.1;
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == name).map(|(_, v)| v)
}

/// Whether the form has more than `max` parameters (`&`-separated, empty ones skipped as the parser does),
/// counted without decoding and stopping at `max + 1`.
fn params_over(body: &[u8], max: usize) -> bool {
    body.split(|b| *b == b'&').filter(|p| !p.is_empty()).nth(max).is_some()
}

/// The form's parameters, decoded, sorted by name then value, each name followed by its value.
fn sorted_params(body: &[u8]) -> Vec<u8> {
    let mut pairs: Vec<(Cow<str>, Cow<str>)> = form_urlencoded::parse(body).collect();
    pairs.sort_unstable();
    let mut out = Vec::with_capacity(body.len());
    for (name, value) in pairs {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// The URL with its port removed, or with the scheme's default port added when it has none.
fn other_port(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return None,
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let host_at = authority.rfind('@').map_or(0, |at| at + 1);
    let (userinfo, host) = authority.split_at(host_at);
    // A port follows the last ':' that is not inside an IPv6 literal.
    match host.rfind(':').filter(|&at| !host[at..].contains(']')) {
        Some(at) => Some(format!("{scheme}://{userinfo}{}{tail}", &host[..at])),
        None => Some(format!("{scheme}://{authority}:{default}{tail}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_toggled() {
        assert_eq!(other_port("https://a.example/x?y=1").as_deref(), Some("https://a.example:443/x?y=1"));
        assert_eq!(other_port("https://a.example:8443/x").as_deref(), Some("https://a.example/x"));
        assert_eq!(other_port("http://u:p@a.example").as_deref(), Some("http://u:p@a.example:80"));
        assert_eq!(other_port("http://[::1]:8080/w").as_deref(), Some("http://[::1]/w"));
        assert_eq!(other_port("http://[::1]/w").as_deref(), Some("http://[::1]:80/w"));
        assert_eq!(other_port("ftp://a.example/"), None);
    }

    #[test]
    fn parameters_are_counted_without_decoding() {
        assert!(!params_over(b"a=1&b=2&&c", 3));
        assert!(params_over(b"a=1&b=2&c&d", 3));
        assert!(!params_over(b"", 0));
        let many = "x=1&".repeat(100_000);
        let started = std::time::Instant::now();
        assert!(params_over(many.as_bytes(), MAX_PARAMS));
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
    }

    #[test]
    fn params_are_sorted_by_name_then_value() {
        assert_eq!(sorted_params(b"b=2&a=z&a=y&c=%2B1+2"), b"ayazb2c+1 2");
    }
}
