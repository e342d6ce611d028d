//! External OpenID providers the operator configured: their settings (`--oidc-issuer`) and their keys. Per issuer:
//! the audience, the algorithms (pinned: asymmetric only, never `none` nor HS*), the clients whose tokens are
//! accepted, the longest token lifetime, the email domains its people may have, and keys from the JWKS its
//! discovery document names, fetched through the guarded client and cached by `kid` (an unknown `kid` refetches at
//! most once per [`REFETCH_INTERVAL`]). Verifying tokens and finding their person is `external_tokens`'.

use hookflow_runner::outbound::{ClientOptions, Guard};
use hookflow_shared::api::runners::NetworkPolicy;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;
use serde::Deserialize;
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// Unknown key ids refetch the issuer's keys at most this often.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Largest discovery document, key set or userinfo answer read.
const MAX_DOCUMENT: usize = 512 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest lifetime (`exp - iat`) of an access token accepted by default: a token meant to last for years is
/// a stolen or misissued one.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// One configured issuer: `--oidc-issuer "https://idp.example.com audience=hookflow algorithms=RS256,ES256"`,
/// plus, for the app's sign-in button, `client_id=<public client>` and optionally `resource=<resource indicator>`;
/// `clients=a,b` (the `client_id`/`azp` a token must name, with the app's client), `domains=example.com,...` (the
/// email domains its people may have) and `max_lifetime_s=<seconds>` (default 24 h).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    /// The public client (authorization code with PKCE, no secret) the app signs people in with.
    pub app_client_id: Option<String>,
    /// The resource indicator (RFC 8707) the app asks tokens for, when the provider wants one.
    pub app_resource: Option<String>,
    /// Other clients whose tokens are accepted. When this or `app_client_id` is set, a token's `client_id` (or
    /// `azp`) must be one of them.
    pub clients: Vec<String>,
    /// Email domains (lower case) an identity of this issuer must have to be linked or accept an invitation;
    /// empty: any.
    pub domains: Vec<String>,
    /// The longest `exp - iat` accepted.
    pub max_lifetime: Duration,
}

impl IssuerConfig {
    /// The clients a token must come from; empty: any.
    pub fn allowed_clients(&self) -> impl Iterator<Item = &str> {
        self.clients.iter().map(String::as_str).chain(self.app_client_id.as_deref())
    }

    /// Whether an email's domain is one this issuer's people may have.
    pub fn allows_email(&self, email: &str) -> bool {
        let domain = email.rsplit_once('@').map(|(_, d)| d).unwrap_or_default();
        self.domains.is_empty() || self.domains.iter().any(|d| d == domain)
    }
}

impl FromStr for IssuerConfig {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parts = text.split_whitespace();
        let issuer = parts.next().ok_or("give the issuer URL first")?.trim_end_matches('/').to_owned();
        let url = Url::parse(&issuer).map_err(|e| format!("`{issuer}` is not a URL: {e}"))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(format!("`{issuer}`: the issuer must be an http(s) URL"));
        }
        let (mut audience, mut algorithms, mut app_client_id, mut app_resource) = (None, Vec::new(), None, None);
        let (mut clients, mut domains, mut max_lifetime) = (Vec::new(), Vec::new(), DEFAULT_MAX_LIFETIME);
        for part in parts {
            match part.split_once('=') {
                Some(("audience", value)) if !value.is_empty() => audience = Some(value.to_owned()),
                Some(("client_id", value)) if !value.is_empty() => app_client_id = Some(value.to_owned()),
                Some(("resource", value)) if !value.is_empty() => app_resource = Some(value.to_owned()),
                Some(("clients", value)) => clients = list(value),
                Some(("domains", value)) => domains = list(&value.to_lowercase()),
                Some(("max_lifetime_s", value)) => {
                    let seconds: u64 = value.parse().map_err(|_| format!("`{part}`: give a number of seconds"))?;
                    if seconds == 0 {
                        return Err(format!("`{part}`: the lifetime must be positive"));
                    }
                    max_lifetime = Duration::from_secs(seconds);
                }
                Some(("algorithms", value)) => {
                    for name in value.split(',') {
                        algorithms.push(asymmetric(name)?);
                    }
                }
                _ => {
                    return Err(format!(
                        "`{part}`: expected audience=, algorithms=, client_id=, resource=, clients=, domains= \
                         or max_lifetime_s="
                    ));
                }
            }
        }
        let audience = audience.ok_or("name the audience: audience=<the aud your provider puts in tokens>")?;
        if algorithms.is_empty() {
            algorithms.push(Algorithm::RS256);
        }
        Ok(Self { issuer, audience, algorithms, app_client_id, app_resource, clients, domains, max_lifetime })
    }
}

/// A comma-separated list without empty items.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned).collect()
}

/// An asymmetric signature algorithm; `none` and the HMAC family are refused (a public key is no secret).
fn asymmetric(name: &str) -> Result<Algorithm, String> {
    let algorithm = Algorithm::from_str(name).map_err(|_| format!("`{name}` is not a JWS algorithm"))?;
    if matches!(algorithm, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
        return Err(format!("`{name}`: HMAC algorithms cannot be used with a provider's public keys"));
    }
    Ok(algorithm)
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, DecodingKey>,
    userinfo: Option<Url>,
    fetched_at: Option<Instant>,
}

/// One configured issuer with its cached keys.
pub struct Provider {
    pub config: IssuerConfig,
    keys: RwLock<Keys>,
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("issuer", &self.config.issuer).finish_non_exhaustive()
    }
}

