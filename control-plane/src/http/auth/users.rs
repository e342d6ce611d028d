//! The people tables as authentication reads them: a user's memberships, and users made from invitations.

use hookflow_shared::Role;
use sqlx::PgConnection;
use uuid::Uuid;

/// A user's organizations and roles.
pub async fn memberships(conn: &mut PgConnection, user_id: Uuid) -> Result<Vec<(Uuid, Role)>, sqlx::Error> {
    let rows: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT organization_id, role FROM memberships WHERE user_id = $1 ORDER BY created_at")
            .bind(user_id)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().filter_map(|(org, role)| Some((org, Role::parse(&role)?))).collect())
}

/// Turns the invitations waiting for `email` into memberships of `user_id`; answers how many there were.
pub async fn accept_invitations(conn: &mut PgConnection, user_id: Uuid, email: &str) -> Result<u64, sqlx::Error> {
    let accepted = sqlx::query(
        "WITH taken AS (DELETE FROM invitations WHERE email = $2 RETURNING organization_id, role)
         INSERT INTO memberships (organization_id, user_id, role) SELECT organization_id, $1, role FROM taken
         ON CONFLICT (organization_id, user_id) DO NOTHING",
    )
    .bind(user_id)
    .bind(email)
    .execute(conn)
    .await?;
    Ok(accepted.rows_affected())
}

/// The user an external identity with this verified email belongs to: the user of that email, or one made now
/// when invitations wait for it. `None` when nobody invited the address.
pub async fn user_for_verified_email(conn: &mut PgConnection, email: &str) -> Result<Option<Uuid>, sqlx::Error> {
    let existing: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM users WHERE email = $1").bind(email).fetch_optional(&mut *conn).await?;
    if let Some(user_id) = existing {
        accept_invitations(conn, user_id, email).await?;
        return Ok(Some(user_id));
    }
    let invited: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM invitations WHERE email = $1)")
        .bind(email)
        .fetch_one(&mut *conn)
        .await?;
    if !invited {
        return Ok(None);
    }
    let user_id = Uuid::now_v7();
    sqlx::query("INSERT INTO users (id, email) VALUES ($1, $2)").bind(user_id).bind(email).execute(&mut *conn).await?;
    accept_invitations(conn, user_id, email).await?;
    Ok(Some(user_id))
}
