//! External providers' access tokens (RFC 9068) as bearer tokens. A token is verified against its issuer's
//! settings: pinned algorithms and audience; `exp`, `iss`, `aud` and `sub` required; a `typ` other than `at+jwt`
//! refused (an ID token is no access token); its `client_id` (or `azp`) among the allowed clients when the operator
//! named any; a lifetime (`exp - iat`) within the issuer's cap. A token whose holder signed out is refused on every
//! replica until it expires (`revoked_tokens`). The person is found by (issuer, `sub`): an identity nobody linked
//! is nobody here, whatever its email. It becomes someone only by accepting an invitation or by being linked from a
//! signed-in account. Unknown identities are remembered, bounded and briefly, so their requests cost no database
//! round trip and never fetch userinfo.

use crate::auth::component::Auth;
use crate::auth::external::{Provider, fetch_json};
use crate::auth::identity::{BearerIdentity, LEEWAY_S};
use crate::auth::users::normalize_email;
use crate::error::{ApiError, ApiResult};
use chrono::{DateTime, Utc};
use hookflow_shared::UserId;
use jsonwebtoken::{Header, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
struct ExternalClaims {
    sub: String,
    exp: i64,
    iat: Option<i64>,
    client_id: Option<String>,
    azp: Option<String>,
    email: Option<String>,
    email_verified: Option<bool>,
}

/// A verified token whose identity nobody here has linked yet.
#[derive(Debug)]
pub struct Unlinked<'a> {
    provider: &'a Provider,
    pub issuer: String,
    pub subject: String,
    /// The token's own email, when it says the provider verified it.
    claimed_email: Option<String>,
}

/// Who a verified external token speaks for.
#[derive(Debug)]
pub enum Resolved<'a> {
    Known(BearerIdentity),
    Unlinked(Unlinked<'a>),
}

/// How a signed-out token is remembered: the SHA-256 of its signed part (header and claims, before the last `.`).
/// Not of the whole token: an ECDSA signature can be re-encoded (`s` -> `n - s`) into another valid one, which
/// would make a signed-out token look new.
pub fn token_hash(token: &str) -> [u8; 32] {
    let signed = token.rsplit_once('.').map_or(token, |(signed, _)| signed);
    Sha256::digest(signed.as_bytes()).into()
}

/// RFC 9068 types access tokens `at+jwt`; a token typed otherwise (an ID token's `JWT`) is not one.
fn typed_as_access_token(header: &Header) -> bool {
    header
        .typ
        .as_deref()
        .is_none_or(|t| t.eq_ignore_ascii_case("at+jwt") || t.eq_ignore_ascii_case("application/at+jwt"))
}

/// Checks the token's signature, claims, client and lifetime against its issuer's settings.
async fn verify<'a>(
    auth: &'a Auth,
    issuer: &str,
    token: &str,
    header: &Header,
) -> ApiResult<(&'a Provider, ExternalClaims)> {
    let provider = auth.external.find(issuer).ok_or_else(ApiError::unauthorized)?;
    let config = &provider.config;
    if !config.algorithms.contains(&header.alg) || !typed_as_access_token(header) {
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
    let mut allowed = config.allowed_clients().peekable();
    if allowed.peek().is_some() {
        let client = claims.client_id.as_deref().or(claims.azp.as_deref());
        if !client.is_some_and(|client| allowed.any(|a| a == client)) {
            return Err(ApiError::unauthorized());
        }
    }
    // A lifetime counts from when the token was issued, or from now when it says nothing (or a time to come).
    let now = Utc::now().timestamp();
    let issued = claims.iat.map_or(now, |iat| iat.min(now));
    let cap = i64::try_from(config.max_lifetime.as_secs()).unwrap_or(i64::MAX);
    if claims.exp.saturating_sub(issued) > cap {
        return Err(ApiError::unauthorized());
    }
    Ok((provider, claims))
}

/// Verifies an external token and finds its person. `remember_unknown`: answer 401 at once for an identity
/// recently found unknown, and remember one found unknown now (requests; accepting and linking look afresh).
pub async fn resolve<'a>(
    auth: &'a Auth,
    issuer: &str,
    token: &str,
    header: &Header,
    remember_unknown: bool,
) -> ApiResult<Resolved<'a>> {
    let (provider, claims) = verify(auth, issuer, token, header).await?;
    let issuer = provider.config.issuer.clone();
    let identity = format!("{issuer}\n{}", claims.sub);
    if remember_unknown && auth.people.identity_unknown(&identity) {
        return Err(ApiError::unauthorized());
    }
    let hash = token_hash(token);
    let (user_id, revoked): (Option<UserId>, bool) = sqlx::query_as(
        "SELECT (SELECT user_id FROM user_identities WHERE issuer = $1 AND subject = $2),
                EXISTS (SELECT 1 FROM revoked_tokens WHERE token_hash = $3)",
    )
    .bind(&issuer)
    .bind(&claims.sub)
    .bind(&hash[..])
    .fetch_one(&auth.pool)
    .await?;
    if revoked {
        return Err(ApiError::unauthorized());
    }
    let Some(user_id) = user_id else {
        if remember_unknown {
            auth.people.store_unknown_identity(identity);
        }
        let claimed_email = claims.email.filter(|_| claims.email_verified == Some(true));
        return Ok(Resolved::Unlinked(Unlinked { provider, issuer, subject: claims.sub, claimed_email }));
    };
    Ok(Resolved::Known(BearerIdentity {
        user_id,
        session_id: None,
        expires_at: DateTime::from_timestamp(claims.exp, 0).unwrap_or_default(),
        password_change_required: false,
        external_token: Some(hash),
    }))
}

