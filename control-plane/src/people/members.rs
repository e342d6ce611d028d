//! The organization's members and invitations: list, add (an email with no user yet waits as an invitation,
//! bound at that person's first sign-in), change a role, remove (their keys in the organization stop working with
//! them). Only an owner grants or takes the owner role, and the last owner can neither leave nor be demoted.

use crate::admin::audit::{self, AuditEvent};
use crate::http::auth::{Actor, Caller, Ctx, role_in, scope};
use crate::http::error::{ApiError, ApiResult, Created, conflict_on_unique};
use crate::http::extract::{ApiJson, ApiPath, Id};
use crate::http::owned::{self, Owned};
use crate::http::pagination::{self, ListParams, Listed};
use crate::people::signup::add_membership;
use crate::people::store::normalize_email;
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::Role;
use hookflow_shared::api::Page;
use hookflow_shared::api::people::{AddMember, Member, UpdateMember};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_members, add_member))
        .routes(routes!(update_member, remove_member))
        .routes(routes!(revoke_invitation))
}

type MemberRow = (Option<Uuid>, Option<Uuid>, String, String, DateTime<Utc>);

fn member((user_id, invitation_id, email, role, created_at): MemberRow) -> Member {
    Member {
        user_id,
        invitation_id,
        email,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        status: if user_id.is_some() { "active" } else { "invited" }.to_owned(),
        created_at: created_at.into(),
    }
}

/// Members and pending invitations, by email.
#[utoipa::path(get, path = "/organization/members", params(ListParams), responses((status = 200, body = Page<Member>)))]
async fn list_members(Ctx { app, caller }: Ctx<scope::OrganizationRead>, params: ListParams) -> Listed<Member> {
    let sql = "SELECT * FROM (
            SELECT m.user_id, NULL::uuid AS invitation_id, u.email, m.role, m.created_at
            FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1
            UNION ALL
            SELECT NULL::uuid, i.id, i.email, i.role, i.created_at FROM invitations i WHERE i.organization_id = $1
        ) members WHERE ($2::text IS NULL OR email > $2) ORDER BY email LIMIT $3";
    let org = (caller.org_id, None);
    Ok(Json(pagination::keyset_page(&app.pool, sql.into(), org, &params, member, |m| m.email.clone()).await?))
}

/// Refuses owner-role changes by anyone but an owner (API keys included).
async fn check_owner_change<S>(app: &AppState, caller: &Caller<S>, touches_owner: bool) -> ApiResult<()> {
    if !touches_owner {
        return Ok(());
    }
    let is_owner = match caller.actor {
        Actor::User(user_id) => role_in(app, user_id, caller.org_id).await? == Some(Role::Owner),
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

async fn record<S>(
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

/// Announces a change of `user_id`'s memberships in the caller's organization to every replica.
async fn announce(conn: &mut PgConnection, org_id: Uuid, user_id: Option<Uuid>) -> ApiResult<()> {
    Invalidation::Organization(org_id).announce(conn).await?;
    if let Some(user_id) = user_id {
        Invalidation::User(user_id).announce(conn).await?;
    }
    Ok(())
}

fn invalidate(app: &AppState, org_id: Uuid, user_id: Option<Uuid>) {
    app.invalidate(Invalidation::Organization(org_id));
    if let Some(user_id) = user_id {
        app.invalidate(Invalidation::User(user_id));
    }
}

/// Add a member by email; an email with no user yet becomes an invitation.
#[utoipa::path(post, path = "/organization/members", request_body = AddMember,
    responses((status = 201, body = Member), (status = 409)))]
async fn add_member(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiJson(body): ApiJson<AddMember>,
) -> Created<Member> {
    let email = normalize_email(&body.email).ok_or_else(|| ApiError::invalid("invalid field `email`"))?;
    check_owner_change(&app, &caller, body.role == Role::Owner).await?;
    let mut tx = app.pool.begin().await?;
    let user: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM users WHERE email = $1").bind(&email).fetch_optional(&mut *tx).await?;
    let row: MemberRow = match user {
        Some(user_id) => {
            add_membership(&mut tx, caller.org_id, user_id, body.role)
                .await
                .map_err(|e| conflict_on_unique(e, "this person is a member already"))?;
            record(&mut tx, &caller, "member.added", &user_id.to_string(), Some(body.role)).await?;
            (Some(user_id), None, email, body.role.as_str().to_owned(), Utc::now())
        }
        None => {
            let id: Uuid = sqlx::query_scalar(
                "INSERT INTO invitations (organization_id, email, role, invited_by) VALUES ($1, $2, $3, $4) RETURNING id",
            )
            .bind(caller.org_id)
            .bind(&email)
            .bind(body.role.as_str())
            .bind(caller.actor.to_string())
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| conflict_on_unique(e, "this email is invited already"))?;
            record(&mut tx, &caller, "member.invited", &email, Some(body.role)).await?;
            (None, Some(id), email, body.role.as_str().to_owned(), Utc::now())
        }
    };
    announce(&mut tx, caller.org_id, user).await?;
    tx.commit().await?;
    invalidate(&app, caller.org_id, user);
    Ok((StatusCode::CREATED, Json(member(row))))
}

