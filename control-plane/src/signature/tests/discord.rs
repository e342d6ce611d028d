//! Discord: keys made in the test, messages signed with them.

use super::{BODY, Sent, Suite, assert_invalid, assert_valid, settings, verifier};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use hookflow_shared::api::signatures::SignatureScheme;

struct Application {
    pair: Ed25519KeyPair,
}

impl Application {
    fn new() -> Self {
        Application { pair: Ed25519KeyPair::generate().expect("a key pair") }
    }

    fn public_key(&self) -> String {
        hex::encode(self.pair.public_key().as_ref())
    }

    fn sent(&self, timestamp: &str, body: &[u8]) -> Sent {
        let signature = hex::encode(self.pair.sign(&[timestamp.as_bytes(), body].concat()).as_ref());
        Sent::new(&[("X-Signature-Ed25519", &signature), ("X-Signature-Timestamp", timestamp)], body)
    }
}

#[test]
fn discord_does_what_every_scheme_does() {
    let (one, two, three) = (Application::new(), Application::new(), Application::new());
    Suite {
        settings: settings(SignatureScheme::Discord, &[]),
        secrets: [one.public_key(), two.public_key()],
        wrong: three.public_key(),
        signed: [one.sent("1700000000", BODY), two.sent("1700000000", BODY)],
        signature_header: "X-Signature-Ed25519",
        malformed: ("X-Signature-Ed25519", "abcd", "malformed X-Signature-Ed25519 header: not 128 hex characters"),
        no_match: "signature did not verify",
        timed: true,
        // A public key cannot sign: no hint.
        expected: None,
    }
    .run();
}

#[test]
fn discord_signs_the_timestamp_too() {
    let app = Application::new();
    let discord = verifier(&settings(SignatureScheme::Discord, &[&app.public_key().to_uppercase()]));
    let sent = app.sent("1700000000", BODY);
    assert_valid(&sent.check(&discord), 0);
    assert_invalid(&sent.with("X-Signature-Timestamp", "1700000001").check(&discord), "signature did not verify");
    assert_invalid(&sent.without("X-Signature-Timestamp").check(&discord), "missing header X-Signature-Timestamp");
    let check = sent.with("X-Signature-Timestamp", "-1").check(&discord);
    assert_invalid(&check, "malformed X-Signature-Timestamp header: not a unix time");
}
