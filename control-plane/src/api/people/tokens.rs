//! Issuing a session's tokens: the EdDSA access token (the user, the session, this server as issuer, a short
//! life) and the refresh token, in the body or, for the app, in an HttpOnly cookie scoped to `/auth`. A request
//! that wants the cookie (or presents it) carries the app's `X-Hookflow-CSRF` header, which a form on another
//! site cannot send.

use crate::auth::bearer::{AUDIENCE, AccessClaims};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, Utc};
use hookflow_shared::wire::header as wire_header;
use hookflow_shared::{ErrorCode, SessionId, UserId};
use jsonwebtoken::{Algorithm, Header};

/// The refresh cookie's name.
pub const REFRESH_COOKIE: &str = "hookflow_refresh";

/// Signs an access token for a session; answers it with its expiry.
pub async fn access_token(
    app: &AppState,
    user_id: UserId,
    session_id: SessionId,
) -> ApiResult<(String, DateTime<Utc>)> {
    let settings = &app.settings;
    let (kid, key) = app
        .auth
        .signing
        .signing_key(&app.pool, &settings.master_key)
        .await
        .map_err(|e| ApiError::internal_because(format!("signing keys: {e}")))?;
    let now = Utc::now();
    let expires_at = now + settings.access_token_ttl;
    let claims = AccessClaims {
        iss: settings.public_url.clone(),
        aud: AUDIENCE.to_owned(),
        sub: user_id,
        sid: session_id,
        iat: now.timestamp(),
        nbf: now.timestamp(),
        exp: expires_at.timestamp(),
    };
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid);
    let token = jsonwebtoken::encode(&header, &claims, &key).map_err(ApiError::internal_because)?;
    Ok((token, expires_at))
}

/// Whether the request is the app's (it sends `X-Hookflow-CSRF`): its refresh token travels in the cookie.
pub fn wants_cookie(headers: &HeaderMap) -> bool {
    headers.contains_key(wire_header::CSRF)
}

/// The refresh cookie holding `token` until `expires_at`.
pub fn refresh_cookie(app: &AppState, token: &str, expires_at: DateTime<Utc>) -> HeaderValue {
    let max_age = (expires_at - Utc::now()).num_seconds().max(0);
    cookie(app, token, max_age)
}

/// The header that removes the refresh cookie.
pub fn clear_cookie(app: &AppState) -> HeaderValue {
    cookie(app, "", 0)
}

fn cookie(app: &AppState, value: &str, max_age: i64) -> HeaderValue {
    let secure = if app.settings.public_url.starts_with("https://") { "; Secure" } else { "" };
    let text = format!("{REFRESH_COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/auth; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The refresh token of a request: the body's, or the cookie's (which needs the CSRF header).
pub fn presented_refresh(headers: &HeaderMap, from_body: Option<String>) -> ApiResult<String> {
    if let Some(token) = from_body.filter(|t| !t.is_empty()) {
        return Ok(token);
    }
    let from_cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == REFRESH_COOKIE)
        .map(|(_, value)| value.to_owned());
    let token = from_cookie.filter(|t| !t.is_empty()).ok_or_else(ApiError::unauthorized)?;
    if !wants_cookie(headers) {
        return Err(ApiError::new(ErrorCode::CsrfRequired, "a cookie-borne refresh needs the X-Hookflow-CSRF header"));
    }
    Ok(token)
}