/// The member's role, locked for the change; 404 when they are not a member.
async fn current_role(conn: &mut PgConnection, org_id: Uuid, user_id: Uuid) -> ApiResult<Role> {
    let role: Option<String> =
        sqlx::query_scalar("SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2 FOR UPDATE")
            .bind(org_id)
            .bind(user_id)
            .fetch_optional(conn)
            .await?;
    role.as_deref().and_then(Role::parse).ok_or_else(|| ApiError::not_found("member"))
}

/// 409 when `user_id` is the organization's only owner (it would be left without one).
async fn keep_an_owner(conn: &mut PgConnection, org_id: Uuid, user_id: Uuid) -> ApiResult<()> {
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

/// Change a member's role.
#[utoipa::path(patch, path = "/organization/members/{user_id}",
    params(("user_id" = Uuid, Path)), request_body = UpdateMember,
    responses((status = 200, body = Member), (status = 409)))]
async fn update_member(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(user_id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<UpdateMember>,
) -> ApiResult<Json<Member>> {
    let mut tx = app.pool.begin().await?;
    let role = current_role(&mut tx, caller.org_id, user_id).await?;
    check_owner_change(&app, &caller, role == Role::Owner || body.role == Role::Owner).await?;
    if role == Role::Owner && body.role != Role::Owner {
        keep_an_owner(&mut tx, caller.org_id, user_id).await?;
    }
    let row: MemberRow = sqlx::query_as(
        "UPDATE memberships m SET role = $3 FROM users u
         WHERE m.organization_id = $1 AND m.user_id = $2 AND u.id = m.user_id
         RETURNING m.user_id, NULL::uuid, u.email, m.role, m.created_at",
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

/// Remove a member; the keys they made in the organization stop working with them.
#[utoipa::path(delete, path = "/organization/members/{user_id}",
    params(("user_id" = Uuid, Path)), responses((status = 204), (status = 409)))]
async fn remove_member(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(user_id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = app.pool.begin().await?;
    let role = current_role(&mut tx, caller.org_id, user_id).await?;
    check_owner_change(&app, &caller, role == Role::Owner).await?;
    if role == Role::Owner {
        keep_an_owner(&mut tx, caller.org_id, user_id).await?;
    }
    owned::delete(&mut *tx, Owned::Member, caller.org_id, user_id).await?;
    record(&mut tx, &caller, "member.removed", &user_id.to_string(), Some(role)).await?;
    announce(&mut tx, caller.org_id, Some(user_id)).await?;
    tx.commit().await?;
    invalidate(&app, caller.org_id, Some(user_id));
    Ok(StatusCode::NO_CONTENT)
}

/// Withdraw an invitation.
#[utoipa::path(delete, path = "/organization/invitations/{id}", params(Id), responses((status = 204)))]
async fn revoke_invitation(Ctx { app, caller }: Ctx<scope::OrganizationWrite>, Id(id): Id) -> ApiResult<StatusCode> {
    let mut tx = app.pool.begin().await?;
    owned::delete(&mut *tx, Owned::Invitation, caller.org_id, id).await?;
    record(&mut tx, &caller, "invitation.revoked", &id.to_string(), None).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
