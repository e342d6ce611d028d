//! Twilio: Twilio's documented example, the vectors of Twilio's Python library (`tests/unit/test_request_validator.py`:
//! auth token `12345`), and independent vectors.

use super::{Sent, assert_invalid, assert_valid, settings, verifier};
use hookflow_shared::api::signatures::SignatureScheme;

const FORM: &str = "application/x-www-form-urlencoded";
const SMS_URL: &str = "https://hooks.example.com/webhook/ep_1/sms";
const SMS: &[u8] = b"To=%2B15005550001&From=%2B15005550006&Body=Hello+world";
// SIGNED = b"https://hooks.example.com/webhook/ep_1/sms" + b"BodyHello worldFrom+15005550006To+15005550001"
pub(super) const TWILIO: [&str; 2] = [
    // base64.b64encode(hmac.new(b"twilio_token_one", SIGNED, hashlib.sha1).digest())
    "xV1gDxJ/D4Dyzorj1IK+I1d8mCo=",
    // base64.b64encode(hmac.new(b"twilio_token_two", SIGNED, hashlib.sha1).digest())
    "8L4/Bu8E2ZGCNtTMAIm6RK63DDU=",
];
// base64.b64encode(hmac.new(b"twilio_token_one", SIGNED, hashlib.sha256).digest())
const ONE_SHA256: &str = "asutrB/ELVlCrCZTzvu/OvPUIhX8B9eHGL8j6Xp23Js=";
// hashlib.sha256(SIGNED).hexdigest()
pub(super) const TWILIO_CONTENT: &str = "4e140ca00cb4594ca14abe812b5803e897faf20514d24a5088aa1dbdf6375822";

pub(super) fn sms(signature: &str) -> Sent {
    Sent::new(&[("Content-Type", &format!("{FORM}; charset=utf-8")), ("X-Twilio-Signature", signature)], SMS)
        .url(SMS_URL)
}

