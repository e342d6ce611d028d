//! A membership's rules that adding, changing, removing and leaving share: the member's role read locked, the
//! organization's last owner kept, and a change announced to every replica and dropped from this one's caches.

use crate::error::{ApiError, ApiResult};
use crate::signals::Invalidation;
use crate::state::AppState;
use hookflow_shared::{OrgId, Role, UserId};
use sqlx::PgConnection;

/// The member's role, locked for the change; 404 when they are not a member.
pub(crate) async fn current_role(conn: &mut PgConnection, org_id: OrgId, user_id: UserId) -> ApiResult<Role> {
    let role: Option<String> =
        sqlx::query_scalar("SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2 FOR UPDATE")
            .bind(org_id)
            .bind(user_id)
            .fetch_optional(conn)
            .await?;
    role.as_deref().and_then(Role::parse).ok_or_else(|| ApiError::not_found("member"))
}

/// 409 when `user_id` is the organization's only owner (it would be left without one).
pub(crate) async fn keep_an_owner(conn: &mut PgConnection, org_id: OrgId, user_id: UserId) -> ApiResult<()> {
    let others: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM memberships WHERE organization_id = $1 AND role = 'owner' AND user_id <> $2
         FOR UPDATE) owners",
    )
    .bind(org_id)
    .bind(user_id)
    .fetch_one(conn)
    .await?;
    if others == 0 {
        return Err(ApiError::conflict(
            "the organization's last owner cannot leave or be demoted; make another owner first",
        ));
    }
    Ok(())
}

/// Announces a change of `user_id`'s memberships in the caller's organization to every replica.
pub(crate) async fn announce(conn: &mut PgConnection, org_id: OrgId, user_id: Option<UserId>) -> ApiResult<()> {
    Invalidation::Organization(org_id).announce(conn).await?;
    if let Some(user_id) = user_id {
        Invalidation::User(user_id).announce(conn).await?;
    }
    Ok(())
}

pub(crate) fn invalidate(app: &AppState, org_id: OrgId, user_id: Option<UserId>) {
    app.invalidate(Invalidation::Organization(org_id));
    if let Some(user_id) = user_id {
        app.invalidate(Invalidation::User(user_id));
    }
}
