//! Password resets of built-in accounts, by mail (only with SMTP configured; 404 otherwise):
//! `POST /auth/password-reset` answers 202 at once for any email, and the lookup, the token and the mail happen
//! after the answer, so neither the answer nor its time tells whether an account exists. A built-in account
//! (one with a password) gets a link holding a one-time token (stored as its SHA-256, valid 30 minutes, used
//! once); `POST /auth/password-reset/confirm` sets the new password, kills the
//! account's other links and ends every session of that person.
//!
//! How many links are mailed: at most three per 30 minutes per account and requester (the asker's IPv4 address or
//! IPv6 /64, `mail::allowance`), so a stranger asking for someone's account never uses up the owner's allowance;
//! and at most [`RESETS_PER_ACCOUNT`] per 30 minutes per account whoever asks, which bounds the mail one person
//! can be flooded with.

use crate::api::people::mailed::{self, in_background, invalid_token};
use crate::api::people::sessions::audit_everywhere;
use crate::api::people::{passwords, store};
use crate::auth::Actor;
use crate::auth::sessions;
use crate::error::{ApiError, ApiResult};
use crate::http::client_address::{ClientAddress, budget_key};
use crate::mail::{Lane, Mailer};
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hookflow_shared::UserId;
use hookflow_shared::api::people::{PasswordResetConfirm, PasswordResetRequest, PasswordResetRequested};
use hookflow_shared::token::{self, TokenKind};
use std::net::IpAddr;

/// How long a reset link works.
pub const RESET_TTL: chrono::TimeDelta = chrono::TimeDelta::minutes(30);
/// Links one account may be sent per `RESET_TTL`, by all requesters together.
pub const RESETS_PER_ACCOUNT: i64 = 20;

/// Ask for a password reset: a built-in account with this email gets a mail with a one-time link (valid 30
/// minutes). The answer is the same, in the same time, whether or not the account exists.
#[utoipa::path(post, operation_id = "request_password_reset", path = "/auth/password-reset",
    request_body = PasswordResetRequest, security(()),
    responses((status = 202, body = PasswordResetRequested,
            description = "Asked for (the same answer whether or not the account exists)"),
        (status = 400), (status = 404, description = "No SMTP is configured on this server"),
        (status = 429, description = "Too many resets asked for from this address")))]
async fn request_reset(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<PasswordResetRequested>)> {
    let mailer = mailed::mailer(&app, "password reset")?;
    let body: PasswordResetRequest = crate::extract::parse_json(&body)?;
    app.sign_ins.password_reset(client)?;
    let email = body.email.as_str().to_owned();
    let requester = budget_key(client);
    in_background("password reset", async move { mail_reset(&app, &mailer, &email, requester).await });
    Ok((StatusCode::ACCEPTED, Json(PasswordResetRequested { status: "requested".to_owned() })))
}

/// After the answer: the link to a built-in account with `email`, if there is one.
async fn mail_reset(app: &AppState, mailer: &Mailer, email: &str, requester: IpAddr) -> ApiResult<()> {
    let mut conn = crate::db::begin::begin(&app.pool).await?;
    let Some(user) = store::find_by_email(&mut conn, email).await?.filter(|u| u.password_hash.is_some()) else {
        return Ok(());
    };
    // One request of this account at a time, so the count below holds.
    sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE").bind(user.id).execute(&mut *conn).await?;
    sqlx::query("DELETE FROM password_resets WHERE user_id = $1 AND expires_at < now() - interval '1 day'")
        .bind(user.id)
        .execute(&mut *conn)
        .await?;
    let recent: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM password_resets WHERE user_id = $1 AND created_at > now() - make_interval(secs => $2)",
    )
    .bind(user.id)
    .bind(RESET_TTL.num_seconds() as f64)
    .fetch_one(&mut *conn)
    .await?;
    if recent >= RESETS_PER_ACCOUNT {
        tracing::info!("a password reset was not mailed: the account was sent {RESETS_PER_ACCOUNT} links lately");
        return Ok(());
    }
    if !mailer.allow(&format!("reset:{}", user.id), requester) {
        tracing::info!("a password reset was not mailed: this requester asked for this account's links lately");
        return Ok(());
    }
    let token = crate::crypto::new_token(TokenKind::PasswordReset);
    sqlx::query("INSERT INTO password_resets (token_hash, user_id, expires_at) VALUES ($1, $2, $3)")
        .bind(token::hash(&token))
        .bind(user.id)
        .bind(chrono::Utc::now() + RESET_TTL)
        .execute(&mut *conn)
        .await?;
    conn.commit().await?;
    let text = format!(
        "Someone (hopefully you) asked to reset the password of your hookflow account {email} at {server}.\n\n\
         To choose a new password, open this link within 30 minutes (it works once):\n\n{link}\n\n\
         Using it signs you out everywhere. If you did not ask for this, ignore this mail: your password stays \
         as it is.\n",
        server = app.settings.public_url,
        link = mailed::link(app, "reset-password", &token),
    );
    mailer.send(Lane::Account, email, "Reset your password", text).map_err(ApiError::internal_because)
}

/// Set a new password with a mailed reset link's token: the old password stops working, every session of the
/// person ends, and the token (and any other reset link of the account) is used up.
#[utoipa::path(post, operation_id = "confirm_password_reset", path = "/auth/password-reset/confirm",
    request_body = PasswordResetConfirm, security(()),
    responses((status = 204, description = "The password is changed; every session of the person ended"),
        (status = 400, description = "`invalid_token`: unknown, used or expired; or `invalid_request` naming the field"),
        (status = 404, description = "No SMTP is configured on this server"),
        (status = 429, description = "Too many failed attempts from this address")))]
async fn confirm_reset(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    body: axum::body::Bytes,
) -> ApiResult<StatusCode> {
    mailed::mailer(&app, "password reset")?;
    let body: PasswordResetConfirm = crate::extract::parse_json(&body)?;
    passwords::check_new(&body.password).map_err(|e| ApiError::invalid(format!("invalid field `password`: {e}")))?;
    TokenKind::PasswordReset.check(&body.token).map_err(|_| invalid_token())?;
    let (address, hash) = (Some(client), token::hash(&body.token));
    app.auth.credential_failures.before_lookup(address, &hash)?;
    // Looked up before hashing (argon2 is dear); taken for good, atomically, after.
    let live: Option<UserId> = sqlx::query_scalar(
        "SELECT user_id FROM password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()",
    )
    .bind(&hash)
    .fetch_optional(&app.pool)
    .await?;
    if live.is_none() {
        app.auth.credential_failures.not_found(address, hash);
        return Err(invalid_token());
    }
    let password_hash = passwords::hash(body.password).await.map_err(ApiError::internal_because)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let user_id: UserId = sqlx::query_scalar(
        "UPDATE password_resets SET used_at = now()
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING user_id",
    )
    .bind(&hash)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(invalid_token)?;
    store::set_password(&mut tx, user_id, &password_hash, false).await?;
    sqlx::query("UPDATE password_resets SET used_at = now() WHERE user_id = $1 AND used_at IS NULL")
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    sessions::revoke_other_sessions(&mut tx, user_id, None).await?;
    audit_everywhere(&mut tx, user_id, Actor::Address(client), "user.password_reset").await?;
    Invalidation::User(user_id).announce(&mut tx).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::User(user_id));
    Ok(StatusCode::NO_CONTENT)
}

pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new().routes(routes!(request_reset)).routes(routes!(confirm_reset))
}
