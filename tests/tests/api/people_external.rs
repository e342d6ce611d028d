//! An external OpenID provider, for real: `oidc-provider` (tests/oidc, run by Node.js) issues JWT access tokens
//! through its authorization code flow with PKCE, scripted over HTTP here. An invited person's token is accepted
//! and bound to them; forged tokens are refused (alg `none`, HS256 keyed with the public key, wrong audience or
//! issuer, expired), and a flood of unknown key ids costs the provider at most one key fetch per interval.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hookflow_control_plane::http::auth::external::IssuerConfig;
use hookflow_tests::TestApp;
use hookflow_tests::people::Bearer;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Digest as _;
use std::collections::HashMap;

use hookflow_tests::oidc::{AUDIENCE, Provider, start_provider};

/// A browser without redirects: cookies kept by hand, every hop visible.
struct Browser {
    client: reqwest::Client,
    cookies: HashMap<String, String>,
}

impl Browser {
    fn new() -> Self {
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        Self { client, cookies: HashMap::new() }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> (u16, Option<String>, String) {
        let cookie: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let response = request.header("cookie", cookie.join("; ")).send().await.expect("provider answers");
        for set in response.headers().get_all("set-cookie") {
            let pair = set.to_str().unwrap_or_default().split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status().as_u16();
        let location = response.headers().get("location").and_then(|l| l.to_str().ok()).map(str::to_owned);
        (status, location, response.text().await.unwrap_or_default())
    }
}

/// A POST of an `application/x-www-form-urlencoded` form.
fn form_post(client: &reqwest::Client, url: &str, fields: &[(&str, String)]) -> reqwest::RequestBuilder {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    client.post(url).header("content-type", "application/x-www-form-urlencoded").body(body)
}

/// Signs `login` in at the provider through its authorization code flow with PKCE; answers the access token.
async fn sign_in_at(provider: &Provider, login: &str) -> String {
    let mut browser = Browser::new();
    let verifier = URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes()) + "-code-verifier-padding";
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    let absolute = |location: &str| {
        if location.starts_with("http") { location.to_owned() } else { format!("{}{location}", provider.issuer) }
    };
    let authorize = reqwest::Url::parse_with_params(
        &format!("{}/auth", provider.issuer),
        &[
            ("client_id", "hookflow-app"),
            ("response_type", "code"),
            ("scope", "openid email"),
            ("redirect_uri", "http://127.0.0.1/callback"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", "s1"),
            ("resource", &provider.resource),
        ],
    )
    .expect("url");
    let authorize = browser.client.get(authorize);
    let (_, mut location, _) = browser.send(authorize).await;
    for _ in 0..10 {
        let at = absolute(&location.clone().expect("a redirect"));
        if at.starts_with("http://127.0.0.1/callback") {
            break;
        }
        let (status, next, page) = browser.send(browser.client.get(&at)).await;
        location = next;
        if status == 200 {
            // The provider's login or consent page: submit its form.
            let action = page.split("action=\"").nth(1).and_then(|r| r.split('"').next()).expect("a form");
            let prompt =
                page.split("name=\"prompt\" value=\"").nth(1).and_then(|r| r.split('"').next()).expect("prompt");
            let mut form = vec![("prompt", prompt.to_owned())];
            if prompt == "login" {
                form.extend([("login", login.to_owned()), ("password", "any".to_owned())]);
            }
            let (_, next, _) = browser.send(form_post(&browser.client, &absolute(action), &form)).await;
            location = next;
        }
    }
    let callback = reqwest::Url::parse(&location.expect("the callback")).expect("url");
    let code = callback.query_pairs().find(|(k, _)| k == "code").expect("a code").1.into_owned();
    let fields = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", "http://127.0.0.1/callback"),
        ("code_verifier", verifier.as_str()),
        ("client_id", "hookflow-app"),
        ("client_secret", "test-secret"),
        ("resource", provider.resource.as_str()),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let token = form_post(&browser.client, &format!("{}/token", provider.issuer), &fields);
    let (status, _, body) = browser.send(token).await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).expect("token answer");
    body["access_token"].as_str().expect("access token").to_owned()
}

fn forge(provider: &Provider, claims: Value, kid: &str) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_rsa_der(&provider.private_key);
    jsonwebtoken::encode(&header, &claims, &key).expect("sign")
}

/// One scenario: invitation, real sign-in and binding, then every forgery.
#[tokio::test]
async fn an_external_providers_tokens_are_accepted_and_forgeries_refused() {
    let provider = start_provider();
    let config: IssuerConfig =
        format!("{} audience={AUDIENCE} algorithms=RS256", provider.issuer).parse().expect("config");
    let app = TestApp::spawn_with(move |s| s.issuers = vec![config]).await;
    let invited = app
        .admin(Method::POST, "/organization/members", Some(json!({"email": "alice@example.com", "role": "member"})))
        .await;
    assert_eq!(invited.status, 201, "{}", invited.text);

    let token = sign_in_at(&provider, "alice").await;
    let alice = Bearer { token: token.clone(), org: Some(app.admin.org) };
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
    assert_eq!(bound, 1, "the identity is bound to the invited user");
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
