//! The generic `hmac` scheme.

use super::{BODY, Sent, Suite, T, assert_invalid, assert_valid, settings, verifier};
use hookflow_shared::api::signatures::{HmacAlgorithm, SignatureEncoding, SignatureScheme, VerificationSettings};

// base64.b64encode(hmac.new(b"generic_one", T + b":" + BODY, hashlib.sha1).digest())
const SHA1_ONE: &str = "JJlof98IWp+vl1Ojmu0j1mYlCRI=";
// base64.b64encode(hmac.new(b"generic_two", T + b":" + BODY, hashlib.sha1).digest())
const SHA1_TWO: &str = "c4FX+QHg/WVDYyDUVxaskMo0qbM=";
// hashlib.sha256(T + b":" + BODY).hexdigest()
const SHA1_CONTENT: &str = "22374a0ffb11e0e40f76d4064f17a40010d12e65b9a6f360080e6a4dc8e51e3d";
// hmac.new(b"generic_one", BODY, hashlib.sha512).hexdigest()
const SHA512_ONE: &str = "b2d52c70c3e99c376396e9852846c82d324fc946f69b60489b3d45b4f41000e8\
    839923e91b531749aeab13a5668da3a12827fdaf6efbc0065c12b8703d3a38be";
// hmac.new(b"generic_one", b"1700000000000." + BODY, hashlib.sha256).hexdigest()
const MILLIS_ONE: &str = "f175de82c68bcac8525921ffe401982d28f1e6102bd162b37af97c42ca9a9402";
// hmac.new(b"generic_one", b"2023-11-14T22:13:20Z." + BODY, hashlib.sha256).hexdigest()
const RFC3339_ONE: &str = "55f94b122e3d95fa4a58c1991e6ad8ab44f49feec158c92b549e627d12cdd669";
// hmac.new(b"generic_one", b"batch-7." + BODY, hashlib.sha256).hexdigest()
const TEXT_ONE: &str = "73f2a70c3937081cf5a72412eba95a9345e9ab5a4435b15a3e7ecf74d16348a6";

fn sha1_timed() -> VerificationSettings {
    VerificationSettings {
        header: Some("X-Signature".into()),
        algorithm: Some(HmacAlgorithm::Sha1),
        encoding: Some(SignatureEncoding::Base64),
        prefix: Some("sha1=".into()),
        timestamp_header: Some("X-Timestamp".into()),
        separator: Some(":".into()),
        ..settings(SignatureScheme::Hmac, &["generic_one"])
    }
}

fn sha1_sent(signature: &str) -> Sent {
    Sent::new(&[("X-Timestamp", "1700000000"), ("X-Signature", &format!("sha1={signature}"))], BODY)
}

#[test]
fn hmac_does_what_every_scheme_does() {
    Suite {
        settings: sha1_timed(),
        secrets: ["generic_one".into(), "generic_two".into()],
        wrong: "generic_three".into(),
        signed: [sha1_sent(SHA1_ONE), sha1_sent(SHA1_TWO)],
        signature_header: "X-Signature",
        malformed: ("X-Signature", SHA1_ONE, "malformed X-Signature header: no sha1= prefix"),
        no_match: "signature did not match",
        timed: true,
        expected: Some((SHA1_CONTENT, "JJlof98I")),
    }
    .run();
}

#[test]
fn hmac_reads_either_base64_and_needs_its_timestamp_header() {
    let generic = verifier(&sha1_timed());
    assert_valid(&sha1_sent("JJlof98IWp-vl1Ojmu0j1mYlCRI").check(&generic), 0);
    assert_valid(&sha1_sent(SHA1_ONE).with("x-signature", &format!("SHA1={SHA1_ONE}")).check(&generic), 0);
    assert_invalid(&sha1_sent(SHA1_ONE).without("X-Timestamp").check(&generic), "missing header X-Timestamp");
}

#[test]
fn hmac_defaults_to_sha256_hex_over_the_body_or_with_a_dot() {
    let sha512 = VerificationSettings {
        header: Some("X-Body-Signature".into()),
        algorithm: Some(HmacAlgorithm::Sha512),
        ..settings(SignatureScheme::Hmac, &["generic_one"])
    };
    let sent = Sent::new(&[("X-Body-Signature", SHA512_ONE)], BODY);
    assert_valid(&sent.received(T + 86_400).check(&verifier(&sha512)), 0);
    let upper = sent.with("X-Body-Signature", &SHA512_ONE.to_uppercase());
    assert_valid(&upper.check(&verifier(&sha512)), 0);
    let check = sent.with("X-Body-Signature", MILLIS_ONE).check(&verifier(&sha512));
    assert_invalid(&check, "malformed X-Body-Signature header: not 128 hex characters");

    let timed = VerificationSettings {
        header: Some("X-Sig".into()),
        timestamp_header: Some("X-Sent-At".into()),
        ..settings(SignatureScheme::Hmac, &["generic_one"])
    };
    let generic = verifier(&timed);
    let sent = |time: &str, signature: &str| Sent::new(&[("X-Sent-At", time), ("X-Sig", signature)], BODY);
    // Milliseconds (above 10^12) and RFC 3339 are timed.
    for (time, signature) in [("1700000000000", MILLIS_ONE), ("2023-11-14T22:13:20Z", RFC3339_ONE)] {
        assert_valid(&sent(time, signature).check(&generic), 0);
        let check = sent(time, signature).received(T + 301).check(&generic);
        assert_invalid(&check, "timestamp outside the tolerance of 300 s (301 s old)");
    }
    // Other text is signed, not timed.
    assert_valid(&sent("batch-7", TEXT_ONE).received(T + 86_400).check(&generic), 0);
}
