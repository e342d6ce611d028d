//! Discord interactions: `X-Signature-Ed25519` (hex Ed25519 signature) over `X-Signature-Timestamp` followed by
//! the body, verified with the application's public key (the secret, 64 hex characters). The timestamp is unix
//! seconds and is held to the tolerance like every signed timestamp. No `expected` hint: a public key cannot
//! make a signature.

use super::common::{Check, Encoding, Message, Offered, Stamp, header};
use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use chrono::{DateTime, Utc};

const HEADER: &str = "X-Signature-Ed25519";
const TIMESTAMP: &str = "X-Signature-Timestamp";

pub(super) fn check(keys: &[[u8; 32]], tolerance_s: u32, message: &Message) -> Check {
    let Some(value) = header(message, HEADER) else {
        return Check::missing(HEADER);
    };
    let Some(time) = header(message, TIMESTAMP) else {
        return Check::missing_beside(TIMESTAMP);
    };
    let Some(stamp) = Stamp::seconds(time) else {
        return Check::malformed(TIMESTAMP, "not a unix time");
    };
    let mut offered = Offered::new(Encoding::Hex, 64);
    offered.push(value);
    if let Some(check) = offered.unreadable(HEADER, "the") {
        return check;
    }
    let signed = [time.as_bytes(), message.body].concat();
    let verified = offered.signatures().find_map(|signature| {
        keys.iter().position(|key| UnparsedPublicKey::new(&ED25519, key).verify(&signed, signature).is_ok())
    });
    judged(verified, stamp, tolerance_s, message.received_at)
}

fn judged(verified: Option<usize>, stamp: Stamp, tolerance_s: u32, received_at: DateTime<Utc>) -> Check {
    let Some(index) = verified else {
        return Check::invalid("signature did not verify");
    };
    match stamp.outside(received_at, tolerance_s) {
        Some(reason) => Check::invalid(reason),
        None => Check::valid(index),
    }
}
