//! Senders' signatures, computed the way each provider documents them, independently of the server: RustCrypto's
//! HMACs here, aws-lc-rs in the server. A test signs a request as Stripe (or any other sender) would, sends it to a
//! capture URL and reads the verdict.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{KeyInit, Mac};

pub fn hmac_sha256(key: &[u8], content: &[u8]) -> Vec<u8> {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    mac.update(content);
    mac.finalize().into_bytes().to_vec()
}

pub fn hmac_sha512(key: &[u8], content: &[u8]) -> Vec<u8> {
    let mut mac = hmac::Hmac::<sha2::Sha512>::new_from_slice(key).expect("any key length");
    mac.update(content);
    mac.finalize().into_bytes().to_vec()
}

pub fn hmac_sha1(key: &[u8], content: &[u8]) -> Vec<u8> {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(key).expect("any key length");
    mac.update(content);
    mac.finalize().into_bytes().to_vec()
}

pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// What a sender puts on one request: headers, and the body it sends.
#[derive(Debug, Clone)]
pub struct Signed {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The inputs of one signature.
#[derive(Debug, Clone, Copy)]
pub struct Sign<'a> {
    pub secret: &'a str,
    pub body: &'a [u8],
    /// Unix seconds the sender signs.
    pub timestamp: i64,
    /// The URL the sender calls (Twilio, Square).
    pub url: &'a str,
}

fn header(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_owned(), value.into())
}

fn with_body(s: &Sign<'_>, headers: Vec<(String, String)>) -> Signed {
    Signed { headers, body: s.body.to_vec() }
}

/// `Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256 of "<ts>.<body>">`.
pub fn stripe(s: Sign<'_>) -> Signed {
    let content = [format!("{}.", s.timestamp).as_bytes(), s.body].concat();
    let v1 = hex::encode(hmac_sha256(s.secret.as_bytes(), &content));
    with_body(&s, vec![header("Stripe-Signature", format!("t={},v1={v1}", s.timestamp))])
}

/// `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
pub fn github(s: Sign<'_>) -> Signed {
    let sig = hex::encode(hmac_sha256(s.secret.as_bytes(), s.body));
    with_body(&s, vec![header("X-Hub-Signature-256", format!("sha256={sig}")), header("X-GitHub-Event", "push")])
}

/// `X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">` with `X-Slack-Request-Timestamp`.
pub fn slack(s: Sign<'_>) -> Signed {
    let content = [format!("v0:{}:", s.timestamp).as_bytes(), s.body].concat();
    let sig = hex::encode(hmac_sha256(s.secret.as_bytes(), &content));
    with_body(
        &s,
        vec![
            header("X-Slack-Request-Timestamp", s.timestamp.to_string()),
            header("X-Slack-Signature", format!("v0={sig}")),
        ],
    )
}

/// `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>`.
pub fn shopify(s: Sign<'_>) -> Signed {
    with_body(&s, vec![header("X-Shopify-Hmac-Sha256", b64(&hmac_sha256(s.secret.as_bytes(), s.body)))])
}

/// Standard Webhooks: the secret is `whsec_<base64 key>`; `webhook-signature: v1,<base64 HMAC-SHA256 of
/// "<id>.<ts>.<body>">`. `prefix` is `webhook` or `svix`.
pub fn standard_webhooks(s: Sign<'_>, message_id: &str, prefix: &str) -> Signed {
    let key = STANDARD.decode(s.secret.trim_start_matches("whsec_")).expect("a whsec_ secret");
    let content = [format!("{message_id}.{}.", s.timestamp).as_bytes(), s.body].concat();
    let sig = b64(&hmac_sha256(&key, &content));
    with_body(
        &s,
        vec![
            header(&format!("{prefix}-id"), message_id),
            header(&format!("{prefix}-timestamp"), s.timestamp.to_string()),
            header(&format!("{prefix}-signature"), format!("v1,{sig}")),
        ],
    )
}

