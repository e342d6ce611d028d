//! Standard Webhooks and Svix.

use super::{BODY, Sent, T, assert_invalid, assert_valid, settings, verifier};
use hookflow_shared::api::signatures::{SignatureScheme, Verdict};

/// "whsec_" + base64.b64encode(b"standard-webhooks-key-one!").decode(), and "two" and "three" alike.
pub(super) const STANDARD_SECRETS: [&str; 3] = [
    "whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LW9uZSE=",
    "whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LXR3byE=",
    "whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LXRocmVlIQ==",
];
pub(super) const STANDARD: [&str; 2] = [ONE, TWO];
// base64.b64encode(hmac.new(b"standard-webhooks-key-one!", b"msg_1." + T + b"." + BODY, hashlib.sha256).digest())
const ONE: &str = "735aGNeLgm69hYyr3+zghcFk3/eK0Taj6s0iOgcmk68=";
// base64.b64encode(hmac.new(b"standard-webhooks-key-two!", b"msg_1." + T + b"." + BODY, hashlib.sha256).digest())
const TWO: &str = "+h0T2V7qmVOUkxvq9wmG439q81VkU1ffRyZYso/g49w=";
// hashlib.sha256(b"msg_1." + T + b"." + BODY).hexdigest()
pub(super) const STANDARD_CONTENT: &str = "359d7405a68bbb2aa10a30cf04c40332898b92d37b8d33bebc9f7f590144fe2d";

pub(super) fn sent(signature: &str) -> Sent {
    let signature = format!("v1,{signature}");
    Sent::new(&[("webhook-id", "msg_1"), ("webhook-timestamp", "1700000000"), ("webhook-signature", &signature)], BODY)
}

/// The specification's test vector (standard-webhooks `libraries/python/tests`, `test_sign_function`).
#[test]
fn standard_webhooks_published_example() {
    let sent = Sent::new(
        &[
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            ("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
        ],
        br#"{"test": 2432232314}"#,
    )
    .received(1_614_265_330);
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]));
    let check = sent.check(&standard);
    assert_valid(&check, 0);
    assert_eq!(check.message_id.as_deref(), Some("msg_p5jXN8AQM9LWM0D4loKWxJek"));
    // The library's "invalid signature" case: the last character changed.
    let check = sent.with("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=").check(&standard);
    assert_invalid(&check, "no v1 signature matched");
}

#[test]
fn svix_headers_are_read_too() {
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &STANDARD_SECRETS[..1]));
    let svix = Sent::new(
        &[("svix-id", "msg_1"), ("svix-timestamp", "1700000000"), ("svix-signature", &format!("v1,{ONE}"))],
        BODY,
    );
    let check = svix.check(&standard);
    assert_valid(&check, 0);
    assert_eq!(check.message_id.as_deref(), Some("msg_1"));
    let check = svix.without("svix-id").check(&standard);
    assert_invalid(&check, "missing header svix-id");
    let check = svix.without("svix-signature").check(&standard);
    assert_eq!((check.verdict, check.reason.as_deref()), (Verdict::Missing, Some("missing header webhook-signature")));
}

#[test]
fn every_v1_entry_is_tried_and_other_versions_ignored() {
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &STANDARD_SECRETS[..1]));
    // From the library's multi-signature test: unknown versions and wrong v1 entries around the right one.
    let value = format!("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,{ONE}  v1a,{ONE} v1,{ONE}");
    let check = sent(ONE).with("webhook-signature", &value).check(&standard);
    assert_valid(&check, 0);
    let check = sent(ONE).with("webhook-signature", &format!("v1a,{ONE}")).check(&standard);
    assert_invalid(&check, "malformed webhook-signature header: no v1, signature");
    let check = sent(ONE).with("webhook-signature", "v1,!!").check(&standard);
    assert_invalid(&check, "malformed webhook-signature header: not the base64 of 32 bytes");
    // Unpadded base64 reads the same.
    let check = sent(ONE.trim_end_matches('=')).check(&standard);
    assert_valid(&check, 0);
}

#[test]
fn the_id_and_timestamp_must_be_there_and_the_id_is_answered() {
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &STANDARD_SECRETS[..1]));
    let check = sent(ONE).without("webhook-id").check(&standard);
    assert_invalid(&check, "missing header webhook-id");
    assert_eq!(check.message_id, None);
    let check = sent(ONE).without("webhook-timestamp").check(&standard);
    assert_invalid(&check, "missing header webhook-timestamp");
    assert_eq!(check.message_id.as_deref(), Some("msg_1"));
    let check = sent(ONE).with("webhook-timestamp", "1700000000.5").check(&standard);
    assert_invalid(&check, "malformed webhook-timestamp header: not a unix time");
    let check = sent(TWO).check(&standard);
    assert_eq!((check.verdict, check.message_id.as_deref()), (Verdict::Invalid, Some("msg_1")));
    let check = sent(ONE).received(T + 301).check(&standard);
    assert_eq!((check.verdict, check.message_id.as_deref()), (Verdict::Invalid, Some("msg_1")));
}

/// What the server signs (destinations, notifications) the verifier accepts, and the specification's vector
/// comes out of the signer exactly.
#[test]
fn the_signer_signs_what_the_verifier_accepts() {
    use crate::signature::{standard_webhooks_secret, standard_webhooks_sign};
    let secret = standard_webhooks_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a secret");
    let signed =
        standard_webhooks_sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, br#"{"test": 2432232314}"#);
    assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    let signature = standard_webhooks_sign(&secret, "dlv_1", 1_700_000_000, BODY);
    let sent = Sent::new(
        &[("webhook-id", "dlv_1"), ("webhook-timestamp", "1700000000"), ("webhook-signature", &signature)],
        BODY,
    );
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]));
    assert_valid(&sent.check(&standard), 0);
    assert!(standard_webhooks_secret("not-a-secret").is_none());
}
