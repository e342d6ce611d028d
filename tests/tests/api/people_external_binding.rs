//! Hardening III, findings 10 and 14, against a real OpenID provider: an external identity never attaches itself
//! to an existing account by its verified email (that account's person links it, signed in; issuers may be limited
//! to email domains), and external tokens are refused when typed as something else than an access token, issued to
//! another client, meant to live too long, or signed out (on every replica); unknown identities never make the
//! server fetch userinfo.

use hookflow_control_plane::api::people::{passwords, store};
use hookflow_control_plane::auth::external::IssuerConfig;
use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::oidc::{
    AUDIENCE, Provider, claims, forge, forge_typed, provider_counts, sign_in_at, start_provider,
};
use hookflow_tests::people::{Bearer, Person};
use reqwest::Method;
use serde_json::json;

/// `GET /webhooks` on `app` with `token`, in the first organization: the status.
async fn call(app: &TestApp, token: String) -> u16 {
    let bearer = Bearer { token, org: Some(app.admin.org) };
    app.call_bearer(Method::GET, "/webhooks", &bearer, None).await.status.as_u16()
}

fn config(provider: &Provider, options: &str) -> IssuerConfig {
    format!("{} audience={AUDIENCE} algorithms=RS256 {options}", provider.issuer).parse().expect("config")
}

/// A user with a password and a chosen email, as the operator or sign-up makes them.
async fn password_user(app: &TestApp, email: &str) -> Person {
    let password = "a long enough password".to_owned();
    let hash = passwords::hash(password.clone()).await.expect("hash");
    let mut conn = app.pool.acquire().await.expect("connection");
    let user_id = store::create_user(&mut conn, email, &hash, false).await.expect("user");
    Person { user_id, email: email.to_owned(), password }
}

/// Finding 10: a provider token with a verified email was silently bound to the password account of that email
/// (the first-start owner's included). Now it is nobody until that account's person links it.
#[tokio::test]
async fn people_external_identity_never_binds_to_an_existing_account_by_email() {
    let provider = start_provider();
    let issuer = config(&provider, "");
    let app = TestApp::spawn_with(move |s| s.issuers = vec![issuer]).await;
    let bob = password_user(&app, "bob@example.com").await;
    let mut conn = app.pool.acquire().await.expect("connection");
    hookflow_control_plane::api::people::signup::add_membership(&mut conn, app.admin.org, bob.user_id, Role::Owner)
        .await
        .expect("membership");

    // The attack: someone holding "bob" at the provider (same verified email) presents its token.
    let external = Bearer { token: sign_in_at(&provider, "bob").await, org: Some(app.admin.org) };
    assert_eq!(app.call_bearer(Method::GET, "/auth/session", &external, None).await.status, 401);
    assert_eq!(app.call_bearer(Method::GET, "/webhooks", &external, None).await.status, 401);
    // Nor does accepting an invitation attach it to the account of its email.
    let invitation = app.invite("someone@example.com", Role::Viewer).await;
    let refused = app.accept(&external, &invitation).await;
    refused.assert_refused(409, "conflict", "link this identity");
    assert_eq!(app.rows("user_identities").await, 0);

    // Bob, signed in with the password, links the identity; its tokens then speak for Bob.
    let (signed_in, _) = app.bearer(&bob, None).await;
    let body = json!({"token": external.token});
    let linked = app.call_bearer(Method::POST, "/auth/identities", &signed_in, Some(body.clone())).await;
    assert_eq!(linked.status, 201, "{}", linked.text);
    assert_eq!((&linked.body["issuer"], &linked.body["subject"]), (&json!(provider.issuer), &json!("bob")));
    let session = app.call_bearer(Method::GET, "/auth/session", &external, None).await;
    assert_eq!((session.status.as_u16(), &session.body["user"]["id"]), (200, &json!(bob.user_id)), "{}", session.text);
    // Linked once: another account cannot take it, and a built-in token or garbage is no identity to link.
    let carol = password_user(&app, "carol@example.com").await;
    let (carol_bearer, _) = app.bearer(&carol, None).await;
    let taken = app.call_bearer(Method::POST, "/auth/identities", &carol_bearer, Some(body)).await;
    taken.assert_refused(409, "conflict", "linked");
    let own = json!({"token": signed_in.token});
    let refused = app.call_bearer(Method::POST, "/auth/identities", &carol_bearer, Some(own)).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    let garbage =
        app.call_bearer(Method::POST, "/auth/identities", &carol_bearer, Some(json!({"token": "x.y.z"}))).await;
    assert_eq!(garbage.status, 400, "{}", garbage.text);
    let audit = app.admin(Method::GET, "/audit-log", None).await;
    assert!(audit.text.contains("user.identity_linked") && !audit.text.contains(&external.token));

    // An issuer limited to some email domains: identities outside them are neither linked nor let in.
    let limited = config(&provider, "domains=example.org");
    let app = TestApp::spawn_with(move |s| s.issuers = vec![limited]).await;
    let dave = password_user(&app, "dave@example.org").await;
    let (dave_bearer, _) = app.bearer(&dave, None).await;
    let alice = Bearer { token: sign_in_at(&provider, "alice").await, org: None };
    let outside =
        app.call_bearer(Method::POST, "/auth/identities", &dave_bearer, Some(json!({"token": alice.token}))).await;
    outside.assert_refused(400, "invalid_request", "domains");
    let invitation = app.invite("alice@example.com", Role::Viewer).await;
    app.accept(&alice, &invitation).await.assert_refused(400, "invalid_request", "domains");
}

