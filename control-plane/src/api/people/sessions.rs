//! Browser sessions of the built-in identity provider: sign in, refresh (single use; a replayed refresh token
//! revokes its session), read and end the session, change the password, sign up (when enabled), and the JWKS.
//! Every bad credential answers the same 401; nothing here logs or records a password or a token.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Person;
use crate::api::people::store;
use crate::api::people::{passwords, tokens};
use crate::auth::Actor;
use crate::auth::external_tokens;
use crate::auth::sessions::{self, Refreshed};
use crate::auth::users::memberships;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::http::client_address::ClientAddress;
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::people::{ChangePassword, OrganizationRole, Refresh, SessionInfo, SessionTokens, SignIn};
use hookflow_shared::{OrgId, SessionId, UserId};
use sqlx::PgConnection;

/// Records `action` for `user_id` in each organization they belong to.
pub(super) async fn audit_everywhere(
    conn: &mut PgConnection,
    user_id: UserId,
    actor: Actor,
    action: &str,
) -> ApiResult<()> {
    for (org_id, _) in memberships(conn, user_id).await? {
        let event = AuditEvent { org_id, actor, action, target: user_id.to_string(), details: serde_json::json!({}) };
        audit::record(conn, event).await?;
    }
    Ok(())
}

/// A session's tokens as the answer carries them: the refresh token in the body, or in the cookie for the app.
async fn answer(
    app: &AppState,
    headers: &HeaderMap,
    user: &store::UserRow,
    session_id: SessionId,
    refresh: String,
    status: StatusCode,
) -> ApiResult<Response> {
    let (access_token, expires_at) = tokens::access_token(app, user.id, session_id).await?;
    let cookie = tokens::wants_cookie(headers);
    let body = SessionTokens {
        access_token,
        refresh_token: (!cookie).then(|| refresh.clone()),
        expires_at: expires_at.into(),
        user: user.api(),
        password_change_required: user.password_change_required,
    };
    let mut response = (status, Json(body)).into_response();
    if cookie {
        let mut conn = app.pool.acquire().await?;
        let session_ends = sessions::session_expiry(&mut conn, session_id).await?;
        response.headers_mut().insert(header::SET_COOKIE, tokens::refresh_cookie(app, &refresh, session_ends));
    }
    Ok(response)
}

/// Sign in with an email and a password.
#[utoipa::path(post, operation_id = "create_session", path = "/auth/sessions", request_body = SignIn, security(()),
    responses((status = 201, body = SessionTokens), (status = 400), (status = 401)))]
async fn sign_in(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SignIn>,
) -> ApiResult<Response> {
    let email = body.email.as_str();
    let attempt = app.sign_ins.begin(email, client)?;
    let mut conn = app.pool.acquire().await?;
    let user = store::find_by_email(&mut conn, email).await?;
    let stored = user.as_ref().and_then(|u| u.password_hash.clone());
    if !passwords::verify(stored, body.password).await {
        // The account's first failure of the throttle window is audited; the rest are counted, not written.
        if attempt.failed()
            && let Some(user) = &user
        {
            audit_everywhere(&mut conn, user.id, Actor::Address(client), "user.sign_in_failed").await?;
        }
        tracing::info!(known = user.is_some(), address = %client, "sign-in failed");
        return Err(ApiError::unauthorized());
    }
    let user = user.ok_or_else(ApiError::unauthorized)?;
    attempt.succeeded();
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let (session_id, refresh) =
        sessions::open_session(&mut tx, user.id, chrono::Utc::now() + app.settings.session_ttl).await?;
    audit_everywhere(&mut tx, user.id, Actor::User(user.id), "user.signed_in").await?;
    tx.commit().await?;
    answer(&app, &headers, &user, session_id, refresh, StatusCode::CREATED).await
}

/// Trade a refresh token (body, or the app's cookie) for new tokens; the one presented dies.
#[utoipa::path(post, operation_id = "refresh_session", path = "/auth/sessions/refresh", request_body = Refresh, security(()),
    responses((status = 201, body = SessionTokens), (status = 400), (status = 401), (status = 403)))]
async fn refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let body: Refresh = if body.is_empty() { Refresh::default() } else { crate::extract::parse_json(&body)? };
    let presented = tokens::presented_refresh(&headers, body.refresh_token)?;
    // Failed lookups are budgeted per address, and a dead token (unknown, or its session ended: both final) is
    // answered from memory for a while (`auth::failures`).
    hookflow_shared::token::TokenKind::Refresh.check(&presented).map_err(|_| ApiError::unauthorized())?;
    let (address, hash) = (Some(client), hookflow_shared::token::hash(&presented));
    app.auth.credential_failures.before_lookup(address, &hash)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    match sessions::use_refresh_token(&mut tx, &presented).await? {
        Refreshed::Rotated { session_id, user_id, refresh } => {
            let user = store::find(&mut tx, user_id).await?.ok_or_else(ApiError::unauthorized)?;
            tx.commit().await?;
            answer(&app, &headers, &user, session_id, refresh, StatusCode::CREATED).await
        }
        Refreshed::Reused { session_id, user_id } => {
            Invalidation::Session(session_id).announce(&mut tx).await?;
            audit_everywhere(&mut tx, user_id, Actor::User(user_id), "session.refresh_reused").await?;
            tx.commit().await?;
            app.invalidate(Invalidation::Session(session_id));
            tracing::warn!(session = %session_id, "a used refresh token was presented again: the session is revoked");
            app.auth.credential_failures.failed(address);
            Err(ApiError::unauthorized())
        }
        Refreshed::Dead => {
            app.auth.credential_failures.not_found(address, hash);
            Err(ApiError::unauthorized())
        }
    }
}

