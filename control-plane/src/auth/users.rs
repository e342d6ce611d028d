//! The people tables as authentication reads and writes them: a user's memberships, external identities linked
//! to users, and users who sign in only through one; and the canonical form of an email.

use hookflow_shared::{OrgId, Role, UserId};
use sqlx::PgConnection;

/// The canonical form of an email: lower-cased; `None` when it is not an address by the rule the OpenAPI document
/// states (`rules::email_pattern`: printable ASCII, no spaces, a dotted domain).
pub fn normalize_email(email: &str) -> Option<String> {
    hookflow_shared::api::rules::is_email(email).then(|| email.to_ascii_lowercase())
}

/// A user's organizations and roles.
pub async fn memberships(conn: &mut PgConnection, user_id: UserId) -> Result<Vec<(OrgId, Role)>, sqlx::Error> {
    let rows: Vec<(OrgId, String)> =
        sqlx::query_as("SELECT organization_id, role FROM memberships WHERE user_id = $1 ORDER BY created_at")
            .bind(user_id)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().filter_map(|(org, role)| Some((org, Role::parse(&role)?))).collect())
}

/// Links an external identity to `user_id`; `false` when it is linked already (to anyone).
pub async fn link_identity(
    conn: &mut PgConnection,
    issuer: &str,
    subject: &str,
    user_id: UserId,
) -> Result<bool, sqlx::Error> {
    let linked = sqlx::query(
        "INSERT INTO user_identities (issuer, subject, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind(issuer)
    .bind(subject)
    .bind(user_id)
    .execute(conn)
    .await?;
    Ok(linked.rows_affected() == 1)
}

/// A user who signs in only through this external identity, made when it accepts an invitation. `None` when an
/// account has this email already: an identity never attaches itself to someone else's account (that account's
/// person links it, signed in).
pub async fn create_external_user(
    conn: &mut PgConnection,
    issuer: &str,
    subject: &str,
    email: &str,
) -> Result<Option<UserId>, sqlx::Error> {
    let user_id = UserId::now_v7();
    let created = sqlx::query("INSERT INTO users (id, email) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING")
        .bind(user_id)
        .bind(email)
        .execute(&mut *conn)
        .await?;
    if created.rows_affected() == 0 || !link_identity(conn, issuer, subject, user_id).await? {
        return Ok(None);
    }
    Ok(Some(user_id))
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
