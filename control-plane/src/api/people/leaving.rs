//! A person leaving an organization, removed by an owner or admin or by their own choice
//! (`DELETE /organization/membership`): the membership ends, and with it, in the same transaction, the keys they
//! made there and the keys those keys made (a person coming back finds none of them working again), and the
//! invitations they or those keys sent (a link kept for later cannot bring them back). The last owner cannot leave.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::api::people::membership::{announce, current_role, invalidate, keep_an_owner};
use crate::auth::{Actor, Caller, scope};
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult};
use axum::http::StatusCode;
use hookflow_shared::{ApiKeyId, ErrorCode, Role, UserId};
use sqlx::PgConnection;

/// Ends `user_id`'s membership (their role was `role`, read locked) and every key it stood behind; records
/// `action` and announces the change. The caller commits.
pub async fn end_membership<S>(
    conn: &mut PgConnection,
    caller: &Caller<S>,
    user_id: UserId,
    role: Role,
    action: &str,
) -> ApiResult<()> {
    if role == Role::Owner {
        keep_an_owner(conn, caller.org_id, user_id).await?;
    }
    owned::delete(&mut *conn, Owned::Member, caller.org_id, user_id).await?;
    let ended: Vec<ApiKeyId> = sqlx::query_scalar(
        "WITH RECURSIVE made AS (
             SELECT id FROM api_keys WHERE organization_id = $1 AND created_by_user = $2
             UNION
             SELECT k.id FROM api_keys k JOIN made ON k.created_by = 'key:' || made.id::text
             WHERE k.organization_id = $1
         )
         DELETE FROM api_keys WHERE organization_id = $1 AND id IN (SELECT id FROM made) RETURNING id",
    )
    .bind(caller.org_id)
    .bind(user_id)
    .fetch_all(&mut *conn)
    .await?;
    // Invitations the person (or a key of theirs) sent die too: a link kept for later would bring them back.
    let senders: Vec<String> = std::iter::once(Actor::User(user_id))
        .chain(ended.iter().map(|id| Actor::Key(*id)))
        .map(|a| a.to_string())
        .collect();
    let withdrawn = sqlx::query("DELETE FROM invitations WHERE organization_id = $1 AND invited_by = ANY($2)")
        .bind(caller.org_id)
        .bind(&senders)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    let details =
        serde_json::json!({ "role": role.as_str(), "keys_ended": ended.len(), "invitations_withdrawn": withdrawn });
    let event = AuditEvent { org_id: caller.org_id, actor: caller.actor, action, target: user_id.to_string(), details };
    audit::record(conn, event).await?;
    // The user's invalidation drops every cached key on every replica, these included.
    announce(conn, caller.org_id, Some(user_id)).await
}

/// Leave the organization of `X-Organization-Id` (people, not API keys); the keys you made there end with your
/// membership. The last owner cannot leave.
#[utoipa::path(delete, operation_id = "leave_organization", path = "/organization/membership",
    responses((status = 204), (status = 403, description = "An API key is not a member: delete it instead"),
        (status = 409, description = "The organization's last owner cannot leave")))]
pub async fn leave_organization(Ctx { app, caller }: Ctx<scope::Any>) -> ApiResult<StatusCode> {
    let Actor::User(user_id) = caller.actor else {
        return Err(ApiError::new(
            ErrorCode::InsufficientScope,
            "only a person leaves an organization; an API key is no member (DELETE /api-keys/{id} ends it)",
        ));
    };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let role = current_role(&mut tx, caller.org_id, user_id).await?;
    end_membership(&mut tx, &caller, user_id, role, "member.left").await?;
    tx.commit().await?;
    invalidate(&app, caller.org_id, Some(user_id));
    Ok(StatusCode::NO_CONTENT)
}