/// Twilio's "Webhooks security" page: auth token `12345`, this URL and these parameters.
#[test]
fn twilio_published_example() {
    let twilio = verifier(&settings(SignatureScheme::Twilio, &["12345"]));
    let body = b"To=%2B18005551212&From=%2B12349013030&Digits=1234&Caller=%2B12349013030&CallSid=CA1234567890ABCDE";
    let sent = Sent::new(&[("Content-Type", FORM), ("X-Twilio-Signature", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")], body)
        .url("https://mycompany.com/myapp.php?foo=1&bar=2");
    assert_valid(&sent.check(&twilio), 0);
    // Read as something other than a form, nothing signs the body.
    assert_invalid(
        &sent.with("Content-Type", "text/plain").check(&twilio),
        "the body is not signed: it is neither a form nor covered by a bodySHA256 in the URL",
    );
}

/// A signed GET (the URL alone) verifies; its signature over a body nothing signs does not.
#[test]
fn twilio_bodies_nothing_signs_are_invalid() {
    let twilio = verifier(&settings(SignatureScheme::Twilio, &["12345"]));
    // base64.b64encode(hmac.new(b"12345", LIBRARY_URL.encode(), hashlib.sha1).digest())
    use aws_lc_rs::hmac;
    use base64::Engine as _;
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, b"12345");
    let signature = base64::engine::general_purpose::STANDARD.encode(hmac::sign(&key, LIBRARY_URL.as_bytes()));
    let get = Sent::new(&[("X-Twilio-Signature", signature.as_str())], b"").url(LIBRARY_URL);
    assert_valid(&get.check(&twilio), 0);
    let replayed = get.with("Content-Type", "application/json").body(br#"{"amount": 1000000}"#).check(&twilio);
    assert_invalid(&replayed, "the body is not signed: it is neither a form nor covered by a bodySHA256 in the URL");
}

#[test]
fn twilio_forms_of_too_many_parameters_are_invalid() {
    let twilio = verifier(&settings(SignatureScheme::Twilio, &["12345"]));
    let form = "a=1&".repeat(1001);
    let check = library("RSOYDt4T1cUTdK1PDd93/VVr8B8=", LIBRARY_URL, form.as_bytes()).check(&twilio);
    assert_invalid(&check, "the form has more than 1000 parameters; Twilio signs no such form");
    let form = "a=1&".repeat(1000);
    let check = library("RSOYDt4T1cUTdK1PDd93/VVr8B8=", LIBRARY_URL, form.as_bytes()).check(&twilio);
    assert_invalid(&check, "signature did not match");
}

const LIBRARY_URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
const LIBRARY_FORM: &[u8] =
    b"CallSid=CA1234567890ABCDE&Digits=1234&From=%2B14158675309&To=%2B18005551212&Caller=%2B14158675309";

fn library(signature: &str, url: &str, body: &[u8]) -> Sent {
    Sent::new(&[("Content-Type", FORM), ("X-Twilio-Signature", signature)], body).url(url)
}

#[test]
fn twilio_library_vectors_with_ports_and_repeated_names() {
    let twilio = verifier(&settings(SignatureScheme::Twilio, &["12345"]));
    let plain = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";
    assert_valid(&library(plain, LIBRARY_URL, LIBRARY_FORM).check(&twilio), 0);
    // Signed without the port that the URL has.
    let with_port = "https://mycompany.com:1234/myapp.php?foo=1&bar=2";
    assert_valid(&library(plain, with_port, LIBRARY_FORM).check(&twilio), 0);
    // Signed with the default port that the URL does not have.
    assert_valid(&library("kvajT1Ptam85bY51eRf/AJRuM3w=", LIBRARY_URL, LIBRARY_FORM).check(&twilio), 0);
    let http = "http://mycompany.com/myapp.php?foo=1&bar=2";
    assert_valid(&library("0ZXoZLH/DfblKGATFgpif+LLRf4=", http, LIBRARY_FORM).check(&twilio), 0);
    // A repeated name: its values sorted too.
    let repeated = b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234";
    assert_valid(&library("IK+Dwps556ElfBT0I3Rgjkr1wJU=", LIBRARY_URL, repeated).check(&twilio), 0);
}

#[test]
fn twilio_json_bodies_are_checked_against_body_sha256() {
    let twilio = verifier(&settings(SignatureScheme::Twilio, &["12345"]));
    let body = br#"{"property": "value", "boolean": true}"#;
    let url = format!("{LIBRARY_URL}&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620");
    let sent = Sent::new(
        &[("Content-Type", "application/json"), ("X-Twilio-Signature", "a9nBmqA0ju/hNViExpshrM61xv4=")],
        body,
    )
    .url(&url);
    assert_valid(&sent.check(&twilio), 0);
    let check = sent.body(br#"{"property": "value", "boolean": false}"#).check(&twilio);
    assert_invalid(&check, "the bodySHA256 in the URL does not match the body");
}

#[test]
fn twilio_follows_the_signature_settings_of_a_webhooks_rule() {
    let twilio = verifier(&settings(SignatureScheme::Twilio, &["twilio_token_one"]));
    let settings = "X-Twilio-Webhooks-Signature-Settings";
    let sent = sms(ONE_SHA256).with(settings, "key=KS0123,algorithm=HMAC_SHA256");
    assert_valid(&sent.check(&twilio), 0);
    assert_invalid(&sms(ONE_SHA256).check(&twilio), "malformed X-Twilio-Signature header: not the base64 of 20 bytes");
    assert_valid(&sms(TWILIO[0]).with(settings, "key=KS0123, algorithm=HMAC_SHA1").check(&twilio), 0);
    let check = sent.with(settings, "key=KS0123,algorithm=HMAC_MD5").check(&twilio);
    assert_invalid(&check, "unsupported algorithm in X-Twilio-Webhooks-Signature-Settings");
    let check = sent.with(settings, "key=KS0123").check(&twilio);
    assert_invalid(&check, "malformed X-Twilio-Webhooks-Signature-Settings header: no algorithm=");
}