/// The signed-in person, their organizations and roles.
#[utoipa::path(get, path = "/auth/session", security(("bearer" = [])), responses((status = 200, body = SessionInfo)))]
async fn get_session(person: Person) -> ApiResult<Json<SessionInfo>> {
    let (app, identity) = (&person.app, person.identity);
    let mut conn = app.pool.acquire().await?;
    let user = store::find(&mut conn, identity.user_id).await?.ok_or_else(ApiError::unauthorized)?;
    let rows: Vec<(OrgId, String, String)> = sqlx::query_as(
        "SELECT o.id, o.name, m.role FROM memberships m JOIN organizations o ON o.id = m.organization_id
         WHERE m.user_id = $1 ORDER BY o.name, o.id",
    )
    .bind(identity.user_id)
    .fetch_all(&mut *conn)
    .await?;
    let organizations = rows
        .into_iter()
        .filter_map(|(id, name, role)| Some(OrganizationRole { id, name, role: hookflow_shared::Role::parse(&role)? }))
        .collect();
    Ok(Json(SessionInfo {
        user: user.api(),
        organizations,
        expires_at: identity.expires_at.into(),
        password_change_required: identity.password_change_required,
    }))
}

/// Sign out: the session's tokens stop working at once, on every replica. An external provider's token presented
/// here is refused from now on until it expires.
#[utoipa::path(delete, path = "/auth/session", security(("bearer" = [])), responses((status = 204)))]
async fn end_session(person: Person) -> ApiResult<Response> {
    let app = &person.app;
    if let Some(session_id) = person.identity.session_id {
        let mut tx = crate::db::begin::begin(&app.pool).await?;
        sessions::revoke_session(&mut tx, session_id).await?;
        Invalidation::Session(session_id).announce(&mut tx).await?;
        tx.commit().await?;
        app.invalidate(Invalidation::Session(session_id));
    }
    if let Some(hash) = person.identity.external_token {
        external_tokens::revoke_external_token(&app.pool, &hash, person.identity.expires_at).await?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, tokens::clear_cookie(app));
    Ok(response)
}

/// Change the password (the only thing a session opened with a one-time password may do); the person's other
/// sessions end.
#[utoipa::path(put, path = "/auth/password", request_body = ChangePassword, security(("bearer" = [])),
    responses((status = 204), (status = 401)))]
async fn change_password(
    person: Person,
    ClientAddress(client): ClientAddress,
    ApiJson(body): ApiJson<ChangePassword>,
) -> ApiResult<StatusCode> {
    let app = &person.app;
    let user_id = person.identity.user_id;
    passwords::check_new(&body.new_password)
        .map_err(|e| ApiError::invalid(format!("invalid field `new_password`: {e}")))?;
    let mut conn = app.pool.acquire().await?;
    let user = store::find(&mut conn, user_id).await?.ok_or_else(ApiError::unauthorized)?;
    let attempt = app.sign_ins.begin(&user.email, client)?;
    if !passwords::verify(user.password_hash.clone(), body.current_password).await {
        attempt.failed();
        return Err(ApiError::invalid("invalid field `current_password`: it is not your current password"));
    }
    attempt.succeeded();
    let hash = passwords::hash(body.new_password).await.map_err(ApiError::internal_because)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    store::set_password(&mut tx, user_id, &hash, false).await?;
    sessions::revoke_other_sessions(&mut tx, user_id, person.identity.session_id).await?;
    audit_everywhere(&mut tx, user_id, Actor::User(user_id), "user.password_changed").await?;
    Invalidation::User(user_id).announce(&mut tx).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::User(user_id));
    Ok(StatusCode::NO_CONTENT)
}

/// The built-in identity provider's public keys.
#[utoipa::path(get, operation_id = "get_signing_keys", path = "/.well-known/jwks.json", security(()),
    responses((status = 200, description = "A JSON Web Key Set (Ed25519 keys, `alg` EdDSA)",
        body = hookflow_shared::api::people::Jwks)))]
async fn jwks(State(app): State<AppState>) -> ApiResult<Json<hookflow_shared::api::people::Jwks>> {
    let keys = app.auth.signing.jwks(&app.pool, &app.settings.master_key).await;
    Ok(Json(keys.map_err(|e| ApiError::internal_because(format!("signing keys: {e}")))?))
}

pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(sign_in))
        .routes(routes!(refresh))
        .routes(routes!(get_session, end_session))
        .routes(routes!(change_password))
        .routes(routes!(jwks))
}
