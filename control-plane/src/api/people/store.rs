//! The users table as the people routes and operator commands write it: users and their passwords (sessions and
//! their refresh tokens are `auth::sessions`').

use hookflow_shared::UserId;
use hookflow_shared::api::people::User;
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
