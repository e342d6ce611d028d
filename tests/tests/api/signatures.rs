//! Signature verification, scheme by scheme, over the real server: each sender's signature is computed here the
//! way its provider documents it (`hookflow_tests::signers`), sent to a capture URL, and the stored verdict read
//! back. Per scheme: both secrets of a rotation verify, a body changed by one byte, a wrong secret, an old and a
//! future timestamp and a malformed header are `invalid` with their reason, a missing header is `missing`.

use hookflow_shared::api::signatures::{Signature, SignatureScheme, Verdict};
use hookflow_tests::TestApp;
use hookflow_tests::signers::{self, DiscordKey, Sign, Signed};
use serde_json::{Value, json};

/// Which key signs a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Stored(usize),
    Wrong,
}

/// Signs a body at a time (unix seconds) for a URL with a key.
pub type Signer = Box<dyn Fn(Key, i64, &[u8], &str) -> Signed + Send + Sync>;

/// One scheme as a test drives it.
pub struct Case {
    pub scheme: SignatureScheme,
    /// The endpoint's `verification` besides `scheme` and `secrets`.
    pub extra: Value,
    pub secrets: [String; 2],
    pub sign: Signer,
    /// The header whose absence makes the verdict `missing`.
    pub signature_header: &'static str,
    /// A value of that header the scheme cannot read (`None`: any value is a comparable token).
    pub malformed: Option<&'static str>,
    pub signs_body: bool,
    pub signs_time: bool,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.scheme.as_str())
    }
}

