//! A real OpenID provider for the tests: `oidc-provider` under Node.js (tests/oidc), started on a port of its own
//! choosing and killed when dropped. It has a confidential client the API tests script over HTTP and the app's
//! public client (`hookflow-browser`, PKCE) that a real browser signs in with. The API tests sign in there over
//! HTTP ([`sign_in_at`]) and forge tokens with its real key ([`forge`]).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::Value;
use sha2::Digest as _;
use std::collections::HashMap;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

/// The audience the provider puts in access tokens.
pub const AUDIENCE: &str = "hookflow-api";
/// The app's public client at the provider.
pub const BROWSER_CLIENT: &str = "hookflow-browser";

/// The provider process, killed when dropped.
#[derive(Debug)]
pub struct Provider {
    child: Child,
    pub issuer: String,
    pub resource: String,
    /// The RSA key the provider signs with (PKCS#1 DER), to forge tokens it would sign.
    pub private_key: Vec<u8>,
    pub kid: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_file() -> std::io::Result<std::fs::File> {
    std::fs::File::create(std::env::temp_dir().join(format!("hookflow-oidc-provider-{}.log", std::process::id())))
}

/// Starts the provider and reads its first line (issuer, resource, signing key).
pub fn start_provider() -> Provider {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/oidc/provider.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .arg(AUDIENCE)
        .stdout(Stdio::piped())
        // The provider's notices, kept for a failure's investigation.
        .stderr(log_file().map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
        .spawn()
        .expect("node runs tests/oidc/provider.mjs (run `npm ci --prefix tests/oidc` first)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("provider's first line");
    let info: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("provider said {line:?}: {e}"));
    let text = |name: &str| info[name].as_str().expect(name).to_owned();
    let private_key = base64::engine::general_purpose::STANDARD.decode(text("private_key_pkcs1")).expect("base64");
    Provider { issuer: text("issuer"), resource: text("resource"), private_key, kid: text("kid"), child }
}

/// A browser without redirects: cookies kept by hand, every hop visible.
#[derive(Debug)]
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
pub async fn sign_in_at(provider: &Provider, login: &str) -> String {
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

pub fn forge(provider: &Provider, claims: Value, kid: &str) -> String {
    forge_typed(provider, claims, kid, Some("at+jwt"))
}

/// A token signed with the provider's key, with the header's `typ` given.
pub fn forge_typed(provider: &Provider, claims: Value, kid: &str, typ: Option<&str>) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    header.typ = typ.map(str::to_owned);
    let key = EncodingKey::from_rsa_der(&provider.private_key);
    jsonwebtoken::encode(&header, &claims, &key).expect("sign")
}

/// Claims of an access token the provider would issue for `sub` now (five minutes of life, the API tests'
/// client), with `overrides` set (a null removes the claim).
pub fn claims(provider: &Provider, sub: &str, overrides: Value) -> Value {
    let now = chrono::Utc::now().timestamp();
    let mut claims = serde_json::json!({"iss": provider.issuer, "aud": AUDIENCE, "sub": sub, "iat": now,
        "exp": now + 300, "client_id": "hookflow-app"});
    for (k, v) in overrides.as_object().into_iter().flatten() {
        if v.is_null() {
            claims.as_object_mut().map(|c| c.remove(k));
        } else {
            claims[k] = v.clone();
        }
    }
    claims
}

/// Requests the provider answered, per path (`/jwks`, `/me` for userinfo, ...).
pub async fn provider_counts(provider: &Provider) -> Value {
    let counts = reqwest::get(format!("{}/test/counts", provider.issuer)).await.expect("counts");
    counts.json().await.expect("json")
}
