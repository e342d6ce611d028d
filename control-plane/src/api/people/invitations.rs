//! Invitations bind by token, never by email: inviting answers a one-time link (`<public URL>/#/invite/<token>`,
//! shown once; only the token's SHA-256 is stored) that whoever signs in with it accepts for themselves
//! (`POST /auth/invitations/accept`), with the built-in provider or an external one. A token works once and for
//! [`INVITATION_TTL`]; an unknown, used, withdrawn or expired one answers the same 404. With SMTP configured the
//! link is also mailed to the invited email, at most [`MAILS_PER_HOUR`] per organization per hour: past it the
//! invitation is made and answered alike, with `mailed: false` (the inviter shares the link), so an organization
//! cannot use the server to flood mailboxes.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::people::signup::add_membership;
use crate::auth::bearer::{self, Signer};
use crate::auth::users::create_external_user;
use crate::auth::{Actor, bearer_in, password_change_required};
use crate::error::{ApiError, ApiResult, Created, conflict_on_unique};
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use hookflow_shared::api::people::{AcceptInvitation, CreatedInvitation, OrganizationRole};
use hookflow_shared::token::{self, TokenKind};
use hookflow_shared::{InvitationId, OrgId, Role, UserId};
use sqlx::PgConnection;

/// How long an invitation's link works.
pub const INVITATION_TTL: chrono::TimeDelta = chrono::TimeDelta::days(7);
/// Invitations one organization may have mailed per hour.
pub const MAILS_PER_HOUR: i64 = 50;

/// Whether the organization may have one more invitation mailed this hour. Counts the `member.invited` audit
/// entries marked `mailed` in the last hour; the organization's invitations are counted one at a time (a lock held
/// until the transaction ends), and the caller records this invitation's entry in the same transaction.
pub async fn within_mail_budget(conn: &mut PgConnection, org_id: OrgId) -> ApiResult<bool> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 51))")
        .bind(org_id)
        .execute(&mut *conn)
        .await?;
    let mailed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE organization_id = $1 AND action = 'member.invited'
         AND created_at > now() - interval '1 hour' AND details->>'mailed' = 'true'",
    )
    .bind(org_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(mailed < MAILS_PER_HOUR)
}

/// An invitation to make.
#[derive(Debug)]
pub struct NewInvitation<'a> {
    pub org_id: OrgId,
    /// Normalized.
    pub email: &'a str,
    pub role: Role,
    pub by: Actor,
}

/// Stores an invitation and answers it with its link, the only place its token ever appears. An expired
/// invitation of the same email makes way; a live one answers 409.
pub async fn create(conn: &mut PgConnection, public_url: &str, new: NewInvitation<'_>) -> ApiResult<CreatedInvitation> {
    sqlx::query("DELETE FROM invitations WHERE organization_id = $1 AND email = $2 AND expires_at <= now()")
        .bind(new.org_id)
        .bind(new.email)
        .execute(&mut *conn)
        .await?;
    let token = crate::crypto::new_token(TokenKind::Invitation);
    let expires_at = Utc::now() + INVITATION_TTL;
    let (invitation_id, created_at): (InvitationId, DateTime<Utc>) = sqlx::query_as(
        "INSERT INTO invitations (organization_id, email, role, invited_by, token_hash, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, created_at",
    )
    .bind(new.org_id)
    .bind(new.email)
    .bind(new.role.as_str())
    .bind(new.by.to_string())
    .bind(token::hash(&token))
    .bind(expires_at)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| conflict_on_unique(e, "this email is invited already; withdraw that invitation to send a new link"))?;
    Ok(CreatedInvitation {
        invitation_id,
        email: new.email.to_owned(),
        role: new.role,
        status: "invited".to_owned(),
        created_at: created_at.into(),
        expires_at: expires_at.into(),
        invite_url: format!("{}/#/invite/{token}", public_url.trim_end_matches('/')),
        token,
        mailed: false,
    })
}