fn hmac_case(
    scheme: SignatureScheme,
    signature_header: &'static str,
    malformed: Option<&'static str>,
    signs_time: bool,
    sign: fn(Sign<'_>) -> Signed,
) -> Case {
    let secrets = [format!("{}-secret-one", scheme.as_str()), format!("{}-secret-two", scheme.as_str())];
    let stored = secrets.clone();
    Case {
        scheme,
        extra: json!({}),
        secrets,
        sign: Box::new(move |key, timestamp, body, url| {
            let secret = match key {
                Key::Stored(i) => stored[i].as_str(),
                Key::Wrong => "not-the-secret",
            };
            sign(Sign { secret, body, timestamp, url })
        }),
        signature_header,
        malformed,
        signs_body: true,
        signs_time,
    }
}

/// Every scheme of the contract.
pub fn cases() -> Vec<Case> {
    use SignatureScheme as S;
    let mut cases = vec![
        hmac_case(S::Stripe, "Stripe-Signature", Some("v1=abc,v1=def"), true, signers::stripe),
        hmac_case(S::Github, "X-Hub-Signature-256", Some("md5=0123"), false, signers::github),
        hmac_case(S::Slack, "X-Slack-Signature", Some("v1:nothing"), true, signers::slack),
        hmac_case(S::Shopify, "X-Shopify-Hmac-Sha256", Some("%%% not base64 %%%"), false, signers::shopify),
        hmac_case(S::Twilio, "X-Twilio-Signature", Some("%%% not base64 %%%"), false, signers::twilio),
        hmac_case(S::Paddle, "Paddle-Signature", Some("h1=abc"), true, signers::paddle),
        hmac_case(S::Linear, "Linear-Signature", Some("not hex at all"), true, signers::linear),
        hmac_case(S::Zoom, "x-zm-signature", Some("v9"), true, signers::zoom),
        hmac_case(S::Square, "x-square-hmacsha256-signature", Some("%%% not base64 %%%"), false, signers::square),
    ];
    let mut gitlab = hmac_case(S::Gitlab, "X-Gitlab-Token", None, false, signers::gitlab);
    gitlab.signs_body = false;
    cases.push(gitlab);
    let mut generic = hmac_case(S::Hmac, "X-Sig", Some("sha256=abc"), true, signers::generic);
    generic.extra = json!({"header": "X-Sig", "algorithm": "sha512", "encoding": "base64", "prefix": "sha512=",
        "timestamp_header": "X-Ts", "separator": ":"});
    cases.push(generic);
    cases.push(standard_webhooks_case("webhook"));
    cases.push(discord_case());
    cases
}

/// Standard Webhooks with `webhook-*` headers (`svix` for Svix's names); each request gets a fresh `webhook-id`.
pub fn standard_webhooks_case(prefix: &'static str) -> Case {
    let secrets = [format!("whsec_{}", signers::b64(b"standard-key-one")), format!("whsec_{}", signers::b64(b"key-2"))];
    let stored = secrets.clone();
    let wrong = format!("whsec_{}", signers::b64(b"another key"));
    Case {
        scheme: SignatureScheme::StandardWebhooks,
        extra: json!({}),
        secrets,
        sign: Box::new(move |key, timestamp, body, url| {
            let secret = match key {
                Key::Stored(i) => stored[i].as_str(),
                Key::Wrong => wrong.as_str(),
            };
            let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
            signers::standard_webhooks(Sign { secret, body, timestamp, url }, &id, prefix)
        }),
        signature_header: if prefix == "svix" { "svix-signature" } else { "webhook-signature" },
        malformed: Some("v1"),
        signs_body: true,
        signs_time: true,
    }
}

fn discord_case() -> Case {
    let keys = [DiscordKey::generate(), DiscordKey::generate(), DiscordKey::generate()];
    let secrets = [keys[0].public_hex(), keys[1].public_hex()];
    Case {
        scheme: SignatureScheme::Discord,
        extra: json!({}),
        secrets,
        sign: Box::new(move |key, timestamp, body, url| {
            let pair = match key {
                Key::Stored(i) => &keys[i],
                Key::Wrong => &keys[2],
            };
            pair.sign(Sign { secret: "", body, timestamp, url })
        }),
        signature_header: "X-Signature-Ed25519",
        malformed: Some("zz-not-hex"),
        signs_body: true,
        signs_time: true,
    }
}

/// An endpoint verifying `case` (in `mode`); answers its id and capture URL.
pub async fn endpoint(app: &TestApp, case: &Case, mode: &str) -> (String, String) {
    let mut verification = json!({"scheme": case.scheme, "secrets": case.secrets, "mode": mode});
    for (name, value) in case.extra.as_object().expect("extra options") {
        verification[name] = value.clone();
    }
    let created = app.create_webhook(json!({"name": case.scheme.as_str(), "verification": verification})).await;
    (created["id"].as_str().expect("id").to_owned(), created["capture_url"].as_str().expect("url").to_owned())
}

/// Sends a signed request to `url`; answers the status and the capture's id (from the receipt, or the newest
/// capture when the endpoint refused it).
pub async fn send(app: &TestApp, url: &str, signed: &Signed) -> (u16, Value) {
    let mut request = app.client.post(url).body(signed.body.clone());
    for (name, value) in &signed.headers {
        request = request.header(name, value);
    }
    let response = request.send().await.expect("send a capture");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The verdict of the newest capture of `id`.
pub async fn newest_signature(app: &TestApp, id: &str) -> Signature {
    let page = app.api().webhooks().requests(id, &[("limit", "1")]).await.expect("list captures");
    page.items.into_iter().next().expect("a capture").signature
}

async fn verdict_of(app: &TestApp, id: &str, url: &str, signed: &Signed) -> Signature {
    let (status, answer) = send(app, url, signed).await;
    assert_eq!(status, 200, "record mode always answers the receipt: {answer}");
    newest_signature(app, id).await
}

fn assert_invalid(signature: &Signature, mentioning: &str, what: &str) {
    assert_eq!(signature.verdict, Verdict::Invalid, "{what}: {signature:?}");
    let reason = signature.reason.as_deref().unwrap_or_default().to_ascii_lowercase();
    assert!(reason.contains(mentioning), "{what}: the reason should mention {mentioning:?}: {signature:?}");
}

#[tokio::test]
async fn every_scheme_tells_a_genuine_sender_from_a_forged_one() {
    let app = TestApp::spawn().await;
    let now = chrono::Utc::now().timestamp();
    let body = br#"{"id":"evt_1","amount":4200}"#;
    let twilio_body = b"CallSid=CA123&From=%2B15550001&To=%2B15550002&Body=hello+there";
    for case in cases() {
        let name = case.scheme.as_str();
        let (id, url) = endpoint(&app, &case, "record").await;
        let body: &[u8] = if case.scheme == SignatureScheme::Twilio { twilio_body } else { body };
        for index in [0, 1] {
            let signature = verdict_of(&app, &id, &url, &(case.sign)(Key::Stored(index), now, body, &url)).await;
            assert_eq!(signature.verdict, Verdict::Valid, "{name} with secret {index}: {signature:?}");
            assert_eq!(signature.secret_index, Some(index as u8), "{name}");
            assert_eq!(signature.scheme, Some(case.scheme), "{name}");
            assert_eq!(signature.reason, None, "{name}");
        }
        let wrong = verdict_of(&app, &id, &url, &(case.sign)(Key::Wrong, now, body, &url)).await;
        assert_eq!(wrong.verdict, Verdict::Invalid, "{name} with a wrong secret: {wrong:?}");
        assert!(wrong.reason.is_some() && wrong.secret_index.is_none(), "{name}: {wrong:?}");

        let mut changed = (case.sign)(Key::Stored(0), now, body, &url);
        let last = changed.body.len() - 2;
        changed.body[last] ^= 0x01;
        let tampered = verdict_of(&app, &id, &url, &changed).await;
        let expected = if case.signs_body { Verdict::Invalid } else { Verdict::Valid };
        assert_eq!(tampered.verdict, expected, "{name} with one byte of the body changed: {tampered:?}");

        if case.signs_time {
            for (skew, what) in [(-3600, "an hour old"), (3600, "an hour ahead")] {
                let signed = (case.sign)(Key::Stored(0), now + skew, body, &url);
                assert_invalid(&verdict_of(&app, &id, &url, &signed).await, "timestamp", &format!("{name} {what}"));
            }
        }
        let mut missing = (case.sign)(Key::Stored(0), now, body, &url);
        missing.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(case.signature_header));
        let signature = verdict_of(&app, &id, &url, &missing).await;
        assert_eq!(signature.verdict, Verdict::Missing, "{name} without {}: {signature:?}", case.signature_header);
        assert!(signature.reason.is_some(), "{name}: a missing signature says which header: {signature:?}");

        if let Some(malformed) = case.malformed {
            let mut signed = (case.sign)(Key::Stored(0), now, body, &url);
            for (n, v) in &mut signed.headers {
                if n.eq_ignore_ascii_case(case.signature_header) {
                    *v = malformed.to_owned();
                }
            }
            let signature = verdict_of(&app, &id, &url, &signed).await;
            assert_eq!(signature.verdict, Verdict::Invalid, "{name} with {malformed:?}: {signature:?}");
        }
    }
}

#[tokio::test]
async fn svix_header_names_verify_as_standard_webhooks() {
    let app = TestApp::spawn().await;
    let case = standard_webhooks_case("svix");
    let (id, url) = endpoint(&app, &case, "record").await;
    let now = chrono::Utc::now().timestamp();
    let signature = verdict_of(&app, &id, &url, &(case.sign)(Key::Stored(1), now, b"{}", &url)).await;
    assert_eq!((signature.verdict, signature.secret_index), (Verdict::Valid, Some(1)), "{signature:?}");
    let forged = verdict_of(&app, &id, &url, &(case.sign)(Key::Wrong, now, b"{}", &url)).await;
    assert_eq!(forged.verdict, Verdict::Invalid, "{forged:?}");
}

#[tokio::test]
async fn twilio_and_square_sign_the_path_and_query_the_sender_called() {
    let app = TestApp::spawn().await;
    let case = cases().into_iter().find(|c| c.scheme == SignatureScheme::Square).expect("square");
    let (id, base) = endpoint(&app, &case, "record").await;
    let now = chrono::Utc::now().timestamp();
    let url = format!("{base}/payments/notify?env=prod&x=1");
    let signed = (case.sign)(Key::Stored(0), now, b"{\"type\":\"payment.created\"}", &url);
    assert_eq!(verdict_of(&app, &id, &url, &signed).await.verdict, Verdict::Valid);
    // Signed for another path: not what was called.
    let signed = (case.sign)(Key::Stored(0), now, b"{}", &format!("{base}/elsewhere"));
    assert_eq!(verdict_of(&app, &id, &url, &signed).await.verdict, Verdict::Invalid);
}
