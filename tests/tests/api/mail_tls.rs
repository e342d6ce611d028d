//! Mail over TLS (issue #50) against the real aiosmtpd server with a certificate for 127.0.0.1 from a CA made in
//! the test: `smtp://` uses STARTTLS when offered (the server refuses mail before it), `?tls=required` insists on
//! it, `smtps://` speaks TLS from the first byte; each delivers once the CA is trusted (`--smtp-ca-file`'s
//! setting), and a server whose certificate is not trusted gets no mail at all (no fallback to plain text): the
//! email channel's `last_delivery` says the send failed.

use hookflow_control_plane::mail::SmtpSettings;
use hookflow_tests::TestApp;
use hookflow_tests::smtp::{SmtpServer, SmtpTlsMode};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const FROM: &str = "hookflow <hookflow@example.com>";

/// A server mailing through `settings`, an email channel to `to`, and one test send: answers the channel's id.
async fn test_send(settings: SmtpSettings, to: &str) -> (TestApp, String) {
    let app = TestApp::spawn_with(move |s| s.smtp = Some(settings)).await;
    let made = app
        .admin(Method::POST, "/notification-channels", Some(json!({"name": "mail", "kind": "email", "address": to})))
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let id = made.body["id"].as_str().expect("id").to_owned();
    let sent = app.admin(Method::POST, &format!("/notification-channels/{id}/test"), None).await;
    assert_eq!(sent.status, 202, "{}", sent.text);
    (app, id)
}

/// The channel's `last_delivery` once there is one (at most `within`).
async fn last_delivery(app: &TestApp, id: &str, within: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let read = app.admin(Method::GET, &format!("/notification-channels/{id}"), None).await;
        if !read.body["last_delivery"].is_null() {
            return read.body["last_delivery"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no last_delivery: {}", read.text);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn mail_tls_starttls_and_smtps_deliver_to_a_trusted_certificate_and_nothing_reaches_an_untrusted_one() {
    let (starttls, ca) = SmtpServer::start_tls(SmtpTlsMode::StartTls).await;
    let (smtps, smtps_ca) = SmtpServer::start_tls(SmtpTlsMode::Smtps).await;
    let trusted = |url: String, ca: &[u8]| {
        SmtpSettings::parse(&url, Some(FROM), None).expect("settings").with_ca_pem(ca.to_vec()).expect("a PEM")
    };
    let plain_url = format!("smtp://{}", starttls.address);
    assert!(
        SmtpSettings::parse(&plain_url, Some(FROM), None).expect("settings").with_ca_pem(b"nope".to_vec()).is_err()
    );

    // Untrusted first (their sends fail only after the retries): nothing is sent, in clear or otherwise.
    let untrusted = [
        (SmtpSettings::parse(&plain_url, Some(FROM), None).expect("settings"), "clear@example.com"),
        (starttls.settings(), "required@example.com"),
        (smtps.settings(), "wrapped@example.com"),
    ];
    let mut waiting = Vec::new();
    for (settings, to) in untrusted {
        waiting.push((test_send(settings, to).await, to));
    }

    // `smtp://`: STARTTLS because the server offers it; `?tls=required`; `smtps://`.
    for (settings, server, to) in [
        (trusted(plain_url.clone(), &ca), &starttls, "default@example.com"),
        (trusted(starttls.url(), &ca), &starttls, "insists@example.com"),
        (trusted(smtps.url(), &smtps_ca), &smtps, "smtps@example.com"),
    ] {
        let (app, id) = test_send(settings, to).await;
        let mails = server.wait_for(to, 1).await;
        assert!(mails[0].tls, "{to}: the mail came over TLS");
        assert!(mails[0].subject.starts_with("[hookflow]"), "{}", mails[0].subject);
        let delivery = last_delivery(&app, &id, Duration::from_secs(20)).await;
        assert_eq!((&delivery["ok"], &delivery["error"]), (&json!(true), &Value::Null), "{to}: {delivery}");
    }

    for ((app, id), to) in &waiting {
        let delivery = last_delivery(app, id, Duration::from_secs(120)).await;
        assert_eq!(delivery["ok"], false, "{to}: {delivery}");
        assert!(delivery["error"].as_str().is_some_and(|e| !e.is_empty()), "{to}: {delivery}");
    }
    for server in [&starttls, &smtps] {
        let received: Vec<Vec<String>> = server.received().into_iter().map(|m| m.to).collect();
        assert!(received.iter().all(|to| to.len() == 1), "{received:?}");
        for (_, to) in &waiting {
            assert!(server.to(to).is_empty(), "{to} got a mail through an untrusted certificate");
        }
    }
}
