//! Browser sessions of the built-in identity provider and their refresh tokens, the one owner of the `sessions`
//! and `refresh_tokens` SQL: opening, rotating a refresh token (single use: a replay revokes the session),
//! revoking, a session's state as requests need it, and how long a session lasts.

use crate::auth::people_cache::SessionState;
use chrono::{DateTime, Utc};
use hookflow_shared::{SessionId, UserId, token};
use sqlx::PgConnection;

/// Opens a session lasting until `expires_at` and answers its id and first refresh token.
pub async fn open_session(
    conn: &mut PgConnection,
    user_id: UserId,
    expires_at: DateTime<Utc>,
) -> Result<(SessionId, String), sqlx::Error> {
    let session_id = SessionId::now_v7();
    sqlx::query("INSERT INTO sessions (id, user_id, expires_at) VALUES ($1, $2, $3)")
        .bind(session_id)
        .bind(user_id)
        .bind(expires_at)
        .execute(&mut *conn)
        .await?;
    let refresh = new_refresh_token(conn, session_id).await?;
    Ok((session_id, refresh))
}

async fn new_refresh_token(conn: &mut PgConnection, session_id: SessionId) -> Result<String, sqlx::Error> {
    let refresh = crate::crypto::new_token(token::TokenKind::Refresh);
    sqlx::query("INSERT INTO refresh_tokens (token_hash, session_id) VALUES ($1, $2)")
        .bind(token::hash(&refresh))
        .bind(session_id)
        .execute(conn)
        .await?;
    Ok(refresh)
}

/// What presenting a refresh token found.
#[derive(Debug)]
pub enum Refreshed {
    /// A live session: the token is now used up and this one replaces it.
    Rotated { session_id: SessionId, user_id: UserId, refresh: String },
    /// The token was used before: someone replayed it. The session is revoked.
    Reused { session_id: SessionId, user_id: UserId },
    /// Unknown token, or its session ended.
    Dead,
}

/// Uses a refresh token once: the row is locked, so two concurrent uses cannot both rotate it.
pub async fn use_refresh_token(conn: &mut PgConnection, refresh: &str) -> Result<Refreshed, sqlx::Error> {
    type Found = (SessionId, Option<DateTime<Utc>>, UserId, bool);
    let found: Option<Found> = sqlx::query_as(
        "SELECT r.session_id, r.used_at, s.user_id, s.revoked_at IS NULL AND s.expires_at > now()
         FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id WHERE r.token_hash = $1 FOR UPDATE OF r",
    )
    .bind(token::hash(refresh))
    .fetch_optional(&mut *conn)
    .await?;
    let Some((session_id, used_at, user_id, live)) = found else { return Ok(Refreshed::Dead) };
    if used_at.is_some() {
        revoke_session(conn, session_id).await?;
        return Ok(Refreshed::Reused { session_id, user_id });
    }
    if !live {
        return Ok(Refreshed::Dead);
    }
    sqlx::query("UPDATE refresh_tokens SET used_at = now() WHERE token_hash = $1")
        .bind(token::hash(refresh))
        .execute(&mut *conn)
        .await?;
    let refresh = new_refresh_token(conn, session_id).await?;
    Ok(Refreshed::Rotated { session_id, user_id, refresh })
}

pub async fn revoke_session(conn: &mut PgConnection, session_id: SessionId) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
        .bind(session_id)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Revokes every session of a user but `keep` (a password changed elsewhere signs out the other devices).
pub async fn revoke_other_sessions(
    conn: &mut PgConnection,
    user_id: UserId,
    keep: Option<SessionId>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL AND id IS DISTINCT FROM $2",
    )
    .bind(user_id)
    .bind(keep)
    .execute(conn)
    .await
    .map(|_| ())
}

/// When a session ends at the latest.
pub async fn session_expiry(conn: &mut PgConnection, session_id: SessionId) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT expires_at FROM sessions WHERE id = $1").bind(session_id).fetch_one(conn).await
}

/// A session's state as a request needs it: whose, whether it is live, whether its person must change their
/// password (an unknown session is not live).
pub async fn state(pool: &sqlx::PgPool, session_id: SessionId) -> Result<SessionState, sqlx::Error> {
    let row: Option<(UserId, bool, bool)> = sqlx::query_as(
        "SELECT s.user_id, s.revoked_at IS NULL AND s.expires_at > now(), u.password_change_required
         FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1",
    )
    .bind(session_id)
    .fetch_optional(pool)
    .await?;
    Ok(match row {
        Some((user_id, live, password_change_required)) => SessionState { user_id, live, password_change_required },
        None => SessionState { user_id: UserId::nil(), live: false, password_change_required: false },
    })
}