/// `X-Twilio-Signature: <base64 HMAC-SHA1 of the URL then each form parameter's name and value, sorted by name>`.
pub fn twilio(s: Sign<'_>) -> Signed {
    let mut params: Vec<(String, String)> =
        form_urlencoded::parse(s.body).map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    params.sort();
    let mut content = s.url.to_owned();
    for (name, value) in params {
        content.push_str(&name);
        content.push_str(&value);
    }
    let sig = b64(&hmac_sha1(s.secret.as_bytes(), content.as_bytes()));
    with_body(&s, vec![header("Content-Type", "application/x-www-form-urlencoded"), header("X-Twilio-Signature", sig)])
}

/// `Paddle-Signature: ts=<ts>;h1=<hex HMAC-SHA256 of "<ts>:<body>">`.
pub fn paddle(s: Sign<'_>) -> Signed {
    let content = [format!("{}:", s.timestamp).as_bytes(), s.body].concat();
    let h1 = hex::encode(hmac_sha256(s.secret.as_bytes(), &content));
    with_body(&s, vec![header("Paddle-Signature", format!("ts={};h1={h1}", s.timestamp))])
}

/// `X-Gitlab-Token: <the secret>`.
pub fn gitlab(s: Sign<'_>) -> Signed {
    with_body(&s, vec![header("X-Gitlab-Token", s.secret)])
}

/// `Linear-Signature: <hex HMAC-SHA256 of the body>`; the body's `webhookTimestamp` (ms) is the signed time.
pub fn linear(s: Sign<'_>) -> Signed {
    let body = format!(r#"{{"action":"create","webhookTimestamp":{}}}"#, s.timestamp * 1000).into_bytes();
    let sig = hex::encode(hmac_sha256(s.secret.as_bytes(), &body));
    Signed { headers: vec![header("Linear-Signature", sig), header("Content-Type", "application/json")], body }
}

/// `x-zm-signature: v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">` with `x-zm-request-timestamp`.
pub fn zoom(s: Sign<'_>) -> Signed {
    let content = [format!("v0:{}:", s.timestamp).as_bytes(), s.body].concat();
    let sig = hex::encode(hmac_sha256(s.secret.as_bytes(), &content));
    with_body(
        &s,
        vec![header("x-zm-request-timestamp", s.timestamp.to_string()), header("x-zm-signature", format!("v0={sig}"))],
    )
}

/// `x-square-hmacsha256-signature: <base64 HMAC-SHA256 of the notification URL then the body>`.
pub fn square(s: Sign<'_>) -> Signed {
    let content = [s.url.as_bytes(), s.body].concat();
    with_body(&s, vec![header("x-square-hmacsha256-signature", b64(&hmac_sha256(s.secret.as_bytes(), &content)))])
}

/// An Ed25519 key pair for Discord: the hex public key is the endpoint's secret.
pub struct DiscordKey(aws_lc_rs::signature::Ed25519KeyPair);

impl std::fmt::Debug for DiscordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DiscordKey")
    }
}

impl DiscordKey {
    pub fn generate() -> Self {
        Self(aws_lc_rs::signature::Ed25519KeyPair::generate().expect("a key pair"))
    }

    pub fn public_hex(&self) -> String {
        use aws_lc_rs::signature::KeyPair as _;
        hex::encode(self.0.public_key().as_ref())
    }

    /// `X-Signature-Ed25519: <hex signature of "<ts><body>">` with `X-Signature-Timestamp`.
    pub fn sign(&self, s: Sign<'_>) -> Signed {
        let content = [s.timestamp.to_string().as_bytes(), s.body].concat();
        let sig = hex::encode(self.0.sign(&content).as_ref());
        with_body(
            &s,
            vec![header("X-Signature-Ed25519", sig), header("X-Signature-Timestamp", s.timestamp.to_string())],
        )
    }
}

/// The generic scheme as the tests configure it: `X-Sig: sha512=<base64 HMAC-SHA512 of "<ts>:<body>">` with the
/// timestamp in `X-Ts`.
pub fn generic(s: Sign<'_>) -> Signed {
    let content = [format!("{}:", s.timestamp).as_bytes(), s.body].concat();
    let sig = b64(&hmac_sha512(s.secret.as_bytes(), &content));
    with_body(&s, vec![header("X-Ts", s.timestamp.to_string()), header("X-Sig", format!("sha512={sig}"))])
}
