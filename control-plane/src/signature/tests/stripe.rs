//! Stripe and Paddle.

use super::{BODY, Sent, Suite, T, assert_invalid, assert_valid, settings, verifier};
use hookflow_shared::api::signatures::SignatureScheme;

// hmac.new(b"whsec_stripe_one", T + b"." + BODY, hashlib.sha256).hexdigest()
const STRIPE_ONE: &str = "4c5541670be872957172926ef0988a4391660223da4b537e7890eecdd4ffe641";
// hmac.new(b"whsec_stripe_two", T + b"." + BODY, hashlib.sha256).hexdigest()
const STRIPE_TWO: &str = "bcadc55bfcedf294dc8d96b9bf34baba87736908c2de2e77a7548f531206ce9f";
// hashlib.sha256(T + b"." + BODY).hexdigest()
const STRIPE_CONTENT: &str = "b78138a6a5b258f7f7d3253de61abc6dc8c107aa843f6139b199ccadd52fb998";

// hmac.new(b"pdl_ntfset_one", T + b":" + BODY, hashlib.sha256).hexdigest()
const PADDLE_ONE: &str = "7ba71bb89b089df3ec285678b5dbab96ed9bdde7867d42ce06a0cb180b1d53ad";
// hmac.new(b"pdl_ntfset_two", T + b":" + BODY, hashlib.sha256).hexdigest()
const PADDLE_TWO: &str = "e9cfd2c1e21ceb8bdb2c68bf88b4d201f2adf4c94895cfaaee2aaa745c5fa9e8";
// hashlib.sha256(T + b":" + BODY).hexdigest()
const PADDLE_CONTENT: &str = "22374a0ffb11e0e40f76d4064f17a40010d12e65b9a6f360080e6a4dc8e51e3d";

fn stripe_header(signatures: &[&str]) -> String {
    let mut header = format!("t={T}");
    for s in signatures {
        header.push_str(&format!(",v1={s}"));
    }
    header
}

fn stripe_sent(signatures: &[&str]) -> Sent {
    Sent::new(&[("Stripe-Signature", &stripe_header(signatures))], BODY)
}

#[test]
fn stripe_does_what_every_scheme_does() {
    Suite {
        settings: settings(SignatureScheme::Stripe, &[]),
        secrets: ["whsec_stripe_one".into(), "whsec_stripe_two".into()],
        wrong: "whsec_stripe_three".into(),
        signed: [stripe_sent(&[STRIPE_ONE]), stripe_sent(&[STRIPE_TWO])],
        signature_header: "Stripe-Signature",
        malformed: ("Stripe-Signature", "v1=ab", "malformed Stripe-Signature header: no t="),
        no_match: "no v1 signature matched",
        timed: true,
        expected: Some((STRIPE_CONTENT, "4c554167")),
    }
    .run();
}

#[test]
fn stripe_reads_every_v1_ignores_v0_and_says_what_is_malformed() {
    let one = verifier(&settings(SignatureScheme::Stripe, &["whsec_stripe_one"]));
    // A rotation on Stripe's side: two v1 entries, one of them ours; v0 entries and unknown keys are ignored.
    let header = format!("t={T},v0={STRIPE_TWO},v1={STRIPE_TWO},v1={},scheme=x", STRIPE_ONE.to_uppercase());
    assert_valid(&Sent::new(&[("stripe-signature", &header)], BODY).check(&one), 0);
    let v0_only = format!("t={T},v0={STRIPE_ONE}");
    let cases = [
        (v0_only.as_str(), "malformed Stripe-Signature header: no v1= signature"),
        ("t=soon,v1=00", "malformed Stripe-Signature header: t= is not a unix time"),
        ("t=1700000000,v1=zz", "malformed Stripe-Signature header: not 64 hex characters"),
        ("t=1700000000,v1=zz,v1=00", "malformed Stripe-Signature header: no v1 signature is 64 hex characters"),
        ("garbage", "malformed Stripe-Signature header: no t="),
    ];
    for (value, reason) in cases {
        let check = Sent::new(&[("Stripe-Signature", value)], BODY).check(&one);
        assert_invalid(&check, reason);
        assert_eq!(check.expected, None);
    }
}

#[test]
fn a_header_of_ten_thousand_entries_is_read_once_and_only_sixteen_are_tried() {
    let one = verifier(&settings(SignatureScheme::Stripe, &["whsec_stripe_one"]));
    let wrong = STRIPE_TWO;
    let mut many = vec![wrong; 9_999];
    many.push(STRIPE_ONE);
    let started = std::time::Instant::now();
    let check = stripe_sent(&many).check(&one);
    assert_invalid(&check, "no v1 signature matched (only the first 16 of 10000 signatures were tried)");
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
    // Within the first sixteen, the matching one counts.
    let mut sixteen = vec![wrong; 15];
    sixteen.push(STRIPE_ONE);
    assert_valid(&stripe_sent(&sixteen).check(&one), 0);
}

#[test]
fn a_repeated_header_counts_once_the_first() {
    let one = verifier(&settings(SignatureScheme::Stripe, &["whsec_stripe_one"]));
    let mut sent = stripe_sent(&[STRIPE_ONE]);
    sent.headers.push(("STRIPE-SIGNATURE".into(), stripe_header(&[STRIPE_TWO])));
    assert_valid(&sent.check(&one), 0);
    sent.headers.reverse();
    assert_invalid(&sent.check(&one), "no v1 signature matched");
}

fn paddle_sent(signatures: &[&str]) -> Sent {
    let mut header = format!("ts={T}");
    for s in signatures {
        header.push_str(&format!(";h1={s}"));
    }
    Sent::new(&[("Paddle-Signature", &header)], BODY)
}

#[test]
fn paddle_does_what_every_scheme_does() {
    Suite {
        settings: settings(SignatureScheme::Paddle, &[]),
        secrets: ["pdl_ntfset_one".into(), "pdl_ntfset_two".into()],
        wrong: "pdl_ntfset_three".into(),
        signed: [paddle_sent(&[PADDLE_ONE]), paddle_sent(&[PADDLE_TWO])],
        signature_header: "Paddle-Signature",
        malformed: ("Paddle-Signature", "ts=1700000000", "malformed Paddle-Signature header: no h1= signature"),
        no_match: "no h1 signature matched",
        timed: true,
        expected: Some((PADDLE_CONTENT, "7ba71bb8")),
    }
    .run();
}

#[test]
fn paddle_accepts_any_of_several_h1_and_wants_ts() {
    let one = verifier(&settings(SignatureScheme::Paddle, &["pdl_ntfset_one"]));
    assert_valid(&paddle_sent(&[PADDLE_TWO, PADDLE_ONE]).check(&one), 0);
    let check = Sent::new(&[("Paddle-Signature", &format!("h1={PADDLE_ONE}"))], BODY).check(&one);
    assert_invalid(&check, "malformed Paddle-Signature header: no ts=");
}
