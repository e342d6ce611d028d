//! Sign-up with a confirmed email (with `--signup` and SMTP configured): `POST /auth/signup` answers 202
//! `{"status": "confirmation_sent"}` for any email, after hashing the password either way; the lookup and the
//! mail happen after the answer. A new email gets a link whose one-time token (stored as its SHA-256 beside the
//! password's hash and the organization's name, valid 24 hours) makes the account through
//! `POST /auth/signup/confirm`; a registered email's owner is told someone tried to sign up with it (the mail
//! holds no link). At most three mails per email per 30 minutes per requester (the asker's IPv4 address or IPv6
//! /64, `mail::allowance`), so a stranger never uses up the owner's allowance, and at most
//! [`MAILS_PER_EMAIL`] per email per 30 minutes whoever asks.

use crate::api::people::accounts::{create_account, signed_up};
use crate::api::people::mailed::{self, in_background, invalid_token};
use crate::api::people::store;
use crate::error::{ApiError, ApiResult};
use crate::http::client_address::ClientAddress;
use crate::mail::{Lane, Mailer};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::people::{SignedUp, SignupConfirm, SignupPending};
use hookflow_shared::token::{self, TokenKind};
use std::net::IpAddr;

/// How long a confirmation link works.
pub const CONFIRMATION_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(24);
/// Mails one email may be sent per 30 minutes, by all requesters together.
pub const MAILS_PER_EMAIL: i64 = 20;

/// The answer to every sign-up when mail is on; the rest happens after it.
pub(super) fn pending(
    app: AppState,
    mailer: Mailer,
    email: String,
    password_hash: String,
    organization_name: String,
    requester: IpAddr,
) -> ApiResult<Response> {
    in_background("sign-up confirmation", async move {
        mail_confirmation(&app, &mailer, &email, &password_hash, &organization_name, requester).await
    });
    let body = SignupPending { status: "confirmation_sent".to_owned() };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

async fn mail_confirmation(
    app: &AppState,
    mailer: &Mailer,
    email: &str,
    password_hash: &str,
    organization_name: &str,
    requester: IpAddr,
) -> ApiResult<()> {
    let mut conn = crate::db::begin::begin(&app.pool).await?;
    // One request of this email at a time, so the count below holds.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 50))").bind(email).execute(&mut *conn).await?;
    sqlx::query("DELETE FROM signup_confirmations WHERE email = $1 AND expires_at < now() - interval '1 day'")
        .bind(email)
        .execute(&mut *conn)
        .await?;
    let recent: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM signup_confirmations WHERE email = $1 AND created_at > now() - interval '30 minutes'",
    )
    .bind(email)
    .fetch_one(&mut *conn)
    .await?;
    if recent >= MAILS_PER_EMAIL {
        tracing::info!("a sign-up was not mailed: the email was sent {MAILS_PER_EMAIL} mails lately");
        return Ok(());
    }
    if !mailer.allow(&format!("signup:{email}"), requester) {
        tracing::info!("a sign-up was not mailed: this requester asked for this email's mails lately");
        return Ok(());
    }
    let registered = store::find_by_email(&mut conn, email).await?.is_some();
    let token = crate::crypto::new_token(TokenKind::SignupConfirmation);
    // A registered email's row is born used: it only counts towards the mails the email may be sent.
    sqlx::query(
        "INSERT INTO signup_confirmations (token_hash, email, password_hash, organization_name, expires_at, used_at)
         VALUES ($1, $2, $3, $4, $5, CASE WHEN $6 THEN now() END)",
    )
    .bind(token::hash(&token))
    .bind(email)
    .bind(if registered { "" } else { password_hash })
    .bind(organization_name)
    .bind(chrono::Utc::now() + CONFIRMATION_TTL)
    .bind(registered)
    .execute(&mut *conn)
    .await?;
    conn.commit().await?;
    let server = &app.settings.public_url;
    let (subject, text) = if registered {
        let text = format!(
            "Someone tried to sign up at {server} with your email, {email}, which has an account there \
             already. No account was made and nothing changed.\n\n\
             If it was you, sign in instead; if you forgot your password, use \"Forgot password?\" on the sign-in \
             page. If it was not you, you may ignore this mail.\n"
        );
        ("Someone tried to sign up with your email", text)
    } else {
        let text = format!(
            "Someone (hopefully you) signed up at {server} with this email, {email}.\n\n\
             To confirm it and make your account, open this link within 24 hours (it works once):\n\n{link}\n\n\
             If it was not you, do not open the link (the account would sign in with the password whoever signed \
             up chose): ignore this mail, and no account is made.\n",
            link = mailed::link(app, "signup/confirm", &token),
        );
        ("Confirm your email to finish signing up", text)
    };
    mailer.send(Lane::Account, email, subject, text).map_err(ApiError::internal_because)
}

/// Confirm a sign-up with its mailed link's token: the account and its organization are made and signed in (the
/// password given at sign-up). A token works once; unknown, used and expired ones answer 400 `invalid_token`.
#[utoipa::path(post, operation_id = "confirm_sign_up", path = "/auth/signup/confirm", request_body = SignupConfirm,
    security(()),
    responses((status = 201, body = SignedUp),
        (status = 400, description = "`invalid_token`: unknown, used or expired"),
        (status = 404, description = "Signing up is not enabled, or no SMTP is configured on this server"),
        (status = 409, description = "An account with this email was made meanwhile"),
        (status = 429, description = "Too many failed attempts from this address")))]
async fn confirm_signup(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    if !app.settings.signup {
        return Err(ApiError::not_found("signing up (not enabled on this server)"));
    }
    mailed::mailer(&app, "sign-up confirmation")?;
    let body: SignupConfirm = crate::extract::parse_json(&body)?;
    TokenKind::SignupConfirmation.check(&body.token).map_err(|_| invalid_token())?;
    let (address, hash) = (Some(client), token::hash(&body.token));
    app.auth.credential_failures.before_lookup(address, &hash)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let row: Option<(String, String, String)> = sqlx::query_as(
        "UPDATE signup_confirmations SET used_at = now()
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
         RETURNING email, password_hash, organization_name",
    )
    .bind(&hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((email, password_hash, organization_name)) = row else {
        drop(tx);
        app.auth.credential_failures.not_found(address, hash);
        return Err(invalid_token());
    };
    // Every other link of this email dies with this one.
    sqlx::query("UPDATE signup_confirmations SET used_at = now() WHERE email = $1 AND used_at IS NULL")
        .bind(&email)
        .execute(&mut *tx)
        .await?;
    if store::find_by_email(&mut tx, &email).await?.is_some() {
        return Err(ApiError::conflict("an account with this email was made meanwhile; sign in instead"));
    }
    let (user_id, org) = create_account(&mut tx, &email, &password_hash, &organization_name).await?;
    signed_up(&app, &headers, tx, user_id, email, org).await
}

pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new().routes(routes!(confirm_signup))
}
