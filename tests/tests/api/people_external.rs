//! An external OpenID provider, for real: `oidc-provider` (tests/oidc, run by Node.js) issues JWT access tokens
//! through its authorization code flow with PKCE, scripted over HTTP here. An invited person accepts the
//! invitation's link with the provider's token and is bound to it; forged tokens are refused (alg `none`, HS256
//! keyed with the public key, wrong audience or issuer, expired, not typed as an access token), and a flood of
//! unknown key ids costs the provider at most one key fetch per interval. Findings 10 and 14 of Hardening III:
//! an identity never attaches itself to an account by email (its person links it, signed in), and tokens from
//! other clients, living too long, or signed out are refused.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hookflow_control_plane::auth::external::IssuerConfig;
use hookflow_tests::TestApp;
use hookflow_tests::oidc::{AUDIENCE, forge, forge_typed, sign_in_at, start_provider};
use hookflow_tests::people::Bearer;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{Value, json};

/// One scenario: invitation, real sign-in and binding, then every forgery.
#[tokio::test]
async fn an_external_providers_tokens_are_accepted_and_forgeries_refused() {
    let provider = start_provider();
    let config: IssuerConfig =
        format!("{} audience={AUDIENCE} algorithms=RS256", provider.issuer).parse().expect("config");
    let app = TestApp::spawn_with(move |s| s.issuers = vec![config]).await;
    let invitation = app.invite("alice@example.com", hookflow_shared::Role::Member).await;

    let token = sign_in_at(&provider, "alice").await;
    let alice = Bearer { token: token.clone(), org: Some(app.admin.org) };
    // The invited email binds nothing by itself: the invitation's link does.
    assert_eq!(app.call_bearer(Method::GET, "/auth/session", &alice, None).await.status, 401);
    let accepted = app.accept(&alice, &invitation).await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
    let session = app.call_bearer(Method::GET, "/auth/session", &alice, None).await;
    assert_eq!(session.status, 200, "{}", session.text);
    assert_eq!(session.body["user"]["email"], "alice@example.com");
    assert_eq!(session.body["organizations"][0]["role"], "member");
    assert_eq!(app.call_bearer(Method::GET, "/webhooks", &alice, None).await.status, 200);
    let bound: i64 = sqlx::query_scalar("SELECT count(*) FROM user_identities WHERE issuer = $1 AND subject = 'alice'")
        .bind(&provider.issuer)
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(bound, 1, "the identity is bound to the user made for it");
    // Someone nobody invited signs in at the provider just as well, but is nobody here.
    let stranger = Bearer { token: sign_in_at(&provider, "mallory").await, org: Some(app.admin.org) };
    assert_eq!(app.call_bearer(Method::GET, "/auth/session", &stranger, None).await.status, 401);

    let now = chrono::Utc::now().timestamp();
    let claims = |overrides: Value| {
        let mut claims = json!({"iss": provider.issuer, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300});
        for (k, v) in overrides.as_object().expect("object") {
            claims[k] = v.clone();
        }
        claims
    };
    let accepted = forge(&provider, claims(json!({})), &provider.kid);
    let app = &app;
    let call = |token: String| {
        let bearer = Bearer { token, org: Some(app.admin.org) };
        async move { app.call_bearer(Method::GET, "/webhooks", &bearer, None).await.status.as_u16() }
    };
    assert_eq!(call(accepted).await, 200, "a token signed with the provider's key and right claims passes");
    assert_eq!(
        call(forge(&provider, claims(json!({"aud": "someone-else"})), &provider.kid)).await,
        401,
        "wrong audience"
    );
    assert_eq!(
        call(forge(&provider, claims(json!({"iss": "http://127.0.0.1:1"})), &provider.kid)).await,
        401,
        "wrong issuer"
    );
    assert_eq!(call(forge(&provider, claims(json!({"exp": now - 600})), &provider.kid)).await, 401, "expired");
    let id_token = forge_typed(&provider, claims(json!({})), &provider.kid, Some("JWT"));
    assert_eq!(call(id_token).await, 401, "typed as something else than an access token");
    let mut no_exp = claims(json!({}));
    no_exp.as_object_mut().expect("object").remove("exp");
    assert_eq!(call(forge(&provider, no_exp, &provider.kid)).await, 401, "exp is required");
    // alg none: the real token's claims with no signature.
    let payload = token.split('.').nth(1).expect("payload");
    let none =
        format!("{}.{payload}.", URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"none","kid":"{}"}}"#, provider.kid)));
    assert_eq!(call(none).await, 401, "alg none");
    // HS256 keyed with the provider's public key (what a library that trusts the token's `alg` would verify).
    let public_jwks: Value =
        reqwest::get(format!("{}/jwks", provider.issuer)).await.expect("jwks").json().await.expect("json");
    let public = serde_json::to_vec(&public_jwks["keys"][0]).expect("public key");
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(provider.kid.clone());
    let hs = jsonwebtoken::encode(&header, &claims(json!({})), &EncodingKey::from_secret(&public)).expect("sign");
    assert_eq!(call(hs).await, 401, "HS256 with the public key");

    // A flood of unknown key ids: one refetch per interval at most.
    let before: Value =
        reqwest::get(format!("{}/test/counts", provider.issuer)).await.expect("counts").json().await.expect("json");
    for i in 0..200 {
        assert_eq!(call(forge(&provider, claims(json!({})), &format!("unknown-{i}"))).await, 401);
    }
    let after: Value =
        reqwest::get(format!("{}/test/counts", provider.issuer)).await.expect("counts").json().await.expect("json");
    let fetched = |counts: &Value| counts["/jwks"].as_u64().unwrap_or(0);
    assert!(
        fetched(&after) - fetched(&before) <= 1,
        "{} key fetches for 200 unknown kids",
        fetched(&after) - fetched(&before)
    );
}
