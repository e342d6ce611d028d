//! External OpenID providers the operator configured: their JWT access tokens (RFC 9068) are accepted as bearer
//! tokens. Per issuer: the audience, the algorithms (pinned: asymmetric only, never `none` nor HS*), keys from the
//! JWKS its discovery document names, fetched through the guarded client and cached by `kid` (an unknown `kid`
//! refetches at most once per [`REFETCH_INTERVAL`]). `exp`, `iss`, `aud` and `sub` are required. A person is found
//! by (issuer, `sub`); the first token of an unbound identity binds it to the user with its verified email, or
//! creates that user when invitations wait for the email.

use crate::http::auth::bearer::{BearerIdentity, LEEWAY_S};
use crate::http::error::{ApiError, ApiResult};
use crate::state::AppState;
use chrono::DateTime;
use hookflow_runner::outbound::{ClientOptions, Guard};
use hookflow_shared::api::runners::NetworkPolicy;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use reqwest::Url;
use serde::Deserialize;
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::RwLock;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Unknown key ids refetch the issuer's keys at most this often.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Largest discovery document, key set or userinfo answer read.
const MAX_DOCUMENT: usize = 512 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One configured issuer: `--oidc-issuer "https://idp.example.com audience=hookflow algorithms=RS256,ES256"`,
/// plus, for the app's sign-in button, `client_id=<public client>` and optionally `resource=<resource indicator>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    /// The public client (authorization code with PKCE, no secret) the app signs people in with.
    pub app_client_id: Option<String>,
    /// The resource indicator (RFC 8707) the app asks tokens for, when the provider wants one.
    pub app_resource: Option<String>,
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
        for part in parts {
            match part.split_once('=') {
                Some(("audience", value)) if !value.is_empty() => audience = Some(value.to_owned()),
                Some(("client_id", value)) if !value.is_empty() => app_client_id = Some(value.to_owned()),
                Some(("resource", value)) if !value.is_empty() => app_resource = Some(value.to_owned()),
                Some(("algorithms", value)) => {
                    for name in value.split(',') {
                        algorithms.push(asymmetric(name)?);
                    }
                }
                _ => {
                    return Err(format!(
                        "`{part}`: expected audience=..., algorithms=..., client_id=... or resource=..."
                    ));
                }
            }
        }
        let audience = audience.ok_or("name the audience: audience=<the aud your provider puts in tokens>")?;
        if algorithms.is_empty() {
            algorithms.push(Algorithm::RS256);
        }
        Ok(Self { issuer, audience, algorithms, app_client_id, app_resource })
    }
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

struct Provider {
    config: IssuerConfig,
    keys: RwLock<Keys>,
    fetching: tokio::sync::Mutex<()>,
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

    fn find(&self, issuer: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.config.issuer == issuer.trim_end_matches('/'))
    }
}

/// The operator chose these issuers: their addresses may be private (a provider inside the company network),
/// never link-local or cloud metadata.
fn client() -> reqwest::Client {
    Guard::new(NetworkPolicy::Private)
        .client(&ClientOptions { timeout: Some(FETCH_TIMEOUT), ..ClientOptions::default() })
}

async fn fetch_json<T: serde::de::DeserializeOwned>(url: &Url, bearer: Option<&str>) -> Result<T, String> {
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
    /// The key for `kid`, refetching the key set when it is unknown (at most once per interval).
    async fn key(&self, kid: &str) -> Option<DecodingKey> {
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

#[derive(Deserialize)]
struct ExternalClaims {
    sub: String,
    exp: i64,
    email: Option<String>,
    email_verified: Option<bool>,
}

/// Verifies an external provider's access token and answers the person it speaks for.
pub async fn authenticate(state: &AppState, issuer: &str, token: &str, header: &Header) -> ApiResult<BearerIdentity> {
    let provider = state.external.find(issuer).ok_or_else(ApiError::unauthorized)?;
    let config = &provider.config;
    if !config.algorithms.contains(&header.alg) {
        return Err(ApiError::unauthorized());
    }
    let kid = header.kid.as_deref().ok_or_else(ApiError::unauthorized)?;
    let key = provider.key(kid).await.ok_or_else(ApiError::unauthorized)?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[config.issuer.as_str(), &format!("{}/", config.issuer)]);
    validation.set_audience(&[config.audience.as_str()]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_nbf = true;
    validation.leeway = LEEWAY_S;
    let claims =
        jsonwebtoken::decode::<ExternalClaims>(token, &key, &validation).map_err(|_| ApiError::unauthorized())?.claims;
    let user_id = person(state, provider, &claims, token).await?.ok_or_else(ApiError::unauthorized)?;
    Ok(BearerIdentity {
        user_id,
        session_id: None,
        expires_at: DateTime::from_timestamp(claims.exp, 0).unwrap_or_default(),
        password_change_required: false,
    })
}

/// The user bound to (issuer, sub); an unbound identity binds to the user of its verified email, created when
/// invitations wait for it. `None`: nobody here knows this person.
async fn person(
    state: &AppState,
    provider: &Provider,
    claims: &ExternalClaims,
    token: &str,
) -> ApiResult<Option<Uuid>> {
    let issuer = &provider.config.issuer;
    let bound: Option<Uuid> =
        sqlx::query_scalar("SELECT user_id FROM user_identities WHERE issuer = $1 AND subject = $2")
            .bind(issuer)
            .bind(&claims.sub)
            .fetch_optional(&state.pool)
            .await?;
    if bound.is_some() {
        return Ok(bound);
    }
    let Some(email) = verified_email(provider, claims, token).await else { return Ok(None) };
    let mut tx = state.pool.begin().await?;
    let Some(user_id) = crate::http::auth::users::user_for_verified_email(&mut tx, &email).await? else {
        return Ok(None);
    };
    sqlx::query("INSERT INTO user_identities (issuer, subject, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
        .bind(issuer)
        .bind(&claims.sub)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(issuer = %issuer, user = %user_id, "external identity bound to a user");
    Ok(Some(user_id))
}

/// The token's verified email, or the userinfo endpoint's.
async fn verified_email(provider: &Provider, claims: &ExternalClaims, token: &str) -> Option<String> {
    if let (Some(email), Some(true)) = (&claims.email, claims.email_verified) {
        return Some(email.to_lowercase());
    }
    #[derive(Deserialize)]
    struct UserInfo {
        sub: String,
        email: Option<String>,
        email_verified: Option<bool>,
    }
    let url = provider.keys.read().unwrap_or_else(|e| e.into_inner()).userinfo.clone()?;
    let info: UserInfo = fetch_json(&url, Some(token)).await.ok()?;
    match (info.sub == claims.sub, info.email, info.email_verified) {
        (true, Some(email), Some(true)) => Some(email.to_lowercase()),
        _ => None,
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
    }
}
