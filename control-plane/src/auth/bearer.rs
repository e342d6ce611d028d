//! `Authorization: Bearer` tokens of people: access tokens of the built-in provider (EdDSA, checked against its
//! published keys and the session they name) and JWT access tokens of configured external providers. Every
//! failure is the same 401; the token itself is never logged.

use crate::auth::component::Auth;
use crate::auth::external_tokens::{self, Resolved, Unlinked};
use crate::auth::identity::{BearerIdentity, LEEWAY_S};
use crate::auth::people_cache::SessionState;
use crate::auth::sessions;
use crate::error::{ApiError, ApiResult};
use chrono::DateTime;
use hookflow_shared::{SessionId, UserId};
use jsonwebtoken::{Algorithm, Validation};
use serde::{Deserialize, Serialize};

/// The audience of the built-in provider's access tokens.
pub const AUDIENCE: &str = "hookflow";

/// The claims of the built-in provider's access tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub aud: String,
    /// The user.
    pub sub: UserId,
    /// The session.
    pub sid: SessionId,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
}

/// Who a bearer token speaks for where a person may be new here (accepting an invitation): someone known, or an
/// external identity nobody has linked yet.
#[derive(Debug)]
pub enum Signer<'a> {
    Known(BearerIdentity),
    Unlinked(Unlinked<'a>),
}

/// Only the issuer, read before verification to choose the keys that verify.
#[derive(Deserialize)]
struct Issuer {
    iss: Option<String>,
}

/// Verifies a bearer token and answers who it speaks for.
pub async fn authenticate(auth: &Auth, token: &str) -> ApiResult<BearerIdentity> {
    match signer(auth, token, true).await? {
        Signer::Known(identity) => Ok(identity),
        Signer::Unlinked(_) => Err(ApiError::unauthorized()),
    }
}

/// Verifies a bearer token that may speak for an external identity nobody has linked yet (looked up afresh).
pub async fn authenticate_signer<'a>(auth: &'a Auth, token: &str) -> ApiResult<Signer<'a>> {
    signer(auth, token, false).await
}

async fn signer<'a>(auth: &'a Auth, token: &str, remember_unknown: bool) -> ApiResult<Signer<'a>> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| ApiError::unauthorized())?;
    let issuer: Issuer =
        jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|_| ApiError::unauthorized())?;
    let issuer = issuer.iss.ok_or_else(ApiError::unauthorized)?;
    if issuer == auth.public_url {
        let kid = header.kid.ok_or_else(ApiError::unauthorized)?;
        return built_in(auth, token, &kid).await.map(Signer::Known);
    }
    Ok(match external_tokens::resolve(auth, &issuer, token, &header, remember_unknown).await? {
        Resolved::Known(identity) => Signer::Known(identity),
        Resolved::Unlinked(unlinked) => Signer::Unlinked(unlinked),
    })
}

/// Validation of the built-in provider's tokens: EdDSA only, this server as issuer, `hookflow` as audience.
pub fn built_in_validation(issuer: &str) -> Validation {
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[AUDIENCE]);
    validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
    validation.validate_nbf = true;
    validation.leeway = LEEWAY_S;
    validation
}

async fn built_in(auth: &Auth, token: &str, kid: &str) -> ApiResult<BearerIdentity> {
    let key = auth.signing.verifying_key(&auth.pool, &auth.master_key, kid).await;
    let key = key.ok_or_else(ApiError::unauthorized)?;
    let claims = jsonwebtoken::decode::<AccessClaims>(token, &key, &built_in_validation(&auth.public_url))
        .map_err(|_| ApiError::unauthorized())?
        .claims;
    let session = session_state(auth, claims.sid).await?;
    if !session.live || session.user_id != claims.sub {
        return Err(ApiError::unauthorized());
    }
    Ok(BearerIdentity {
        user_id: claims.sub,
        session_id: Some(claims.sid),
        expires_at: DateTime::from_timestamp(claims.exp, 0).unwrap_or_default(),
        password_change_required: session.password_change_required,
        external_token: None,
    })
}

/// A session's state: from memory, or the database (an unknown session is not live).
async fn session_state(auth: &Auth, session_id: SessionId) -> ApiResult<SessionState> {
    if let Some(known) = auth.people.session(session_id) {
        return Ok(known);
    }
    let session = sessions::state(&auth.pool, session_id).await?;
    auth.people.store_session(session_id, session);
    Ok(session)
}
