//! Regression test of forged credentials (security review "Hardening III", finding 16): well-formed forged API
//! keys, job tokens and refresh tokens cost at most one database lookup each, and an address that spent its
//! budget of failed lookups (60 a minute by default) is answered 429 before any lookup. Whether a lookup happens
//! is seen by locking `api_keys`: one would wait. Valid credentials keep working: a key that worked here is
//! served from the cache whatever its address did, and other addresses keep their own budget.

use hookflow_control_plane::crypto::new_token;
use hookflow_shared::JobId;
use hookflow_shared::token::TokenKind;
use hookflow_shared::wire::{header, runner_route};
use hookflow_tests::TestApp;
use hookflow_tests::app::{Creds, Reply, read};
use std::net::IpAddr;
use std::time::Duration;

/// `GET /webhooks` with `key` from `client`; a lookup waiting on a lock shows as a timeout.
async fn list_with(app: &TestApp, client: &reqwest::Client, key: &str) -> Reply {
    let request = client
        .get(app.url("/webhooks"))
        .header(header::API_KEY, key)
        .header(header::ORGANIZATION, app.admin.org.to_string())
        .timeout(Duration::from_secs(5));
    read(request.send().await.expect("answered without waiting for the database")).await
}

fn client_from(address: &str) -> reqwest::Client {
    let address: IpAddr = address.parse().expect("address");
    reqwest::Client::builder().local_address(address).build().expect("client")
}

#[tokio::test]
async fn forged_credentials_cost_one_lookup_each_then_none() {
    let app = TestApp::spawn().await;
    let (here, there) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let valid = Creds { key: app.admin.key.clone(), org: app.admin.org };
    assert_eq!(list_with(&app, &here, &valid.key).await.status, 200, "the valid key worked once (it is cached)");
    let first_forgery = new_token(TokenKind::ApiKey);
    assert_eq!(list_with(&app, &here, &first_forgery).await.status, 401);
    for _ in 1..60 {
        assert_eq!(list_with(&app, &here, &new_token(TokenKind::ApiKey)).await.status, 401);
    }

    // From now on a lookup of a key would wait for this lock.
    let mut lock = app.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.expect("lock api_keys");
    for _ in 0..1000 {
        let refused = list_with(&app, &here, &new_token(TokenKind::ApiKey)).await;
        assert_eq!(refused.status, 429, "{}", refused.text);
        assert_eq!(refused.code(), "rate_limited");
        let wait: u64 = refused.headers["retry-after"].to_str().ok().and_then(|s| s.parse().ok()).expect("Retry-After");
        assert!((1..=60).contains(&wait), "{wait}");
    }
    // Job tokens and refresh tokens from the same address share its budget.
    let job = here
        .post(app.url(&runner_route::job_complete(JobId::now_v7())))
        .bearer_auth(new_token(TokenKind::Job))
        .json(&serde_json::json!({"status": "succeeded"}))
        .timeout(Duration::from_secs(5));
    assert_eq!(read(job.send().await.expect("answered")).await.status, 429);
    let refresh = here
        .post(app.url("/auth/sessions/refresh"))
        .json(&serde_json::json!({"refresh_token": new_token(TokenKind::Refresh)}))
        .timeout(Duration::from_secs(5));
    assert_eq!(read(refresh.send().await.expect("answered")).await.status, 429);
    // The valid key still works from the flooded address, without a lookup.
    assert_eq!(list_with(&app, &here, &valid.key).await.status, 200);
    // A forgery the database did not know is answered from memory, from any address.
    assert_eq!(list_with(&app, &there, &first_forgery).await.status, 401);
    lock.rollback().await.expect("unlock");

    // Another address has its own budget: its new forgeries are looked up (and refused) as before.
    assert_eq!(list_with(&app, &there, &new_token(TokenKind::ApiKey)).await.status, 401);
    assert_eq!(list_with(&app, &there, &valid.key).await.status, 200);
}
