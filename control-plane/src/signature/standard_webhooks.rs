//! Standard Webhooks and Svix: `webhook-id`, `webhook-timestamp` (unix seconds) and `webhook-signature`
//! (space-separated `v1,<base64>` entries; other versions such as the asymmetric `v1a` are ignored), or the same
//! under `svix-` names. HMAC-SHA256 over `<id>.<timestamp>.<body>` with the base64 key after `whsec_`.

use super::common::{Check, Claim, Encoding, Judge, Message, Offered, Stamp, header};

/// One set of header names.
struct Names {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

const STANDARD: Names = Names { id: "webhook-id", timestamp: "webhook-timestamp", signature: "webhook-signature" };
const SVIX: Names = Names { id: "svix-id", timestamp: "svix-timestamp", signature: "svix-signature" };

pub(super) fn check(judge: &Judge, message: &Message) -> Check {
    // The set whose signature header is there; `webhook-` first.
    let found = [&STANDARD, &SVIX].into_iter().find_map(|n| header(message, n.signature).map(|v| (n, v)));
    let Some((names, value)) = found else {
        return Check::missing(STANDARD.signature);
    };
    let id = header(message, names.id);
    signed(judge, message, names, value, id).with_message_id(id)
}

fn signed(judge: &Judge, message: &Message, names: &Names, value: &str, id: Option<&str>) -> Check {
    let Some(id) = id else {
        return Check::missing_beside(names.id);
    };
    let Some(time) = header(message, names.timestamp) else {
        return Check::missing_beside(names.timestamp);
    };
    let Some(stamp) = Stamp::seconds(time) else {
        return Check::malformed(names.timestamp, "not a unix time");
    };
    let mut offered = Offered::new(Encoding::Base64, 32);
    for entry in value.split(' ').filter(|e| !e.is_empty()) {
        if let Some(("v1", signature)) = entry.split_once(',') {
            offered.push(signature);
        }
    }
    if offered.seen() == 0 {
        return Check::malformed(names.signature, "no v1, signature");
    }
    if let Some(check) = offered.unreadable(names.signature, "v1,") {
        return check;
    }
    let content: [&[u8]; 5] = [id.as_bytes(), b".", time.as_bytes(), b".", message.body];
    judge.hmac(&Claim { content: &content, offered: &offered, no_match: "no v1 signature matched", stamp: Some(stamp) })
}

/// Signs what is sent the Standard Webhooks way: `v1,<base64 HMAC-SHA256>` of `<msg_id>.<timestamp>.<body>` with
/// the secret's decoded bytes (the part after `whsec_`, base64-decoded). The one signer of what the server sends:
/// destinations' deliveries and alert notifications alike.
pub fn sign(secret: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    use aws_lc_rs::hmac;
    use base64::Engine as _;
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut context = hmac::Context::with_key(&key);
    context.update(msg_id.as_bytes());
    context.update(b".");
    context.update(timestamp.to_string().as_bytes());
    context.update(b".");
    context.update(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(context.sign().as_ref()))
}

/// The bytes a `whsec_` secret signs with (its base64 after the prefix); `None` for anything else.
pub fn secret_bytes(secret: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_")?).ok()
}