/// Mails an invitation's link to the invited email (SMTP configured): queued, never waited for; a mail that
/// cannot be queued is logged, and the inviter still has the link to share. Answers whether it was queued.
pub async fn mail(app: &AppState, mailer: &crate::mail::Mailer, org_id: OrgId, invitation: &CreatedInvitation) -> bool {
    let name: Option<String> = sqlx::query_scalar("SELECT name FROM organizations WHERE id = $1")
        .bind(org_id)
        .fetch_optional(&app.pool)
        .await
        .ok()
        .flatten();
    let name = name.unwrap_or_else(|| "an organization".to_owned());
    let text = format!(
        "You are invited to join the organization \"{name}\" on hookflow at {server}, as {role}.\n\n\
         To accept, open this link within 7 days and sign in (or make an account) there; it works once:\n\n\
         {link}\n\n\
         If you do not know this organization, ignore this mail: nobody joins without the link.\n",
        server = app.settings.public_url,
        role = invitation.role.as_str(),
        link = invitation.invite_url,
    );
    let subject = format!("You are invited to {name}");
    match mailer.send(crate::mail::Lane::Other, &invitation.email, &subject, text) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "an invitation was not mailed");
            false
        }
    }
}

/// The live invitation of a token, locked: (id, organization, its name, role).
async fn take(conn: &mut PgConnection, token: &str) -> ApiResult<(InvitationId, OrgId, String, Role)> {
    let not_found = || ApiError::not_found("invitation (unknown, used, withdrawn or expired)");
    TokenKind::Invitation.check(token).map_err(|_| not_found())?;
    let row: Option<(InvitationId, OrgId, String, String)> = sqlx::query_as(
        "SELECT i.id, i.organization_id, o.name, i.role FROM invitations i JOIN organizations o ON o.id = i.organization_id
         WHERE i.token_hash = $1 AND i.expires_at > now() FOR UPDATE OF i",
    )
    .bind(token::hash(token))
    .fetch_optional(conn)
    .await?;
    let (id, org_id, name, role) = row.ok_or_else(not_found)?;
    Ok((id, org_id, name, Role::parse(&role).ok_or_else(not_found)?))
}

/// The user accepting: the signed-in person, or a user made now for an external identity nobody linked yet.
async fn accepting_user(conn: &mut PgConnection, signer: &Signer<'_>, bearer: &str) -> ApiResult<UserId> {
    match signer {
        Signer::Known(identity) if identity.password_change_required => Err(password_change_required()),
        Signer::Known(identity) => Ok(identity.user_id),
        Signer::Unlinked(unlinked) => {
            let email = unlinked.verified_email(bearer).await?;
            let created = create_external_user(conn, &unlinked.issuer, &unlinked.subject, &email).await?;
            created.ok_or_else(|| {
                ApiError::conflict(
                    "an account with your email exists: sign in to it, link this identity (POST /auth/identities), \
                     then accept",
                )
            })
        }
    }
}

/// Accept an invitation: the signed-in person (built-in or external provider) joins its organization with its
/// role. Works once; unknown, used, withdrawn and expired invitations answer 404.
#[utoipa::path(post, operation_id = "accept_invitation", path = "/auth/invitations/accept",
    request_body = AcceptInvitation, security(("bearer" = [])),
    responses((status = 201, body = OrganizationRole),
        (status = 404, description = "No live invitation has this token (unknown, used, withdrawn or expired)"),
        (status = 409, description = "Already a member, or an account has the external identity's email")))]
async fn accept_invitation(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Created<OrganizationRole> {
    // The token is checked before the body is read.
    let bearer = bearer_in(&headers).ok_or_else(ApiError::unauthorized)?;
    let signer = bearer::authenticate_signer(&app.auth, bearer).await?;
    let body: AcceptInvitation = crate::extract::parse_json(&body)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let (invitation_id, org_id, name, role) = take(&mut tx, &body.token).await?;
    let user_id = accepting_user(&mut tx, &signer, bearer).await?;
    add_membership(&mut tx, org_id, user_id, role)
        .await
        .map_err(|e| conflict_on_unique(e, "you are a member of this organization already"))?;
    sqlx::query("DELETE FROM invitations WHERE id = $1").bind(invitation_id).execute(&mut *tx).await?;
    let details = serde_json::json!({ "invitation_id": invitation_id, "role": role.as_str() });
    let actor = Actor::User(user_id);
    let event = AuditEvent { org_id, actor, action: "invitation.accepted", target: user_id.to_string(), details };
    audit::record(&mut tx, event).await?;
    Invalidation::Organization(org_id).announce(&mut tx).await?;
    Invalidation::User(user_id).announce(&mut tx).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::Organization(org_id));
    app.invalidate(Invalidation::User(user_id));
    Ok((StatusCode::CREATED, Json(OrganizationRole { id: org_id, name, role })))
}

pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new().routes(routes!(accept_invitation))
}
