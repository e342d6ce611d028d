//! GitHub, Shopify, Linear, Square and GitLab.

use super::{BODY, Sent, Suite, T, assert_invalid, assert_valid, settings, verifier};
use hookflow_shared::api::signatures::{SignatureScheme, Verdict};

// hashlib.sha256(BODY).hexdigest()
const BODY_CONTENT: &str = "67b8c11e34991a4563dc1a506564990d7e41bd2a5e1c6996b426572fc19c1f8a";

// hmac.new(b"gh_secret_one", BODY, hashlib.sha256).hexdigest()
const GITHUB_ONE: &str = "dcabbf6c0e907f31f8214fefed99100d453875af4f6d8d753ceb12b1d70a5b7f";
// hmac.new(b"gh_secret_two", BODY, hashlib.sha256).hexdigest()
const GITHUB_TWO: &str = "d80675b40471c145d02504dfffc9a9468ca36e6e9f6748d0370cd47b2296f234";

fn github_sent(signature: &str) -> Sent {
    Sent::new(&[("X-Hub-Signature-256", &format!("sha256={signature}"))], BODY)
}

#[test]
fn github_does_what_every_scheme_does() {
    Suite {
        settings: settings(SignatureScheme::Github, &[]),
        secrets: ["gh_secret_one".into(), "gh_secret_two".into()],
        wrong: "gh_secret_three".into(),
        signed: [github_sent(GITHUB_ONE), github_sent(GITHUB_TWO)],
        signature_header: "X-Hub-Signature-256",
        malformed: ("X-Hub-Signature-256", GITHUB_ONE, "malformed X-Hub-Signature-256 header: no sha256= prefix"),
        no_match: "signature did not match",
        timed: false,
        expected: Some((BODY_CONTENT, "dcabbf6c")),
    }
    .run();
}

/// GitHub's documentation ("Validating webhook deliveries") gives this secret, payload and signature.
#[test]
fn github_published_example() {
    let github = verifier(&settings(SignatureScheme::Github, &["It's a Secret to Everybody"]));
    let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    assert_valid(&Sent::new(&[("x-hub-signature-256", signature)], b"Hello, World!").check(&github), 0);
    // The legacy SHA-1 header alone is not enough.
    let legacy = Sent::new(&[("X-Hub-Signature", "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59")], b"Hello, World!");
    assert_eq!(legacy.check(&github).verdict, Verdict::Missing);
}

// base64.b64encode(hmac.new(b"shpss_one", BODY, hashlib.sha256).digest())
const SHOPIFY_ONE: &str = "VoYGY2kSEHwwTO1fA1GThLnkpcWYlY3RE9i4P+CWnls=";
// base64.b64encode(hmac.new(b"shpss_two", BODY, hashlib.sha256).digest())
const SHOPIFY_TWO: &str = "/KyIKihH1hFXUV1E0v/Q84PbMFZFpinNNwZkrqMcd88=";

#[test]
fn shopify_does_what_every_scheme_does() {
    let sent = |signature| Sent::new(&[("X-Shopify-Hmac-Sha256", signature)], BODY);
    Suite {
        settings: settings(SignatureScheme::Shopify, &[]),
        secrets: ["shpss_one".into(), "shpss_two".into()],
        wrong: "shpss_three".into(),
        signed: [sent(SHOPIFY_ONE), sent(SHOPIFY_TWO)],
        signature_header: "X-Shopify-Hmac-Sha256",
        malformed: (
            "X-Shopify-Hmac-Sha256",
            GITHUB_ONE,
            "malformed X-Shopify-Hmac-Sha256 header: not the base64 of 32 bytes",
        ),
        no_match: "signature did not match",
        timed: false,
        expected: Some((BODY_CONTENT, "VoYGY2kS")),
    }
    .run();
}

const LINEAR_BODY: &[u8] = br#"{"action":"create","type":"Issue","webhookTimestamp":1700000000000}"#;
// hmac.new(b"lin_wh_one", LINEAR_BODY, hashlib.sha256).hexdigest()
const LINEAR_ONE: &str = "7a27441f3fc648d51f63e83c77ac8b425869299e0db43fda5cf9107473a85495";
// hmac.new(b"lin_wh_two", LINEAR_BODY, hashlib.sha256).hexdigest()
const LINEAR_TWO: &str = "9e761cd5131fc70e5756e2835a289965c2c4905ec7222eeec3ab9316f60f4a36";
// hashlib.sha256(LINEAR_BODY).hexdigest()
const LINEAR_CONTENT: &str = "710faa25c59548f1b4249b46710d34ca28a3fb0cbc171b7bb07f84c87f63c82f";
// hmac.new(b"lin_wh_one", BODY, hashlib.sha256).hexdigest()
const LINEAR_ONE_PLAIN: &str = "0ceae0e348463a23d58f6d2a0f5f10400ba3f09428e4904e7a490f3e2b7b1b9b";

