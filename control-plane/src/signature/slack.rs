//! Slack and Zoom: `v0=<hex>` HMAC-SHA256 over `v0:<timestamp>:<body>`, the timestamp (unix seconds) in a
//! header of its own.
//!
//! - Slack: `X-Slack-Signature`, `X-Slack-Request-Timestamp`.
//! - Zoom: `x-zm-signature`, `x-zm-request-timestamp`.

use super::common::{Check, Claim, Encoding, Judge, Message, Offered, Stamp, header};

/// The headers of one of these senders.
struct Names {
    signature: &'static str,
    timestamp: &'static str,
}

const SLACK: Names = Names { signature: "X-Slack-Signature", timestamp: "X-Slack-Request-Timestamp" };
const ZOOM: Names = Names { signature: "x-zm-signature", timestamp: "x-zm-request-timestamp" };

pub(super) fn slack(judge: &Judge, message: &Message) -> Check {
    check(&SLACK, judge, message)
}

pub(super) fn zoom(judge: &Judge, message: &Message) -> Check {
    check(&ZOOM, judge, message)
}

fn check(names: &Names, judge: &Judge, message: &Message) -> Check {
    let Some(value) = header(message, names.signature) else {
        return Check::missing(names.signature);
    };
    let Some(signature) = value.strip_prefix("v0=") else {
        return Check::malformed(names.signature, "no v0= prefix");
    };
    let Some(time) = header(message, names.timestamp) else {
        return Check::missing_beside(names.timestamp);
    };
    let Some(stamp) = Stamp::seconds(time) else {
        return Check::malformed(names.timestamp, "not a unix time");
    };
    let mut offered = Offered::new(Encoding::Hex, 32);
    offered.push(signature);
    if let Some(check) = offered.unreadable(names.signature, "v0=") {
        return check;
    }
    let content: [&[u8]; 4] = [b"v0:", time.as_bytes(), b":", message.body];
    judge.hmac(&Claim { content: &content, offered: &offered, no_match: "signature did not match", stamp: Some(stamp) })
}
