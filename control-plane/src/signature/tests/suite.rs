//! The suite every scheme runs, over one table of the schemes and their vectors: valid, a body changed by one
//! byte, a wrong secret, a rotation, the `expected` hint, a missing header, a malformed header, timestamps past
//! and future, and no secret in `Debug`. GitLab compares a token, not a signature: `body.rs` tests it alone.

use super::body::{self, BODY_CONTENT, GITHUB, LINEAR, LINEAR_CONTENT, SHOPIFY, SQUARE, SQUARE_CONTENT};
use super::discord::Application;
use super::generic::{self, SHA1, SHA1_CONTENT};
use super::slack::{self, SLACK, V0_CONTENT, ZOOM};
use super::standard_webhooks::{self as standard, STANDARD, STANDARD_CONTENT, STANDARD_SECRETS};
use super::stripe::{self, PADDLE, PADDLE_CONTENT, STRIPE, STRIPE_CONTENT};
use super::twilio::{self, TWILIO, TWILIO_CONTENT};
use super::{BODY, Sent, T, assert_invalid, assert_valid, settings, verifier};
use crate::signature::Verifier;
use hookflow_shared::api::signatures::{SignatureScheme as S, Verdict, VerificationSettings};

#[test]
fn every_scheme_does_what_every_scheme_must() {
    let table = table();
    assert_eq!(table.len(), S::ALL.len() - 1, "every scheme but GitLab has a row");
    for row in table {
        // Which row failed, shown with the failure.
        eprintln!("scheme {}", row.settings.scheme.as_str());
        row.run();
    }
}

/// The schemes, each with two secrets, a well-formed wrong one, and the same message signed with either.
fn table() -> Vec<Row> {
    let plain = |scheme| settings(scheme, &[]);
    let shopify = |s| Sent::new(&[("X-Shopify-Hmac-Sha256", s)], BODY);
    let linear = |s| Sent::new(&[("Linear-Signature", s)], body::LINEAR_BODY);
    let square = |s| Sent::new(&[("x-square-hmacsha256-signature", s)], BODY);
    let apps = [(); 3].map(|()| Application::new());
    let discord = [&apps[0], &apps[1]].map(|app| app.sent("1700000000", BODY));
    vec![
        Row::new(plain(S::Github), names("gh_secret"), GITHUB.map(body::github_sent))
            .malformed("X-Hub-Signature-256", GITHUB[0], "no sha256= prefix")
            .expected(BODY_CONTENT, "dcabbf6c"),
        Row::new(plain(S::Shopify), names("shpss"), SHOPIFY.map(shopify))
            .malformed("X-Shopify-Hmac-Sha256", GITHUB[0], "not the base64 of 32 bytes")
            .expected(BODY_CONTENT, "VoYGY2kS"),
        // The timestamp is the body's `webhookTimestamp` (milliseconds).
        Row::new(plain(S::Linear), names("lin_wh"), LINEAR.map(linear))
            .malformed("Linear-Signature", "sha256=00", "not 64 hex characters")
            .timed()
            .expected(LINEAR_CONTENT, "7a27441f"),
        Row::new(plain(S::Square), names("sq_key"), SQUARE.map(square))
            .malformed("x-square-hmacsha256-signature", "%%%", "not")
            .expected(SQUARE_CONTENT, "PMfO6ONO"),
        Row::new(plain(S::Slack), names("slack_signing"), SLACK.map(slack::slack_sent))
            .malformed("X-Slack-Signature", SLACK[0], "no v0= prefix")
            .timed()
            .expected(V0_CONTENT, "fb91a854"),
        Row::new(plain(S::Zoom), names("zoom_secret"), ZOOM.map(slack::zoom_sent))
            .malformed("x-zm-signature", "v1=00", "no v0= prefix")
            .timed()
            .expected(V0_CONTENT, "7bedd09c"),
        Row::new(plain(S::Stripe), names("whsec_stripe"), STRIPE.map(|s| stripe::stripe_sent(&[s])))
            .malformed("Stripe-Signature", "v1=ab", "no t=")
            .no_match("no v1 signature matched")
            .timed()
            .expected(STRIPE_CONTENT, "4c554167"),
        Row::new(plain(S::Paddle), names("pdl_ntfset"), PADDLE.map(|s| stripe::paddle_sent(&[s])))
            .malformed("Paddle-Signature", "ts=1700000000", "no h1= signature")
            .no_match("no h1 signature matched")
            .timed()
            .expected(PADDLE_CONTENT, "7ba71bb8"),
        Row::new(plain(S::Twilio), names("twilio_token"), TWILIO.map(twilio::sms))
            .malformed("X-Twilio-Signature", "abc", "not the base64 of 20 bytes")
            .expected(TWILIO_CONTENT, "xV1gDxJ/"),
        Row::new(generic::sha1_timed(), names("generic"), SHA1.map(generic::sha1_sent))
            .malformed("X-Signature", SHA1[0], "no sha1= prefix")
            .timed()
            .expected(SHA1_CONTENT, "JJlof98I"),
        Row::new(plain(S::StandardWebhooks), STANDARD_SECRETS.map(String::from), STANDARD.map(standard::sent))
            .malformed("webhook-signature", STANDARD[0], "no v1, signature")
            .no_match("no v1 signature matched")
            .timed()
            .expected(STANDARD_CONTENT, "735aGNeL"),
        // A public key cannot sign: no hint.
        Row::new(plain(S::Discord), apps.map(|app| app.public_key()), discord)
            .malformed("X-Signature-Ed25519", "abcd", "not 128 hex characters")
            .no_match("signature did not verify")
            .timed(),
    ]
}

