//! Slack and Zoom.

use super::{BODY, Sent, Suite, assert_invalid, assert_valid, settings, verifier};
use hookflow_shared::api::signatures::SignatureScheme;

// hmac.new(b"slack_signing_one", b"v0:" + T + b":" + BODY, hashlib.sha256).hexdigest()
const SLACK_ONE: &str = "fb91a85487f725b9e3ce7701f14f1a84f531d139bfd623c379adc8de4fb2422d";
// hmac.new(b"slack_signing_two", b"v0:" + T + b":" + BODY, hashlib.sha256).hexdigest()
const SLACK_TWO: &str = "619c0d135464cd649e71549cc64f3644e9ea6e4d97e3b9df8a2f7dcbdb0b6ac4";
// hashlib.sha256(b"v0:" + T + b":" + BODY).hexdigest()
const V0_CONTENT: &str = "704c07b1bd09421a9ec979ddd6b8de0ad0a2b3402b51915b8f1284718ba1cf39";

// hmac.new(b"zoom_secret_one", b"v0:" + T + b":" + BODY, hashlib.sha256).hexdigest()
const ZOOM_ONE: &str = "7bedd09c00551c991421e1d4b1649d9a70a33496908f4aa32d33a495acafe7f4";
// hmac.new(b"zoom_secret_two", b"v0:" + T + b":" + BODY, hashlib.sha256).hexdigest()
const ZOOM_TWO: &str = "d580fe03f603fd6fccba7c242a5abbb697e3224a199e69b33bd8a0d2ee254bda";

fn slack_sent(signature: &str) -> Sent {
    let signature = format!("v0={signature}");
    Sent::new(&[("X-Slack-Request-Timestamp", "1700000000"), ("X-Slack-Signature", &signature)], BODY)
}

#[test]
fn slack_does_what_every_scheme_does() {
    Suite {
        settings: settings(SignatureScheme::Slack, &[]),
        secrets: ["slack_signing_one".into(), "slack_signing_two".into()],
        wrong: "slack_signing_three".into(),
        signed: [slack_sent(SLACK_ONE), slack_sent(SLACK_TWO)],
        signature_header: "X-Slack-Signature",
        malformed: ("X-Slack-Signature", SLACK_ONE, "malformed X-Slack-Signature header: no v0= prefix"),
        no_match: "signature did not match",
        timed: true,
        expected: Some((V0_CONTENT, "fb91a854")),
    }
    .run();
}

/// Slack's documentation ("Verifying requests from Slack") walks through this request.
#[test]
fn slack_published_example() {
    let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V\
        &channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=\
        &response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN\
        &trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    let signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    let sent =
        Sent::new(&[("X-Slack-Request-Timestamp", "1531420618"), ("X-Slack-Signature", signature)], body.as_bytes())
            .received(1_531_420_618 + 5);
    let slack = verifier(&settings(SignatureScheme::Slack, &["8f742231b10e8888abcd99yyyzzz85a5"]));
    assert_valid(&sent.check(&slack), 0);
}

#[test]
fn slack_needs_its_timestamp_header() {
    let slack = verifier(&settings(SignatureScheme::Slack, &["slack_signing_one"]));
    let sent = slack_sent(SLACK_ONE);
    assert_invalid(
        &sent.without("X-Slack-Request-Timestamp").check(&slack),
        "missing header X-Slack-Request-Timestamp",
    );
    let check = sent.with("X-Slack-Request-Timestamp", "yesterday").check(&slack);
    assert_invalid(&check, "malformed X-Slack-Request-Timestamp header: not a unix time");
    let check = sent.with("x-slack-signature", "v0=123").check(&slack);
    assert_invalid(&check, "malformed X-Slack-Signature header: not 64 hex characters");
}

fn zoom_sent(signature: &str) -> Sent {
    let signature = format!("v0={signature}");
    Sent::new(&[("x-zm-request-timestamp", "1700000000"), ("x-zm-signature", &signature)], BODY)
}

#[test]
fn zoom_does_what_every_scheme_does() {
    Suite {
        settings: settings(SignatureScheme::Zoom, &[]),
        secrets: ["zoom_secret_one".into(), "zoom_secret_two".into()],
        wrong: "zoom_secret_three".into(),
        signed: [zoom_sent(ZOOM_ONE), zoom_sent(ZOOM_TWO)],
        signature_header: "x-zm-signature",
        malformed: ("x-zm-signature", "v1=00", "malformed x-zm-signature header: no v0= prefix"),
        no_match: "signature did not match",
        timed: true,
        expected: Some((V0_CONTENT, "7bedd09c")),
    }
    .run();
}

#[test]
fn zoom_needs_its_timestamp_header() {
    let zoom = verifier(&settings(SignatureScheme::Zoom, &["zoom_secret_one"]));
    let check = zoom_sent(ZOOM_ONE).without("x-zm-request-timestamp").check(&zoom);
    assert_invalid(&check, "missing header x-zm-request-timestamp");
}
