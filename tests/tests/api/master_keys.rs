//! Master key rotation, online: secrets, signing keys, destinations' and notification channels' signing secrets
//! are re-encrypted under a new key while a server keeps writing secrets under the old one; a second pass takes
//! what was written meanwhile; then a server holding only the new key delivers every secret to a claim, verifies
//! earlier sessions and signs new ones, and signs a destination's delivery and a channel's alert that the
//! `standardwebhooks` library verifies with the secrets shown before the rotation. Values under a key the ring
//! lacks are reported, never lost.

use hookflow_control_plane::crypto::MasterKey;
use hookflow_control_plane::server::rotate;
use hookflow_shared::Role;
use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use hookflow_tests::people::Bearer;
use hookflow_tests::receiver::Receiver;
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const OLD: [u8; 32] = [11; 32];
const NEW: [u8; 32] = [22; 32];

#[tokio::test]
async fn a_rotation_reencrypts_everything_online_and_the_old_key_can_go() {
    let app = TestApp::spawn_with(|s| s.master_key = MasterKey::new(OLD)).await;
    let other = app.new_org("Other").await;
    for (creds, name, value) in [(&app.admin, "API_PASSWORD", "first-secret"), (&other, "TOKEN", "second-secret")] {
        let secret = PutSecret { value: value.parse().expect("a value"), allowed_hosts: vec![], runners_only: false };
        app.api_as(creds).secrets().put(name, &secret).await.expect("put the secret");
    }
    // A person's session: the built-in provider's signing key is sealed under the master key too.
    let person = app.person(app.admin.org, Role::Member).await;
    let (bearer, _) = app.bearer(&person, Some(app.admin.org)).await;
    // A signed destination and a webhook notification channel, their secrets sealed under the old key.
    let hook = Receiver::spawn(204).await;
    let webhook = app.webhook_named("rotated").await;
    let destination = app
        .admin(
            Method::POST,
            &format!("/webhooks/{webhook}/destinations"),
            Some(json!({"name": "signed", "url": format!("{}/deliveries", hook.base), "signing": "standard-webhooks"})),
        )
        .await;
    assert_eq!(destination.status, 201, "{}", destination.text);
    let destination_secret = destination.body["signing_secret"].as_str().expect("a secret").to_owned();
    let channel = app
        .admin(
            Method::POST,
            "/notification-channels",
            Some(json!({"name": "ops", "kind": "webhook", "url": format!("{}/alerts", hook.base)})),
        )
        .await;
    assert_eq!(channel.status, 201, "{}", channel.text);
    let channel_secret = channel.body["signing_secret"].as_str().expect("a secret").to_owned();
    let channel_id = channel.body["id"].as_str().expect("id").to_owned();

    // Values written under a key the ring does not hold are reported and left alone.
    let unknown = MasterKey::new([33; 32]);
    let report = rotate::reencrypt(&app.pool, &unknown).await.expect("pass");
    assert_eq!(
        (report.secrets, report.signing_keys, report.destination_secrets, report.channel_secrets, report.unreadable),
        (0, 0, 0, 0, 5)
    );

    // Phase 2 of the runbook on the running server: the new key seals, the old one still opens. Meanwhile a writer
    // keeps replacing a secret through the API (under whichever key its server holds at that moment).
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let (client, url, key, org, writing) =
            (app.client.clone(), app.url("/secrets/LIVE"), app.admin.key.clone(), app.admin.org, writing.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while writing.load(Ordering::SeqCst) {
                n += 1;
                let reply = client
                    .put(&url)
                    .header(hookflow_shared::wire::header::API_KEY, &key)
                    .header(hookflow_shared::wire::header::ORGANIZATION, org.to_string())
                    .json(&json!({"value": format!("live-{n}")}))
                    .send()
                    .await
                    .expect("write");
                assert_eq!(reply.status(), 200);
            }
            n
        })
    };
    let ring = MasterKey::with_previous(NEW, vec![OLD]);
    let first = rotate::reencrypt(&app.pool, &ring).await.expect("first pass");
    app.master_key().replace(NEW, vec![OLD]);
    let second = rotate::reencrypt(&app.pool, &ring).await.expect("second pass");
    writing.store(false, Ordering::SeqCst);
    let written = writer.await.expect("writer");
    let last = rotate::reencrypt(&app.pool, &ring).await.expect("last pass");
    assert!(first.secrets >= 2 && first.signing_keys == 1, "{first:?}");
    assert_eq!((first.destination_secrets, first.channel_secrets), (1, 1), "{first:?}");
    assert_eq!((last.unreadable, last.remaining), (0, 0), "{first:?} {second:?} {last:?}");
    let versions: Vec<i32> = sqlx::query_scalar(
        "SELECT key_version FROM secrets UNION ALL SELECT key_version FROM signing_keys
         UNION ALL SELECT signing_key_version FROM destinations
         UNION ALL SELECT signing_key_version FROM notification_channels",
    )
    .fetch_all(&app.pool)
    .await
    .expect("versions");
    assert!(versions.iter().all(|v| *v == ring.current_version()), "{versions:?}");

    // A server that holds only the new key: every secret opens, earlier sessions verify, new ones are signed.
    let retired = app.replica_with_keys(MasterKey::new(NEW)).await;
    let definition = json!({"nodes": [{"id": "use", "kind": "request",
        "request": {"method": "POST", "url": "http://127.0.0.1:9/x",
                    "body": "{{secret.API_PASSWORD}} {{secret.LIVE}}"}}]});
    let flow = retired.post::<Value>("/flows", &json!({"name": "uses secrets", "definition": definition}), 201).await;
    let launched = retired
        .post::<Value>(
            &format!("/flows/{}/launch", flow["id"].as_str().expect("id")),
            &json!({"mode": "ephemeral"}),
            201,
        )
        .await;
    let secrets = &launched["job"]["secrets"];
    assert_eq!(secrets["API_PASSWORD"], "first-secret");
    assert_eq!(secrets["LIVE"], format!("live-{written}"), "the last value the writer stored");
    let session = retired.call_bearer(Method::GET, "/auth/session", &bearer, None).await;
    assert_eq!(session.status, 200, "a session signed before the rotation: {}", session.text);
    let (fresh, _) = retired.bearer(&person, Some(app.admin.org)).await;
    let fresh = Bearer { token: fresh.token, org: Some(app.admin.org) };
    assert_eq!(retired.call_bearer(Method::GET, "/webhooks", &fresh, None).await.status, 200);
    // The other organization's secret, under the new key, still bound to its organization and name.
    let theirs: Option<(Vec<u8>,)> =
        sqlx::query_as("SELECT ciphertext FROM secrets WHERE organization_id = $1 AND name = 'TOKEN'")
            .bind(other.org)
            .fetch_optional(&app.pool)
            .await
            .expect("row");
    let ciphertext = theirs.expect("kept").0;
    assert!(!ciphertext.windows(13).any(|w| w == b"second-secret"), "never stored in clear");

    // The old server stops: from here only the server without the old key sends. The destination's delivery and
    // the channel's test alert are signed with the secrets shown before the rotation.
    app.shutdown_token().cancel();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(retired.capture(Method::POST, &webhook, "{\"after\": \"rotation\"}").await.status, 200);
    let test = retired.admin(Method::POST, &format!("/notification-channels/{channel_id}/test"), None).await;
    assert_eq!(test.status, 202, "{}", test.text);
    let arrivals = hook
        .wait_until(Duration::from_secs(30), |a| {
            a.iter().any(|x| x.uri == "/deliveries") && a.iter().any(|x| x.uri == "/alerts")
        })
        .await;
    let (deliveries, alerts): (Vec<_>, Vec<_>) = arrivals.into_iter().partition(|a| a.uri == "/deliveries");
    assert_eq!(deliveries.len(), 1, "one delivery");
    assert_eq!(alerts.len(), 1, "one test alert");
    assert_eq!(&deliveries[0].body[..], b"{\"after\": \"rotation\"}");
    crate::alerts::verify_signatures(&destination_secret, &deliveries);
    crate::alerts::verify_signatures(&channel_secret, &alerts);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = retired.admin(Method::GET, &format!("/notification-channels/{channel_id}"), None).await;
        if !read.body["last_delivery"].is_null() {
            assert_eq!(read.body["last_delivery"]["ok"], true, "{}", read.text);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no last_delivery: {}", read.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
