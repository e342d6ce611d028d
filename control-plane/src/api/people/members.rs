//! The organization's members and invitations: list, invite (always an invitation with a one-time link, whether or
//! not the email has an account, which the answer never tells), change a role, remove (the keys they made end
//! with them, see `leaving`). Only an owner grants or takes the owner role, and the last owner can neither leave
//! nor be demoted.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::api::people::membership::{announce, current_role, invalidate, keep_an_owner};
use crate::api::people::{invitations, leaving};
use crate::auth::{Actor, Caller, role_in, scope};
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::people::{AddMember, CreatedInvitation, Member, UpdateMember};
use hookflow_shared::{InvitationId, Role, UserId};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_members, add_member))
        .routes(routes!(update_member, remove_member))
        .routes(routes!(revoke_invitation))
        .routes(routes!(leaving::leave_organization))
}

type MemberRow = (Option<UserId>, Option<InvitationId>, String, String, DateTime<Utc>, Option<DateTime<Utc>>);

fn member((user_id, invitation_id, email, role, created_at, expires_at): MemberRow) -> Member {
    let status = match (user_id, expires_at) {
        (Some(_), _) => "active",
        (None, Some(at)) if at <= Utc::now() => "expired",
        (None, _) => "invited",
    };
    Member {
        user_id,
        invitation_id,
        email,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        status: status.to_owned(),
        created_at: created_at.into(),
        expires_at: expires_at.map(Into::into),
    }
}

/// Members and pending invitations, by email.
#[utoipa::path(get, path = "/organization/members", params(ListParams), responses((status = 200, body = Page<Member>)))]
async fn list_members(Ctx { app, caller }: Ctx<scope::OrganizationRead>, params: ListParams) -> Listed<Member> {
    let sql = "SELECT * FROM (
            SELECT m.user_id, NULL::uuid AS invitation_id, u.email, m.role, m.created_at, NULL::timestamptz AS expires_at
            FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1
            UNION ALL
            SELECT NULL::uuid, i.id, i.email, i.role, i.created_at, i.expires_at
            FROM invitations i WHERE i.organization_id = $1
        ) members WHERE ($2::text IS NULL OR email > $2) ORDER BY email LIMIT $3";
    let org = (caller.org_id, None);
    Ok(Json(pagination::keyset_page(&app.pool, sql.into(), org, &params, member, |m| m.email.clone()).await?))
}

/// Refuses owner-role changes by anyone but an owner (API keys included).
pub(crate) async fn check_owner_change<S>(app: &AppState, caller: &Caller<S>, touches_owner: bool) -> ApiResult<()> {
    if !touches_owner {
        return Ok(());
    }
    let is_owner = match caller.actor {
        Actor::User(user_id) => role_in(&app.auth, user_id, caller.org_id).await? == Some(Role::Owner),
        _ => false,
    };
    if is_owner {
        Ok(())
    } else {
        Err(ApiError::new(
            hookflow_shared::ErrorCode::InsufficientScope,
            "only an owner grants or takes the owner role",
        ))
    }
}

pub(crate) async fn record<S>(
    conn: &mut PgConnection,
    caller: &Caller<S>,
    action: &str,
    target: &str,
    role: Option<Role>,
) -> ApiResult<()> {
    let details = serde_json::json!({ "role": role.map(Role::as_str) });
    let event = AuditEvent { org_id: caller.org_id, actor: caller.actor, action, target: target.to_owned(), details };
    audit::record(conn, event).await?;
    Ok(())
}

/// Invite a person by email: the answer holds the invitation's one-time link, to share with them. Someone with an
/// account is invited the same way (nobody is added without accepting), and the answer does not tell whether the
/// email has one. With SMTP configured the link is also mailed, at most 50 per organization per hour; `mailed`
/// says whether it was.
#[utoipa::path(post, path = "/organization/members", request_body = AddMember,
    responses((status = 201, body = CreatedInvitation), (status = 409)))]