/// `<stem>_one`, `<stem>_two`, `<stem>_three`.
fn names(stem: &str) -> [String; 3] {
    ["one", "two", "three"].map(|n| format!("{stem}_{n}"))
}

/// One scheme of the table.
struct Row {
    /// The settings, whose secrets each step replaces.
    settings: VerificationSettings,
    /// The two secrets that signed, then a well-formed one that signed neither message.
    secrets: [String; 3],
    /// The same message signed with the first and with the second secret.
    signed: [Sent; 2],
    /// The signature header, a value of it that cannot be read, and the start of the reason after
    /// `malformed <header> header: `.
    malformed: (&'static str, &'static str, &'static str),
    no_match: &'static str,
    /// The messages sign [`T`] as their timestamp.
    timed: bool,
    /// The hex SHA-256 of the signed bytes and the first 8 characters of the first secret's signature.
    expected: Option<(&'static str, &'static str)>,
}

impl Row {
    /// Untimed, "signature did not match", no hint; the malformed header is to be said.
    fn new(settings: VerificationSettings, secrets: [String; 3], signed: [Sent; 2]) -> Self {
        let (malformed, no_match) = (("", "", ""), "signature did not match");
        Row { settings, secrets, signed, malformed, no_match, timed: false, expected: None }
    }

    fn malformed(self, header: &'static str, value: &'static str, reason: &'static str) -> Self {
        Row { malformed: (header, value, reason), ..self }
    }

    fn no_match(self, reason: &'static str) -> Self {
        Row { no_match: reason, ..self }
    }

    fn timed(self) -> Self {
        Row { timed: true, ..self }
    }

    fn expected(self, content_sha256: &'static str, signature_prefix: &'static str) -> Self {
        Row { expected: Some((content_sha256, signature_prefix)), ..self }
    }

    fn verifier(&self, secrets: &[usize]) -> Verifier {
        let secrets = secrets.iter().map(|&i| self.secrets[i].clone()).collect();
        verifier(&VerificationSettings { secrets, ..self.settings.clone() })
    }

    fn run(&self) {
        let [a, b] = &self.signed;
        let one = self.verifier(&[0]);
        let both = self.verifier(&[0, 1]);
        assert_valid(&a.check(&one), 0);

        let mut changed = a.body.clone();
        *changed.last_mut().expect("a body") ^= 1;
        assert_invalid(&a.body(&changed).check(&one), self.no_match);
        assert_invalid(&a.check(&self.verifier(&[2])), self.no_match);

        assert_valid(&a.check(&both), 0);
        assert_valid(&b.check(&both), 1);
        let check = b.check(&one);
        assert_invalid(&check, self.no_match);
        let expected = check.expected.map(|e| (e.signed_content_sha256, e.signature_prefix));
        assert_eq!(expected, self.expected.map(|(s, p)| (s.to_owned(), p.to_owned())));

        let (header, value, reason) = self.malformed;
        assert!(!header.is_empty(), "the row says its signature header");
        let missing = a.without(header).check(&one);
        assert_eq!(missing.verdict, Verdict::Missing);
        assert_eq!(missing.reason, Some(format!("missing header {header}")));
        let check = a.with(header, value).check(&one);
        assert_eq!(check.verdict, Verdict::Invalid, "{check:?}");
        let reason = format!("malformed {header} header: {reason}");
        assert!(check.reason.as_deref().is_some_and(|r| r.starts_with(&reason)), "{check:?}");

        self.run_timestamps(a, &one);
        let debug = format!("{both:?}");
        assert!(self.secrets[..2].iter().all(|s| !debug.contains(s.as_str())), "{debug}");
    }

    /// A timed scheme accepts the tolerance each way and not a second more; an untimed one any age.
    fn run_timestamps(&self, a: &Sent, one: &Verifier) {
        if self.timed {
            assert_valid(&a.received(T + 300).check(one), 0);
            assert_valid(&a.received(T - 300).check(one), 0);
            let old = "timestamp outside the tolerance of 300 s (301 s old)";
            assert_invalid(&a.received(T + 301).check(one), old);
            let future = "timestamp outside the tolerance of 300 s (301 s in the future)";
            assert_invalid(&a.received(T - 301).check(one), future);
        } else {
            assert_valid(&a.received(T + 86_400 * 365).check(one), 0);
        }
    }
}
