//! The people tables as the people routes and operator commands write them: users, passwords, sessions and
//! their refresh tokens.

use chrono::{DateTime, Utc};
use hookflow_shared::api::people::User;
use hookflow_shared::{SessionId, UserId, token};
use sqlx::PgConnection;

/// A user as sign-in needs them.
#[derive(Debug, sqlx::FromRow)]
pub struct UserRow {
    pub id: UserId,
    pub email: String,
    pub password_hash: Option<String>,
    pub password_change_required: bool,
}

impl UserRow {
    pub fn api(&self) -> User {
        User { id: self.id, email: self.email.clone() }
    }
}

/// The canonical form of an email: lower-cased; `None` when it is not an address by the rule the OpenAPI document
/// states (`rules::email_pattern`: printable ASCII, no spaces, a dotted domain).
pub fn normalize_email(email: &str) -> Option<String> {
    hookflow_shared::api::rules::is_email(email).then(|| email.to_ascii_lowercase())
}

pub async fn find_by_email(conn: &mut PgConnection, email: &str) -> Result<Option<UserRow>, sqlx::Error> {
    sqlx::query_as("SELECT id, email, password_hash, password_change_required FROM users WHERE email = $1")
        .bind(email)
        .fetch_optional(conn)
        .await
}

pub async fn find(conn: &mut PgConnection, user_id: UserId) -> Result<Option<UserRow>, sqlx::Error> {
    sqlx::query_as("SELECT id, email, password_hash, password_change_required FROM users WHERE id = $1")
        .bind(user_id)
        .fetch_optional(conn)
        .await
}

/// Creates a user with a password hash (in no organization: invitations bind by token, never by email).
pub async fn create_user(
    conn: &mut PgConnection,
    email: &str,
    password_hash: &str,
    password_change_required: bool,
) -> Result<UserId, sqlx::Error> {
    let id = UserId::now_v7();
    sqlx::query("INSERT INTO users (id, email, password_hash, password_change_required) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(email)
        .bind(password_hash)
        .bind(password_change_required)
        .execute(conn)
        .await?;
    Ok(id)
}

pub async fn set_password(
    conn: &mut PgConnection,
    user_id: UserId,
    password_hash: &str,
    change_required: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE users SET password_hash = $2, password_change_required = $3 WHERE id = $1")
        .bind(user_id)
        .bind(password_hash)
        .bind(change_required)
        .execute(conn)
        .await
        .map(|_| ())
}

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

/// Refuses an external provider's token (by its hash) until it expires, on every replica (each request looks it
/// up); revocations already past their token's expiry go.
pub async fn revoke_external_token(
    pool: &sqlx::PgPool,
    token_hash: &[u8],
    expires_at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("DELETE FROM revoked_tokens WHERE expires_at < now()").execute(&mut *tx).await?;
    sqlx::query("INSERT INTO revoked_tokens (token_hash, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(token_hash)
        .bind(expires_at + chrono::TimeDelta::seconds(crate::auth::bearer::LEEWAY_S as i64))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// When a session ends at the latest.
pub async fn session_expiry(conn: &mut PgConnection, session_id: SessionId) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT expires_at FROM sessions WHERE id = $1").bind(session_id).fetch_one(conn).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalized_or_refused() {
        assert_eq!(normalize_email("Ada@Example.COM").as_deref(), Some("ada@example.com"));
        // The rule the OpenAPI document states: no white space anywhere (surrounding spaces included), ASCII only.
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a da@example.com",
            "ada@.com",
            " ada@example.com",
            "adä@example.com",
        ] {
            assert_eq!(normalize_email(bad), None, "{bad}");
        }
    }
}