/// The timestamp is the body's `webhookTimestamp` (milliseconds).
#[test]
fn linear_does_what_every_scheme_does() {
    let sent = |signature| Sent::new(&[("Linear-Signature", signature)], LINEAR_BODY);
    Suite {
        settings: settings(SignatureScheme::Linear, &[]),
        secrets: ["lin_wh_one".into(), "lin_wh_two".into()],
        wrong: "lin_wh_three".into(),
        signed: [sent(LINEAR_ONE), sent(LINEAR_TWO)],
        signature_header: "Linear-Signature",
        malformed: ("Linear-Signature", "sha256=00", "malformed Linear-Signature header: not 64 hex characters"),
        no_match: "signature did not match",
        timed: true,
        expected: Some((LINEAR_CONTENT, "7a27441f")),
    }
    .run();
}

/// Linear's SDK prefers the `Linear-Timestamp` header (milliseconds); without either, nothing is timed.
#[test]
fn linear_reads_the_timestamp_header_first() {
    let linear = verifier(&settings(SignatureScheme::Linear, &["lin_wh_one"]));
    let plain = Sent::new(&[("Linear-Signature", LINEAR_ONE_PLAIN)], BODY);
    assert_valid(&plain.received(T + 86_400).check(&linear), 0);
    let timed = plain.with("Linear-Timestamp", "1700000000500");
    assert_valid(&timed.received(T + 300).check(&linear), 0);
    let check = timed.received(T + 301).check(&linear);
    assert_invalid(&check, "timestamp outside the tolerance of 300 s (301 s old)");
    let check = timed.received(T - 300).check(&linear);
    assert_invalid(&check, "timestamp outside the tolerance of 300 s (301 s in the future)");
    // The header wins over the body's field.
    let both = Sent::new(&[("Linear-Signature", LINEAR_ONE), ("Linear-Timestamp", "1600000000000")], LINEAR_BODY);
    assert_eq!(both.check(&linear).verdict, Verdict::Invalid);
    let check = plain.with("Linear-Timestamp", "now").check(&linear);
    assert_invalid(&check, "malformed Linear-Timestamp header: not a unix time in milliseconds");
}

// base64.b64encode(hmac.new(b"sq_key_one", b"https://hooks.example.com/webhook/ep_1/square?x=1" + BODY, hashlib.sha256).digest())
const SQUARE_ONE: &str = "PMfO6ONOdhJznKNTc0qnzfwuB5vO++sRwGWLdHnYf+M=";
// base64.b64encode(hmac.new(b"sq_key_two", b"https://hooks.example.com/webhook/ep_1/square?x=1" + BODY, hashlib.sha256).digest())
const SQUARE_TWO: &str = "7Y+ckX/BNWV0TsFaClF/8OafIL5Q8ycH4zuMU7FgagE=";
// hashlib.sha256(b"https://hooks.example.com/webhook/ep_1/square?x=1" + BODY).hexdigest()
const SQUARE_CONTENT: &str = "0db890acb9a7dd1c868d799a267993e3b84fd8bb42d5f0bb29b8c4006801aa07";

#[test]
fn square_does_what_every_scheme_does() {
    let sent = |signature| Sent::new(&[("x-square-hmacsha256-signature", signature)], BODY);
    Suite {
        settings: settings(SignatureScheme::Square, &[]),
        secrets: ["sq_key_one".into(), "sq_key_two".into()],
        wrong: "sq_key_three".into(),
        signed: [sent(SQUARE_ONE), sent(SQUARE_TWO)],
        signature_header: "x-square-hmacsha256-signature",
        malformed: ("x-square-hmacsha256-signature", "%%%", "malformed x-square-hmacsha256-signature header: not"),
        no_match: "signature did not match",
        timed: false,
        expected: Some((SQUARE_CONTENT, "PMfO6ONO")),
    }
    .run();
}

/// The test notification of Square's SDKs (`WebhooksHelper` tests): key, URL, body and signature.
#[test]
fn square_published_example() {
    let body = br#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
    let signature = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";
    let sent = Sent::new(&[("x-square-hmacsha256-signature", signature)], body)
        .url("https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9");
    let square = verifier(&settings(SignatureScheme::Square, &["Ibxx_5AKakO-3qeNVR61Dw"]));
    assert_valid(&sent.check(&square), 0);
    // Another URL is another signed content.
    let check = sent.url("https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9?x=1").check(&square);
    assert_invalid(&check, "signature did not match");
}

#[test]
fn gitlab_compares_the_token_and_gives_no_hint() {
    let token = |value| Sent::new(&[("X-Gitlab-Token", value)], BODY);
    let one = verifier(&settings(SignatureScheme::Gitlab, &["glpat-token-one"]));
    let both = verifier(&settings(SignatureScheme::Gitlab, &["glpat-token-one", "glpat-token-two"]));
    assert_valid(&token("glpat-token-one").check(&one), 0);
    assert_valid(&token("glpat-token-two").check(&both), 1);
    for wrong in ["glpat-token-two", "glpat-token-on", "glpat-token-one1", "GLPAT-TOKEN-ONE"] {
        let check = token(wrong).check(&one);
        assert_invalid(&check, "token did not match");
        assert_eq!(check.expected, None, "the token is the secret: no hint");
    }
    let check = token("glpat-token-one").without("x-gitlab-token").check(&one);
    assert_eq!((check.verdict, check.reason.as_deref()), (Verdict::Missing, Some("missing header X-Gitlab-Token")));
    assert!(!format!("{both:?}").contains("glpat"));
}