async fn add_member(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiJson(body): ApiJson<AddMember>,
) -> Created<CreatedInvitation> {
    let email = body.email.as_str();
    check_owner_change(&app, &caller, body.role == Role::Owner).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    // Whom the organization holds is its own to know (its list shows them); whom the server holds is not.
    let member: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
                        WHERE m.organization_id = $1 AND u.email = $2)",
    )
    .bind(caller.org_id)
    .bind(email)
    .fetch_one(&mut *tx)
    .await?;
    if member {
        return Err(ApiError::conflict("this person is a member already"));
    }
    let new = invitations::NewInvitation { org_id: caller.org_id, email, role: body.role, by: caller.actor };
    let mut created = invitations::create(&mut tx, &app.settings.public_url, new).await?;
    // The organization's invitation mail budget: past it the invitation is made and answered, not mailed.
    let mailer = match &app.mailer {
        Some(mailer) if invitations::within_mail_budget(&mut tx, caller.org_id).await? => Some(mailer),
        Some(_) => {
            tracing::info!("an invitation was not mailed: the organization's invitation mail budget is used up");
            None
        }
        None => None,
    };
    let details = serde_json::json!({ "role": body.role.as_str(), "mailed": mailer.is_some() });
    let (org_id, actor, target) = (caller.org_id, caller.actor, email.to_owned());
    audit::record(&mut tx, AuditEvent { org_id, actor, action: "member.invited", target, details }).await?;
    tx.commit().await?;
    if let Some(mailer) = mailer {
        created.mailed = invitations::mail(&app, mailer, caller.org_id, &created).await;
    }
    Ok((StatusCode::CREATED, Json(created)))
}

/// Change a member's role.
#[utoipa::path(patch, path = "/organization/members/{user_id}",
    params(("user_id" = Uuid, Path)), request_body = UpdateMember,
    responses((status = 200, body = Member), (status = 409)))]
async fn update_member(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(user_id): ApiPath<UserId>,
    ApiJson(body): ApiJson<UpdateMember>,
) -> ApiResult<Json<Member>> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let role = current_role(&mut tx, caller.org_id, user_id).await?;
    check_owner_change(&app, &caller, role == Role::Owner || body.role == Role::Owner).await?;
    if role == Role::Owner && body.role != Role::Owner {
        keep_an_owner(&mut tx, caller.org_id, user_id).await?;
    }
    let row: MemberRow = sqlx::query_as(
        "UPDATE memberships m SET role = $3 FROM users u
         WHERE m.organization_id = $1 AND m.user_id = $2 AND u.id = m.user_id
         RETURNING m.user_id, NULL::uuid, u.email, m.role, m.created_at, NULL::timestamptz",
    )
    .bind(caller.org_id)
    .bind(user_id)
    .bind(body.role.as_str())
    .fetch_one(&mut *tx)
    .await?;
    record(&mut tx, &caller, "member.role_changed", &user_id.to_string(), Some(body.role)).await?;
    announce(&mut tx, caller.org_id, Some(user_id)).await?;
    tx.commit().await?;
    invalidate(&app, caller.org_id, Some(user_id));
    Ok(Json(member(row)))
}

/// Remove a member; the keys they made in the organization, and the keys those keys made, end with them.
#[utoipa::path(delete, path = "/organization/members/{user_id}",
    params(("user_id" = Uuid, Path)), responses((status = 204), (status = 409)))]
async fn remove_member(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(user_id): ApiPath<UserId>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let role = current_role(&mut tx, caller.org_id, user_id).await?;
    check_owner_change(&app, &caller, role == Role::Owner).await?;
    leaving::end_membership(&mut tx, &caller, user_id, role, "member.removed").await?;
    tx.commit().await?;
    invalidate(&app, caller.org_id, Some(user_id));
    Ok(StatusCode::NO_CONTENT)
}

/// Withdraw an invitation.
#[utoipa::path(delete, path = "/organization/invitations/{id}", params(Id), responses((status = 204)))]
async fn revoke_invitation(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    Id(id): Id<InvitationId>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    owned::delete(&mut *tx, Owned::Invitation, caller.org_id, id).await?;
    record(&mut tx, &caller, "invitation.revoked", &id.to_string(), None).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
