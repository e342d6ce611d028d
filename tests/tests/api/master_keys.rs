//! Master key rotation, online: secrets and signing keys are re-encrypted under a new key while a server keeps
//! writing secrets under the old one; a second pass takes what was written meanwhile; then a server holding only
//! the new key delivers every secret to a claim, verifies earlier sessions and signs new ones. Values under a key
//! the ring lacks are reported, never lost.

use hookflow_control_plane::crypto::MasterKey;
use hookflow_control_plane::server::rotate;
use hookflow_shared::Role;
use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use hookflow_tests::people::Bearer;
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

    // Values written under a key the ring does not hold are reported and left alone.
    let unknown = MasterKey::new([33; 32]);
    let report = rotate::reencrypt(&app.pool, &unknown).await.expect("pass");
    assert_eq!((report.secrets, report.signing_keys, report.unreadable), (0, 0, 3));

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
    assert_eq!((last.unreadable, last.remaining), (0, 0), "{first:?} {second:?} {last:?}");
    let versions: Vec<i32> =
        sqlx::query_scalar("SELECT key_version FROM secrets UNION ALL SELECT key_version FROM signing_keys")
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
}