/// Refuses an external provider's token (by its hash) until it expires, on every replica (each request looks it
/// up); revocations already past their token's expiry go.
pub async fn revoke_external_token(
    pool: &sqlx::PgPool,
    token_hash: &[u8],
    expires_at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let mut tx = crate::db::begin::begin(&pool).await?;
    sqlx::query("DELETE FROM revoked_tokens WHERE expires_at < now()").execute(&mut *tx).await?;
    sqlx::query("INSERT INTO revoked_tokens (token_hash, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(token_hash)
        .bind(expires_at + chrono::TimeDelta::seconds(LEEWAY_S as i64))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

impl Unlinked<'_> {
    /// The identity's verified email (the token's, or the provider's userinfo answer), which must lie in the
    /// issuer's domains when the operator named some. Fetched only when an identity is being linked or accepts an
    /// invitation, never on a plain request.
    pub async fn verified_email(&self, token: &str) -> ApiResult<String> {
        let email = match &self.claimed_email {
            Some(email) => Some(email.clone()),
            None => self.userinfo_email(token).await,
        };
        let email = email
            .as_deref()
            .and_then(normalize_email)
            .ok_or_else(|| ApiError::invalid("your identity provider did not give a verified email address for you"))?;
        if !self.provider.config.allows_email(&email) {
            return Err(ApiError::invalid(
                "this identity provider's people must have an email in the domains the operator named",
            ));
        }
        Ok(email)
    }

    /// Refuses an identity outside the issuer's domains (when the operator named some).
    pub async fn check_domain(&self, token: &str) -> ApiResult<()> {
        if self.provider.config.domains.is_empty() { Ok(()) } else { self.verified_email(token).await.map(|_| ()) }
    }

    async fn userinfo_email(&self, token: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct UserInfo {
            sub: String,
            email: Option<String>,
            email_verified: Option<bool>,
        }
        let url = self.provider.userinfo()?;
        let info: UserInfo = fetch_json(&url, Some(token)).await.ok()?;
        match (info.sub == self.subject, info.email, info.email_verified) {
            (true, Some(email), Some(true)) => Some(email),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::Algorithm;

    #[test]
    fn a_re_encoded_signature_is_the_same_signed_out_token() {
        // ECDSA's (r, s) and (r, n - s) both verify: the signed part, not the signature, names the token.
        assert_eq!(token_hash("aGVhZA.Y2xhaW1z.c2lnMQ"), token_hash("aGVhZA.Y2xhaW1z.c2lnMg"));
        assert_ne!(token_hash("aGVhZA.Y2xhaW1z.c2lnMQ"), token_hash("aGVhZA.b3RoZXI.c2lnMQ"));
    }

    #[test]
    fn only_access_tokens_are_typed_right() {
        let mut header = Header::new(Algorithm::RS256);
        assert!(!typed_as_access_token(&header), "an ID token's `JWT`");
        for typ in ["at+jwt", "AT+JWT", "application/at+jwt"] {
            header.typ = Some(typ.into());
            assert!(typed_as_access_token(&header), "{typ}");
        }
        header.typ = None;
        assert!(typed_as_access_token(&header), "no typ: the client and lifetime checks decide");
    }
}
