//! Stripe and Paddle Billing: one header holds a timestamp and one or more hex HMAC-SHA256 signatures
//! (several during a secret rotation), the signed content is the timestamp, a separator, then the body.
//!
//! - Stripe: `Stripe-Signature: t=<unix>,v1=<hex>,v1=<hex>`, signed `<t>.<body>`; other schemes (`v0=`) ignored.
//! - Paddle: `Paddle-Signature: ts=<unix>;h1=<hex>`, signed `<ts>:<body>`.

use super::common::{Check, Claim, Encoding, Judge, Message, Offered, Stamp, header};

/// How one of these headers is laid out.
struct Layout {
    header: &'static str,
    /// Between entries.
    entries: char,
    time_key: &'static str,
    signature_key: &'static str,
    /// Between the timestamp and the body in the signed content.
    separator: &'static [u8],
    no_match: &'static str,
}

const STRIPE: Layout = Layout {
    header: "Stripe-Signature",
    entries: ',',
    time_key: "t",
    signature_key: "v1",
    separator: b".",
    no_match: "no v1 signature matched",
};
const PADDLE: Layout = Layout {
    header: "Paddle-Signature",
    entries: ';',
    time_key: "ts",
    signature_key: "h1",
    separator: b":",
    no_match: "no h1 signature matched",
};

pub(super) fn stripe(judge: &Judge, message: &Message) -> Check {
    check(&STRIPE, judge, message)
}

pub(super) fn paddle(judge: &Judge, message: &Message) -> Check {
    check(&PADDLE, judge, message)
}

fn check(layout: &Layout, judge: &Judge, message: &Message) -> Check {
    let Some(value) = header(message, layout.header) else {
        return Check::missing(layout.header);
    };
    // One pass over the entries, whatever their number; only the first MAX_ENTRIES signatures are decoded.
    let mut time = None;
    let mut offered = Offered::new(Encoding::Hex, 32);
    for entry in value.split(layout.entries) {
        let Some((key, text)) = entry.split_once('=') else { continue };
        match key.trim() {
            k if k == layout.time_key && time.is_none() => time = Some(text.trim()),
            k if k == layout.signature_key => offered.push(text),
            _ => {}
        }
    }
    let (time_key, signature_key) = (layout.time_key, layout.signature_key);
    let Some(time) = time else {
        return Check::malformed(layout.header, &format!("no {time_key}="));
    };
    let Some(stamp) = Stamp::seconds(time) else {
        return Check::malformed(layout.header, &format!("{time_key}= is not a unix time"));
    };
    if offered.seen() == 0 {
        return Check::malformed(layout.header, &format!("no {signature_key}= signature"));
    }
    if let Some(check) = offered.unreadable(layout.header, signature_key) {
        return check;
    }
    let content: [&[u8]; 3] = [time.as_bytes(), layout.separator, message.body];
    judge.hmac(&Claim { content: &content, offered: &offered, no_match: layout.no_match, stamp: Some(stamp) })
}
