//! Each preset against requests shaped as its provider documents them; HMACs checked against values computed
//! apart (Python's `hmac`) from the documents' algorithms, and Slack's against the example its document gives.

use super::*;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
    }
    map
}

fn parts<'a>(method: &'a Method, query: &'a str, headers: &'a HeaderMap, body: &'a [u8], now_s: i64) -> Parts<'a> {
    Parts { method, query, headers, body, now_s }
}

fn answer(recognised: Option<Recognised>) -> Answer {
    match recognised {
        Some(Recognised::Answer(answer)) => answer,
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn text(answer: &Answer) -> &str {
    std::str::from_utf8(&answer.body).unwrap()
}

#[test]
fn slack_echoes_the_challenge_and_checks_the_documented_signature() {
    // The signing example of Slack's "Verifying requests from Slack".
    let tag = signed_tag(
        "8f742231b10e8888abcd99yyyzzz85a5",
        "1531420618",
        "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&\
         channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&\
         response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&\
         trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
    );
    assert_eq!(tag, "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503");

    let body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let none = HeaderMap::new();
    let got = answer(recognise(HandshakePreset::Slack, None, &parts(&Method::POST, "", &none, body, 0)));
    assert_eq!(got.content_type, Some("application/json"));
    assert_eq!(text(&got), r#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#);

    let now = 1_531_420_618;
    let good = signed_tag("slack-secret", "1531420618", std::str::from_utf8(body).unwrap());
    let signed = headers(&[("x-slack-request-timestamp", "1531420618"), ("x-slack-signature", &good)]);
    let secret = Some("slack-secret");
    assert!(matches!(
        recognise(HandshakePreset::Slack, secret, &parts(&Method::POST, "", &signed, body, now)),
        Some(Recognised::Answer(_))
    ));
    let stale = parts(&Method::POST, "", &signed, body, now + 301);
    assert_eq!(recognise(HandshakePreset::Slack, secret, &stale), Some(Recognised::Refused));
    assert_eq!(
        recognise(HandshakePreset::Slack, Some("other"), &parts(&Method::POST, "", &signed, body, now)),
        Some(Recognised::Refused)
    );
    // Not a handshake: an event callback, a GET.
    let event = br#"{"type":"event_callback","challenge":"x"}"#;
    assert_eq!(recognise(HandshakePreset::Slack, None, &parts(&Method::POST, "", &none, event, 0)), None);
    assert_eq!(recognise(HandshakePreset::Slack, None, &parts(&Method::GET, "", &none, body, 0)), None);
}

fn signed_tag(secret: &str, timestamp: &str, body: &str) -> String {
    let tag = signed_hmac(secret, &[b"v0:", timestamp.as_bytes(), b":", body.as_bytes()]);
    format!("v0={}", hex::encode(tag))
}

fn signed_hmac(secret: &str, parts: &[&[u8]]) -> Vec<u8> {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
    let mut context = aws_lc_rs::hmac::Context::with_key(&key);
    parts.iter().for_each(|p| context.update(p));
    context.sign().as_ref().to_vec()
}

#[test]
fn meta_answers_the_challenge_only_to_its_verify_token() {
    let none = HeaderMap::new();
    let query = "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock";
    let got =
        answer(recognise(HandshakePreset::Meta, Some("meatyhamhock"), &parts(&Method::GET, query, &none, b"", 0)));
    assert_eq!((got.content_type, text(&got)), (Some("text/plain; charset=utf-8"), "1158201444"));
    for secret in [Some("other"), Some("meatyhamhoc"), None] {
        let refused = recognise(HandshakePreset::Meta, secret, &parts(&Method::GET, query, &none, b"", 0));
        assert_eq!(refused, Some(Recognised::Refused), "{secret:?}");
    }
    assert_eq!(
        recognise(HandshakePreset::Meta, Some("t"), &parts(&Method::GET, "hub.challenge=1", &none, b"", 0)),
        None
    );
    assert_eq!(recognise(HandshakePreset::Meta, Some("t"), &parts(&Method::POST, query, &none, b"", 0)), None);
}

#[test]
fn msgraph_and_dropbox_echo_their_tokens_as_text() {
    let none = HeaderMap::new();
    let query =
        "validationToken=Validation%3a+Testing+client+application+reachability+for+subscription+Request-Id%3a+b6a2e1a4";
    let got = answer(recognise(HandshakePreset::Msgraph, None, &parts(&Method::POST, query, &none, b"", 0)));
    assert_eq!(text(&got), "Validation: Testing client application reachability for subscription Request-Id: b6a2e1a4");
    assert_eq!(got.content_type, Some("text/plain; charset=utf-8"));
    assert_eq!(recognise(HandshakePreset::Msgraph, None, &parts(&Method::POST, "", &none, b"{}", 0)), None);

    let got =
        answer(recognise(HandshakePreset::Dropbox, None, &parts(&Method::GET, "challenge=abc123", &none, b"", 0)));
    assert_eq!((text(&got), got.headers.clone()), ("abc123", vec![("x-content-type-options", "nosniff".to_owned())]));
    let long = format!("challenge={}", "a".repeat(MAX_CHALLENGE + 1));
    assert_eq!(recognise(HandshakePreset::Dropbox, None, &parts(&Method::GET, &long, &none, b"", 0)), None);
}

#[test]
fn zoom_and_twitter_answer_hmacs_of_their_tokens() {
    let none = HeaderMap::new();
    let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
    let zoom = parts(&Method::POST, "", &none, body, 0);
    let got = answer(recognise(HandshakePreset::Zoom, Some("zoom-secret-token"), &zoom));
    assert_eq!(
        text(&got),
        r#"{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"d9e0d764a78494688ba3f2d5c0ed4ca311394b4834d959759213424d2df961e3"}"#
    );
    assert_eq!(recognise(HandshakePreset::Zoom, None, &zoom), Some(Recognised::Refused));

    let crc = parts(&Method::GET, "crc_token=crc-token-123&nonce=1", &none, b"", 0);
    let got = answer(recognise(HandshakePreset::Twitter, Some("x-consumer-secret"), &crc));
    assert_eq!(got.content_type, Some("application/json"));
    assert_eq!(text(&got), r#"{"response_token":"sha256=YUsT0aLbF0VtFGcLCND1EU/aQP0sjPL19cPulVY7Wes="}"#);
    assert_eq!(recognise(HandshakePreset::Twitter, None, &crc), Some(Recognised::Refused));
}

const TWITCH_BODY: &[u8] = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"1","cost":1,"condition":{"broadcaster_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}"#;

#[test]
fn twitch_echoes_a_challenge_whose_signature_verifies() {
    let signature = "sha256=1b04fd61e0b8aa8f45c9afcc110a5254d217852a9eb12954c8629b491b3d83a9";
    let sent = |signature: &str| {
        headers(&[
            ("twitch-eventsub-message-id", "e76c6bd4-55c9-4987-8304-da1588d8988b"),
            ("twitch-eventsub-message-timestamp", "2019-11-16T10:11:12.634234626Z"),
            ("twitch-eventsub-message-type", "webhook_callback_verification"),
            ("twitch-eventsub-message-signature", signature),
        ])
    };
    let now = chrono::DateTime::parse_from_rfc3339("2019-11-16T10:12:00Z").unwrap().timestamp();
    let good = sent(signature);
    let got = answer(recognise(
        HandshakePreset::Twitch,
        Some("s3cRe7-twitch"),
        &parts(&Method::POST, "", &good, TWITCH_BODY, now),
    ));
    assert_eq!((got.content_type, text(&got)), (Some("text/plain; charset=utf-8"), "pogchamp-kappa-360noscope-vohiyo"));
    let bad = sent(&signature.replace("1b04", "1b05"));
    for (secret, headers, now) in [
        (Some("s3cRe7-twitch"), &bad, now),
        (Some("other"), &good, now),
        (None, &good, now),
        (Some("s3cRe7-twitch"), &good, now + 11 * 60),
    ] {
        let refused = recognise(HandshakePreset::Twitch, secret, &parts(&Method::POST, "", headers, TWITCH_BODY, now));
        assert_eq!(refused, Some(Recognised::Refused));
    }
    let notification = headers(&[("twitch-eventsub-message-type", "notification")]);
    assert_eq!(
        recognise(HandshakePreset::Twitch, Some("s"), &parts(&Method::POST, "", &notification, TWITCH_BODY, now)),
        None
    );
}

#[test]
fn smartsheet_answers_in_header_and_body_and_trello_answers_head() {
    let challenge = headers(&[("smartsheet-hook-challenge", "d78dd1d3-01ce-4481-81de-92b4f3aa5ab1")]);
    let body = br#"{"challenge":"d78dd1d3-01ce-4481-81de-92b4f3aa5ab1","webhookId":2674017481058180}"#;
    let got = answer(recognise(HandshakePreset::Smartsheet, None, &parts(&Method::POST, "", &challenge, body, 0)));
    assert_eq!(got.content_type, Some("application/json"));
    assert_eq!(text(&got), r#"{"smartsheetHookResponse":"d78dd1d3-01ce-4481-81de-92b4f3aa5ab1"}"#);
    assert_eq!(got.headers, vec![("smartsheet-hook-response", "d78dd1d3-01ce-4481-81de-92b4f3aa5ab1".to_owned())]);
    let none = HeaderMap::new();
    assert_eq!(recognise(HandshakePreset::Smartsheet, None, &parts(&Method::POST, "", &none, body, 0)), None);

    let got = answer(recognise(HandshakePreset::Trello, None, &parts(&Method::HEAD, "", &none, b"", 0)));
    assert_eq!((got.content_type, got.body.len()), (None, 0));
    assert_eq!(recognise(HandshakePreset::Trello, None, &parts(&Method::POST, "", &none, b"{}", 0)), None);
}