/// The configured providers with their cached keys.
#[derive(Default)]
pub struct ExternalIssuers {
    providers: Vec<Provider>,
}

impl std::fmt::Debug for ExternalIssuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.providers.iter().map(|p| &p.config.issuer)).finish()
    }
}

impl ExternalIssuers {
    pub fn new(configs: &[IssuerConfig]) -> Self {
        let providers = configs
            .iter()
            .map(|config| Provider { config: config.clone(), keys: RwLock::default(), fetching: Default::default() })
            .collect();
        Self { providers }
    }

    pub fn find(&self, issuer: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.config.issuer == issuer.trim_end_matches('/'))
    }
}

/// The operator chose these issuers: their addresses may be private (a provider inside the company network),
/// never link-local or cloud metadata.
fn client() -> reqwest::Client {
    Guard::new(NetworkPolicy::Private)
        .client(&ClientOptions { timeout: Some(FETCH_TIMEOUT), ..ClientOptions::default() })
}

pub async fn fetch_json<T: serde::de::DeserializeOwned>(url: &Url, bearer: Option<&str>) -> Result<T, String> {
    let mut request = client().get(url.clone());
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    let body =
        hookflow_runner::outbound::read_limited(response, MAX_DOCUMENT).await.map_err(|e| format!("{url}: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: Url,
    userinfo_endpoint: Option<Url>,
}

impl Provider {
    /// The userinfo endpoint its discovery document named (known once its keys were fetched).
    pub fn userinfo(&self) -> Option<Url> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).userinfo.clone()
    }

    /// The key for `kid`, refetching the key set when it is unknown (at most once per interval).
    pub async fn key(&self, kid: &str) -> Option<DecodingKey> {
        if let Some(key) = self.keys.read().unwrap_or_else(|e| e.into_inner()).by_kid.get(kid) {
            return Some(key.clone());
        }
        let _one_fetch = self.fetching.lock().await;
        let due = {
            let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
            if let Some(key) = keys.by_kid.get(kid) {
                return Some(key.clone());
            }
            keys.fetched_at.is_none_or(|at| at.elapsed() >= REFETCH_INTERVAL)
        };
        if due {
            match self.fetch().await {
                Ok(keys) => *self.keys.write().unwrap_or_else(|e| e.into_inner()) = keys,
                Err(e) => {
                    tracing::warn!(issuer = %self.config.issuer, error = %e, "fetching the provider's keys failed");
                    self.keys.write().unwrap_or_else(|e| e.into_inner()).fetched_at = Some(Instant::now());
                }
            }
        }
        self.keys.read().unwrap_or_else(|e| e.into_inner()).by_kid.get(kid).cloned()
    }

    async fn fetch(&self) -> Result<Keys, String> {
        let issuer = &self.config.issuer;
        let url = Url::parse(&format!("{issuer}/.well-known/openid-configuration")).map_err(|e| e.to_string())?;
        let discovery: Discovery = fetch_json(&url, None).await?;
        if discovery.issuer.trim_end_matches('/') != issuer {
            return Err(format!("the discovery document names another issuer: {}", discovery.issuer));
        }
        let set: JwkSet = fetch_json(&discovery.jwks_uri, None).await?;
        let by_kid = set
            .keys
            .iter()
            .filter_map(|jwk| Some((jwk.common.key_id.clone()?, DecodingKey::from_jwk(jwk).ok()?)))
            .collect();
        Ok(Keys { by_kid, userinfo: discovery.userinfo_endpoint, fetched_at: Some(Instant::now()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuer_settings_parse_and_refuse_symmetric_algorithms() {
        let parsed: IssuerConfig =
            "https://idp.example.com/ audience=hookflow algorithms=RS256,ES256".parse().expect("ok");
        assert_eq!(parsed.issuer, "https://idp.example.com");
        assert_eq!(parsed.algorithms, vec![Algorithm::RS256, Algorithm::ES256]);
        assert!("https://idp.example.com audience=a algorithms=HS256".parse::<IssuerConfig>().is_err());
        assert!("https://idp.example.com audience=a algorithms=none".parse::<IssuerConfig>().is_err());
        assert!("https://idp.example.com".parse::<IssuerConfig>().is_err(), "an audience is required");
        assert!("ftp://idp audience=a".parse::<IssuerConfig>().is_err());
        assert_eq!(parsed.max_lifetime, DEFAULT_MAX_LIFETIME);
        assert!(parsed.allowed_clients().next().is_none() && parsed.allows_email("x@anything.org"));
    }

    #[test]
    fn issuers_limit_clients_domains_and_lifetimes() {
        let parsed: IssuerConfig =
            "https://idp.example.com audience=a client_id=app clients=ci,cli domains=Example.COM,example.org \
             max_lifetime_s=3600"
                .parse()
                .expect("ok");
        assert_eq!(parsed.allowed_clients().collect::<Vec<_>>(), ["ci", "cli", "app"]);
        assert!(parsed.allows_email("ada@example.com") && parsed.allows_email("bob@example.org"));
        assert!(!parsed.allows_email("eve@example.net") && !parsed.allows_email("eve@sub.example.com"));
        assert_eq!(parsed.max_lifetime, Duration::from_secs(3600));
        assert!("https://idp.example.com audience=a max_lifetime_s=0".parse::<IssuerConfig>().is_err());
        assert!("https://idp.example.com audience=a max_lifetime_s=day".parse::<IssuerConfig>().is_err());
    }
}