/// Finding 14: external tokens' `typ` and client went unchecked, a 10-year token was accepted, signing out left
/// the token working, and each request of an unknown identity fetched userinfo.
#[tokio::test]
async fn people_external_tokens_are_typed_from_a_known_client_short_lived_and_end_at_sign_out() {
    let provider = start_provider();
    let issuer = config(&provider, "clients=hookflow-app max_lifetime_s=3600");
    let replica_issuer = issuer.clone();
    let app = TestApp::spawn_with(move |s| s.issuers = vec![issuer]).await;
    let replica = app.replica_with(move |s| s.issuers = vec![replica_issuer]).await;
    let real = sign_in_at(&provider, "alice").await;
    let invitation = app.invite("alice@example.com", Role::Member).await;
    assert_eq!(app.accept(&Bearer { token: real.clone(), org: None }, &invitation).await.status, 201);
    let now = chrono::Utc::now().timestamp();
    let alice = |overrides: serde_json::Value| forge(&provider, claims(&provider, "alice", overrides), &provider.kid);
    assert_eq!(call(&app, alice(json!({}))).await, 200, "the provider's access token for the allowed client");
    assert_eq!(call(&app, alice(json!({"client_id": null, "azp": "hookflow-app"}))).await, 200, "azp names it too");
    let id_token = forge_typed(&provider, claims(&provider, "alice", json!({})), &provider.kid, Some("JWT"));
    assert_eq!(call(&app, id_token).await, 401, "typed as an ID token");
    assert_eq!(call(&app, alice(json!({"client_id": "another-client"}))).await, 401, "another client's token");
    assert_eq!(call(&app, alice(json!({"client_id": null}))).await, 401, "no client named");
    let ten_years = now + 10 * 365 * 24 * 3600;
    assert_eq!(call(&app, alice(json!({"exp": ten_years}))).await, 401, "a 10-year token");
    assert_eq!(call(&app, alice(json!({"exp": ten_years, "iat": ten_years - 60}))).await, 401, "a late `iat`");
    assert_eq!(call(&app, alice(json!({"exp": now + 7200, "iat": null}))).await, 401, "two hours from now");

    // Signing out with the real token ends it on every replica; another token of the same person still works.
    let bearer = Bearer { token: real.clone(), org: Some(app.admin.org) };
    assert_eq!((call(&app, real.clone()).await, call(&replica, real.clone()).await), (200, 200));
    let out = app.call_bearer(Method::DELETE, "/auth/session", &bearer, None).await;
    assert_eq!(out.status, 204, "{}", out.text);
    assert_eq!((call(&app, real.clone()).await, call(&replica, real.clone()).await), (401, 401));
    assert_eq!(call(&replica, alice(json!({}))).await, 200);
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM revoked_tokens WHERE expires_at > now()")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(kept, 1, "one revocation, kept until the token expires");

    // Unknown identities without an email in their token: refused without asking the provider's userinfo.
    let before = provider_counts(&provider).await;
    for i in 0..30 {
        let stranger = forge(&provider, claims(&provider, &format!("stranger-{}", i % 3), json!({})), &provider.kid);
        assert_eq!(call(&app, stranger).await, 401);
    }
    let after = provider_counts(&provider).await;
    let userinfo = |counts: &serde_json::Value| counts["/me"].as_u64().unwrap_or(0);
    assert_eq!(userinfo(&after), userinfo(&before), "userinfo fetched for unknown identities: {after}");
}
